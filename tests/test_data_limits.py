"""Model output is untrusted, round 4 (issue 44), on the DuckDB data tools and uploads:

- a query's time and memory limits hold for one function call (the two hostile queries of the
  probe), measured on this process (where daphne would run them before) and on the query's own;
- Stop (the tool call cancelled) kills a running query at once;
- a composed notebook's scope is checked on what DuckDB binds, whatever the case or quoting, and
  the catalog (tables, settings, databases) is not open to queries;
- uploads are bounded by what they become (rows, cells, unpacked bytes, time) and by a per-user
  quota; an .xlsx sent in parts (as the Data page sends it) imports.
"""

from __future__ import annotations

import asyncio
import io
import time
import zipfile
from pathlib import Path
from typing import Any

import duckdb
import openpyxl
import pytest
from django.test import override_settings

from runs.conf import conf
from runs.engine.tools import FunctionTool, ToolOutput
from runs.presets.tools import data, duckdb_processes
from runs.presets.tools.sql import SQLError
from runs.service.data_import import data_usage
from tests.rest_support import user_with_token
from tests.test_data_files import CSV, DataApi, PartsApi, every_table

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]

LEVENSHTEIN = "SELECT levenshtein(repeat('a',250000), repeat('b',250000))"
REPEAT = "SELECT length(repeat('x', 1500000000))"
MB = 1024**2


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path) -> Any:
    with override_settings(AGENTUI_DATA_DIR=str(tmp_path)):
        yield tmp_path


async def ask(scope: data.DataScope, sql: str) -> ToolOutput:
    """`data_query` called as a notebook calls it (the tool, bound to its scope)."""
    tool = FunctionTool.from_defaults(data.data_query).bind_context(scope)
    return await tool.acall(sql=sql)


def peak_rss_mb() -> float:
    """This process's peak resident memory since `reset_peak()` (VmHWM), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM in /proc/self/status")


def reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")


async def user_with_tables(*names: str) -> int:
    user, token = await user_with_token("alice")
    api = DataApi(token)
    for name in names:
        uploaded = await api.upload(f"{name}.csv", CSV)
        assert uploaded.status_code == 201, uploaded.content
    return int(user.pk)


@pytest.mark.parametrize(
    ("sql", "words"),
    [
        (LEVENSHTEIN, "took longer than 5 s and was stopped"),
        (REPEAT, "needed more than 512 MB of memory"),
    ],
)
async def test_one_hostile_function_call_stays_within_time_and_memory(
    sql: str, words: str
) -> None:
    user_id = await user_with_tables("hostile")
    scope = data.DataScope(user_id)
    with override_settings(AGENTUI_DATA_QUERY_MEMORY_BYTES=512 * MB):
        reset_peak()
        before = peak_rss_mb()
        started = time.monotonic()
        refused = await ask(scope, sql)
        took = time.monotonic() - started
        grew = peak_rss_mb() - before
    assert refused.is_error and words in refused.content
    assert took < conf().data_query_time_limit_s + 2.0, f"the query took {took:.1f} s"
    assert grew < 100, f"this process grew by {grew:.0f} MB"
    query_peak = duckdb_processes.recent_peaks_kb()[-1] / 1024
    assert 0 < query_peak < 512, f"the query's process peaked at {query_peak:.0f} MB"
    assert duckdb_processes.running_queries() == 0
    # nothing lost: the next query reads the table
    result = await ask(scope, "SELECT COUNT(*) FROM hostile")
    assert result.raw_output["rows"] == [[3]]


async def test_stop_kills_a_running_query_at_once() -> None:
    user_id = await user_with_tables("hostile")
    tool = FunctionTool.from_defaults(data.data_query).bind_context(
        data.DataScope(user_id)
    )
    call = asyncio.create_task(tool.acall(sql=LEVENSHTEIN))
    assert await asyncio.to_thread(
        duckdb_processes.wait_for_queries, lambda n: n == 1, 10.0
    )
    stopped = time.monotonic()
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert await asyncio.to_thread(
        duckdb_processes.wait_for_queries, lambda n: n == 0, 10.0
    )
    assert time.monotonic() - stopped < 2.0
    # a stopper stopped before its query starts keeps it from starting
    stopper = duckdb_processes.Stopper()
    stopper.stop()
    with pytest.raises(SQLError, match="stopped"):
        data.query(user_id, "SELECT 1", stopper=stopper)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM PRIVATE1",
        'SELECT * FROM "Private1"',
        "SELECT * FROM main.PRIVATE1",
        "SELECT * FROM query_table('private1')",
        "SELECT * FROM hostile, (SELECT * FROM Private1)",
        "WITH hostile AS (SELECT * FROM private1) SELECT * FROM hostile",
        "SUMMARIZE PRIVATE1",
        # planned away on statistics when optimised: still a read of private1
        "SELECT * FROM hostile WHERE visitors IN (SELECT -1 FROM private1 WHERE visitors < 0)",
    ],
)
async def test_a_table_outside_the_scope_is_refused_whatever_its_spelling(
    sql: str,
) -> None:
    user_id = await user_with_tables("hostile", "private1")
    scope = data.DataScope(user_id, ("hostile",))
    refused = await ask(scope, sql)
    assert refused.is_error
    assert (
        "only the data tables it was given (hostile), not 'private1'" in refused.content
    )


@pytest.mark.parametrize(
    ("sql", "tables"),
    [
        ("SELECT COUNT(*) FROM HOSTILE", ["hostile"]),
        ('SELECT COUNT(*) FROM "hostile" a JOIN Hostile b USING (city)', ["hostile"]),
        ("SELECT 1", []),
        ("SELECT COUNT(*) FROM range(10)", []),
    ],
)
async def test_data_used_is_what_duckdb_read(sql: str, tables: list[str]) -> None:
    user_id = await user_with_tables("hostile", "private1")
    result = await ask(data.DataScope(user_id, ("hostile",)), sql)
    assert not result.is_error, result.content
    assert result.raw_output["tables"] == tables


@pytest.mark.parametrize(
    ("sql", "rows"),
    [
        ("SELECT table_name FROM duckdb_tables()", [["hostile"]]),
        ("SELECT table_name FROM information_schema.tables", [["hostile"]]),
        (
            "SELECT DISTINCT table_name FROM information_schema.columns",
            [["hostile"]],
        ),
        ("SELECT DISTINCT table_name FROM duckdb_columns()", [["hostile"]]),
        ("SELECT tablename FROM pg_catalog.pg_tables", [["hostile"]]),
        ("SHOW TABLES", [["hostile"]]),
        ("SELECT count(*) FROM duckdb_views()", [[0]]),
        ("SELECT count(*) FROM duckdb_databases() WHERE path IS NOT NULL", [[0]]),
    ],
)
async def test_the_catalog_shows_only_the_notebooks_tables_and_no_paths(
    sql: str, rows: list[list[Any]], data_dir: Path
) -> None:
    user_id = await user_with_tables("hostile", "private1")
    result = await ask(data.DataScope(user_id, ("hostile",)), sql)
    assert not result.is_error, result.content
    assert result.raw_output["rows"] == rows
    assert result.raw_output["tables"] == []
    assert "private1" not in result.content and str(data_dir) not in result.content
    # a notebook given every table sees every table, still without paths
    every = await ask(data.DataScope(user_id), "SELECT * FROM duckdb_databases()")
    assert str(data_dir) not in every.content
    listed = await ask(
        data.DataScope(user_id), "SELECT table_name FROM duckdb_tables()"
    )
    assert listed.raw_output["rows"] == [["hostile"], ["private1"]]


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM system.main.duckdb_tables()",
        "SELECT * FROM system.main.duckdb_databases()",
        "SELECT * FROM duckdb_settings()",
        "SELECT * FROM pragma_table_info('private1')",
        "SHOW private1",
        "DESCRIBE private1",
        "DESCRIBE SELECT * FROM private1",
        "SELECT * FROM (DESCRIBE private1)",
        "SELECT current_setting('allowed_paths')",
        "SELECT current_setting('temp_directory')",
    ],
)
async def test_what_would_show_other_tables_or_paths_is_refused(
    sql: str, data_dir: Path
) -> None:
    user_id = await user_with_tables("hostile", "private1")
    for scope in (data.DataScope(user_id, ("hostile",)), data.DataScope(user_id)):
        refused = await ask(scope, sql)
        assert refused.is_error and "not available to queries" in refused.content
        assert str(data_dir) not in refused.content
        assert "private1" not in refused.content.replace(sql, "")


def workbook(rows: int, columns: int = 2) -> bytes:
    book = openpyxl.Workbook(write_only=True)
    sheet = book.create_sheet()
    sheet.append([f"c{n}" for n in range(columns)])
    for r in range(rows):
        sheet.append([r * columns + c for c in range(columns)])
    buffer = io.BytesIO()
    book.save(buffer)
    return buffer.getvalue()


async def upload_in_parts(api: PartsApi, filename: str, content: bytes) -> Any:
    started = await api.start(filename, len(content))
    assert started.status_code == 201, started.content
    upload = started.json()
    offset = 0
    while offset < len(content):
        part = content[offset : offset + upload["part_bytes"]]
        sent = await api.part(upload["id"], offset, part)
        assert sent.status_code == 200, sent.content
        offset = sent.json()["received"]
    return await api.finish(upload["id"])


async def test_an_xlsx_sent_in_parts_becomes_a_table(data_dir: Path) -> None:
    user, token = await user_with_token("alice")
    finished = await upload_in_parts(PartsApi(token), "Stock.xlsx", workbook(3))
    assert finished.status_code == 201, finished.content
    assert finished.json()["name"] == "stock" and finished.json()["rows"] == 3
    assert (
        sorted(p.name for p in (data_dir / "uploads").rglob("*") if p.is_file()) == []
    )


def sheet_bomb() -> bytes:
    """A small .xlsx whose sheet unpacks to about 20 MB (one long run of empty rows)."""
    rows = "<row/>" * 3_000_000
    sheet = (
        '<?xml version="1.0" encoding="UTF-8"?><worksheet xmlns="http://schemas.openxmlformats'
        f'.org/spreadsheetml/2006/main"><sheetData>{rows}</sheetData></worksheet>'
    )
    buffer = io.BytesIO(workbook(1))
    with zipfile.ZipFile(buffer, "a", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("xl/worksheets/padding.xml", sheet)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("filename", "make", "settings", "words"),
    [
        (
            "many.xlsx",
            lambda: workbook(101),
            {"AGENTUI_DATA_MAX_ROWS": 100},
            "has more than 100 rows",
        ),
        (
            "wide.xlsx",
            lambda: workbook(30, 3),
            {"AGENTUI_DATA_MAX_CELLS": 50},
            "has more than 50 cells",
        ),
        (
            "bomb.xlsx",
            sheet_bomb,
            {"AGENTUI_DATA_MAX_EXPANDED_BYTES": 10 * MB},
            "files may unpack to at most 10,485,760 bytes",
        ),
        (
            "slow.xlsx",
            lambda: workbook(60_000),
            {"AGENTUI_DATA_IMPORT_SECONDS": 0.5},
            "took longer than 0.5 s to read; it was not imported",
        ),
        (
            "many.csv",
            lambda: b"n\n" + b"".join(b"%d\n" % n for n in range(101)),
            {"AGENTUI_DATA_MAX_ROWS": 100},
            "has 101 rows; files may have at most 100",
        ),
    ],
)
async def test_an_upload_is_bounded_by_what_it_becomes(
    filename: str, make: Any, settings: dict[str, Any], words: str
) -> None:
    user, token = await user_with_token("alice")
    api = PartsApi(token)
    content = make()
    with override_settings(**settings):
        refused = await upload_in_parts(api, filename, content)
    assert refused.status_code == 413, refused.content
    assert words in refused.json()["detail"]
    assert refused.json()["code"] == "too_large"
    assert every_table(user.pk) == []
    assert sorted(p.name for p in Path(data.data_dir()).rglob("*.csv")) == []


async def test_a_parquet_file_is_bounded_by_its_metadata_before_it_is_read(
    tmp_path: Path,
) -> None:
    user, token = await user_with_token("alice")
    parquet = tmp_path / "made.parquet"
    with duckdb.connect() as connection:
        connection.execute(
            f"COPY (SELECT range AS n, range * 2 AS m FROM range(1000)) TO '{parquet}'"
            " (FORMAT parquet)"
        )
    api = DataApi(token)
    for settings, words in [
        ({"AGENTUI_DATA_MAX_ROWS": 999}, "has 1,000 rows; files may have at most 999"),
        ({"AGENTUI_DATA_MAX_CELLS": 1999}, "has 2,000 cells (1,000 rows of 2 columns)"),
        ({"AGENTUI_DATA_MAX_EXPANDED_BYTES": 100}, "files may unpack to at most 100"),
    ]:
        with override_settings(**settings):
            refused = await api.upload("made.parquet", parquet.read_bytes())
        assert refused.status_code == 413, refused.content
        assert words in refused.json()["detail"]
    assert every_table(user.pk) == []
    assert (await api.upload("made.parquet", parquet.read_bytes())).status_code == 201


async def test_a_user_over_their_quota_is_told_and_keeps_what_they_had() -> None:
    user, token = await user_with_token("alice")
    api = DataApi(token)
    assert (await api.upload("kept.csv", CSV)).status_code == 201
    used = data_usage(user.pk)
    assert used > 0
    big = b"n,text\n" + b"".join(
        b"%d,row %d of many\n" % (n, n) for n in range(200_000)
    )
    with override_settings(AGENTUI_DATA_QUOTA_BYTES=used + 1):
        refused = await api.upload("big.csv", big)
        assert refused.status_code == 413, refused.content
        assert refused.json()["code"] == "over_quota"
        assert "over your" in refused.json()["detail"]
        assert every_table(user.pk) == ["kept"]
        assert data_usage(user.pk) <= used + 1
    with override_settings(AGENTUI_DATA_QUOTA_BYTES=used):
        at_quota = await PartsApi(token).start("more.csv", 10)
        assert at_quota.status_code == 413
        assert "all of your quota" in at_quota.json()["detail"]
    assert [t["name"] for t in await api.tables()] == ["kept"]
