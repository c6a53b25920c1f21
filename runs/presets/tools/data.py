"""Each user's own data: uploaded CSV, Parquet and Excel files as tables of a DuckDB database.

One database file per user, `<AGENTUI_DATA_DIR>/users/<user id>.duckdb`. A file becomes a table
in one transaction: it is read into a temporary table under a name of its own (DuckDB reads the
file from disk, never whole into Python), checked (rows, cells, a name that is free) and
renamed into place, so a bad file leaves nothing behind. What a file becomes is bounded before
and while it is read (an .xlsx's or Parquet file's unpacked size, rows, cells; an .xlsx is read
in a worker process of bounded time and memory), and a person's tables by a quota on disk.

The model reads the tables through `data_query`, `data_tables` and `describe_data_table`. Each
query runs in a process of its own (runs/presets/tools/duckdb_worker.py) whose memory and CPU
the kernel caps and which is killed after `TIME_LIMIT_S`, or at once on Stop: DuckDB's own
limits do not hold inside one function call. There the connection is read-only, cannot reach
files or the network (`enable_external_access` false, no extension loading) and cannot change
that (`lock_configuration`), one SELECT at a time, with the same row and byte caps as
`sql_query`; DuckDB's plan of the query says which tables it reads, checked against a composed
notebook's scope, and every result names them (`tables`), so a notebook's trace shows which
data it used.

DuckDB lets one process at a time open a file for writing, and one process cannot open it with
two configurations at once: so every use opens the file, does its work and closes it, under a
per-user lock in this process, and waits a little (`BUSY_WAIT_S`) for another process's use.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import zipfile
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from runs.conf import conf
from runs.engine.tools import ToolContext
from runs.presets.tools.dataset import data_dir
from runs.presets.tools.duckdb_worker import peak_kb
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

TIME_LIMIT_S = 5.0
BUSY_WAIT_S = 10.0
PREVIEW_ROWS = 20
MAX_TABLES = 200
FORMATS = {".csv": "csv", ".tsv": "csv", ".parquet": "parquet", ".xlsx": "xlsx"}
_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_IMPORTING = "__importing_"
_READ_ONLY_CONFIG: dict[str, str | bool | int] = {
    "enable_external_access": False,
    "autoload_known_extensions": False,
    "autoinstall_known_extensions": False,
    "allow_community_extensions": False,
    "memory_limit": "512MB",
    "threads": 2,
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


def max_file_bytes() -> int:
    return conf().data_max_file_bytes


def database_path(user_id: int) -> Path:
    return data_dir() / "users" / f"{int(user_id)}.duckdb"


_locks: dict[int, threading.Lock] = {}
_locks_guard = threading.Lock()


def _lock(user_id: int) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(user_id, threading.Lock())


@contextmanager
def _held(user_id: int) -> Iterator[None]:
    """The user's lock in this process, waited for at most BUSY_WAIT_S (an import may hold it
    for minutes: a query or a listing meanwhile is told so instead of hanging)."""
    lock = _lock(user_id)
    if not lock.acquire(timeout=BUSY_WAIT_S):
        raise DataError(
            "your data is busy (a file is being imported); try again when it is done",
            "busy",
        )
    try:
        yield
    finally:
        lock.release()


@contextmanager
def _connected(user_id: int, *, write: bool) -> Iterator[duckdb.DuckDBPyConnection]:
    """The user's database, opened for this use only (read-only and locked down unless `write`)."""
    path = database_path(user_id)
    if not write and not path.exists():
        raise DataError(
            "you have no data yet: upload a CSV, Parquet or Excel file", "not_found"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    with _held(user_id):
        deadline = time.monotonic() + BUSY_WAIT_S
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


# --- importing files --------------------------------------------------------------------------


def table_name_for(filename: str) -> str:
    """A table name from a file name: `Sales 2024.csv` -> `sales_2024`."""
    stem = Path(filename).stem.lower()
    name = re.sub(r"[^a-z0-9_]+", "_", stem).strip("_")[:63] or "data"
    return f"t_{name}"[:63] if name[0].isdigit() else name


def format_of(filename: str) -> str:
    suffix = Path(filename).suffix.lower()
    kind = FORMATS.get(suffix)
    if kind is None:
        raise DataError(
            f"{filename!r} is not a CSV, Parquet or Excel (.xlsx) file"
            f" (got {suffix or 'no extension'})"
        )
    return kind


def _check_content(path: Path, kind: str, filename: str) -> None:
    """The file's first bytes fit its kind (a renamed binary is refused before DuckDB reads it)."""
    with path.open("rb") as handle:
        head = handle.read(65536)
    if not head:
        raise DataError(f"{filename!r} is empty")
    if kind == "parquet" and not head.startswith(b"PAR1"):
        raise DataError(f"{filename!r} is not a Parquet file (no PAR1 header)")
    if kind == "xlsx" and not head.startswith(b"PK\x03\x04"):
        raise DataError(f"{filename!r} is not an Excel .xlsx file")
    if kind == "csv" and b"\x00" in head:
        raise DataError(f"{filename!r} is not a text CSV file (it has NUL bytes)")


def _xlsx_to_csv(path: Path, filename: str) -> Path:
    """The first sheet of an .xlsx as a CSV file next to it, so DuckDB detects the column types
    as for a CSV: checked unpacked size first (the zip's own listing), then converted row by row
    in a worker process of bounded time and memory, within the rows, cells and bytes limits."""
    limit = conf().data_max_expanded_bytes
    try:
        with zipfile.ZipFile(path) as archive:
            unpacked = sum(item.file_size for item in archive.infolist())
    except (zipfile.BadZipFile, OSError):
        raise DataError(f"{filename!r} is not an Excel .xlsx file") from None
    if unpacked > limit:
        raise DataError(
            f"{filename!r} unpacks to {unpacked:,} bytes; files may unpack to at most"
            f" {limit:,} bytes",
            "too_large",
        )
    out = path.with_name(f"{path.name}.csv")
    seconds = conf().data_import_seconds
    payload = {
        **_limits(seconds),
        "task": "xlsx",
        "source": str(path.resolve()),
        "target": str(out.resolve()),
        "max_rows": conf().data_max_rows,
        "max_cells": conf().data_max_cells,
        "max_bytes": limit,
        "cpu_seconds": int(seconds) + 1,
    }
    try:
        answer, status = _spawn(
            payload,
            path.parent,
            seconds,
            None,
            f"took longer than {seconds:g} s to read",
        )
    except SQLError as exc:
        out.unlink(missing_ok=True)
        raise DataError(
            f"{filename!r} {exc}; it was not imported", "too_large"
        ) from None
    if answer is None or not answer.get("ok"):
        out.unlink(missing_ok=True)
        if answer is None or answer.get("kind") == "memory":
            raise DataError(
                f"{filename!r} needed more memory to read than it may"
                f" ({_memory_text(conf().data_query_memory_bytes)}; exit status {status})",
                "too_large",
            )
        if answer.get("kind") == "too_large":
            raise DataError(f"{filename!r} {answer['error']}", "too_large")
        raise DataError(f"{filename!r} could not be read as Excel ({answer['error']})")
    return out


def _reader(kind: str, path: Path) -> str:
    literal = "'" + str(path).replace("'", "''") + "'"
    if kind == "parquet":
        return f"read_parquet({literal})"
    return f"read_csv({literal}, header = true, sample_size = 20480)"


def _explain_import(exc: duckdb.Error, filename: str) -> DataError:
    text = str(exc)
    if "unicode" in text.lower() or "utf-8" in text.lower():
        return DataError(
            f"{filename!r} is not UTF-8 text; save it as UTF-8 and upload again"
        )
    if "sniff" in text.lower():
        return DataError(
            f"{filename!r} does not look like a CSV file (no columns found)"
        )
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return DataError(f"{filename!r} could not be imported: {first}")


def checked_name(name: str, filename: str) -> str:
    """The table name to use: `name`, or one made from the file name; DataError if unusable."""
    table = (name.strip() or table_name_for(filename)).lower()
    if not _NAME.match(table) or table.startswith(_IMPORTING):
        raise DataError(
            f"{table!r} is not a usable table name: use lower-case letters, digits and _,"
            " starting with a letter (at most 63 characters)"
        )
    return table


def import_file(
    user_id: int, source: Path, filename: str, name: str = ""
) -> dict[str, Any]:
    """Import the file at `source` (on disk) as table `name` (from the file name if empty) of the
    user's database; returns the new table's description. Nothing is left behind on failure."""
    kind = format_of(filename)
    size = source.stat().st_size
    if size > max_file_bytes():
        raise DataError(
            f"{filename!r} is {size:,} bytes; files are limited to {max_file_bytes():,} bytes",
            "too_large",
        )
    _check_content(source, kind, filename)
    table = checked_name(name, filename)
    _check_quota(user_id)
    readable = source
    if kind == "xlsx":
        readable = _xlsx_to_csv(source, filename)
    if kind == "parquet":
        _check_parquet(source, filename)
    staging = f"{_IMPORTING}{uuid.uuid4().hex[:12]}"
    try:
        with _connected(user_id, write=True) as connection:
            _drop_leftovers(connection)
            connection.execute("BEGIN")
            try:
                existing = _table_names(connection)
                if table in existing:
                    raise DataError(
                        f"you already have a table named {table!r}; delete it first or"
                        " choose another name",
                        "clash",
                    )
                if len(existing) >= MAX_TABLES:
                    raise DataError(
                        f"you have {MAX_TABLES} tables already; delete some first"
                    )
                try:
                    connection.execute(
                        f'CREATE TABLE "{staging}" AS SELECT * FROM {_reader(kind, readable)}'
                    )
                except duckdb.Error as exc:
                    raise _explain_import(exc, filename) from None
                count = _count(connection, staging)
                if count == 0:
                    raise DataError(
                        f"{filename!r} has no rows (only a header, or nothing)"
                    )
                _check_size(count, len(_columns(connection, staging)), filename)
                connection.execute(f'ALTER TABLE "{staging}" RENAME TO "{table}"')
                connection.execute("COMMIT")
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("CHECKPOINT")
            used, quota = _used_bytes(connection), conf().data_quota_bytes
            if used > quota:
                connection.execute(f'DROP TABLE "{table}"')
                connection.execute("CHECKPOINT")
                raise DataError(
                    f"{filename!r} would take your data to {used:,} bytes, over your"
                    f" {quota:,} bytes; it was not kept (delete tables you no longer need)",
                    "quota",
                )
            return _describe(connection, table)
    finally:
        if readable is not source:
            readable.unlink(missing_ok=True)


def _check_size(rows: int, columns: int, filename: str) -> None:
    """A file's rows and cells (rows times columns) within AGENTUI_DATA_MAX_ROWS / _CELLS."""
    most_rows, most_cells = conf().data_max_rows, conf().data_max_cells
    if rows > most_rows:
        raise DataError(
            f"{filename!r} has {rows:,} rows; files may have at most {most_rows:,}",
            "too_large",
        )
    if rows * columns > most_cells:
        raise DataError(
            f"{filename!r} has {rows * columns:,} cells ({rows:,} rows of {columns:,}"
            f" columns); files may have at most {most_cells:,}",
            "too_large",
        )


def _check_parquet(path: Path, filename: str) -> None:
    """What a Parquet file becomes, from its own metadata, before DuckDB reads its data: rows,
    cells and its columns' uncompressed bytes within the limits."""
    literal = "'" + str(path).replace("'", "''") + "'"
    try:
        with duckdb.connect(config={"threads": 1, "memory_limit": "64MB"}) as meta:
            rows_row = meta.execute(
                f"SELECT sum(num_rows) FROM parquet_file_metadata({literal})"
            ).fetchone()
            size_row = meta.execute(
                "SELECT sum(total_uncompressed_size), count(DISTINCT path_in_schema)"
                f" FROM parquet_metadata({literal})"
            ).fetchone()
    except duckdb.Error as exc:
        raise _explain_import(exc, filename) from None
    rows = int(rows_row[0] or 0) if rows_row else 0
    unpacked = int(size_row[0] or 0) if size_row else 0
    columns = int(size_row[1] or 0) if size_row else 0
    _check_size(rows, columns, filename)
    limit = conf().data_max_expanded_bytes
    if unpacked > limit:
        raise DataError(
            f"{filename!r} unpacks to {unpacked:,} bytes; files may unpack to at most"
            f" {limit:,} bytes",
            "too_large",
        )


def _used_bytes(connection: duckdb.DuckDBPyConnection) -> int:
    """The bytes the user's tables take in their database (its blocks in use)."""
    row = connection.execute(
        "SELECT used_blocks * block_size FROM pragma_database_size() "
        "WHERE database_name = current_database()"
    ).fetchone()
    return int(row[0]) if row else 0


def data_usage(user_id: int) -> int:
    """The bytes the user's tables take on disk (what AGENTUI_DATA_QUOTA_BYTES bounds)."""
    if not database_path(user_id).exists():
        return 0
    with _connected(user_id, write=False) as connection:
        return _used_bytes(connection)


def _check_quota(user_id: int) -> None:
    """Refuse an upload when the user's data is at its quota already (before any byte)."""
    used, quota = data_usage(user_id), conf().data_quota_bytes
    if used >= quota:
        raise DataError(
            f"your data takes {used:,} bytes, all of your quota ({quota:,} bytes); delete"
            " tables you no longer need before uploading more",
            "quota",
        )


def _drop_leftovers(connection: duckdb.DuckDBPyConnection) -> None:
    """Staging tables of an import whose process died mid-way (never committed, but be sure)."""
    for table in _table_names(connection, include_staging=True):
        if table.startswith(_IMPORTING):
            connection.execute(f'DROP TABLE IF EXISTS "{table}"')


def delete_table(user_id: int, name: str) -> None:
    with _connected(user_id, write=True) as connection:
        if name not in _table_names(connection):
            raise DataError(f"there is no table {name!r}", "not_found")
        connection.execute(f'DROP TABLE "{name}"')
        connection.execute("CHECKPOINT")


# --- reading ----------------------------------------------------------------------------------


def _table_names(
    connection: duckdb.DuckDBPyConnection, include_staging: bool = False
) -> list[str]:
    rows = connection.execute(
        "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main' "
        "AND database_name = current_database() ORDER BY table_name"
    ).fetchall()
    return [r[0] for r in rows if include_staging or not r[0].startswith(_IMPORTING)]


def _count(connection: duckdb.DuckDBPyConnection, table: str) -> int:
    row = connection.execute(f'SELECT COUNT(*) FROM "{table}"').fetchone()
    return int(row[0]) if row else 0


def _columns(connection: duckdb.DuckDBPyConnection, table: str) -> list[Any]:
    return connection.execute(
        "SELECT column_name, data_type FROM duckdb_columns() WHERE schema_name = 'main' "
        "AND database_name = current_database() AND table_name = ? ORDER BY column_index",
        [table],
    ).fetchall()


def _describe(connection: duckdb.DuckDBPyConnection, table: str) -> dict[str, Any]:
    return {
        "name": table,
        "rows": _count(connection, table),
        "columns": [{"name": n, "type": t} for n, t in _columns(connection, table)],
    }


def list_data_tables(user_id: int) -> list[dict[str, Any]]:
    """The user's tables with their columns (name, type) and row counts."""
    if not database_path(user_id).exists():
        return []
    with _connected(user_id, write=False) as connection:
        return [_describe(connection, t) for t in _table_names(connection)]


# --- queries, each in a process of its own (runs/presets/tools/duckdb_worker.py) -------------

WORKER = Path(__file__).with_name("duckdb_worker.py")
# A worker takes ~0.1 s to start (Python and duckdb), more on a busy machine: not the query's time
STARTUP_S = 1.0
_live: set[subprocess.Popen[bytes]] = set()
_live_changed = threading.Condition()


_peaks: deque[int] = deque(maxlen=100)


def recent_peaks_kb() -> list[int]:
    """The peak resident memory (KiB) of the last worker processes that ran, oldest first."""
    return list(_peaks)


def running_queries() -> int:
    """How many query processes are running now."""
    with _live_changed:
        return len(_live)


def wait_for_queries(until: Callable[[int], bool], timeout: float) -> bool:
    """Wait until `until(the number of query processes running)` holds; False on timeout."""
    with _live_changed:
        return _live_changed.wait_for(lambda: until(len(_live)), timeout)


class Stopper:
    """Stops a query's process from another thread: the person pressed Stop, or the tool call
    was cancelled. Stopped before its process started, the query does not start."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self.stopped = False

    def attach(self, process: subprocess.Popen[bytes] | None) -> None:
        with self._lock:
            self._process = process
            if self.stopped and process is not None:
                process.kill()

    def stop(self) -> None:
        with self._lock:
            self.stopped = True
            if self._process is not None:
                self._process.kill()


def _memory_text(size: int) -> str:
    return f"{size / 1024**2:,.0f} MB"


def _spawn(
    payload: dict[str, Any],
    cwd: Path,
    time_limit: float,
    stopper: Stopper | None,
    too_long: str,
) -> tuple[dict[str, Any] | None, int]:
    """Run one request in a new worker process, killed after `time_limit` s (SQLError
    `too_long`) or when stopped; its answer (None when it ended without one) and exit status."""
    if stopper is not None and stopper.stopped:
        raise SQLError("the query was stopped")
    process = subprocess.Popen(
        [sys.executable, "-I", str(WORKER)],
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    with _live_changed:
        _live.add(process)
        _live_changed.notify_all()
    if stopper is not None:
        stopper.attach(process)
    try:
        out, _ = process.communicate(json.dumps(payload).encode(), timeout=time_limit)
    except subprocess.TimeoutExpired:
        _peaks.append(peak_kb(process.pid))
        process.kill()
        process.communicate()
        raise SQLError(too_long) from None
    finally:
        if stopper is not None:
            stopper.attach(None)
        with _live_changed:
            _live.discard(process)
            _live_changed.notify_all()
    if stopper is not None and stopper.stopped:
        raise SQLError("the query was stopped")
    if process.returncode == -signal.SIGXCPU:
        raise SQLError(too_long)
    try:
        answer = json.loads(out)
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        return None, process.returncode
    _peaks.append(int(answer.get("peak_kb") or 0))
    return answer, process.returncode


def _limits(time_limit: float) -> dict[str, Any]:
    """A worker's memory and CPU: `AGENTUI_DATA_QUERY_MEMORY_BYTES`, DuckDB half of it."""
    memory = conf().data_query_memory_bytes
    threads = int(_READ_ONLY_CONFIG["threads"])
    return {
        "memory_bytes": memory,
        "duckdb_memory": f"{memory // 2 // 1024**2}MB",
        "threads": threads,
        # CPU seconds: every thread busy the whole time, and a little to start
        "cpu_seconds": int(time_limit * threads) + 2,
    }


def _ask_worker(
    user_id: int, request: dict[str, Any], time_limit: float, stopper: Stopper | None
) -> dict[str, Any]:
    """One query in a worker process; its answer, or SQLError/DataError saying why none."""
    path = database_path(user_id)
    memory = conf().data_query_memory_bytes
    answer, status = _spawn(
        {**request, **_limits(time_limit), "task": "query", "database": path.name},
        path.parent,
        time_limit + STARTUP_S,
        stopper,
        f"the query took longer than {time_limit:g} s and was stopped",
    )
    if answer is None:
        raise SQLError(
            f"the query failed: it needed more than {_memory_text(memory)} of memory"
            f" (or its process ended: exit status {status})"
        )
    if answer.get("ok"):
        return answer
    kind, message = answer.get("kind"), str(answer.get("error") or "")
    if kind == "memory":
        raise SQLError(
            f"the query needed more than {_memory_text(memory)} of memory and was stopped;"
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
            return _ask_worker(user_id, request, TIME_LIMIT_S, stopper)
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
    with _connected(user_id, write=False) as connection:
        if name not in _table_names(connection):
            raise DataError(f"there is no table {name!r}", "not_found")
        described = _describe(connection, name)
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


def import_uploaded(
    user_id: int, chunks: Iterator[bytes], filename: str, name: str = ""
) -> dict[str, Any]:
    """Import a file given as chunks (an upload): written to a temporary file first, counting
    bytes so an oversized one is refused before it fills the disk."""
    format_of(filename)
    limit = max_file_bytes()
    suffix = Path(filename).suffix.lower()
    handle, raw = tempfile.mkstemp(prefix="agentui-upload-", suffix=suffix)
    path = Path(raw)
    try:
        written = 0
        with os.fdopen(handle, "wb") as out:
            for chunk in chunks:
                written += len(chunk)
                if written > limit:
                    raise DataError(
                        f"{filename!r} is over the size limit of {limit:,} bytes",
                        "too_large",
                    )
                out.write(chunk)
        return import_file(user_id, path, filename, name)
    finally:
        path.unlink(missing_ok=True)


# --- uploads in parts (the page; scripts with large files) ------------------------------------
#
# Under daphne a request's whole body is held in memory before the app reads it, so a large file
# arrives as parts of at most PART_BYTES, each appended to a file on disk, then imported from
# there: memory per request stays one part, however large the file.

PART_BYTES = 1024 * 1024
MAX_OPEN_UPLOADS = 3
UPLOAD_TTL_S = 24 * 3600.0
_UPLOAD_ID = re.compile(r"^[0-9a-f]{32}$")


def _uploads_dir(user_id: int) -> Path:
    return data_dir() / "uploads" / str(int(user_id))


def _upload_paths(user_id: int, upload_id: str) -> tuple[Path, Path]:
    if not _UPLOAD_ID.match(upload_id):
        raise DataError("there is no such upload", "not_found")
    folder = _uploads_dir(user_id)
    meta, part = folder / f"{upload_id}.json", folder / f"{upload_id}.part"
    if not meta.exists() or not part.exists():
        raise DataError(
            "there is no such upload (finished, cancelled or expired)", "not_found"
        )
    return meta, part


def _forget_stale(folder: Path) -> None:
    now = time.time()
    for path in folder.glob("*.json"):
        try:
            stale = now - path.stat().st_mtime > UPLOAD_TTL_S
        except FileNotFoundError:
            continue
        if stale:
            path.with_suffix(".part").unlink(missing_ok=True)
            path.unlink(missing_ok=True)


def start_upload(
    user_id: int, filename: str, size: int, name: str = ""
) -> dict[str, Any]:
    """Begin an upload in parts of `size` bytes; checks what can be checked before any byte."""
    format_of(filename)
    if size <= 0:
        raise DataError(f"{filename!r} is empty")
    if size > max_file_bytes():
        raise DataError(
            f"{filename!r} is {size:,} bytes; files are limited to {max_file_bytes():,} bytes",
            "too_large",
        )
    checked_name(name, filename)
    _check_quota(user_id)
    folder = _uploads_dir(user_id)
    folder.mkdir(parents=True, exist_ok=True)
    with _lock(user_id):
        _forget_stale(folder)
        if len(list(folder.glob("*.json"))) >= MAX_OPEN_UPLOADS:
            raise DataError(
                f"you have {MAX_OPEN_UPLOADS} uploads going on; finish or cancel one first",
                "too_many",
            )
        upload_id = uuid.uuid4().hex
        (folder / f"{upload_id}.part").touch()
        (folder / f"{upload_id}.json").write_text(
            json.dumps({"filename": filename, "size": size, "name": name})
        )
    return {"id": upload_id, "part_bytes": PART_BYTES, "size": size, "received": 0}


def add_part(user_id: int, upload_id: str, offset: int, chunk: bytes) -> int:
    """Append `chunk` at `offset` (where the upload stands); returns the bytes received so far."""
    with _lock(user_id):
        meta_path, part = _upload_paths(user_id, upload_id)
        meta = json.loads(meta_path.read_text())
        received = part.stat().st_size
        if offset != received:
            raise DataError(
                f"the next part starts at byte {received:,}, not {offset:,}", "conflict"
            )
        if len(chunk) > PART_BYTES:
            raise DataError(f"a part is at most {PART_BYTES:,} bytes", "too_large")
        if received + len(chunk) > meta["size"]:
            raise DataError(
                f"more bytes than the {meta['size']:,} announced for {meta['filename']!r}"
            )
        with part.open("ab") as out:
            out.write(chunk)
        meta_path.touch()  # still in use: not stale
        return received + len(chunk)


def finish_upload(user_id: int, upload_id: str) -> dict[str, Any]:
    """Import the whole uploaded file as a table; the upload is gone afterwards either way."""
    with _lock(user_id):
        meta_path, part = _upload_paths(user_id, upload_id)
        meta = json.loads(meta_path.read_text())
        received = part.stat().st_size
        # taken out of the uploads under the lock: a second finish finds nothing
        taken = part.with_suffix(".importing")
        part.rename(taken)
        meta_path.unlink()
    try:
        if received != meta["size"]:
            raise DataError(
                f"{meta['filename']!r}: received {received:,} of {meta['size']:,} bytes"
            )
        return import_file(user_id, taken, meta["filename"], meta["name"])
    finally:
        taken.unlink(missing_ok=True)


def cancel_upload(user_id: int, upload_id: str) -> None:
    with _lock(user_id):
        meta_path, part = _upload_paths(user_id, upload_id)
        part.unlink(missing_ok=True)
        meta_path.unlink(missing_ok=True)
