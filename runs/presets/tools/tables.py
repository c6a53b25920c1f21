"""A tool's result as a table, when it is one: `{"columns", "rows"}` or a list of records.

The chart tool reads earlier results with it, and the traces' CSV download and export with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Table:
    columns: list[str]
    rows: list[list[Any]]


def as_table(value: Any) -> Table | None:
    """`{"columns": [...], "rows": [[...]]}` or a list of records, as a Table; else None."""
    if isinstance(value, dict):
        columns = value.get("columns")
        rows = value.get("rows", value.get("example_rows"))
        if (
            isinstance(columns, list)
            and _names(columns)
            and isinstance(rows, list)
            and all(isinstance(r, list) for r in rows)
        ):
            return Table(list(columns), rows)
        return None
    if isinstance(value, list) and value and all(isinstance(r, dict) for r in value):
        keys: dict[str, None] = {}
        for record in value:
            keys.update(dict.fromkeys(str(k) for k in record))
        names = list(keys)
        return Table(names, [[record.get(k) for k in names] for record in value])
    return None


def _names(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(c, str) for c in value)
    )
