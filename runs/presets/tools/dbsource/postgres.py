"""PostgreSQL sources (psycopg): `postgresql://role:password@host:5432/database`.

- every use is one transaction opened `READ ONLY` on a session whose default is read-only too,
  so a write anywhere in a query (a function that inserts, `nextval`, `SELECT ... FOR UPDATE`)
  is refused by PostgreSQL;
- `statement_timeout` (and `lock_timeout`) are set to the source's `timeout_s` before each of
  our statements, so a query that also calls `set_config('statement_timeout', ...)` cannot
  lift it for what follows;
- the query runs as a server-side cursor (`DECLARE`, sent with the extended protocol, which
  takes exactly one statement), from which at most the row cap + 1 rows are fetched;
- Stop sends a cancel request (as `pg_cancel_backend` would);
- the tables read come from the plan (`EXPLAIN (VERBOSE, FORMAT JSON)`), which names them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql as pg_sql

from runs.presets.tools.dbsource.common import (
    CONNECT_TIMEOUT_S,
    MAX_TABLES,
    Cancel,
    DbSourceError,
    Fetched,
    SourceSpec,
    connect_failed,
    explained,
    first_line,
    grouped_columns,
    read_capped,
)

SCHEMES = ("postgres", "postgresql")
SERVER = "PostgreSQL"
HOME = "public"
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]{0,62}$")


def _explain(
    spec: SourceSpec, exc: psycopg.Error, cancel: Cancel | None = None
) -> DbSourceError:
    """A driver's error as the model and the person should read it."""
    said = spec.scrub(first_line(exc))
    if isinstance(exc, pg_errors.QueryCanceled):
        kind = "cancelled" if cancel and cancel.cancelled else "timeout"
    elif isinstance(exc, pg_errors.ReadOnlySqlTransaction) or (
        isinstance(exc, pg_errors.FeatureNotSupported) and "read-only" in said
    ):
        kind = "read_only"
    elif isinstance(exc, pg_errors.InsufficientPrivilege):
        kind = "permission"
    elif isinstance(exc, psycopg.OperationalError):
        kind = "unreachable"
    else:
        kind = "invalid"
    return explained(spec, kind, said, SERVER)


def _cancel_request(connection: psycopg.Connection[Any]) -> None:
    try:
        # a cancel request on a connection of its own; nothing if already closed
        connection.cancel_safe(timeout=CONNECT_TIMEOUT_S)
    except (psycopg.Error, OSError):
        pass


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
        raise connect_failed(spec, exc) from None
    try:
        if cancel is not None:
            cancel.attach(lambda: _cancel_request(connection))
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION READ ONLY")
            yield cursor
    finally:
        if cancel is not None:
            cancel.attach(None)
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


def _fetch(
    connection: psycopg.Connection[Any],
    sql: str,
    limit: int,
    max_bytes: int | None = None,
) -> tuple[list[str], list[list[Any]], bool]:
    """At most `limit` + 1 rows of `sql` through a server-side cursor (one statement only)."""
    with connection.cursor(name="agentui_query") as cursor:
        cursor.execute(sql)
        columns = [c.name for c in cursor.description or []]
        rows, more = read_capped(cursor.fetchmany, limit, max_bytes)
    return columns, rows, more


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
    spec: SourceSpec,
    text: str,
    limit: int,
    max_bytes: int,
    cancel: Cancel | None = None,
) -> Fetched:
    """`text` (one checked query) on `spec`: up to `limit` rows, the tables it read, and how
    many rows it has in all when there were more (counted in the same session)."""
    with _session(spec, cancel) as cursor:
        connection = cursor.connection
        try:
            _arm(cursor, spec)
            columns, rows, more = _fetch(connection, text, limit, max_bytes)
            tables = _tables_read(cursor, spec, text)
        except psycopg.Error as exc:
            raise _explain(spec, exc, cancel) from None
        total = None
        if more and not (cancel is not None and cancel.cancelled):
            try:
                _arm(cursor, spec)
                _, counted, _ = _fetch(
                    connection, f"SELECT COUNT(*) FROM ({text}) AS agentui_q", 1
                )
                total = int(counted[0][0]) if counted else None
            except psycopg.Error:
                pass
    return Fetched(columns, rows, more, tables, total)


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
    """The tables and views the source's role can see (information_schema lists only those)."""
    with _session(spec, cancel) as cursor:
        try:
            _arm(cursor, spec)
            cursor.execute(_TABLES_SQL, ())
            rows = cursor.fetchmany(MAX_TABLES * 50)
        except psycopg.Error as exc:
            raise _explain(spec, exc, cancel) from None
    return grouped_columns(rows, HOME)


def first_rows(
    spec: SourceSpec, table: str, rows: int
) -> tuple[list[str], list[list[Any]]]:
    """The first `rows` rows of `table` (a name list_tables gave)."""
    parts = table.split(".")
    if not all(_IDENT.match(p) for p in parts):
        raise DbSourceError(f"{table[:80]!r} is not a table name", "not_found")
    qualified = pg_sql.SQL(".").join(pg_sql.Identifier(p) for p in parts)
    with _session(spec) as cursor:
        try:
            _arm(cursor, spec)
            statement = pg_sql.SQL("SELECT * FROM {} ").format(qualified)
            columns, fetched, _ = _fetch(
                cursor.connection, statement.as_string(cursor.connection), rows
            )
        except psycopg.Error as exc:
            raise _explain(spec, exc) from None
    return columns, fetched


# Read-only transactions still run these: with them, one person's query can end another's
# (everyone's queries on a source run as its role, and a role may signal its own sessions)
SIGNALLING = ("pg_terminate_backend", "pg_cancel_backend")


def test_connection(spec: SourceSpec) -> tuple[str, str | None]:
    """Who and where the session is, and a warning when the role itself could write or end
    other sessions' queries."""
    with _session(spec) as cursor:
        try:
            cursor.execute(
                "SELECT current_user, current_database(), current_setting('server_version'),"
                " (SELECT rolsuper FROM pg_roles WHERE rolname = current_user),"
                " (SELECT COUNT(DISTINCT (table_schema, table_name))"
                "  FROM information_schema.table_privileges WHERE grantee = current_user"
                "  AND privilege_type IN ('INSERT', 'UPDATE', 'DELETE', 'TRUNCATE')),"
                " pg_has_role(current_user, 'pg_signal_backend', 'USAGE'),"
                " (SELECT string_agg(DISTINCT proname, ', ' ORDER BY proname) FROM pg_proc"
                "  WHERE pronamespace = 'pg_catalog'::regnamespace AND proname = ANY(%s)"
                "  AND has_function_privilege(oid, 'EXECUTE'))",
                (list(SIGNALLING),),
            )
            row = cursor.fetchone()
        except psycopg.Error as exc:
            raise _explain(spec, exc) from None
    assert row is not None
    user, database, version, superuser, writable, signals_others, signalling = row
    said = f"connected as {user} to {database} ({SERVER} {version})"
    if superuser:
        return said, "the role is a superuser, use a read-only role"
    warnings = []
    if writable:
        warnings.append(
            f"the role may write to {writable} table(s), use a read-only role"
        )
    if signals_others:
        warnings.append(
            "the role has pg_signal_backend, so its queries can end other roles' sessions:"
            " revoke it"
        )
    if signalling:
        warnings.append(
            f"the role may run {signalling}, so one person's query can end another's on"
            " this source: revoke EXECUTE on them from PUBLIC (docs/operations.md,"
            " Database sources)"
        )
    return said, "; ".join(warnings) or None
