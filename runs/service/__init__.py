"""The notebook service: the one entrance for the websocket consumer, the pages, REST and AG-UI.

Every action takes a notebook (`Task`) primary key whose ownership the caller has checked,
raises `runs.protocol.ProtocolError` (with a code and a reason, having changed nothing) when the
action is not allowed, and returns once the action is accepted: its effects arrive as events on
the notebook's channel-layer group. Steps run as asyncio tasks in the caller's event loop.

The entrances import this package (and `runs.traces` for reading stored runs), never its
modules or the layers below it, save `runs.service.surfaces`: the few realtime, telemetry and
preset objects they use as they are. This package re-exports only the service's own names, and
no runner: a surface reads a notebook through read models (`notebook_view`, `pending_steps`,
`shared_state`, `conversation_messages`). `make lint` checks that (import-linter, .importlinter).
"""

from runs.service.agent_notebooks import start_for_agent, status_for_agent
from runs.service.attachments import (
    MAX_IMAGES_PER_MESSAGE,
    ImageRefused,
    discard_upload,
    max_image_bytes,
    size_text,
    store_upload,
)
from runs.service.attachments import describe as describe_image
from runs.service.batch import approve_branches, reject_all
from runs.service.budgets import budget_of, budget_wait, set_budget
from runs.service.claims import check_send
from runs.service.compose import (
    MAX_PRESET_NAME_CHARS,
    ComposeChoices,
    ComposeConfig,
    ToolChoice,
    compose_choices,
    delete_user_preset,
    describe_user_preset,
    save_user_preset,
    user_presets,
)
from runs.service.corrected_answers import (
    MAX_CORRECTED_ANSWER_CHARS,
    correct_answer,
    may_correct,
    reviewable_notebook,
)
from runs.service.data import (
    DataError,
    add_data_part,
    cancel_data_upload,
    delete_data_table,
    finish_data_upload,
    import_data_file,
    list_data_tables,
    preview_data_table,
    start_data_upload,
)
from runs.service.data import max_file_bytes as max_data_file_bytes
from runs.service.dataset_import import (
    MAX_EXAMPLES,
    ExampleIn,
    ImportRefused,
    max_import_bytes,
)
from runs.service.datasets import (
    MAX_DESCRIPTION_CHARS,
    MAX_NAME_CHARS,
    MAX_NOTE_CHARS,
    MAX_NOTEBOOKS_AT_ONCE,
    add_examples,
    create_dataset,
    demo_dataset,
    edit_example,
    import_examples,
    notebook_example,
    own_dataset,
    readable_dataset,
    readable_datasets,
    remove_examples,
    reviewable_notebooks,
)
from runs.service.datasets import checked as checked_example
from runs.service.deadlines import MAX_DEADLINE_S, set_deadline
from runs.service.deletion import (
    DELETED_MESSAGE,
    delete_as_operator,
    delete_notebook,
    deleted_json,
    deletion_of,
)
from runs.service.dispatch import perform, take_forwarded
from runs.service.driver import Origin
from runs.service.external_requests import (
    Asker,
    Outcome,
    ask_and_wait,
    decide_external,
    request_title,
)
from runs.service.forking import fork_notebook
from runs.service.health import TIMEOUT_S as HEALTH_TIMEOUT_S
from runs.service.health import Finding as HealthFinding
from runs.service.health import (
    check_database,
    check_llm,
    check_redis,
    readiness,
    reason_of,
    without_password,
)
from runs.service.inbox import (
    decide_from_inbox,
    inbox_count,
    inbox_of,
    inbox_owners,
    inbox_requests,
    waiting_title,
)
from runs.service.lease import is_held
from runs.service.llm import LLMSettings, llm_settings, offered_models
from runs.service.login_links import make_login_token, user_for_login_token
from runs.service.notify import save_settings as save_inbox_settings
from runs.service.notify import settings_of as inbox_settings_of
from runs.service.operator import (
    masked_source_url,
    mcp_server_health,
    refresh_mcp_listing,
    source_kind,
    source_url_problem,
    stored_state,
    test_source,
)
from runs.service.pending import (
    PendingQuestion,
    PendingStep,
    pending_steps,
    shared_state,
)
from runs.service.policies import (
    ConditionError,
    RuleSpec,
    parse_condition,
    refresh_gate,
    revoke_policies,
    revoke_policy,
    save_default_policy,
    set_policy,
)
from runs.service.policies import describe as describe_policy
from runs.service.policies import rules_for as policies_of
from runs.service.reading import (
    RUNNABLE,
    ConversationMessage,
    ModelCut,
    NotebookView,
    StepView,
    conversation_messages,
    event_payload,
    events_after,
    hello_summary,
    last_seq,
    notebook_view,
    owner_of,
    stream_snapshots,
    text_as_read,
)
from runs.service.recovery import recover_interrupted
from runs.service.runtime import spawn, wait_idle
from runs.service.sources import (
    DbSourceError,
    db_source_tables,
    db_sources,
    demo_examples_for,
    preview_db_table,
)
from runs.service.status import INBOX_MESSAGE
from runs.service.step_actions import (
    approve,
    decide,
    edit_input,
    reject_tool_call,
    undo,
)
from runs.service.sweeper import start_sweeper
from runs.service.takeover import ensure_recovered, take_over
from runs.service.tokens import (
    AuthFailed,
    arequest_user,
    auth_failed_response,
    bearer_token,
    create_token,
    live_token,
    request_user,
    revoke_token,
    unauthenticated_response,
)
from runs.service.turn_actions import (
    abandon,
    create_notebook,
    create_notebook_row,
    send_message,
    set_mode,
    wait_run,
    wait_settled,
)
from runs.service.waiting import WaitingStep, deadline_of
from runs.service.webhooks import (
    add_webhook,
    deliver_due,
    delivery_json,
    remove_webhook,
    webhook_json,
)
from runs.service.worker_actions import Decide

__all__ = [
    "MAX_DESCRIPTION_CHARS",
    "MAX_EXAMPLES",
    "max_import_bytes",
    "MAX_NAME_CHARS",
    "MAX_NOTE_CHARS",
    "MAX_NOTEBOOKS_AT_ONCE",
    "ExampleIn",
    "ImportRefused",
    "add_examples",
    "checked_example",
    "create_dataset",
    "demo_dataset",
    "edit_example",
    "import_examples",
    "notebook_example",
    "reviewable_notebooks",
    "own_dataset",
    "readable_dataset",
    "readable_datasets",
    "remove_examples",
    "MAX_CORRECTED_ANSWER_CHARS",
    "correct_answer",
    "may_correct",
    "reviewable_notebook",
    "DELETED_MESSAGE",
    "delete_notebook",
    "delete_as_operator",
    "deleted_json",
    "deletion_of",
    "budget_of",
    "budget_wait",
    "set_budget",
    "INBOX_MESSAGE",
    "MAX_DEADLINE_S",
    "WaitingStep",
    "deadline_of",
    "decide_from_inbox",
    "Asker",
    "Outcome",
    "ask_and_wait",
    "decide_external",
    "inbox_requests",
    "request_title",
    "bearer_token",
    "live_token",
    "start_for_agent",
    "status_for_agent",
    "inbox_count",
    "inbox_of",
    "inbox_owners",
    "inbox_settings_of",
    "save_inbox_settings",
    "set_deadline",
    "waiting_title",
    "MAX_IMAGES_PER_MESSAGE",
    "RUNNABLE",
    "AuthFailed",
    "DataError",
    "ImageRefused",
    "LLMSettings",
    "NotebookView",
    "Origin",
    "StepView",
    "ConditionError",
    "RuleSpec",
    "abandon",
    "approve_branches",
    "describe_policy",
    "parse_condition",
    "policies_of",
    "refresh_gate",
    "reject_all",
    "revoke_policies",
    "revoke_policy",
    "save_default_policy",
    "set_policy",
    "DbSourceError",
    "add_data_part",
    "db_source_tables",
    "db_sources",
    "demo_examples_for",
    "preview_db_table",
    "approve",
    "cancel_data_upload",
    "arequest_user",
    "auth_failed_response",
    "check_send",
    "create_notebook",
    "create_notebook_row",
    "ComposeChoices",
    "MAX_PRESET_NAME_CHARS",
    "ComposeConfig",
    "ToolChoice",
    "compose_choices",
    "delete_user_preset",
    "describe_user_preset",
    "save_user_preset",
    "user_presets",
    "create_token",
    "decide",
    "delete_data_table",
    "describe_image",
    "discard_upload",
    "edit_input",
    "ensure_recovered",
    "events_after",
    "finish_data_upload",
    "add_webhook",
    "delivery_json",
    "deliver_due",
    "remove_webhook",
    "webhook_json",
    "ConversationMessage",
    "ModelCut",
    "conversation_messages",
    "event_payload",
    "fork_notebook",
    "hello_summary",
    "import_data_file",
    "is_held",
    "last_seq",
    "list_data_tables",
    "llm_settings",
    "offered_models",
    "max_data_file_bytes",
    "max_image_bytes",
    "notebook_view",
    "owner_of",
    "perform",
    "Decide",
    "take_forwarded",
    "preview_data_table",
    "readiness",
    "recover_interrupted",
    # the admin, the management commands and the project's wiring (agentui)
    "HEALTH_TIMEOUT_S",
    "HealthFinding",
    "check_database",
    "check_llm",
    "check_redis",
    "reason_of",
    "without_password",
    "make_login_token",
    "user_for_login_token",
    "masked_source_url",
    "mcp_server_health",
    "refresh_mcp_listing",
    "source_kind",
    "source_url_problem",
    "stored_state",
    "test_source",
    "start_sweeper",
    "reject_tool_call",
    "request_user",
    "revoke_token",
    "send_message",
    "set_mode",
    "size_text",
    "spawn",
    "take_over",
    "start_data_upload",
    "store_upload",
    "stream_snapshots",
    "text_as_read",
    "PendingQuestion",
    "PendingStep",
    "pending_steps",
    "shared_state",
    "unauthenticated_response",
    "undo",
    "wait_idle",
    "wait_run",
    "wait_settled",
]
