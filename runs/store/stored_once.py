"""A large tool output is stored once: as its `tool_call_result`'s `content`.

A tool's `raw_output` is what its function returned and `content` that value as text; for a
large output the two are the same data twice (a 10 MB string would be stored as 20 MB). So the
stored event keeps `content` and, when `raw_output` is just that text (or the value whose JSON
it is), leaves `raw_output` out and says where it is (`raw_output_from_content`: "text" or
"json"). The model's copy (its memory message, and the next call's `agent_input`) is only the
bounded slice it was given (runs.engine.tools.for_model).
"""

from __future__ import annotations

import json
from typing import Any

# the events that carry a tool's whole output (a late one: what a call left running by Stop returned)
TOOL_OUTPUT_EVENTS = ("tool_call_result", "tool_call_late_outcome")

# Below this many characters both copies are kept: the page draws tables from `raw_output`.
ONCE_FROM_CHARS = 64 * 1024


def store_once(payload: dict[str, Any]) -> dict[str, Any]:
    """A `tool_call_result` payload with a large `raw_output` that repeats `content` left out."""
    output = payload.get("tool_output")
    if payload.get("type") not in TOOL_OUTPUT_EVENTS or not isinstance(output, dict):
        return payload
    content, raw = output.get("content"), output.get("raw_output")
    if not isinstance(content, str) or len(content) < ONCE_FROM_CHARS or raw is None:
        return payload
    if raw == content:
        source = "text"
    elif not isinstance(raw, str) and _json_text(raw) == content:
        source = "json"
    else:
        return payload
    kept = {**output, "raw_output": None, "raw_output_from_content": source}
    return {**payload, "tool_output": kept}


def raw_output_of(output: dict[str, Any]) -> Any:
    """A stored tool output's `raw_output`, also when it was stored as its `content`."""
    source = output.get("raw_output_from_content")
    if source == "text":
        return output.get("content")
    if source == "json":
        try:
            return json.loads(output.get("content") or "null")
        except ValueError:
            return None
    return output.get("raw_output")


def _json_text(value: Any) -> str | None:
    try:
        return json.dumps(value, default=str)
    except (TypeError, ValueError):
        return None
