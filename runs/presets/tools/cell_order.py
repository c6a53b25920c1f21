"""The order a result table's "Sort by" gives, written once for the server: the page sorts
the rows it shows with the same rules (static/js/render/table.js, `compareCells`), and a CSV
download sorted on the page comes in this order (runs/traces/results.py).

The rules, so that the browser and Python agree exactly (a browser's `localeCompare` depends
on its locale, so neither side uses one):

- an empty cell (null) comes last, whichever way the column is sorted;
- numbers come before text and compare as numbers (true/false are text);
- text compares in runs of digits and the rest: digits by their value ("item 9" before
  "item 10"), the rest by its lower-case characters; texts equal so compare as written;
- rows with equal cells keep the order they came in.
"""

from __future__ import annotations

import json
import re
from typing import Any

_DIGITS = re.compile(r"([0-9]+)")


def cell_text(value: Any) -> str:
    """A non-number cell as the page writes it: JSON for objects and lists, true/false."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    return str(value)


def text_key(text: str) -> tuple[tuple[Any, ...], str]:
    """What text sorts by: its runs (lower-cased text, digits as (length, digits) without
    leading zeros, which orders them by value with no size limit), then the text itself."""
    runs: list[Any] = []
    for i, part in enumerate(_DIGITS.split(text)):
        if i % 2:
            digits = part.lstrip("0")
            runs.append((len(digits), digits))
        else:
            runs.append(part.lower())
    return tuple(runs), text


def text_collation(a: str, b: str) -> int:
    """`text_key`'s order as an SQLite collation (a query's sorted export)."""
    x, y = text_key(a), text_key(b)
    return (x > y) - (x < y)


def cell_key(value: Any) -> tuple[int, Any]:
    """What a non-empty cell sorts by: numbers first, by value, then text by `text_key`."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, value)
    return (1, text_key(cell_text(value)))


def sorted_rows(rows: list[list[Any]], index: int, descending: bool) -> list[list[Any]]:
    """`rows` by their cell at `index` (a missing cell is empty): empty cells last, ties in
    their first order (Python's sort is stable, also reversed)."""

    def at(row: list[Any]) -> Any:
        return row[index] if index < len(row) else None

    filled = [row for row in rows if at(row) is not None]
    empty = [row for row in rows if at(row) is None]
    filled.sort(key=lambda row: cell_key(at(row)), reverse=descending)
    return filled + empty
