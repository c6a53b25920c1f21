"""What the surfaces (web, rest, agui) take from the layers under the service, named here once.

The facade (`runs.service`) offers only the service's own operations and read models; these are
the few objects of realtime, telemetry, presets, demo and store a page or an endpoint needs as
they are: following a notebook's events, the process's metrics, the preset catalogue. The
entrances contract (.importlinter) lets them import this module and no other below the facade.
"""

from runs.demo import EXAMPLE_FILE as DEMO_DATA_FILE
from runs.demo import DemoExample, demo_example_prompts
from runs.presets import Preset, all_presets, get_preset
from runs.presets.mcp import McpToolChoice, available_mcp_tools
from runs.presets.tools.sample_chart import sample_chart_png
from runs.realtime.catch_up import follow, unfollow
from runs.realtime.feed import Item as FeedItem
from runs.realtime.feed import NotebookFeed
from runs.store.fork import ForkError
from runs.telemetry import metrics
from runs.telemetry.config import TelemetryConfig
from runs.telemetry.spans import trace_id_of

__all__ = [
    "DEMO_DATA_FILE",
    "DemoExample",
    "FeedItem",
    "ForkError",
    "McpToolChoice",
    "NotebookFeed",
    "Preset",
    "TelemetryConfig",
    "all_presets",
    "available_mcp_tools",
    "demo_example_prompts",
    "follow",
    "get_preset",
    "metrics",
    "sample_chart_png",
    "trace_id_of",
    "unfollow",
]
