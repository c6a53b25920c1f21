"""What both backends share: the source's spec and its password scrubbing, errors and their
messages, the Cancel handed to the work, the query check, the bounded query and the capped
fetch.

The backends (postgres.py, mysql.py) keep only what their driver and server do differently.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from runs.presets.tools.sql import MAX_CELL_CHARS, CutValue, SQLError, checked_sql

CONNECT_TIMEOUT_S = 5
PREVIEW_ROWS = 20
FETCH_BATCH = 50
# One value of a result at most, as the server sends it: a longer one is cut by the server
# (`bounded_select`), so no value is ever read whole. No more than the model is shown of one.
MAX_VALUE_BYTES = MAX_CELL_CHARS
# About the most bytes one fetch may bring, whatever the width of the rows (`Bounded.batch`)
FETCH_BUDGET_BYTES = 4 * 1024 * 1024
# per column of a bounded row at most: the value (bytes as hex: twice), its head (up to 4
# bytes a character) and its size
_WIRE_BYTES_PER_COLUMN = 7 * MAX_VALUE_BYTES
MAX_TABLES = 500
_QUERY_START = re.compile(r"^\s*(\(\s*)*(select|with|values|table)\b", re.IGNORECASE)
_COMMENTS = re.compile(r"--[^\n]*|#[^\n]*|/\*.*?\*/", re.DOTALL)


class DbSourceError(SQLError):
    """A source unreachable, a query refused or failed; the message says why (never the URL).

    `kind`: "not_found" (no such source granted), "unreachable", "timeout", "read_only",
    "permission", "cancelled", "invalid" (the query).
    """

    def __init__(self, message: str, kind: str = "invalid") -> None:
        super().__init__(message)
        self.kind = kind


def masked_url(url: str) -> str:
    """`url` with its password (in the userinfo or a `password=` parameter) as `***`."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, host = netloc.rsplit("@", 1)
            user = userinfo.split(":", 1)[0]
            netloc = f"{user}:***@{host}" if ":" in userinfo else f"{user}@{host}"
        query = re.sub(r"(?i)(^|&)(password)=[^&]*", r"\1\2=***", parts.query)
        return urlunsplit((parts.scheme, netloc, parts.path, query, ""))
    except ValueError:
        return "(an unreadable URL)"


def _secrets_of(url: str) -> list[str]:
    parts = urlsplit(url)
    found = [parts.password or ""]
    found += re.findall(r"(?i)(?:^|&)password=([^&]*)", parts.query)
    return [
        s
        for s in {*found, *(unquote(s) for s in found), *(quote(s) for s in found)}
        if s
    ]


@dataclass(frozen=True)
class SourceSpec:
    """What a query needs of a source's row (read once, then used off the database thread)."""

    pk: int
    name: str
    description: str
    url: str
    timeout_s: float
    updated_at: datetime

    def scrub(self, text: str) -> str:
        """`text` without the URL's password (a driver's message could quote the URL)."""
        for secret in _secrets_of(self.url):
            text = text.replace(secret, "***")
        return text


@dataclass(frozen=True)
class Fetched:
    """What a backend read of one query: its columns, up to the row cap of rows, whether there
    were more, the tables the server says it read, and how many rows it has in all (counted
    only when there were more; None when it could not say)."""

    columns: list[str]
    rows: list[list[Any]]
    more: bool
    tables: list[str]
    total: int | None


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def stopped() -> DbSourceError:
    return DbSourceError("the query was stopped", "cancelled")


# after a stop, how long to wait before stopping again while the session still runs
STOP_AGAIN_AFTER_S = (0.05, 0.2, 1.0)


class Cancel:
    """Cancels, from another thread, what a session runs: the statement in flight, or the
    session itself if it has not connected yet. A backend attaches how to cancel its statement
    (PostgreSQL: a cancel request; MySQL: `KILL QUERY` from a second connection); calling this
    runs it, and a session attached after the call is refused.

    A cancel request or a `KILL QUERY` that lands between two of the session's statements finds
    nothing to stop, and the next one (the query) would then run to the source's timeout with
    nobody waiting for it: while the session is still attached, the stop is sent again a moment
    later (`STOP_AGAIN_AFTER_S`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stop: Callable[[], None] | None = None
        self._detached = threading.Event()
        self.cancelled = False

    def __call__(self) -> None:
        with self._lock:
            self.cancelled = True
        for wait in (*STOP_AGAIN_AFTER_S, None):
            with self._lock:
                stop = self._stop
            if stop is None:
                return
            stop()  # each backend's own: it swallows its driver's errors (nothing to cancel)
            if wait is None or self._detached.wait(wait):
                return

    def attach(self, stop: Callable[[], None] | None) -> None:
        with self._lock:
            if stop is not None and self.cancelled:
                raise stopped()
            self._stop = stop
            if stop is None:
                self._detached.set()
            else:
                self._detached.clear()


def query_text(sql: str) -> str:
    """The one query `sql` holds, without its trailing `;`: refused before it is sent unless it
    starts as a query does (SELECT, WITH, VALUES, TABLE). The session, not this, is what stops
    a write; this only says plainly why an INSERT or a DDL statement cannot run."""
    text = checked_sql(sql).rstrip().rstrip(";").rstrip()
    if not text:
        raise DbSourceError("the query is empty")
    if not _QUERY_START.match(_COMMENTS.sub(" ", text)):
        raise DbSourceError(
            "sources are read-only: only one query (SELECT, WITH … SELECT, VALUES or TABLE)"
            " can run on them, never INSERT, UPDATE, DELETE or DDL",
            "read_only",
        )
    return text


def explained(spec: SourceSpec, kind: str, said: str, server: str) -> DbSourceError:
    """The error of `kind` on `spec` as the model and the person read it; `said` is the
    driver's message, already scrubbed; `server` names the database kind."""
    message = {
        "cancelled": "the query was stopped",
        "timeout": f"the query took longer than {spec.timeout_s:g} s (the statement timeout"
        f" of source {spec.name!r}) and was stopped",
        "read_only": f"source {spec.name!r} is read-only: {said}",
        "permission": f"permission denied on source {spec.name!r}: {said}",
        "unreachable": f"could not reach source {spec.name!r}: {said}",
    }.get(kind, f"{server} error on source {spec.name!r}: {said}")
    return DbSourceError(message, kind if kind in _KINDS else "invalid")


def time_left(spec: SourceSpec, ends: float | None) -> float:
    """Seconds left of `spec`'s timeout for a use of it that ends at `ends` (time.monotonic;
    None: a whole timeout per statement), so that all its statements together keep the
    timeout; the timeout's error once none is left."""
    if ends is None:
        return spec.timeout_s
    left = ends - time.monotonic()
    if left <= 0:
        raise explained(spec, "timeout", "", "")
    return left


_KINDS = ("cancelled", "timeout", "read_only", "permission", "unreachable")


def connect_failed(spec: SourceSpec, exc: BaseException) -> DbSourceError:
    return DbSourceError(
        f"could not connect to source {spec.name!r}: {spec.scrub(first_line(exc))}",
        "unreachable",
    )


def plain(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return f"<{len(value)} bytes>"
    if isinstance(value, (dict, list)):
        return json.dumps(value, default=str)
    return str(value)  # dates, decimals, UUIDs, ranges: as Python prints them


def read_capped(
    fetchmany: Callable[[int], Sequence[Sequence[Any]]],
    limit: int,
    max_bytes: int | None = None,
    per_fetch: int = FETCH_BATCH,
) -> tuple[list[list[Any]], bool]:
    """At most `limit` + 1 rows from an open result, `per_fetch` at a time: with
    `max_bytes`, reading stops once the rows read hold more than that (as JSON), so wide rows
    never pile up to the row cap in memory. Returns the first `limit` rows and whether there
    may be more (the count that follows says how many)."""
    rows: list[list[Any]] = []
    used = 0
    over_bytes = False
    while len(rows) <= limit:
        want = min(per_fetch, limit + 1 - len(rows))
        batch = fetchmany(want)
        for row in batch:
            cells = [plain(v) for v in row]
            rows.append(cells)
            used += len(json.dumps(cells, default=str))
        if len(batch) < want:
            break
        if max_bytes is not None and used > max_bytes:
            over_bytes = len(rows) <= limit
            break
    return rows[:limit], len(rows) > limit or over_bytes


@dataclass(frozen=True)
class Column:
    """One column of a query's result as the bounded query reads it: its name, how the outer
    query names its value, and its text (or bytes) whose size the server measures and cuts;
    None for a type of a small fixed size (numbers, dates), read as it is."""

    name: str
    value: str
    text: str | None


@dataclass(frozen=True)
class Bounded:
    """A checked query read through `sql`, which has the server cut every value longer than
    MAX_VALUE_BYTES before sending it: three columns come for each of `columns` (the value, or
    NULL when cut; its head when cut; its size), and `read` turns them back into one cell."""

    sql: str
    columns: list[str]

    @property
    def batch(self) -> int:
        """Rows per fetch: FETCH_BATCH, fewer when the rows are so wide that a batch of the
        largest ones would pass FETCH_BUDGET_BYTES (one at least)."""
        widest = max(1, len(self.columns)) * _WIRE_BYTES_PER_COLUMN
        return max(1, min(FETCH_BATCH, FETCH_BUDGET_BYTES // widest))

    def read(
        self,
        fetchmany: Callable[[int], Sequence[Sequence[Any]]],
        limit: int,
        max_bytes: int | None = None,
    ) -> tuple[list[list[Any]], bool]:
        """read_capped over the bounded result, a row of cells per row."""

        def cells(n: int) -> list[list[Any]]:
            return [
                [_uncut(*row[i : i + 3]) for i in range(0, len(row), 3)]
                for row in fetchmany(n)
            ]

        return read_capped(cells, limit, max_bytes, self.batch)


def bounded_select(
    source: str, columns: Sequence[Column], size_of: str, head_of: str
) -> str:
    """The SELECT over `source` (the query as a FROM item) that bounds each of `columns`:
    `size_of` and `head_of` are the dialect's byte length of a text and its first characters
    (`{text}`, `{n}`). A head of n characters may be up to 4n bytes; `_uncut` keeps n."""
    n = MAX_VALUE_BYTES
    parts: list[str] = []
    for column in columns:
        if column.text is None:
            parts += [column.value, "NULL", "NULL"]
            continue
        size = size_of.format(text=column.text)
        head = head_of.format(text=column.text, n=n)
        parts += [
            f"CASE WHEN {size} > {n} THEN NULL ELSE {column.value} END",
            f"CASE WHEN {size} > {n} THEN {head} END",
            f"CASE WHEN {size} > {n} THEN {size} END",
        ]
    return f"SELECT {', '.join(parts)} FROM {source}"


def _uncut(value: Any, head: Any = None, size: Any = None) -> Any:
    """One cell of a bounded row: the value, or what the server kept of a longer one (bytes
    show as their size only, as `plain` shows them)."""
    if head is None:
        return value
    if isinstance(head, (bytes, bytearray, memoryview)):
        return f"<{size} bytes>"
    kept = str(head).encode()[:MAX_VALUE_BYTES].decode(errors="ignore")
    return CutValue(
        f"{kept}… (value cut at {MAX_VALUE_BYTES:,} bytes of {int(size):,})"
    )


def cut_note(rows: Sequence[Sequence[Any]]) -> str | None:
    """What the result says of the values the server cut, or None when it cut none."""
    cut = sum(isinstance(v, CutValue) for row in rows for v in row)
    if not cut:
        return None
    return (
        f"{cut:,} value(s) were cut at {MAX_VALUE_BYTES:,} bytes (each says how long it is);"
        " select a part of a long value (substring, left) to read more of it"
    )


def named(schema: str, table: str, home: str) -> str:
    """How a table is called on the Data page and in `tables`: bare in the source's home schema
    (PostgreSQL's `public`, MySQL's database of the URL), `schema.table` elsewhere."""
    return table if schema == home else f"{schema}.{table}"


def grouped_columns(rows: Sequence[Sequence[Any]], home: str) -> list[dict[str, Any]]:
    """(schema, table, column, type) rows as `[{"name", "columns": [{"name", "type"}]}]`, at
    most MAX_TABLES tables."""
    tables: dict[str, list[dict[str, str]]] = {}
    for schema, table, column, kind in rows:
        name = named(str(schema), str(table), home)
        if name in tables or len(tables) < MAX_TABLES:
            tables.setdefault(name, []).append({"name": str(column), "type": str(kind)})
    return [{"name": n, "columns": c} for n, c in tables.items()]
