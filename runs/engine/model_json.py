"""How deep JSON a model writes may nest.

Tool arguments and ReAct's Action Input are read with Python's JSON decoder, which recurses per
level: a model (or a document it read) nesting lists a thousand deep made the decoder raise
RecursionError, which failed the step instead of telling the model. What decodes may still be
too deep for what comes after it (storing, sending and showing each recurse too), so arguments
nesting deeper than MAX_DEPTH are refused as malformed ones are: in words the model can act on.
"""

from __future__ import annotations

from typing import Any

MAX_DEPTH = 100  # a chart spec, the deepest arguments of ours, nests about 8 deep


def deeper_than(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether lists and objects in `value` nest more than `limit` deep (without recursing)."""
    level: list[Any] = [value]
    for _ in range(limit + 1):
        level = [
            inner
            for item in level
            if isinstance(item, dict | list)
            for inner in (item.values() if isinstance(item, dict) else item)
        ]
        if not level:
            return False
    return True


def too_deep_error(raw: str) -> str:
    return f"nested more than {MAX_DEPTH} levels deep: {raw[:200]}"
