"""Read-only SQL over the sample dataset, safe to hand to a model.

Defence in depth: the file is opened read-only (`mode=ro`), an authorizer allows only reading
(SELECT, READ, FUNCTION; no PRAGMA, ATTACH, writes or recursive CTEs), a progress handler stops
a query after a time limit, values are capped in size, and at most `ROW_LIMIT` rows come back.

What one call hands the model is bounded twice (settings, read per call): at most
`AGENTUI_SQL_MAX_ROWS` rows and about `AGENTUI_SQL_MAX_BYTES` of JSON, long text values cut
to `MAX_CELL_CHARS`; the result then says how many rows were left out. A person still gets
every row as CSV (`sql_export`).
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from collections.abc import Callable
from contextlib import closing
from typing import Any

from django.conf import settings

from runs.presets.tools.dataset import ensure_sample_db

ROW_LIMIT = 200
TIME_LIMIT_S = 2.0
# A person downloading a result as CSV gets every row, within these bounds.
EXPORT_ROW_LIMIT = 1_000_000
EXPORT_TIME_LIMIT_S = 30.0
MAX_SQL_CHARS = 5000
MAX_VALUE_BYTES = 1_000_000
MAX_CELL_CHARS = 2000  # a longer text value reaches the model cut, with a note
_PROGRESS_EVERY = 1000  # VM instructions between time checks

_ALLOWED = frozenset(
    {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION}
)
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


class SQLError(ValueError):
    """A query refused or failed; the message says why, for the model to fix its query."""


def _authorizer(action: int, *_: Any) -> int:
    return sqlite3.SQLITE_OK if action in _ALLOWED else sqlite3.SQLITE_DENY


def _connect(deadline: float) -> sqlite3.Connection:
    path = ensure_sample_db()
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1.0)
    connection.set_authorizer(_authorizer)
    # A non-zero return interrupts the running statement.
    connection.set_progress_handler(
        lambda: int(time.monotonic() > deadline), _PROGRESS_EVERY
    )
    connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
    connection.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, MAX_SQL_CHARS * 4)
    connection.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
    return connection


def _plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    return value


def _run(
    sql: str,
    params: tuple[Any, ...] = (),
    limit: int = ROW_LIMIT,
    time_limit: float = TIME_LIMIT_S,
) -> tuple[list[str], list[list[Any]], bool]:
    deadline = time.monotonic() + time_limit
    with closing(_connect(deadline)) as connection:
        try:
            cursor = connection.execute(sql, params)
            rows = cursor.fetchmany(limit + 1)
        except sqlite3.DatabaseError as exc:
            raise _explain(exc) from None
        except sqlite3.ProgrammingError as exc:  # e.g. two statements at once
            raise SQLError(str(exc)) from None
        except sqlite3.Warning as exc:
            raise SQLError(str(exc)) from None
        columns = [column[0] for column in cursor.description or []]
    return (
        columns,
        [[_plain(v) for v in row] for row in rows[:limit]],
        len(rows) > limit,
    )


def _total_rows(sql: str) -> int | None:
    """How many rows `sql` matches in all, or None when counting fails or takes too long."""
    try:
        _, rows, _ = _run(f"SELECT COUNT(*) FROM ({sql.rstrip().rstrip(';')})")
    except SQLError:
        return None
    return int(rows[0][0]) if rows else None


def _explain(exc: sqlite3.DatabaseError) -> SQLError:
    text = str(exc)
    if "not authorized" in text or "prohibited" in text:
        return SQLError(
            "only read-only SELECT queries over the sample tables are allowed"
        )
    if "interrupted" in text:
        return SQLError(
            f"the query took longer than {TIME_LIMIT_S:g} s and was stopped"
        )
    if "readonly" in text or "read-only" in text:
        return SQLError("the database is read-only")
    return SQLError(f"SQLite error: {text}")


def max_rows() -> int:
    return int(getattr(settings, "AGENTUI_SQL_MAX_ROWS", ROW_LIMIT))


def max_bytes() -> int:
    return int(getattr(settings, "AGENTUI_SQL_MAX_BYTES", 256 * 1024))


def _cell(value: Any) -> Any:
    if isinstance(value, str) and len(value) > MAX_CELL_CHARS:
        return f"{value[:MAX_CELL_CHARS]}… ({len(value) - MAX_CELL_CHARS:,} more characters)"
    return value


def _within_bytes(rows: list[list[Any]], budget: int) -> list[list[Any]]:
    """The leading rows whose JSON fits in `budget` bytes (at least one)."""
    kept: list[list[Any]] = []
    used = 0
    for row in rows:
        used += len(json.dumps(row, default=str).encode()) + 1
        if kept and used > budget:
            break
        kept.append(row)
    return kept


def sql_query(sql: str) -> dict[str, Any]:
    """Run one read-only SQL SELECT over the sample sales database (tables: cities, products, sales).

    Returns the column names and the first rows (up to a row and a size cap); `truncated` says
    whether more rows matched, and then `total_rows` how many and `rows_left_out` how many
    were not returned.
    """
    text = _checked(sql)
    columns, fetched, more = _run(text, limit=max_rows())
    rows = _within_bytes([[_cell(v) for v in row] for row in fetched], max_bytes())
    truncated = more or len(rows) < len(fetched)
    result: dict[str, Any] = {
        "columns": columns,
        "rows": rows,
        "row_count": len(rows),
        "truncated": truncated,
    }
    if truncated:
        total = _total_rows(text) if more else len(fetched)
        result["total_rows"] = total
        if total is not None:
            result["rows_left_out"] = total - len(rows)
            result["note"] = (
                f"{total - len(rows):,} of {total:,} rows were left out (this tool returns at"
                f" most {max_rows():,} rows and about {max_bytes() // 1024:,} KB); aggregate"
                " or filter to see the rest"
            )
    return result


def _checked(sql: str) -> str:
    text = sql.strip()
    if not text:
        raise SQLError("the query is empty")
    if len(text) > MAX_SQL_CHARS:
        raise SQLError(f"queries are limited to {MAX_SQL_CHARS} characters")
    return text


def sql_export(sql: str) -> tuple[list[str], list[list[Any]]]:
    """Every row of a read-only query (up to EXPORT_ROW_LIMIT), for a person's CSV download.

    The same guards as `sql_query`; not a tool (the model gets capped results).
    """
    columns, rows, truncated = _run(
        _checked(sql), limit=EXPORT_ROW_LIMIT, time_limit=EXPORT_TIME_LIMIT_S
    )
    if truncated:
        raise SQLError(
            f"the result has more than {EXPORT_ROW_LIMIT:,} rows; narrow the query"
        )
    return columns, rows


def sql_value(sql: str) -> Any:
    """Run one read-only SQL SELECT over the sample sales database and return a single value.

    The value is the first column of the first row (null when no row matched), e.g. for
    "SELECT ROUND(SUM(revenue), 2) FROM sales WHERE sold_on LIKE '2024%'".
    """
    result = sql_query(sql)
    return result["rows"][0][0] if result["rows"] and result["columns"] else None


def list_tables() -> list[dict[str, Any]]:
    """List the sample database's tables with their row counts."""
    _, rows, _ = _run(
        "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
    )
    tables = []
    for (name,) in rows:
        _, count, _ = _run(f'SELECT COUNT(*) FROM "{name}"')
        tables.append({"table": name, "rows": count[0][0]})
    return tables


def describe_table(name: str) -> dict[str, Any]:
    """Describe one table of the sample database: its columns (name, type) and three example rows."""
    if not _NAME.match(name):
        raise SQLError(f"{name!r} is not a table name")
    _, found, _ = _run(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)
    )
    if not found:
        known = ", ".join(t["table"] for t in list_tables())
        raise SQLError(f"there is no table {name!r}; the tables are: {known}")
    columns, sample, _ = _run(f'SELECT * FROM "{name}" LIMIT 3')
    return {
        "table": name,
        "schema": found[0][0],
        "columns": columns,
        "example_rows": sample,
    }


TOOLS: tuple[Callable[..., Any], ...] = (
    list_tables,
    describe_table,
    sql_query,
    sql_value,
)
