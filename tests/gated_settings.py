"""Settings of a live app whose function-calling agent runs the gated slow tool (tests/gated_tools.py)."""

from agentui.settings import *  # noqa: F403

AGENTUI_PRESETS = {"function_calling": {"tools": ["gated_tools.archive_report"]}}
