"""The app's rows, one module per capability; every model is importable from `runs.models`.

Where a model lives:

| Module | Models |
|---|---|
| `notebooks` | `Task` (a notebook), `Turn`, `Step`, `StepEdge`, `Message`, `Event`, their choices, `group_name` |
| `attachments` | `Attachment` (an image sent with a message) |
| `review` | `Annotation`, `AnnotationTarget`, `CorrectedAnswer` |
| `api_tokens` | `ApiToken` |
| `quotas` | `MinuteCount`, `RunCount`, `ForkCount` (per-minute limits) |
| `inbox` | `InboxSettings`, `inbox_group_name` |
| `mcp_servers` | `McpServer`, `McpTransport`, `McpLogLevel`, `root_uris` |
| `data_sources` | `DataSource`, `DataSourceKind` |
| `policies` | `ToolPolicy`, `PolicyDecision` |
| `webhooks` | `Webhook`, `WebhookDelivery`, `WebhookEvent`, `DeliveryStatus` |
| `prices` | `ModelPrice` |
| `user_presets` | `UserPreset` |
| `deletion` | `DeletedNotebook` |
| `datasets` | `Dataset`, `DatasetVersion`, `Example`, `Immutable` |
| `external_requests` | `ExternalRequest`, `ExternalKind`, `ExternalStatus` (asked over agentui's MCP server) |

`notebooks` imports no other model module; the others import only `notebooks` (checked by
`.importlinter`). They are imported here in the order the models were first declared, so Django
registers them in that order.
"""

# In the declaration order above, not the alphabet.
# isort: off
from .notebooks import (
    ApprovalMode,
    DeadlineAction,
    Event,
    Message,
    MessageStatus,
    NotebookStatus,
    Step,
    StepEdge,
    StepKindChoices,
    StepStatusChoices,
    Task,
    Turn,
    TurnStatus,
    group_name,
)
from .attachments import Attachment
from .review import Annotation, AnnotationTarget, CorrectedAnswer
from .api_tokens import ApiToken
from .quotas import ForkCount, MinuteCount, RunCount
from .inbox import InboxSettings, inbox_group_name
from .mcp_servers import McpLogLevel, McpServer, McpTransport, root_uris
from .data_sources import DataSource, DataSourceKind
from .policies import PolicyDecision, ToolPolicy
from .webhooks import DeliveryStatus, Webhook, WebhookDelivery, WebhookEvent
from .prices import ModelPrice
from .user_presets import UserPreset
from .deletion import DeletedNotebook
from .datasets import Dataset, DatasetVersion, Example, Immutable
from .external_requests import ExternalKind, ExternalRequest, ExternalStatus
# isort: on

__all__ = [
    "Annotation",
    "AnnotationTarget",
    "CorrectedAnswer",
    "ApiToken",
    "ApprovalMode",
    "Attachment",
    "DataSource",
    "DataSourceKind",
    "Dataset",
    "DatasetVersion",
    "DeadlineAction",
    "DeletedNotebook",
    "DeliveryStatus",
    "ExternalKind",
    "ExternalRequest",
    "ExternalStatus",
    "Event",
    "Example",
    "ForkCount",
    "Immutable",
    "InboxSettings",
    "McpServer",
    "root_uris",
    "McpLogLevel",
    "McpTransport",
    "Message",
    "MessageStatus",
    "MinuteCount",
    "ModelPrice",
    "NotebookStatus",
    "PolicyDecision",
    "RunCount",
    "Step",
    "StepEdge",
    "StepKindChoices",
    "StepStatusChoices",
    "Task",
    "ToolPolicy",
    "Turn",
    "TurnStatus",
    "UserPreset",
    "Webhook",
    "WebhookDelivery",
    "WebhookEvent",
    "group_name",
    "inbox_group_name",
]
