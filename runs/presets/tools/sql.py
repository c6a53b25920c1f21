"""Read-only SQL over the sample dataset, safe to hand to a model.

Defence in depth: the file is opened read-only (`mode=ro`); an authorizer allows only reading
(SELECT, READ, recursive CTEs) and only the functions in `ALLOWED_FUNCTIONS` (no PRAGMA, ATTACH,
writes, `load_extension`, `fts3_tokenizer`, `printf`, ...); a progress handler stops a query past
its time budget, and a query that still ends past it is an error, never a result. The budget
holds because no allowed function can run long in one call: values are capped at
`MAX_VALUE_BYTES` and LIKE/GLOB patterns at `MAX_PATTERN_CHARS` (the slowest calls, `replace`,
`instr` and `like` on the largest values, take ~0.1 s), and `printf`/`format` (whose width and
precision loop up to 2^31 times inside one call) and the character-list forms of `trim` (quadratic
in SQLite, seconds per call) are refused or run by our own linear code. At most `ROW_LIMIT` rows
come back.

What one call hands the model is bounded twice (settings, read per call): at most
`AGENTUI_SQL_MAX_ROWS` rows and about `AGENTUI_SQL_MAX_BYTES` of JSON, long text values cut
to `MAX_CELL_CHARS`; the result then says how many rows were left out. A person still gets
every row as CSV (`sql_export`: batches from an open query, within `AGENTUI_CSV_EXPORT_MAX_ROWS`
and `AGENTUI_CSV_EXPORT_TIME_LIMIT_S` of SQLite's own work).
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from collections.abc import Callable
from contextlib import closing
from typing import Any

from runs.conf import conf
from runs.presets.tools.cell_order import text_collation
from runs.presets.tools.dataset import ensure_sample_db

ROW_LIMIT = 200
EXPORT_BATCH_ROWS = 1000
MAX_SQL_CHARS = 5000
# One text or blob value at most: also what keeps every allowed function's single call short.
MAX_VALUE_BYTES = 100_000
MAX_PATTERN_CHARS = 1000  # a LIKE or GLOB pattern
MAX_CELL_CHARS = 2000  # a longer text value reaches the model cut, with a note
_PROGRESS_EVERY = 100  # VM instructions between time checks

_ALLOWED = frozenset(
    {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_RECURSIVE}
)
# The SQL functions a query may call: SQLite's core, date, math, aggregate and window functions
# that finish quickly on bounded values. Everything else is refused, among them load_extension,
# fts3_tokenizer, readfile/writefile, printf/format, sqlite_* and changes().
ALLOWED_FUNCTIONS = frozenset(
    {
        # core scalar
        "abs", "char", "coalesce", "concat", "concat_ws", "glob", "hex", "ifnull", "iif",
        "instr", "length", "like", "likelihood", "likely", "lower", "ltrim", "max", "min",
        "nullif", "octet_length", "quote", "random", "randomblob", "replace", "round",
        "rtrim", "sign", "soundex", "substr", "substring", "trim", "typeof", "unhex",
        "unicode", "unlikely", "upper", "zeroblob",
        # date and time
        "date", "datetime", "julianday", "strftime", "time", "timediff", "unixepoch",
        # math
        "acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "ceil", "ceiling", "cos",
        "cosh", "degrees", "exp", "floor", "ln", "log", "log10", "log2", "mod", "pi", "pow",
        "power", "radians", "sin", "sinh", "sqrt", "tan", "tanh", "trunc",
        # aggregate
        "avg", "count", "group_concat", "string_agg", "sum", "total",
        # window
        "row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile", "lag",
        "lead", "first_value", "last_value", "nth_value",
    }
)  # fmt: skip
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


class SQLError(ValueError):
    """A query refused or failed; the message says why, for the model to fix its query."""


def _trim_with(left: bool, right: bool) -> Callable[[Any, Any], Any]:
    """`trim(x, chars)` and its kin in linear time (SQLite's compares every character of x with
    every one of chars: seconds for one call on large values). Text only; NULL otherwise."""

    def trim(value: Any, chars: Any) -> Any:
        if isinstance(value, (int, float)):
            value = str(value)
        if not isinstance(value, str) or not isinstance(chars, str):
            return None
        drop = set(chars)
        start, end = 0, len(value)
        while left and start < end and value[start] in drop:
            start += 1
        while right and end > start and value[end - 1] in drop:
            end -= 1
        return value[start:end]

    return trim


_TRIMS = {
    "trim": _trim_with(True, True),
    "ltrim": _trim_with(True, False),
    "rtrim": _trim_with(False, True),
}


class _Budget:
    """Seconds of SQLite work a query may take. The clock runs only while SQLite works, so a
    download that reads its batches slowly does not spend it."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.spent = 0.0
        self._since: float | None = None
        self.refused_function: str | None = (
            None  # what the authorizer last refused, to say so
        )

    def authorize(self, action: int, _arg1: Any, arg2: Any, *_: Any) -> int:
        """SQLite's authorizer: reading, and only the functions in ALLOWED_FUNCTIONS."""
        if action == sqlite3.SQLITE_FUNCTION:
            if isinstance(arg2, str) and arg2.lower() in ALLOWED_FUNCTIONS:
                return sqlite3.SQLITE_OK
            self.refused_function = str(arg2)
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK if action in _ALLOWED else sqlite3.SQLITE_DENY

    def __enter__(self) -> _Budget:
        self._since = time.monotonic()
        return self

    def __exit__(self, *_: object) -> None:
        if self._since is not None:
            self.spent += time.monotonic() - self._since
            self._since = None

    def over(self) -> bool:
        running = time.monotonic() - self._since if self._since is not None else 0.0
        return self.spent + running > self.seconds


def _connect(budget: _Budget) -> sqlite3.Connection:
    path = ensure_sample_db()
    # Batches of an export may be read from different threads, one at a time.
    connection = sqlite3.connect(
        f"file:{path}?mode=ro", uri=True, timeout=1.0, check_same_thread=False
    )
    for name, trim in _TRIMS.items():  # over SQLite's own two-argument forms
        connection.create_function(name, 2, trim, deterministic=True)
    connection.create_collation(
        "cell_text", text_collation
    )  # a sorted export's text order
    connection.set_authorizer(budget.authorize)
    # A non-zero return interrupts the running statement.
    connection.set_progress_handler(lambda: int(budget.over()), _PROGRESS_EVERY)
    connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
    connection.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, MAX_SQL_CHARS * 4)
    connection.setlimit(sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH, MAX_PATTERN_CHARS)
    connection.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
    return connection


def _guarded(budget: _Budget, work: Callable[[], Any]) -> Any:
    """`work()` on the connection within `budget`; any SQLite failure, or finishing past the
    budget (a call the progress handler could not stop), is an SQLError."""
    try:
        with budget:
            result = work()
    except sqlite3.DatabaseError as exc:
        raise _explain(exc, budget) from None
    except (
        sqlite3.ProgrammingError,
        sqlite3.Warning,
    ) as exc:  # e.g. two statements at once
        raise SQLError(str(exc)) from None
    if budget.over():
        raise _too_long(budget.seconds)
    return result


def _plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    return value


def _run(
    sql: str,
    params: tuple[Any, ...] = (),
    limit: int = ROW_LIMIT,
) -> tuple[list[str], list[list[Any]], bool]:
    budget = _Budget(conf().sql_time_limit_s)
    with closing(_connect(budget)) as connection:
        cursor = _guarded(budget, lambda: connection.execute(sql, params))
        rows = _guarded(budget, lambda: cursor.fetchmany(limit + 1))
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


def _too_long(seconds: float) -> SQLError:
    return SQLError(f"the query took longer than {seconds:g} s and was stopped")


def _explain(exc: sqlite3.DatabaseError, budget: _Budget) -> SQLError:
    text = str(exc)
    if "not authorized" in text and budget.refused_function:
        return SQLError(
            f"the function {budget.refused_function}() is not allowed; queries may use"
            " SQLite's core, date, math, aggregate and window functions"
            " (not printf, format or load_extension)"
        )
    if "not authorized" in text or "prohibited" in text:
        return SQLError(
            "only read-only SELECT queries over the sample tables are allowed"
            " (no PRAGMA, ATTACH or writes)"
        )
    if "interrupted" in text:
        return _too_long(budget.seconds)
    if "readonly" in text or "read-only" in text:
        return SQLError("the database is read-only")
    return SQLError(f"SQLite error: {text}")


def max_rows() -> int:
    return conf().sql_max_rows


def max_bytes() -> int:
    return conf().sql_max_bytes


class CutValue(str):
    """A value a database source cut before sending it (runs.presets.tools.dbsource): its text
    already says so and how long the whole value was, so it reaches the model as it is."""


def _cell(value: Any) -> Any:
    if (
        isinstance(value, str)
        and len(value) > MAX_CELL_CHARS
        and not isinstance(value, CutValue)
    ):
        return cut_text(value[:MAX_CELL_CHARS], len(value))
    return value


def cut_text(head: str, chars: int) -> str:
    """A long text value as the model is given it: its first characters (`head`) and how many
    of its `chars` were left out."""
    return f"{head}… ({chars - len(head):,} more characters)"


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
    text = checked_sql(sql)
    columns, fetched, more = _run(text, limit=max_rows())
    return capped_result(columns, fetched, more, lambda: _total_rows(text))


def capped_result(
    columns: list[str],
    fetched: list[list[Any]],
    more: bool,
    count_all: Callable[[], int | None],
) -> dict[str, Any]:
    """What a query tool hands the model: `fetched` (up to max_rows + 1 rows read; `more` when
    there were more) within max_bytes, long texts cut, and how many rows were left out
    (`count_all` counts them when needed; None when it cannot)."""
    rows = _within_bytes([[_cell(v) for v in row] for row in fetched], max_bytes())
    truncated = more or len(rows) < len(fetched)
    result: dict[str, Any] = {
        "columns": columns,
        "rows": rows,
        "row_count": len(rows),
        "truncated": truncated,
    }
    if truncated:
        total = count_all() if more else len(fetched)
        result["total_rows"] = total
        if total is not None:
            result["rows_left_out"] = total - len(rows)
            result["note"] = (
                f"{total - len(rows):,} of {total:,} rows were left out (this tool returns at"
                f" most {max_rows():,} rows and about {max_bytes() // 1024:,} KB); aggregate"
                " or filter to see the rest"
            )
    return result


def checked_sql(sql: str) -> str:
    text = sql.strip()
    if not text:
        raise SQLError("the query is empty")
    if len(text) > MAX_SQL_CHARS:
        raise SQLError(f"queries are limited to {MAX_SQL_CHARS} characters")
    return text


class Export:
    """Every row of one read-only query, read in batches from an open query: a person's CSV
    download (not a tool; the model gets capped results). The same guards as `sql_query`, with
    `AGENTUI_CSV_EXPORT_TIME_LIMIT_S` of SQLite's own work for the whole read; the reader decides how many
    rows it takes. Opening runs the query, so a bad one fails here; close it when done.
    """

    def __init__(self, sql: str, order: SortOrder | None = None) -> None:
        self._budget = _Budget(conf().csv_export_time_limit_s)
        self._connection = _connect(self._budget)
        self._sorted = order is not None
        text = (
            checked_sql(sql) if order is None else _sorted_sql(checked_sql(sql), order)
        )
        try:
            self._cursor = _guarded(
                self._budget, lambda: self._connection.execute(text)
            )
        except BaseException:
            self._connection.close()
            raise
        names = [column[0] for column in self._cursor.description or []]
        self.columns = _outer_names(names[1:]) if self._sorted else names

    def batch(self, size: int = EXPORT_BATCH_ROWS) -> list[list[Any]]:
        """The next rows, at most `size`; [] at the end. SQLError past the time budget."""
        rows = _guarded(self._budget, lambda: self._cursor.fetchmany(size))
        if self._sorted:  # without the row number the sort's ties are broken by
            return [[_plain(v) for v in row[1:]] for row in rows]
        return [[_plain(v) for v in row] for row in rows]

    def close(self) -> None:
        self._connection.close()

    def __enter__(self) -> Export:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def sql_export(sql: str, order: SortOrder | None = None) -> Export:
    """An open `Export` of every row of `sql` (SQLError when the query is refused or fails),
    sorted by `order` (column index, descending) as the page sorts a table."""
    return Export(sql, order)


SortOrder = tuple[int, bool]  # (column index, descending)


def _sorted_sql(sql: str, order: SortOrder) -> str:
    """`sql` sorted as the page sorts (runs/presets/tools/cell_order.py): SQLite already puts
    numbers before text and compares them by value; text goes by the `cell_text` collation,
    empty cells last, ties in the query's own order (its row number, the first column). The
    query sits on lines of its own, so a trailing `-- comment` ends there."""
    index, descending = order
    body = sql.rstrip().rstrip(";")
    way = "DESC" if descending else "ASC"
    return (
        f"SELECT row_number() OVER () AS agentui_row, * FROM (\n{body}\n)"
        f" ORDER BY {index + 2} COLLATE cell_text {way} NULLS LAST, 1"
    )


_RENAMED = re.compile(r"^(.*):[0-9]+$")


def _outer_names(names: list[str]) -> list[str]:
    """Column names as the query itself gives them: read through a subquery, SQLite renames
    a repeated name `id` to `id:1`; this takes the suffix off again."""
    out: list[str] = []
    for name in names:
        match = _RENAMED.match(name)
        out.append(match.group(1) if match and match.group(1) in out else name)
    return out


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
