"""Settings of a live app whose tool-calling agents run recorded tools (tests/recorded_tools.py)."""

from agentui.settings import *  # noqa: F403

_RECORDED = {"tools": ["recorded_tools.RECORDED_TOOLS"]}
AGENTUI_PRESETS = {
    "function_calling": _RECORDED,
    "llm_compiler": _RECORDED,
    "coa": _RECORDED,
}
