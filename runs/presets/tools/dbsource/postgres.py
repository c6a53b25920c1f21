"""PostgreSQL sources (psycopg): `postgresql://role:password@host:5432/database`.

- every use is one transaction opened `READ ONLY` on a session whose default is read-only too,
  so a write anywhere in a query (a function that inserts, `nextval`, `SELECT ... FOR UPDATE`)
  is refused by PostgreSQL;
- `statement_timeout` (and `lock_timeout`) are set before each of our statements (each fetch
  too) to what is left of the source's `timeout_s` for the whole query, so a query that also
  calls `set_config('statement_timeout', ...)` cannot lift it for what follows, and all the
  statements of one query together keep the timeout;
- the query is first parsed and described alone (a Parse and a Describe of exactly its text:
  one statement, nothing run), then read through a SELECT over it that has the server cut
  every value longer than MAX_VALUE_BYTES (`octet_length` of its text, `substring`), so no
  value is read whole; that runs as a server-side cursor (`DECLARE`, sent with the extended
  protocol, which takes exactly one statement), from which at most the row cap + 1 rows are
  fetched;
- Stop sends a cancel request (as `pg_cancel_backend` would);
- the tables read are those the session's own statistics say the query scanned
  (`pg_stat_xact_user_tables`, counted in its transaction), not the plan's text: EXPLAIN
  VERBOSE prints folded constants whole, so a plan could be as huge as a value.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg import pq
from psycopg import sql as pg_sql

from runs.presets.tools.dbsource.common import (
    CONNECT_TIMEOUT_S,
    MAX_TABLES,
    Bounded,
    Cancel,
    Column,
    DbSourceError,
    Fetched,
    SourceSpec,
    bounded_select,
    connect_failed,
    explained,
    first_line,
    grouped_columns,
    time_left,
)

SCHEMES = ("postgres", "postgresql")
SERVER = "PostgreSQL"
HOME = "public"
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]{0,62}$")
_BYTEA = 17  # its text is hex: its size and head are taken of the bytes themselves


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


def _arm(
    cursor: psycopg.Cursor[Any], spec: SourceSpec, ends: float | None = None
) -> None:
    """The source's timeouts for the next statement, whatever an earlier query set: what is
    left of them for a use that ends at `ends` (`time_left`)."""
    millis = f"{max(1, int(time_left(spec, ends) * 1000))}ms"
    cursor.execute(
        "SELECT set_config('statement_timeout', %s, true),"
        " set_config('lock_timeout', %s, true)",
        (millis, millis),
    )


def _columns_of(connection: psycopg.Connection[Any], sql: str) -> list[tuple[str, int]]:
    """The names and type OIDs of the result of `sql`, from the server's parse of exactly its
    text (a Parse and a Describe of the unnamed statement: nothing runs). An error unless it is
    one statement, whole: so the SELECT that bounds its values can wrap it."""
    pgconn = connection.pgconn
    encoding = connection.info.encoding
    parsed = pgconn.prepare(b"", sql.encode(encoding, "replace"))
    if parsed.status != pq.ExecStatus.COMMAND_OK:
        raise pg_errors.error_from_result(parsed, encoding=encoding)
    described = pgconn.describe_prepared(b"")
    if described.status != pq.ExecStatus.COMMAND_OK:
        raise pg_errors.error_from_result(described, encoding=encoding)
    return [
        ((described.fname(i) or b"").decode(encoding, "replace"), described.ftype(i))
        for i in range(described.nfields)
    ]


def _bounded(connection: psycopg.Connection[Any], sql: str) -> Bounded:
    """`sql` read with each value cut by the server past MAX_VALUE_BYTES. Its columns are
    renamed by position (a result may name two alike); `OFFSET 0` keeps PostgreSQL from
    pulling the query up into ours, so each value is computed once however often we look."""
    columns = _columns_of(connection, sql)
    aliases = ", ".join(f"c{i}" for i in range(len(columns)))
    source = f"(SELECT * FROM (\n{sql}\n) AS agentui_q0 OFFSET 0) AS agentui_q"
    if columns:
        source += f"({aliases})"
    refs = [
        Column(
            name,
            f"agentui_q.c{i}",
            f"agentui_q.c{i}" + ("" if oid == _BYTEA else "::text"),
        )
        for i, (name, oid) in enumerate(columns)
    ]
    query = bounded_select(
        source, refs, "octet_length({text})", "substring({text} from 1 for {n})"
    )
    return Bounded(query, [c.name for c in refs])


def _fetch(
    connection: psycopg.Connection[Any],
    sql: str,
    limit: int,
    arm: Callable[[], None],
    max_bytes: int | None = None,
) -> tuple[list[str], list[list[Any]], bool]:
    """At most `limit` + 1 rows of `sql`, each value bounded (`_bounded`), through a
    server-side cursor (one statement only); `arm` sets the timeouts before each statement."""
    arm()
    bounded = _bounded(connection, sql)
    with connection.cursor(name="agentui_query") as cursor:
        arm()
        cursor.execute(bounded.sql)

        def fetchmany(n: int) -> list[Any]:
            arm()  # each FETCH is a statement of its own
            return cursor.fetchmany(n)

        rows, more = bounded.read(fetchmany, limit, max_bytes)
    return bounded.columns, rows, more


def _tables_read(cursor: psycopg.Cursor[Any]) -> list[str]:
    """The tables the transaction's statements scanned so far (`schema.table`), as the
    session's statistics count them; [] if it cannot say."""
    try:
        cursor.execute(
            "SELECT schemaname, relname FROM pg_stat_xact_user_tables"
            " WHERE COALESCE(seq_scan, 0) + COALESCE(idx_scan, 0) > 0"
        )
        rows = cursor.fetchmany(MAX_TABLES)
    except psycopg.Error:
        return []
    return sorted(f"{schema}.{table}" for schema, table in rows)


def run_query(
    spec: SourceSpec,
    text: str,
    limit: int,
    max_bytes: int,
    cancel: Cancel | None = None,
) -> Fetched:
    """`text` (one checked query) on `spec`: up to `limit` rows, the tables it read, and how
    many rows it has in all when there were more (counted in the same session)."""
    ends = time.monotonic() + spec.timeout_s
    with _session(spec, cancel) as cursor:
        connection = cursor.connection

        def arm() -> None:
            _arm(cursor, spec, ends)

        try:
            columns, rows, more = _fetch(connection, text, limit, arm, max_bytes)
            arm()
            tables = _tables_read(cursor)
        except psycopg.Error as exc:
            raise _explain(spec, exc, cancel) from None
        total = None
        if more and not (cancel is not None and cancel.cancelled):
            try:
                count = f"SELECT COUNT(*) FROM (\n{text}\n) AS agentui_q"
                _, counted, _ = _fetch(connection, count, 1, arm)
                total = int(counted[0][0]) if counted else None
            except (psycopg.Error, DbSourceError):
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
            statement = pg_sql.SQL("SELECT * FROM {} ").format(qualified)
            columns, fetched, _ = _fetch(
                cursor.connection,
                statement.as_string(cursor.connection),
                rows,
                lambda: _arm(cursor, spec),
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
