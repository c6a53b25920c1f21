"""Checks that text from a person can be stored as it is, on SQLite and PostgreSQL alike.

PostgreSQL refuses NUL characters in text and JSON columns, and no database can encode a lone
UTF-16 surrogate (which JSON's "\\ud800" escapes can produce) as UTF-8. Nested JSON deeper than
`MAX_JSON_DEPTH` is refused before the engine parses it (Python's parser would run out of stack).
Every check returns the problem in words, or None.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_JSON_DEPTH = 32

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable_problem(text: str) -> str | None:
    """Why `text` cannot be stored (a NUL or a lone surrogate), or None."""
    found = _UNSTORABLE.search(text)
    if found is None:
        return None
    if found.group() == "\x00":
        return "contains a NUL character, which cannot be stored"
    return f"contains a lone surrogate (U+{ord(found.group()):04X}), which is not valid Unicode"


def json_depth(value: Any) -> int:
    """How deeply lists and objects nest in a parsed JSON value (a scalar is 0)."""
    depth, level = 0, [(value, 1)]
    while level:
        item, d = level.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            depth = max(depth, d)
            level.extend((child, d + 1) for child in item)
    return depth


def json_nesting_problem(text: str) -> str | None:
    """Why `text`, if it is JSON, nests too deeply to be edited; None if it is fine or not JSON."""
    stripped = text.lstrip()
    if not stripped.startswith(("[", "{")):
        return None
    try:
        value = json.loads(stripped)
    except RecursionError:
        return f"nests lists or objects more than {MAX_JSON_DEPTH} deep"
    except ValueError:
        return None  # not JSON: the step's own check says what is wrong with it
    if json_depth(value) > MAX_JSON_DEPTH:
        return f"nests lists or objects more than {MAX_JSON_DEPTH} deep"
    return None
