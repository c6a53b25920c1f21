"""Files into DuckDB (issue 27): uploads over REST become tables of the user's own database, bad
files are refused with a clear message and leave nothing behind, and the data tools read the
tables read-only, within the caps, without files, network or settings."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import duckdb
import openpyxl
import pytest
from django.test import AsyncClient, override_settings

from runs import service
from runs.demo.files import DATA_PROMPT, EXAMPLE_FILE, data_file_rules
from runs.engine.testing import Script
from runs.presets.tools import data
from runs.presets.tools.sql import SQLError
from runs.service import surfaces
from tests.live_support import llm_at
from tests.metrics_support import samples, value
from tests.rest_support import API, Api, user_with_token

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]

CSV = b"city,month,visitors\nLisbon,2024-01,1200\nPorto,2024-01,800\nLisbon,2024-02,1500\n"


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path) -> Any:
    with override_settings(AGENTUI_DATA_DIR=str(tmp_path)):
        yield tmp_path


class DataApi:
    def __init__(self, token: str) -> None:
        self.client = AsyncClient()
        self.headers = {"Authorization": f"Bearer {token}"}

    async def upload(self, filename: str, content: bytes, name: str = "") -> Any:
        upload = io.BytesIO(content)
        upload.name = filename
        form: dict[str, Any] = {"file": upload}
        if name:
            form["name"] = name
        return await self.client.post(f"{API}/data/files", form, headers=self.headers)

    async def tables(self) -> list[dict[str, Any]]:
        response = await self.client.get(f"{API}/data/tables", headers=self.headers)
        assert response.status_code == 200, response.content
        return list(response.json())

    async def table(self, name: str, **params: Any) -> Any:
        return await self.client.get(
            f"{API}/data/tables/{name}", params, headers=self.headers
        )


def every_table(user_id: int) -> list[str]:
    """All tables in the user's file, staging ones included (nothing half-made may stay)."""
    path = data.database_path(user_id)
    if not path.exists():
        return []
    with duckdb.connect(str(path), read_only=True) as connection:
        return [r[0] for r in connection.execute("SHOW TABLES").fetchall()]


async def test_a_csv_becomes_a_table_with_columns_types_and_rows() -> None:
    user, token = await user_with_token("alice")
    api = DataApi(token)
    created = await api.upload("Visitors 2024.csv", CSV)
    assert created.status_code == 201, created.content
    assert created.json() == {
        "name": "visitors_2024",
        "rows": 3,
        "columns": [
            {"name": "city", "type": "VARCHAR"},
            {"name": "month", "type": "VARCHAR"},
            {"name": "visitors", "type": "BIGINT"},
        ],
    }
    assert [t["name"] for t in await api.tables()] == ["visitors_2024"]
    preview = await api.table("visitors_2024", rows=2)
    assert preview.status_code == 200
    assert preview.json()["preview"] == [
        ["Lisbon", "2024-01", 1200],
        ["Porto", "2024-01", 800],
    ]
    # another user sees none of it
    _, bob_token = await user_with_token("bob")
    assert await DataApi(bob_token).tables() == []
    assert (await DataApi(bob_token).table("visitors_2024")).status_code == 404


async def test_parquet_and_excel_files_become_tables(tmp_path: Path) -> None:
    user, token = await user_with_token("alice")
    api = DataApi(token)
    parquet = tmp_path / "made.parquet"
    with duckdb.connect() as connection:
        connection.execute(
            f"COPY (SELECT range AS n, range * 2.5::DOUBLE AS x FROM range(1000)) TO '{parquet}'"
            " (FORMAT parquet)"
        )
    created = await api.upload("numbers.parquet", parquet.read_bytes())
    assert created.status_code == 201, created.content
    assert created.json()["rows"] == 1000
    assert [c["type"] for c in created.json()["columns"]] == ["BIGINT", "DOUBLE"]

    book = openpyxl.Workbook()
    sheet = book.active
    sheet.append(["product", "units"])
    sheet.append(["mug", 3])
    sheet.append(["grinder", 7])
    buffer = io.BytesIO()
    book.save(buffer)
    created = await api.upload("Stock.xlsx", buffer.getvalue(), name="stock")
    assert created.status_code == 201, created.content
    assert created.json()["rows"] == 2
    preview = (await api.table("stock")).json()["preview"]
    assert preview == [["mug", 3], ["grinder", 7]]


@pytest.mark.parametrize(
    ("filename", "content", "status", "words"),
    [
        ("notes.txt", CSV, 422, "not a CSV, Parquet or Excel"),
        ("data.csv", b"a,b\n1,\x00\x01\n", 422, "NUL bytes"),
        ("latin.csv", "name,city\nJosé,Évora\n".encode("latin-1"), 422, "not UTF-8"),
        ("header.csv", b"a,b,c\n", 422, "has no rows"),
        ("empty.csv", b"", 422, "is empty"),
        ("fake.parquet", CSV, 422, "not a Parquet file"),
        ("fake.xlsx", CSV, 422, "not an Excel"),
        ("big.csv", CSV * 50, 413, "limited to"),
    ],
)
async def test_a_bad_file_is_refused_clearly_and_leaves_nothing(
    filename: str, content: bytes, status: int, words: str
) -> None:
    user, token = await user_with_token("alice")
    api = DataApi(token)
    assert (await api.upload("kept.csv", CSV)).status_code == 201
    with override_settings(AGENTUI_DATA_MAX_FILE_BYTES=1000):
        refused = await api.upload(filename, content)
    assert refused.status_code == status, refused.content
    assert words in refused.json()["detail"]
    assert [t["name"] for t in await api.tables()] == ["kept"]
    assert every_table(user.pk) == ["kept"]


async def test_a_name_clash_or_a_bad_name_is_refused() -> None:
    user, token = await user_with_token("alice")
    api = DataApi(token)
    assert (await api.upload("sales.csv", CSV)).status_code == 201
    clash = await api.upload("other.csv", b"x\n1\n", name="sales")
    assert clash.status_code == 409
    assert clash.json() == {
        "code": "name_taken",
        "detail": "you already have a table named 'sales'; delete it first or choose another name",
    }
    bad = await api.upload("other.csv", b"x\n1\n", name='x"; DROP TABLE sales; --')
    assert bad.status_code == 422
    assert "not a usable table name" in bad.json()["detail"]
    assert every_table(user.pk) == ["sales"]
    assert (await api.table("sales")).json()["rows"] == 3


async def test_data_query_reads_the_tables_and_names_them() -> None:
    user, token = await user_with_token("alice")
    assert (await DataApi(token).upload("visitors.csv", CSV)).status_code == 201
    scope = data.DataScope(user.pk)
    result = await data.data_query(
        scope,
        "SELECT city, SUM(visitors) AS total FROM visitors GROUP BY city ORDER BY city",
    )
    assert result["rows"] == [["Lisbon", 2700], ["Porto", 800]]
    assert result["tables"] == ["visitors"]
    assert data.data_tables(scope)[0]["rows"] == 3


@pytest.mark.parametrize(
    ("sql", "words"),
    [
        ("SELECT * FROM read_csv('/etc/passwd')", "not available"),
        ("COPY visitors TO '/tmp/out.csv'", "only one read-only SELECT"),
        ("ATTACH '/tmp/other.duckdb'", "only one read-only SELECT"),
        ("SET enable_external_access = true", "only one read-only SELECT"),
        ("SELECT 1; DROP TABLE visitors", "only one read-only SELECT"),
        ("INSTALL httpfs", "only one read-only SELECT"),
        ("SELECT * FROM read_text('/etc/hostname')", "not available"),
        ("SELECT * FROM 'https://example.org/x.csv'", "not available"),
        ("SELECT * FROM nowhere", "DuckDB error"),
    ],
)
async def test_data_query_refuses_files_network_settings_and_writes(
    sql: str, words: str
) -> None:
    user, token = await user_with_token("alice")
    assert (await DataApi(token).upload("visitors.csv", CSV)).status_code == 201
    with pytest.raises(SQLError) as refused:
        await data.data_query(data.DataScope(user.pk), sql)
    assert words in str(refused.value)
    assert data.list_data_tables(user.pk)[0]["rows"] == 3


async def test_data_query_stops_a_long_query_and_caps_rows() -> None:
    user, token = await user_with_token("alice")
    assert (await DataApi(token).upload("visitors.csv", CSV)).status_code == 201
    scope = data.DataScope(user.pk)
    with override_settings(AGENTUI_DATA_QUERY_TIME_LIMIT_S=0.3):
        with pytest.raises(SQLError, match="took longer than 0.3 s"):
            await data.data_query(
                scope,
                "SELECT COUNT(*) FROM range(100000000000) WHERE range % 7 = 3",
            )
    with override_settings(AGENTUI_SQL_MAX_ROWS=10):
        capped = await data.data_query(scope, "SELECT range FROM range(25)")
    assert capped["row_count"] == 10 and capped["truncated"]
    assert capped["total_rows"] == 25 and capped["rows_left_out"] == 15


def test_the_offline_demo_offers_the_uploaded_file_example() -> None:
    from runs.demo import demo_example_prompts

    assert any(e.prompt == DATA_PROMPT for e in demo_example_prompts())
    assert EXAMPLE_FILE.read_text().startswith("shop,city,month,visitors,")


class PartsApi(DataApi):
    async def start(self, filename: str, size: int, name: str = "") -> Any:
        return await self.client.post(
            f"{API}/data/uploads",
            {"filename": filename, "size": size, "name": name},
            content_type="application/json",
            headers=self.headers,
        )

    async def part(self, upload_id: str, offset: int, chunk: bytes) -> Any:
        return await self.client.put(
            f"{API}/data/uploads/{upload_id}?offset={offset}",
            chunk,
            content_type="application/octet-stream",
            headers=self.headers,
        )

    async def finish(self, upload_id: str) -> Any:
        return await self.client.post(
            f"{API}/data/uploads/{upload_id}/finish", headers=self.headers
        )


def uploads_left(data_dir: Path) -> list[str]:
    return sorted(p.name for p in (data_dir / "uploads").rglob("*") if p.is_file())


async def test_a_file_sent_in_parts_becomes_a_table_and_leaves_no_upload(
    settings: Any, data_dir: Path
) -> None:
    settings.AGENTUI_DATA_PART_BYTES = 40
    user, token = await user_with_token("alice")
    api = PartsApi(token)
    started = await api.start("visits.csv", len(CSV))
    assert started.status_code == 201, started.content
    upload = started.json()
    assert upload["part_bytes"] == 40 and upload["received"] == 0
    offset = 0
    while offset < len(CSV):
        sent = await api.part(upload["id"], offset, CSV[offset : offset + 40])
        assert sent.status_code == 200, sent.content
        offset = sent.json()["received"]
    finished = await api.finish(upload["id"])
    assert finished.status_code == 201, finished.content
    assert finished.json()["name"] == "visits" and finished.json()["rows"] == 3
    assert uploads_left(data_dir) == []
    again = await api.finish(upload["id"])
    assert again.status_code == 404


async def test_parts_refused_clearly_and_nothing_half_made(
    settings: Any, data_dir: Path
) -> None:
    settings.AGENTUI_DATA_PART_BYTES = 40
    user, token = await user_with_token("alice")
    api = PartsApi(token)
    upload = (await api.start("visits.csv", len(CSV))).json()
    wrong = await api.part(upload["id"], 10, CSV[:10])
    assert wrong.status_code == 409
    assert wrong.json() == {
        "code": "wrong_offset",
        "detail": "the next part starts at byte 0, not 10",
    }
    too_big = await api.part(upload["id"], 0, CSV[:41])
    assert too_big.status_code == 413
    assert (await api.part(upload["id"], 0, CSV[:40])).status_code == 200
    early = await api.finish(upload["id"])
    assert early.status_code == 422
    assert f"received 40 of {len(CSV)} bytes" in early.json()["detail"]
    assert uploads_left(data_dir) == [] and every_table(user.pk) == []

    overflow = (await api.start("small.csv", 5)).json()
    assert (await api.part(overflow["id"], 0, b"abcdef")).status_code == 422
    assert (await api.start("notes.txt", 10)).status_code == 422
    with override_settings(AGENTUI_DATA_MAX_FILE_BYTES=100):
        assert (await api.start("big.csv", 101)).status_code == 413
    assert (await api.part("0" * 32, 0, b"x")).status_code == 404
    assert (await api.part("../../etc", 0, b"x")).status_code == 404
    # at most three uploads going on at once; cancelling one frees its place and its bytes
    for _ in range(2):
        assert (await api.start("more.csv", 10)).status_code == 201
    refused = await api.start("one-more.csv", 10)
    assert refused.status_code == 429 and "finish or cancel" in refused.json()["detail"]
    cancelled = await api.client.delete(
        f"{API}/data/uploads/{overflow['id']}", headers=api.headers
    )
    assert cancelled.status_code == 204
    assert (await api.start("one-more.csv", 10)).status_code == 201
    assert every_table(user.pk) == []


async def test_a_file_over_the_one_request_limit_is_told_to_go_in_parts() -> None:
    user, token = await user_with_token("alice")
    with override_settings(AGENTUI_DATA_MAX_POST_BYTES=50):
        refused = await DataApi(token).upload("visits.csv", CSV)
    assert refused.status_code == 413
    assert (
        "send larger files in parts (POST /api/v1/data/uploads)"
        in (refused.json()["detail"])
    )
    assert every_table(user.pk) == []


async def test_the_demo_prompt_answers_from_the_uploaded_table_and_the_trace_names_it(
    scripted_server: Any,
) -> None:
    user, token = await user_with_token("alice")
    uploaded = await DataApi(token).upload(EXAMPLE_FILE.name, EXAMPLE_FILE.read_bytes())
    assert uploaded.status_code == 201, uploaded.content
    model = scripted_server(Script(rules=data_file_rules()))
    with llm_at(model):
        api = Api(token)
        created = await api.post(
            "/notebooks/", {"text": DATA_PROMPT, "agent": "function_calling"}
        )
        assert created.status_code == 201, created.content
        pk = created.json()["id"]
        detail = await api.wait(pk)
        await service.wait_idle()
    assert detail["response"].startswith(
        "Baixa in Lisbon had the most visitors: 8,010 in total"
    )
    trace = await api.get(f"/notebooks/{pk}/trace")
    body = b"".join([chunk async for chunk in trace.streaming_content])
    exported = json.loads(body)
    assert exported["task"]["data_tables"] == ["shop_visits"]
    [result] = [
        e["event"]
        for e in exported["events"]
        if e["event"]["type"] == "tool_call_result"
    ]
    assert result["tool_name"] == "data_query"
    assert json.loads(result["tool_output"]["content"])["rows"][0] == [
        "Baixa",
        "Lisbon",
        8010,
    ]


async def test_a_query_or_listing_during_an_import_is_told_the_data_is_busy(
    settings: Any,
) -> None:
    user, token = await user_with_token("alice")
    api = DataApi(token)
    assert (await api.upload("visitors.csv", CSV)).status_code == 201
    settings.AGENTUI_DATA_BUSY_WAIT_S = 0.1
    lock = data.user_lock(user.pk)
    lock.acquire()  # as a long import holds it
    try:
        listed = await api.client.get(f"{API}/data/tables", headers=api.headers)
        with pytest.raises(data.DataError, match="a file is being imported"):
            await data.data_query(data.DataScope(user.pk), "SELECT 1")
    finally:
        lock.release()
    assert listed.status_code == 503
    assert listed.json()["code"] == "busy"
    assert [t["name"] for t in await api.tables()] == ["visitors"]


async def test_imports_are_counted_in_the_metrics_by_outcome() -> None:
    def imports() -> dict[Any, float]:
        return samples(surfaces.metrics.exposition().decode())

    before = imports()
    _, token = await user_with_token("alice")
    api = DataApi(token)
    assert (await api.upload("visitors.csv", CSV)).status_code == 201
    assert (await api.upload("visitors.csv", CSV)).status_code == 409
    assert (await api.upload("header.csv", b"a\n")).status_code == 422
    after = imports()

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved("agentui_data_imports_total", outcome="ok") == 1
    assert moved("agentui_data_imports_total", outcome="clash") == 1
    assert moved("agentui_data_imports_total", outcome="invalid") == 1
    assert moved("agentui_data_import_seconds_count") == 1
