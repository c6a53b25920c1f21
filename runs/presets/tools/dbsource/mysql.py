"""MySQL and MariaDB sources (PyMySQL): `mysql://user:password@host:3306/database` (or
`mariadb://`).

- the session's transactions are read-only (`SET SESSION TRANSACTION READ ONLY`) and each use
  is one `START TRANSACTION READ ONLY`, so a write anywhere in a query (a function that
  inserts, `SELECT ... FOR UPDATE`) is refused by the server; PyMySQL never enables
  multi-statements, so the text is one statement;
- before each of our statements what is left of the source's timeout for the whole query is
  set as the session's statement limit
  (`max_statement_time`, seconds, on MariaDB; `max_execution_time`, milliseconds, on MySQL,
  which applies it to SELECT), with `lock_wait_timeout`; the socket has connect and read
  timeouts too, so a server that stops answering cannot hold the thread;
- the query is first prepared alone (the binary protocol's COM_STMT_PREPARE of its text: the
  server parses exactly it, one statement, runs nothing, and describes its columns), then
  read as a CTE whose column list renames its columns by position (`WITH agentui_q
  (agentui_1, …) AS (...)`, so two columns of one name are read as two and keep their names)
  through a SELECT that has the server cut every value longer than MAX_VALUE_BYTES
  (`LENGTH`, `LEFT`), so no value is read whole;
- that is read through an unbuffered cursor (`SSCursor`): at most the row cap + 1 rows are
  fetched, and a result not read to its end is dropped with its connection (reading it to the
  end is what a cursor's close would do); the count of all rows, when needed, runs in a
  session of its own;
- Stop runs `KILL QUERY <connection id>` from a second short connection as the same user;
- which tables were read comes from the server's own rewrite of the query, the note `EXPLAIN`
  leaves (`EXPLAIN EXTENDED` on MariaDB; `SHOW WARNINGS`, code 1003), which names every table
  it reads as `database`.`table` before its alias: the plan's JSON names a table by its alias,
  so `SELECT ... FROM visits AS shops` read as `shops` there. Kept: the names of tables in the
  source's database that its user can see; a derived table or a CTE has no database there.
"""

from __future__ import annotations

import re
import struct
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import unquote, urlsplit

import pymysql
from pymysql.constants import COMMAND
from pymysql.cursors import SSCursor
from pymysql.protocol import FieldDescriptorPacket

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
    grouped_columns,
    stopped,
    time_left,
)

SCHEMES = ("mysql", "mariadb")
SERVER = "MySQL"
# past the statement limit, so the server's own timeout answers first
READ_MARGIN_S = 10
_TIMED_OUT = {1969, 3024}  # MariaDB's max_statement_time, MySQL's max_execution_time
_INTERRUPTED = 1317  # KILL QUERY
_READ_ONLY = {
    1792,
    1290,
    1836,
}  # read-only transaction, --read-only server, read-only mode
_PERMISSION = {1044, 1142, 1143, 1227, 1370}
# FIELD_TYPE codes of a small fixed size (numbers, dates and times, BIT, ENUM, SET): read as
# they are, since a CASE over some of them (BIGINT UNSIGNED) would turn them into decimals
_FIXED_TYPES = frozenset(
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 16, 246, 247, 248}
)
# The server runs the text of a `/*! ... */` comment, and MySQL reads `/*+ ... */` as optimizer
# hints: either can lift the statement limit for the query it is in (MariaDB's
# `/*!SET STATEMENT max_statement_time=0 FOR*/ SELECT ...`, MySQL's `MAX_EXECUTION_TIME(...)`),
# so a query holding one is not sent (anywhere in the text: a string that holds one is refused
# too, which costs a rare query a rewrite, never the limit)
_EXECUTABLE_COMMENT = re.compile(r"/\*[!+]")
# `SELECT ... INTO OUTFILE | DUMPFILE` writes a file on the database server and `LOAD_FILE()`
# reads one, for a user with the FILE privilege, and a read-only transaction stops neither:
# refused by their words anywhere in the text (comments may stand between `INTO` and
# `OUTFILE`, and a string may hide where a comment starts)
_SERVER_FILES = re.compile(r"\b(?:OUTFILE|DUMPFILE|LOAD_FILE)\b", re.IGNORECASE)


def _params(spec: SourceSpec) -> dict[str, Any]:
    parts = urlsplit(spec.url.strip())
    return {
        "host": parts.hostname or "127.0.0.1",
        "port": parts.port or 3306,
        "user": unquote(parts.username or ""),
        "password": unquote(parts.password or ""),
        "database": unquote(parts.path.strip("/")),
        "charset": "utf8mb4",
        "connect_timeout": CONNECT_TIMEOUT_S,
        "read_timeout": spec.timeout_s + READ_MARGIN_S,
        "write_timeout": spec.timeout_s + READ_MARGIN_S,
        "autocommit": False,
        "cursorclass": SSCursor,
    }


def _explain(
    spec: SourceSpec, exc: pymysql.MySQLError, cancel: Cancel | None = None
) -> DbSourceError:
    """A driver's error as the model and the person should read it."""
    code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else 0
    message = str(exc.args[1]) if len(exc.args) > 1 else str(exc)
    said = spec.scrub(message.strip().splitlines()[0] if message.strip() else str(code))
    stopping = cancel is not None and cancel.cancelled
    if stopping and (code in _TIMED_OUT or code == _INTERRUPTED or code >= 2000):
        kind = "cancelled"
    elif code in _TIMED_OUT or (code == 2013 and "timed out" in said):
        kind = "timeout"
    elif code in _READ_ONLY:
        kind = "read_only"
    elif code in _PERMISSION:
        kind = "permission"
    elif code >= 2000:  # the client's own: cannot connect, connection lost
        kind = "unreachable"
    else:
        kind = "invalid"
    return explained(spec, kind, said, SERVER)


def _kill_query(spec: SourceSpec, thread_id: int) -> None:
    """`KILL QUERY` of `thread_id`'s statement, from a connection of its own (a user may kill
    its own connections' statements); nothing if that fails (the query ends at its timeout)."""
    params = {**_params(spec), "read_timeout": CONNECT_TIMEOUT_S}
    params["write_timeout"] = CONNECT_TIMEOUT_S
    try:
        killer = pymysql.connect(**params)
    except (pymysql.MySQLError, OSError):
        return
    try:
        with killer.cursor() as cursor:
            cursor.execute("KILL QUERY %s", (int(thread_id),))
    except (pymysql.MySQLError, OSError):
        pass
    finally:
        killer.close()


class _Session:
    """One connection in a READ ONLY transaction; `arm()` before each statement."""

    def __init__(
        self,
        connection: pymysql.Connection[Any],
        spec: SourceSpec,
        cancel: Cancel | None,
        ends: float | None = None,
    ) -> None:
        self.connection = connection
        self.ends = (
            ends  # when the whole use must end (`time_left`); None: per statement
        )
        self.cursor = connection.cursor()
        self.spec = spec
        self.cancel = cancel
        self.mariadb = "mariadb" in connection.get_server_info().lower()

    def arm(self) -> None:
        """The source's statement limit for the next statement, whatever an earlier query
        set; refuses to go on once stopped (a KILL QUERY between statements kills nothing)."""
        if self.cancel is not None and self.cancel.cancelled:
            raise stopped()
        seconds = max(0.001, time_left(self.spec, self.ends))
        waits = max(1, int(seconds + 0.999))
        if self.mariadb:
            self.cursor.execute(
                "SET SESSION max_statement_time = %s, lock_wait_timeout = %s",
                (seconds, waits),
            )
        else:
            self.cursor.execute(
                "SET SESSION max_execution_time = %s, lock_wait_timeout = %s",
                (max(1, int(seconds * 1000)), waits),
            )

    def rows_of(self, sql: str, args: Any = None) -> list[tuple[Any, ...]]:
        """Every row of a small result (ours: plans, catalogs, counts)."""
        self.arm()
        self.cursor.execute(sql, args)
        return list(self.cursor.fetchall())


@contextmanager
def _session(
    spec: SourceSpec, cancel: Cancel | None = None, ends: float | None = None
) -> Iterator[_Session]:
    """A session in a fresh READ ONLY transaction on `spec`, closed after (which also ends the
    transaction and drops a result left unread); `cancel` can stop what it runs."""
    try:
        connection = pymysql.connect(**_params(spec))
    except (pymysql.MySQLError, OSError) as exc:
        raise connect_failed(spec, exc) from None
    try:
        session = _Session(connection, spec, cancel, ends)
        if cancel is not None:
            thread_id = connection.thread_id()
            cancel.attach(lambda: _kill_query(spec, thread_id))
        try:
            session.cursor.execute("SET SESSION TRANSACTION READ ONLY")
            session.cursor.execute("START TRANSACTION READ ONLY")
        except pymysql.MySQLError as exc:
            raise _explain(spec, exc, cancel) from None
        yield session
    finally:
        if cancel is not None:
            cancel.attach(None)
        # a result left unread is dropped with the connection, not read to its end (which
        # the cursor's close, and PyMySQL's own clean-up of the result, would do)
        result = getattr(connection, "_result", None)
        if result is not None:
            result.unbuffered_active = False
        try:
            connection.close()
        except (pymysql.MySQLError, OSError):
            pass


# the rewritten query's note (`SHOW WARNINGS` after an EXPLAIN)
_REWRITTEN = 1003
# one token of that text: a quoted string (skipped), a quoted identifier, a dot, anything else
_TOKEN = re.compile(
    r"""'(?:[^'\\]|\\.|'')*'|(`(?:[^`]|``)*`|"(?:[^"]|"")*")|(\.)|[^'`".]+""", re.S
)


def _qualified_tables(rewritten: str) -> Iterator[tuple[str, str]]:
    """(database, table) of every `db`.`table` reference in the server's rewrite of a query:
    two quoted identifiers joined by a dot, not part of a longer `db`.`alias`.`column`. Text in
    string literals is skipped, so a literal that spells a reference names nothing."""
    # identifiers and dots in order; None for anything else
    names: list[str | None] = []
    for match in _TOKEN.finditer(rewritten):
        quoted, dot = match.group(1), match.group(2)
        if quoted:
            mark = quoted[0]
            names.append(quoted[1:-1].replace(mark * 2, mark))
        else:
            names.append("." if dot else None)
    for i in range(len(names) - 2):
        first, dot, second = names[i], names[i + 1], names[i + 2]
        if first in (None, ".") or dot != "." or second in (None, "."):
            continue
        before = names[i - 1] if i else None
        after = names[i + 3] if i + 3 < len(names) else None
        if before != "." and after != ".":
            yield first, second


def _tables_read(session: _Session, sql: str) -> list[str]:
    """The tables of the source's database that `sql` reads, by the server's rewrite of it;
    [] if it cannot say."""
    explain = "EXPLAIN EXTENDED " if session.mariadb else "EXPLAIN "
    try:
        session.rows_of(explain + sql)
        # the EXPLAIN's notes, read before any other statement
        session.cursor.execute("SHOW WARNINGS")
        notes = [
            str(row[2]) for row in session.cursor.fetchall() if row[1] == _REWRITTEN
        ]
        database = _params(session.spec)["database"]  # what the session is connected to
        names = sorted(
            {
                table
                for db, table in _qualified_tables(" ".join(notes))
                if db == database
            }
        )
        if not names:
            return []
        marks = ", ".join(["%s"] * len(names))
        found = session.rows_of(
            "SELECT table_name FROM information_schema.tables"
            f" WHERE table_schema = DATABASE() AND table_name IN ({marks})",
            names,
        )
    except (pymysql.MySQLError, ValueError):
        return []
    return sorted({str(name) for (name,) in found})


def _described(session: _Session, sql: str) -> list[tuple[str, int]]:
    """(name, FIELD_TYPE code) of each column of `sql`, as the server prepares it alone
    (COM_STMT_PREPARE: it parses exactly `sql`, one whole statement, and runs nothing). The
    binary protocol's prepare, since PyMySQL has none of its own: the text protocol describes
    a query only by running something over it, and a derived table or a CTE without a column
    list refuses two columns of one name (`SELECT * FROM a JOIN b ON a.id = b.id`)."""
    connection = session.connection
    session.arm()
    connection._execute_command(COMMAND.COM_STMT_PREPARE, sql)
    # OK: status, statement id, columns, parameters (an error packet raises here)
    statement, columns, params = struct.unpack(
        "<xIHH", connection._read_packet().read(9)
    )
    try:
        # a definition per parameter, then one per column, each list closed by an EOF (PyMySQL
        # never asks for CLIENT_DEPRECATE_EOF)
        for _ in range(params + (1 if params else 0)):
            connection._read_packet()
        fields = [
            connection._read_packet(FieldDescriptorPacket) for _ in range(columns)
        ]
        if columns:
            connection._read_packet()
    finally:
        # no answer comes to a close
        connection._execute_command(
            COMMAND.COM_STMT_CLOSE, struct.pack("<I", statement)
        )
    return [(str(field.name), int(field.type_code)) for field in fields]


def _over(sql: str, columns: int) -> str:
    """`sql` as the CTE `agentui_q` whose columns are renamed by position (`agentui_1`, …), so
    two of one name are two columns (MySQL 8+, MariaDB 10.3+); the outer query follows."""
    names = ", ".join(f"agentui_{i}" for i in range(1, columns + 1))
    return f"WITH agentui_q ({names}) AS (\n{sql}\n)"


def _bounded(session: _Session, sql: str) -> Bounded:
    """`sql` read with each value cut by the server past MAX_VALUE_BYTES. The server parses
    `sql` alone first (`_described`), so only one whole statement is wrapped; its columns are
    read by position and keep their own names, two alike included."""
    described = _described(session, sql)
    refs = [
        Column(
            name,
            f"agentui_q.agentui_{i}",
            None if kind in _FIXED_TYPES else f"agentui_q.agentui_{i}",
        )
        for i, (name, kind) in enumerate(described, 1)
    ]
    select = bounded_select("agentui_q", refs, "LENGTH({text})", "LEFT({text}, {n})")
    return Bounded(f"{_over(sql, len(refs))}\n{select}", [c.name for c in refs])


def _read(
    session: _Session, sql: str, limit: int, max_bytes: int | None = None
) -> tuple[list[str], list[list[Any]], bool]:
    """At most `limit` + 1 rows of `sql`, each value bounded (`_bounded`)."""
    bounded = _bounded(session, sql)
    session.arm()
    session.cursor.execute(bounded.sql)
    rows, more = bounded.read(session.cursor.fetchmany, limit, max_bytes)
    return bounded.columns, rows, more


def _count(
    spec: SourceSpec, text: str, columns: int, cancel: Cancel | None, ends: float
) -> int | None:
    try:
        with _session(spec, cancel, ends) as session:
            [(total,)] = session.rows_of(
                f"{_over(text, columns)}\nSELECT COUNT(*) FROM agentui_q"
            )
    except (DbSourceError, pymysql.MySQLError, ValueError):
        return None
    return int(total)


def run_query(
    spec: SourceSpec,
    text: str,
    limit: int,
    max_bytes: int,
    cancel: Cancel | None = None,
) -> Fetched:
    """`text` (one checked query) on `spec`: up to `limit` rows, the tables it read, and how
    many rows it has in all when there were more (counted in a session of its own)."""
    if _EXECUTABLE_COMMENT.search(text):
        raise DbSourceError(
            f"source {spec.name!r} does not run queries with executable comments (/*! */) or"
            " optimizer hints (/*+ */): they could lift its time limit; remove them",
            "invalid",
        )
    if _SERVER_FILES.search(text):
        raise DbSourceError(
            f"source {spec.name!r} does not run queries that read or write files on the"
            " database server (INTO OUTFILE, INTO DUMPFILE, LOAD_FILE): sources are read-only",
            "read_only",
        )
    ends = time.monotonic() + spec.timeout_s
    with _session(spec, cancel, ends) as session:
        try:
            tables = _tables_read(session, text)
            columns, rows, more = _read(session, text, limit, max_bytes)
        except pymysql.MySQLError as exc:
            raise _explain(spec, exc, cancel) from None
    if cancel is not None and cancel.cancelled:
        raise stopped()
    total = _count(spec, text, len(columns), cancel, ends) if more else None
    return Fetched(columns, rows, more, tables, total)


_TABLES_SQL = """
SELECT table_schema, table_name, column_name, data_type
FROM information_schema.columns
WHERE table_schema NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys')
ORDER BY table_schema = DATABASE() DESC, table_schema, table_name, ordinal_position
"""


def list_tables(spec: SourceSpec, cancel: Cancel | None = None) -> list[dict[str, Any]]:
    """The tables and views the user can see (information_schema lists only those): bare names
    in the URL's database, `database.table` in the others."""
    with _session(spec, cancel) as session:
        try:
            [(home,)] = session.rows_of("SELECT DATABASE()")
            session.arm()
            session.cursor.execute(_TABLES_SQL)
            rows = session.cursor.fetchmany(MAX_TABLES * 50)
        except pymysql.MySQLError as exc:
            raise _explain(spec, exc, cancel) from None
    return grouped_columns(rows, str(home or ""))


def first_rows(
    spec: SourceSpec, table: str, rows: int
) -> tuple[list[str], list[list[Any]]]:
    """The first `rows` rows of `table` (a name list_tables gave)."""
    quoted = ".".join("`" + part.replace("`", "``") + "`" for part in table.split("."))
    with _session(spec) as session:
        try:
            columns, fetched, _ = _read(session, f"SELECT * FROM {quoted}", rows)
        except pymysql.MySQLError as exc:
            raise _explain(spec, exc) from None
    return columns, fetched


_WRITES = (
    "'INSERT', 'UPDATE', 'DELETE', 'CREATE', 'DROP', 'ALTER', 'FILE', 'SUPER',"
    " 'EXECUTE', 'CREATE ROUTINE', 'ALTER ROUTINE'"
)


def test_connection(spec: SourceSpec) -> tuple[str, str | None]:
    """Who and where the session is, and a warning when the user itself could write."""
    with _session(spec) as session:
        try:
            [(user, database, version)] = session.rows_of(
                "SELECT CURRENT_USER(), DATABASE(), VERSION()"
            )
            name, _, host = str(user).rpartition("@")
            grantee = f"'{name}'@'{host}'"
            [(glob, schemas, tables)] = session.rows_of(
                "SELECT"
                f" (SELECT COUNT(*) FROM information_schema.user_privileges"
                f"  WHERE grantee = %s AND privilege_type IN ({_WRITES})),"
                f" (SELECT COUNT(DISTINCT table_schema) FROM information_schema.schema_privileges"
                f"  WHERE grantee = %s AND privilege_type IN ({_WRITES})),"
                f" (SELECT COUNT(DISTINCT table_schema, table_name)"
                f"  FROM information_schema.table_privileges"
                f"  WHERE grantee = %s AND privilege_type IN ({_WRITES}))",
                (grantee, grantee, grantee),
            )
        except pymysql.MySQLError as exc:
            raise _explain(spec, exc) from None
    server = "MariaDB" if "mariadb" in str(version).lower() else SERVER
    said = f"connected as {user} to {database} ({server} {version})"
    if glob:
        return said, "the user may write to every database, use a read-only user"
    if schemas or tables:
        return said, (
            f"the user may write to {int(schemas)} database(s) and {int(tables)}"
            " table(s), use a read-only user"
        )
    return said, None
