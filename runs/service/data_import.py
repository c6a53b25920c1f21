"""A data file on disk becomes a table of its owner's DuckDB database, or is refused saying why.

A file becomes a table in one transaction: it is read into a temporary table under a name of
its own (DuckDB reads the file from disk, never whole into Python), checked (rows, cells, a name
that is free) and renamed into place, so a bad file leaves nothing behind. What a file becomes
is bounded before and while it is read (an .xlsx's or Parquet file's unpacked size, rows,
cells; an .xlsx is read in a worker process of bounded time and memory), and a person's tables
by a quota on disk. The database itself (opening it, its lock, its tables) is
runs.presets.tools.data's; files arrive through runs.service.uploads.
"""

from __future__ import annotations

import re
import uuid
import zipfile
from pathlib import Path
from typing import Any

import duckdb

from runs.conf import conf
from runs.presets.tools.data import (
    IMPORTING,
    DataError,
    columns_of,
    connected,
    count_rows,
    database_path,
    describe_table,
    table_names,
)
from runs.presets.tools.duckdb_processes import memory_text, run_worker, worker_limits
from runs.presets.tools.sql import SQLError

FORMATS = {".csv": "csv", ".tsv": "csv", ".parquet": "parquet", ".xlsx": "xlsx"}

_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")

MAX_TABLES = 200


def max_file_bytes() -> int:
    return conf().data_max_file_bytes


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
        **worker_limits(seconds),
        "task": "xlsx",
        "source": str(path.resolve()),
        "target": str(out.resolve()),
        "max_rows": conf().data_max_rows,
        "max_cells": conf().data_max_cells,
        "max_bytes": limit,
        "cpu_seconds": int(seconds) + 1,
    }
    try:
        answer, status = run_worker(
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
                f" ({memory_text(conf().data_query_memory_bytes)}; exit status {status})",
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
    if not _NAME.match(table) or table.startswith(IMPORTING):
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
    check_quota(user_id)
    readable = source
    if kind == "xlsx":
        readable = _xlsx_to_csv(source, filename)
    if kind == "parquet":
        _check_parquet(source, filename)
    staging = f"{IMPORTING}{uuid.uuid4().hex[:12]}"
    try:
        with connected(user_id, write=True) as connection:
            _drop_leftovers(connection)
            connection.execute("BEGIN")
            try:
                existing = table_names(connection)
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
                count = count_rows(connection, staging)
                if count == 0:
                    raise DataError(
                        f"{filename!r} has no rows (only a header, or nothing)"
                    )
                _check_size(count, len(columns_of(connection, staging)), filename)
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
            return describe_table(connection, table)
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
    with connected(user_id, write=False) as connection:
        return _used_bytes(connection)


def check_quota(user_id: int) -> None:
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
    for table in table_names(connection, include_staging=True):
        if table.startswith(IMPORTING):
            connection.execute(f'DROP TABLE IF EXISTS "{table}"')
