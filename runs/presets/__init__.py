"""Agent presets: the agents a person can pick for a notebook (`catalog`), the Team's members
(`team`) and the analysts' built-in tools (`tools`)."""

from runs.presets.catalog import (
    Preset,
    all_presets,
    default_preset_name,
    get_preset,
    presets,
    resolve_tools,
)

__all__ = [
    "Preset",
    "all_presets",
    "default_preset_name",
    "get_preset",
    "presets",
    "resolve_tools",
]
