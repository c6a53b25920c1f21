"""Each user's own data: their tables in a DuckDB database, and the model's tools that read them.

One database file per user, `<AGENTUI_DATA_DIR>/users/<user id>.duckdb`. Files become tables
through the service (runs.service.data_import, runs.service.uploads); this module opens the
database, lists, describes and deletes tables, and runs queries.

The model reads the tables through `data_query`, `data_tables` and `describe_data_table`. Each
query runs in a process of its own (runs/presets/tools/duckdb_worker.py) whose memory and CPU
the kernel caps and which is killed after `AGENTUI_DATA_QUERY_TIME_LIMIT_S`, or at once on Stop: DuckDB's own
limits do not hold inside one function call. There the connection is read-only, cannot reach
files or the network (`enable_external_access` false, no extension loading) and cannot change
that (`lock_configuration`), one SELECT at a time, with the same row and byte caps as
`sql_query`; DuckDB's plan of the query says which tables it reads, checked against a composed
notebook's scope, and every result names them (`tables`), so a notebook's trace shows which
data it used.

DuckDB lets one process at a time open a file for writing, and one process cannot open it with
two configurations at once: so every use opens the file, does its work and closes it, under a
per-user lock in this process, and waits a little (`AGENTUI_DATA_BUSY_WAIT_S`) for another process's use.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from runs.conf import conf
from runs.engine.tools import ToolContext
from runs.presets.tools.dataset import data_dir
from runs.presets.tools.duckdb_processes import (
    THREADS,
    Stopper,
    memory_text,
    run_worker,
    worker_limits,
)
from runs.presets.tools.sql import (
    MAX_CELL_CHARS,
    CutValue,
    SQLError,
    capped_result,
    checked_sql,
    cut_text,
    max_bytes,
    max_rows,
)

PREVIEW_ROWS = 20
IMPORTING = "__importing_"
_READ_ONLY_CONFIG: dict[str, str | bool | int] = {
    "enable_external_access": False,
    "autoload_known_extensions": False,
    "autoinstall_known_extensions": False,
    "allow_community_extensions": False,
    "memory_limit": "512MB",
    "threads": THREADS,
    "lock_configuration": True,
}


def _write_config(path: Path) -> dict[str, Any]:
    """An import's DuckDB: a bounded buffer pool that spills next to the database, so memory
    stays flat however large the file (AGENTUI_DATA_IMPORT_MEMORY, default 128MB)."""
    return {
        "threads": 2,
        "memory_limit": conf().data_import_memory,
        "temp_directory": str(path.parent / "tmp"),
    }


class DataError(ValueError):
    """A file or a query refused; the message says why, for the person or the model.

    `kind`: "invalid" (the file or name), "clash" (the name is taken), "too_large", "not_found".
    """

    def __init__(self, message: str, kind: str = "invalid") -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class DataScope(ToolContext):
    """Whose data a notebook's data tools read (bound when its runner is built), and which of
    their tables a composed notebook was given (None: all of them)."""

    user_id: int
    tables: tuple[str, ...] | None = None

    def allows(self, table: str) -> bool:
        return self.tables is None or table in self.tables

    def refusal(self, table: str) -> DataError:
        given = ", ".join(self.tables or ()) or "none"
        return DataError(
            f"this notebook may read only the data tables it was given ({given}), "
            f"not {table!r}",
            "not_allowed",
        )


def database_path(user_id: int) -> Path:
    return data_dir() / "users" / f"{int(user_id)}.duckdb"


_locks: dict[int, threading.Lock] = {}
_locks_guard = threading.Lock()


def user_lock(user_id: int) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(user_id, threading.Lock())


@contextmanager
def _held(user_id: int) -> Iterator[None]:
    """The user's lock in this process, waited for at most AGENTUI_DATA_BUSY_WAIT_S (an import may hold it
    for minutes: a query or a listing meanwhile is told so instead of hanging)."""
    lock = user_lock(user_id)
    if not lock.acquire(timeout=conf().data_busy_wait_s):
        raise DataError(
            "your data is busy (a file is being imported); try again when it is done",
            "busy",
        )
    try:
        yield
    finally:
        lock.release()


@contextmanager
def connected(user_id: int, *, write: bool) -> Iterator[duckdb.DuckDBPyConnection]:
    """The user's database, opened for this use only (read-only and locked down unless `write`)."""
    path = database_path(user_id)
    if not write and not path.exists():
        raise DataError(
            "you have no data yet: upload a CSV, Parquet or Excel file", "not_found"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    with _held(user_id):
        deadline = time.monotonic() + conf().data_busy_wait_s
        while True:
            try:
                if write:
                    connection = duckdb.connect(str(path), config=_write_config(path))
                else:
                    connection = duckdb.connect(
                        str(path), read_only=True, config=dict(_READ_ONLY_CONFIG)
                    )
                break
            except duckdb.IOException as exc:  # another process holds the file's lock
                if time.monotonic() > deadline:
                    raise DataError(
                        "your data is busy (another server process is using it); try again",
                        "busy",
                    ) from exc
                time.sleep(0.1)
        try:
            yield connection
        finally:
            connection.close()


def delete_table(user_id: int, name: str) -> None:
    with connected(user_id, write=True) as connection:
        if name not in table_names(connection):
            raise DataError(f"there is no table {name!r}", "not_found")
        connection.execute(f'DROP TABLE "{name}"')
        connection.execute("CHECKPOINT")


# --- reading ----------------------------------------------------------------------------------


def table_names(
    connection: duckdb.DuckDBPyConnection, include_staging: bool = False
) -> list[str]:
    rows = connection.execute(
        "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main' "
        "AND database_name = current_database() ORDER BY table_name"
    ).fetchall()
    return [r[0] for r in rows if include_staging or not r[0].startswith(IMPORTING)]


def count_rows(connection: duckdb.DuckDBPyConnection, table: str) -> int:
    row = connection.execute(f'SELECT COUNT(*) FROM "{table}"').fetchone()
    return int(row[0]) if row else 0


def columns_of(connection: duckdb.DuckDBPyConnection, table: str) -> list[Any]:
    return connection.execute(
        "SELECT column_name, data_type FROM duckdb_columns() WHERE schema_name = 'main' "
        "AND database_name = current_database() AND table_name = ? ORDER BY column_index",
        [table],
    ).fetchall()


def describe_table(connection: duckdb.DuckDBPyConnection, table: str) -> dict[str, Any]:
    return {
        "name": table,
        "rows": count_rows(connection, table),
        "columns": [{"name": n, "type": t} for n, t in columns_of(connection, table)],
    }


def list_data_tables(user_id: int) -> list[dict[str, Any]]:
    """The user's tables with their columns (name, type) and row counts."""
    if not database_path(user_id).exists():
        return []
    with connected(user_id, write=False) as connection:
        return [describe_table(connection, t) for t in table_names(connection)]


# --- queries, each in a process of its own (runs/presets/tools/duckdb_processes.py) ----------

# A worker takes ~0.1 s to start (Python and duckdb), more on a busy machine: not the query's time
STARTUP_S = 1.0


def _ask_worker(
    user_id: int, request: dict[str, Any], time_limit: float, stopper: Stopper | None
) -> dict[str, Any]:
    """One query in a worker process; its answer, or SQLError/DataError saying why none."""
    path = database_path(user_id)
    memory = conf().data_query_memory_bytes
    answer, status = run_worker(
        {
            **request,
            **worker_limits(time_limit),
            "task": "query",
            "database": path.name,
        },
        path.parent,
        time_limit + STARTUP_S,
        stopper,
        f"the query took longer than {time_limit:g} s and was stopped",
    )
    if answer is None:
        raise SQLError(
            f"the query failed: it needed more than {memory_text(memory)} of memory"
            f" (or its process ended: exit status {status})"
        )
    if answer.get("ok"):
        return answer
    kind, message = answer.get("kind"), str(answer.get("error") or "")
    if kind == "memory":
        raise SQLError(
            f"the query needed more than {memory_text(memory)} of memory and was stopped;"
            " aggregate, filter or make values smaller"
        )
    if kind == "busy":
        raise DataError(
            "your data is busy (another server process is using it); try again", "busy"
        )
    if kind == "not_allowed":
        raise DataError(str(answer.get("table")), "not_allowed")
    raise SQLError(message)


def _rows_of(answer: dict[str, Any]) -> list[list[Any]]:
    """Rows as the worker sent them, long texts as `{"cut", "chars"}`, cut as sql_query cuts."""
    return [
        [
            CutValue(cut_text(v["cut"], int(v["chars"]))) if isinstance(v, dict) else v
            for v in row
        ]
        for row in answer["rows"]
    ]


def _query_answer(
    user_id: int,
    sql: str,
    scope: DataScope | None,
    limit: int,
    count: bool,
    stopper: Stopper | None,
) -> dict[str, Any]:
    request = {
        "sql": sql,
        "scope": None if scope is None or scope.tables is None else list(scope.tables),
        "limit": limit,
        "count": count,
        "max_bytes": max_bytes(),
        "cell_chars": MAX_CELL_CHARS,
    }
    with _held(user_id):
        try:
            return _ask_worker(
                user_id, request, conf().data_query_time_limit_s, stopper
            )
        except DataError as exc:
            if exc.kind == "not_allowed" and scope is not None:
                raise scope.refusal(str(exc)) from None
            raise


def _require_data(user_id: int) -> None:
    if not database_path(user_id).exists():
        raise DataError(
            "you have no data yet: upload a CSV, Parquet or Excel file", "not_found"
        )


def preview(
    user_id: int, name: str, rows: int = PREVIEW_ROWS, stopper: Stopper | None = None
) -> dict[str, Any]:
    """The first `rows` rows of one of the user's tables, with its description."""
    with connected(user_id, write=False) as connection:
        if name not in table_names(connection):
            raise DataError(f"there is no table {name!r}", "not_found")
        described = describe_table(connection, name)
    answer = _query_answer(
        user_id, f'SELECT * FROM "{name}"', None, max(1, min(rows, 200)), False, stopper
    )
    return {**described, "preview": _rows_of(answer)}


def query(
    user_id: int,
    sql: str,
    scope: DataScope | None = None,
    stopper: Stopper | None = None,
) -> dict[str, Any]:
    """A read-only query over the user's tables, capped as `sql_query` is, naming the tables
    DuckDB read for it; with `scope`, one reading a table the notebook was not given (as DuckDB
    binds it, whatever its case or quoting) is refused before it runs."""
    text = checked_sql(sql)
    _require_data(user_id)
    answer = _query_answer(user_id, text, scope, max_rows(), True, stopper)
    result = capped_result(
        answer["columns"],
        _rows_of(answer),
        bool(answer["more"]),
        lambda: answer["total"],
    )
    result["tables"] = answer["tables"]
    return result


async def _stoppable(work: Callable[[Stopper], Any]) -> Any:
    """`work` in a thread; cancelled (Stop), its query process is killed at once."""
    stopper = Stopper()
    try:
        return await asyncio.to_thread(work, stopper)
    except asyncio.CancelledError:
        stopper.stop()
        raise


# --- the model's tools ------------------------------------------------------------------------


def data_tables(ctx: DataScope) -> list[dict[str, Any]]:
    """List your uploaded data tables (DuckDB) with their columns, types and row counts."""
    return [t for t in list_data_tables(ctx.user_id) if ctx.allows(t["name"])]


async def describe_data_table(ctx: DataScope, name: str) -> dict[str, Any]:
    """Describe one of your uploaded data tables: its columns, types, row count and five rows."""
    if not ctx.allows(name):
        raise ctx.refusal(name)
    return await _stoppable(lambda stopper: preview(ctx.user_id, name, 5, stopper))  # type: ignore[no-any-return]


async def data_query(ctx: DataScope, sql: str) -> dict[str, Any]:
    """Run one read-only SQL SELECT (DuckDB dialect) over your uploaded data tables.

    Returns the column names and the first rows (up to a row and a size cap); `truncated` says
    whether more rows matched, and `tables` which of your tables the query read.
    """
    return await _stoppable(lambda stopper: query(ctx.user_id, sql, ctx, stopper))  # type: ignore[no-any-return]


def scope_binder(
    user_id: int, tables: Sequence[str] | None = None
) -> Callable[[Any], Any]:
    """Binds a tool that takes a DataScope to `user_id`'s data (only `tables` of it, when
    given); other tools stay as they are."""
    scope = DataScope(user_id, None if tables is None else tuple(tables))

    def bind(tool: Any) -> Any:
        context_type = getattr(tool, "context_type", None)
        if isinstance(context_type, type) and issubclass(context_type, DataScope):
            return tool.bind_context(scope)
        return tool

    return bind
