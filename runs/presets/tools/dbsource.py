"""Database sources an admin registered (`runs.models.DataSource`): read-only SQL over PostgreSQL.

The guards are the database session's own, not a parser of ours:

- every use is one transaction opened `READ ONLY` on a session whose default is read-only too, so
  a write anywhere in a query (a function that inserts, `nextval`, `SELECT ... FOR UPDATE`) is
  refused by PostgreSQL;
- `statement_timeout` (and `lock_timeout`) are set to the source's `timeout_s` before each of our
  statements, so a query that also calls `set_config('statement_timeout', ...)` cannot lift it
  for what follows;
- the query runs as a server-side cursor (`DECLARE`, sent with the extended protocol, which
  takes exactly one statement) and at most the SQL tool's row cap + 1 rows are fetched, so a
  query matching millions of rows sends the cap, and fetching stops early once the rows read
  pass the SQL tools' byte cap; what reaches the model is then cut to that cap as for the other
  SQL tools (`capped_result`).

Stop reaches a query in flight: the caller hands the work a `Cancel` and calls it when the
person stops the step (runs.presets.sources), and PostgreSQL cancels the statement at once
instead of letting it run on until its timeout on a thread nobody waits for.

The URL holds a password: nothing here returns it, and error messages are scrubbed of it.
Which tables a query read comes from PostgreSQL's own plan (`EXPLAIN (VERBOSE, FORMAT JSON)`),
so the notebook records the tables the database says it used.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote, unquote, urlsplit, urlunsplit

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql as pg_sql

from runs.presets.tools.sql import (
    SQLError,
    capped_result,
    checked_sql,
    max_bytes,
    max_rows,
)

CONNECT_TIMEOUT_S = 5
PREVIEW_ROWS = 20
FETCH_BATCH = 50
MAX_TABLES = 500
SCHEMES = ("postgres", "postgresql")
_QUERY_START = re.compile(r"^\s*(\(\s*)*(select|with|values|table)\b", re.IGNORECASE)
_COMMENTS = re.compile(r"--[^\n]*|/\*.*?\*/", re.DOTALL)
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]{0,62}$")


class DbSourceError(SQLError):
    """A source unreachable, a query refused or failed; the message says why (never the URL).

    `kind`: "not_found" (no such source granted), "unreachable", "timeout", "read_only",
    "permission", "invalid" (the query).
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


def url_problem(url: str) -> str | None:
    """Why `url` cannot be a source's URL, or None."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return "not a URL"
    if parts.scheme not in SCHEMES:
        return "use a postgresql:// URL (postgresql://role:password@host:5432/database)"
    if not parts.hostname:
        return "the URL names no host"
    if not parts.path.strip("/"):
        return "the URL names no database (…/database)"
    return None


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


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class Cancel:
    """Cancels, from another thread, what a session runs: the statement in flight, or the
    session itself if it has not connected yet."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._connection: psycopg.Connection[Any] | None = None
        self.cancelled = False

    def __call__(self) -> None:
        with self._lock:
            self.cancelled = True
            connection = self._connection
        if connection is not None:
            try:
                # a cancel request on a connection of its own; nothing if already closed
                connection.cancel_safe(timeout=CONNECT_TIMEOUT_S)
            except (psycopg.Error, OSError):
                pass

    def _attach(self, connection: psycopg.Connection[Any] | None) -> None:
        with self._lock:
            if connection is not None and self.cancelled:
                raise DbSourceError("the query was stopped", "cancelled")
            self._connection = connection


def _explain(
    spec: SourceSpec, exc: psycopg.Error, sql: str = "", cancel: Cancel | None = None
) -> DbSourceError:
    """A driver's error as the model and the person should read it."""
    said = spec.scrub(_first_line(exc))
    if isinstance(exc, pg_errors.QueryCanceled) and cancel and cancel.cancelled:
        return DbSourceError("the query was stopped", "cancelled")
    if isinstance(exc, pg_errors.QueryCanceled):
        return DbSourceError(
            f"the query took longer than {spec.timeout_s:g} s (the statement timeout of"
            f" source {spec.name!r}) and was stopped",
            "timeout",
        )
    if isinstance(exc, pg_errors.ReadOnlySqlTransaction) or (
        isinstance(exc, pg_errors.FeatureNotSupported) and "read-only" in said
    ):
        return DbSourceError(f"source {spec.name!r} is read-only: {said}", "read_only")
    if isinstance(exc, pg_errors.InsufficientPrivilege):
        return DbSourceError(
            f"permission denied on source {spec.name!r}: {said}", "permission"
        )
    if (
        isinstance(exc, pg_errors.SyntaxError)
        and sql
        and not _QUERY_START.match(_COMMENTS.sub(" ", sql))
    ):
        return DbSourceError(
            f"source {spec.name!r} is read-only: only one query (SELECT, WITH … SELECT,"
            " VALUES or TABLE) can run on it, never INSERT, UPDATE, DELETE or DDL",
            "read_only",
        )
    if isinstance(exc, psycopg.OperationalError) and not isinstance(
        exc, pg_errors.QueryCanceled
    ):
        return DbSourceError(
            f"could not reach source {spec.name!r}: {said}", "unreachable"
        )
    return DbSourceError(f"PostgreSQL error on source {spec.name!r}: {said}")


@contextmanager
def _session(
    spec: SourceSpec, cancel: Cancel | None = None
) -> Iterator[psycopg.Cursor[Any]]:
    """A cursor in a fresh READ ONLY transaction on `spec`, rolled back and closed after;
    `cancel` can stop what it runs from another thread."""
    millis = str(max(1, int(spec.timeout_s * 1000)))
    try:
        connection = psycopg.connect(
            spec.url,
            connect_timeout=CONNECT_TIMEOUT_S,
            autocommit=False,
            application_name="agentui",
            options=f"-c default_transaction_read_only=on -c statement_timeout={millis}",
        )
    except psycopg.Error as exc:
        raise DbSourceError(
            f"could not connect to source {spec.name!r}: {spec.scrub(_first_line(exc))}",
            "unreachable",
        ) from None
    try:
        if cancel is not None:
            cancel._attach(connection)
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION READ ONLY")
            yield cursor
    finally:
        if cancel is not None:
            cancel._attach(None)
        try:
            connection.rollback()
        except psycopg.Error:
            pass
        connection.close()


def _arm(cursor: psycopg.Cursor[Any], spec: SourceSpec) -> None:
    """The source's timeouts for the next statement, whatever an earlier query set."""
    millis = f"{max(1, int(spec.timeout_s * 1000))}ms"
    cursor.execute(
        "SELECT set_config('statement_timeout', %s, true),"
        " set_config('lock_timeout', %s, true)",
        (millis, millis),
    )


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return f"<{len(value)} bytes>"
    if isinstance(value, (dict, list)):
        return json.dumps(value, default=str)
    return str(value)  # dates, decimals, UUIDs, ranges: as Python prints them


def _fetch(
    connection: psycopg.Connection[Any],
    spec: SourceSpec,
    sql: str,
    limit: int,
    max_bytes: int | None = None,
) -> tuple[list[str], list[list[Any]], bool]:
    """At most `limit` + 1 rows of `sql` through a server-side cursor (one statement only), in
    batches of FETCH_BATCH: with `max_bytes`, fetching stops once the rows read hold more than
    that (as JSON), so wide rows never pile up to the row cap in memory; the result then says
    there may be more (the count that follows says how many)."""
    with connection.cursor(name="agentui_query") as cursor:
        cursor.execute(sql)
        columns = [c.name for c in cursor.description or []]
        rows: list[list[Any]] = []
        used = 0
        over_bytes = False
        while len(rows) <= limit:
            batch = cursor.fetchmany(min(FETCH_BATCH, limit + 1 - len(rows)))
            if not batch:
                break
            for row in batch:
                plain = [_plain(v) for v in row]
                rows.append(plain)
                used += len(json.dumps(plain, default=str))
            if max_bytes is not None and used > max_bytes:
                over_bytes = len(rows) <= limit
                break
    return columns, rows[:limit], len(rows) > limit or over_bytes


def _relations(plan: Any) -> Iterator[str]:
    if isinstance(plan, dict):
        name = plan.get("Relation Name")
        if isinstance(name, str):
            schema = plan.get("Schema")
            yield f"{schema}.{name}" if isinstance(schema, str) else name
        for value in plan.values():
            yield from _relations(value)
    elif isinstance(plan, list):
        for item in plan:
            yield from _relations(item)


def _tables_read(cursor: psycopg.Cursor[Any], spec: SourceSpec, sql: str) -> list[str]:
    """The tables PostgreSQL's plan for `sql` reads (`schema.table`); [] if it cannot say.

    Runs after `sql` went through DECLARE, which takes one statement only: the same text after
    EXPLAIN is that one statement too."""
    try:
        _arm(cursor, spec)
        cursor.execute(pg_sql.SQL("EXPLAIN (VERBOSE, FORMAT JSON) ") + pg_sql.SQL(sql))
        row = cursor.fetchone()
    except psycopg.Error:
        return []
    plan = row[0] if row else None
    if isinstance(plan, str):
        plan = json.loads(plan)
    return sorted(set(_relations(plan)))


def run_query(
    spec: SourceSpec, sql: str, cancel: Cancel | None = None
) -> dict[str, Any]:
    """One read-only query on `spec`: capped as the other SQL tools are, naming the source and
    the tables it read. DbSourceError says what went wrong."""
    text = checked_sql(sql).rstrip().rstrip(";").rstrip()
    if not text:
        raise DbSourceError("the query is empty")
    with _session(spec, cancel) as cursor:
        connection = cursor.connection
        try:
            _arm(cursor, spec)
            columns, fetched, more = _fetch(
                connection, spec, text, max_rows(), max_bytes()
            )
            tables = _tables_read(cursor, spec, text)
        except psycopg.Error as exc:
            raise _explain(spec, exc, text, cancel) from None

        def count_all() -> int | None:
            if cancel is not None and cancel.cancelled:
                return None
            try:
                _arm(cursor, spec)
                _, total, _ = _fetch(
                    connection, spec, f"SELECT COUNT(*) FROM ({text}) AS agentui_q", 1
                )
            except psycopg.Error:
                return None
            return int(total[0][0]) if total else None

        result = capped_result(columns, fetched, more, count_all)
    result["source"] = spec.name
    result["tables"] = tables
    return result


_TABLES_SQL = """
SELECT c.table_schema, c.table_name, c.column_name, c.data_type
FROM information_schema.columns c
JOIN information_schema.tables t
  ON t.table_schema = c.table_schema AND t.table_name = c.table_name
WHERE c.table_schema NOT IN ('pg_catalog', 'information_schema')
  AND c.table_schema NOT LIKE 'pg_toast%%'
ORDER BY c.table_schema, c.table_name, c.ordinal_position
"""


def list_tables(spec: SourceSpec, cancel: Cancel | None = None) -> list[dict[str, Any]]:
    """The tables and views the source's role can see (information_schema lists only those),
    each `{"name": "schema.table", "columns": [{"name", "type"}]}`."""
    with _session(spec, cancel) as cursor:
        try:
            _arm(cursor, spec)
            cursor.execute(_TABLES_SQL, ())
            rows = cursor.fetchmany(MAX_TABLES * 50)
        except psycopg.Error as exc:
            raise _explain(spec, exc, cancel=cancel) from None
    tables: dict[str, list[dict[str, str]]] = {}
    for schema, table, column, kind in rows:
        name = table if schema == "public" else f"{schema}.{table}"
        if name in tables or len(tables) < MAX_TABLES:
            tables.setdefault(name, []).append({"name": column, "type": kind})
    return [{"name": n, "columns": c} for n, c in tables.items()]


def _qualified(table: str) -> pg_sql.Composable:
    parts = table.split(".")
    if not 1 <= len(parts) <= 2 or not all(_IDENT.match(p) for p in parts):
        raise DbSourceError(f"{table[:80]!r} is not a table name", "not_found")
    return pg_sql.SQL(".").join(pg_sql.Identifier(p) for p in parts)


def preview(spec: SourceSpec, table: str, rows: int = PREVIEW_ROWS) -> dict[str, Any]:
    """The first `rows` rows of one table of the source, with its columns."""
    listed = {t["name"]: t for t in list_tables(spec)}
    if table not in listed:
        raise DbSourceError(
            f"source {spec.name!r} has no table {table[:80]!r} you can read",
            "not_found",
        )
    with _session(spec) as cursor:
        try:
            _arm(cursor, spec)
            statement = pg_sql.SQL("SELECT * FROM {} ").format(_qualified(table))
            columns, fetched, _ = _fetch(
                cursor.connection,
                spec,
                statement.as_string(cursor.connection),
                max(1, min(rows, 200)),
            )
        except psycopg.Error as exc:
            raise _explain(spec, exc) from None
    return {**listed[table], "preview_columns": columns, "preview": fetched}


def test_connection(spec: SourceSpec) -> str:
    """What connecting to `spec` says: the server, the role, what it sees and whether the role
    itself could write (every session is read-only anyway; a read-only role is the second
    guard). DbSourceError when it cannot connect."""
    with _session(spec) as cursor:
        try:
            cursor.execute(
                "SELECT current_user, current_database(), current_setting('server_version'),"
                " (SELECT rolsuper FROM pg_roles WHERE rolname = current_user),"
                " (SELECT COUNT(DISTINCT (table_schema, table_name))"
                "  FROM information_schema.table_privileges WHERE grantee = current_user"
                "  AND privilege_type IN ('INSERT', 'UPDATE', 'DELETE', 'TRUNCATE'))",
                (),
            )
            row = cursor.fetchone()
        except psycopg.Error as exc:
            raise _explain(spec, exc) from None
    tables = len(list_tables(spec))
    assert row is not None
    user, database, version, superuser, writable = row
    said = (
        f"connected as {user} to {database} (PostgreSQL {version}), {tables} table(s)"
        " visible; queries run read-only"
    )
    if superuser:
        return said + "; WARNING: the role is a superuser, use a read-only role"
    if writable:
        return (
            said + f"; WARNING: the role may write to {writable} table(s), use a"
            " read-only role"
        )
    return said
