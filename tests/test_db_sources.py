"""Database sources (issue 27) on the real PostgreSQL of make test's services pass: a read-only
role made for the test, registered as a source, queried through the notebook's tools.

The session is what refuses: a write hidden in a function the role may run, a query past the
statement timeout, more rows than the cap; a person without the grant gets no tools and no
source; the password never appears in an answer, an error or the stored trace.
"""

from __future__ import annotations

import asyncio
import gc
import json
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from channels.db import database_sync_to_async
from django.contrib.auth.models import Group
from django.test import override_settings

from runs.models import DataSource, Event
from runs.presets import sources
from runs.presets.tools import dbsource
from runs.presets.tools.dbsource import DbSourceError, postgres
from tests.live_support import (
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    make_user,
)
from tests.pg_source_support import PgSource, read_only_source

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def pg() -> Iterator[PgSource]:
    with read_only_source() as made:
        yield made


def register(pg: PgSource, name: str = "warehouse", **fields: Any) -> DataSource:
    fields.setdefault("timeout_s", 2.0)
    return DataSource.objects.create(
        name=name, description="shop visits", url=pg.url, **fields
    )


def tools_of(user_id: int) -> dict[str, Any]:
    tools, _ = sources.notebook_source_tools(user_id)
    return {tool.metadata.name: tool for tool in tools}


async def call(tool: Any, **arguments: Any) -> Any:
    return await tool.acall(**arguments)


def query_then_answer(sql: str, answer: str) -> Any:
    """A model that runs `sql` on the warehouse source, then answers `answer`."""
    from runs.engine.testing import Match, Reply, Rule, Script, ToolCallSpec

    query = ToolCallSpec(name="db_query", arguments={"source": "warehouse", "sql": sql})
    return Script(
        rules=[
            Rule(
                name="query",
                match=Match(tool_results_since_user=0),
                reply=Reply(text="Looking at the warehouse.", tool_calls=[query]),
            ),
            Rule(name="answer", reply=Reply(text=answer)),
        ]
    )


async def start_notebook(api: Any, text: str) -> int:
    """A function-calling notebook asking `text`, started through REST: its id."""
    created = await api.post("/notebooks/", {"text": text, "agent": "function_calling"})
    assert created.status_code == 201, created.content
    return int(created.json()["id"])


async def answered(model: Any, token: str, text: str) -> tuple[Any, int, Any]:
    """`text` asked of `model` in a function-calling notebook run to its end: the REST client,
    the notebook's id and its detail."""
    from runs import service
    from tests.live_support import llm_at
    from tests.rest_support import Api

    api = Api(token)
    with llm_at(model):
        pk = await start_notebook(api, text)
        detail = await api.wait(pk)
        await service.wait_idle()
    return api, pk, detail


async def trace_of(api: Any, pk: int) -> tuple[bytes, dict[str, Any], dict[str, Any]]:
    """The notebook's exported trace: its bytes, parsed, and its one tool result."""
    trace = await api.get(f"/notebooks/{pk}/trace")
    body = b"".join([chunk async for chunk in trace.streaming_content])
    exported = json.loads(body)
    [result] = [
        e["event"]
        for e in exported["events"]
        if e["event"]["type"] == "tool_call_result"
    ]
    return body, exported, result


def test_the_url_is_masked_and_checked() -> None:
    url = "postgresql://reader:s3cr%40t@db.example:5432/shop?password=other&sslmode=require"
    masked = dbsource.masked_url(url)
    assert masked == (
        "postgresql://reader:***@db.example:5432/shop?password=***&sslmode=require"
    )
    assert "s3cr" not in masked and "other" not in masked
    assert dbsource.url_problem("sqlite:///c.db") is not None
    assert dbsource.url_problem("postgresql://reader@db.example") is not None
    assert dbsource.url_problem("postgresql://reader:x@db.example/shop") is None


@pytest.mark.postgres
async def test_queries_are_read_only_capped_and_name_their_tables(pg: PgSource) -> None:
    user = await database_sync_to_async(make_user)("alice")
    await database_sync_to_async(register)(pg, everyone=True)
    tools = await database_sync_to_async(tools_of)(user.pk)
    assert sorted(tools) == ["db_query", "db_tables"]
    assert tools["db_query"].metadata.parameters_json["properties"]["source"][
        "enum"
    ] == ["warehouse"]

    listed = await call(tools["db_tables"], source="warehouse")
    assert not listed.is_error, listed.content
    names = [t["name"] for t in listed.raw_output]
    assert f"{pg.schema}.visits" in names
    assert (
        f"{pg.schema}.secrets" not in names
    )  # information_schema shows what it may read

    with override_settings(AGENTUI_SQL_MAX_ROWS=25):
        result = await call(
            tools["db_query"],
            source="warehouse",
            sql=f"SELECT id, shop FROM {pg.schema}.visits ORDER BY id",
        )
    assert not result.is_error, result.content
    out = result.raw_output
    assert out["row_count"] == 25 and out["truncated"]
    assert out["total_rows"] == 500 and out["rows_left_out"] == 475
    assert out["rows"][0] == [1, "shop 1"]
    assert out["source"] == "warehouse"
    assert out["tables"] == [f"{pg.schema}.visits"]

    # wide rows: fetching stops once past the byte cap (the first batch of 50 here), so row 61,
    # which fails when read, is never read; rows past the cap would have been
    with override_settings(AGENTUI_SQL_MAX_ROWS=200, AGENTUI_SQL_MAX_BYTES=20_000):
        wide = await call(
            tools["db_query"],
            source="warehouse",
            sql=f"SELECT id, repeat('x', 1000) AS pad,"
            f" CASE WHEN id > 60 THEN 1 / (id - id) ELSE 0 END AS trap"
            f" FROM {pg.schema}.visits ORDER BY id",
        )
    assert not wide.is_error, wide.content
    assert wide.raw_output["truncated"]
    assert 10 <= wide.raw_output["row_count"] < 25, wide.raw_output["row_count"]

    # a write the role is allowed, hidden in a function: the read-only session refuses it
    sneaky = await call(
        tools["db_query"], source="warehouse", sql=f"SELECT {pg.schema}.sneaky()"
    )
    assert sneaky.is_error and "read-only" in sneaky.content, sneaky.content
    insert = await call(
        tools["db_query"],
        source="warehouse",
        sql=f"INSERT INTO {pg.schema}.visits VALUES (10000, 'y', 1)",
    )
    assert insert.is_error and "read-only" in insert.content, insert.content
    two = await call(
        tools["db_query"],
        source="warehouse",
        sql=f"SELECT 1; DELETE FROM {pg.schema}.visits",
    )
    assert two.is_error, two.content
    assert await database_sync_to_async(pg.count_visits)() == 500

    denied = await call(
        tools["db_query"], source="warehouse", sql=f"SELECT * FROM {pg.schema}.secrets"
    )
    assert denied.is_error and "permission denied" in denied.content, denied.content


@pytest.mark.postgres
async def test_the_statement_timeout_stops_a_long_query(pg: PgSource) -> None:
    user = await database_sync_to_async(make_user)("alice")
    await database_sync_to_async(register)(pg, everyone=True, timeout_s=1.0)
    tools = await database_sync_to_async(tools_of)(user.pk)
    started = time.monotonic()
    slept = await call(tools["db_query"], source="warehouse", sql="SELECT pg_sleep(10)")
    took = time.monotonic() - started
    assert slept.is_error and "took longer than 1 s" in slept.content, slept.content
    assert took < 5, took
    # lifting the timeout inside the query does not lift it for the count that follows
    lifted = await call(
        tools["db_query"],
        source="warehouse",
        sql="SELECT set_config('statement_timeout', '0', true), pg_sleep(0.01)"
        " FROM generate_series(1, 1000000)",
    )
    assert time.monotonic() - started < 10
    assert lifted.is_error or lifted.raw_output["total_rows"] is None, lifted.content


@pytest.mark.postgres
async def test_only_granted_people_can_target_a_source(pg: PgSource) -> None:
    def setup() -> tuple[int, int, int]:
        granted, by_group, other = (
            make_user("alice"),
            make_user("bob"),
            make_user("eve"),
        )
        source = register(pg)
        source.users.add(granted)
        team = Group.objects.create(name="analysts")
        team.user_set.add(by_group)
        source.groups.add(team)
        register(pg, name="disabled_one", everyone=True, enabled=False)
        return granted.pk, by_group.pk, other.pk

    alice, bob, eve = await database_sync_to_async(setup)()
    assert [
        s.name for s in await database_sync_to_async(sources.granted_sources)(alice)
    ] == ["warehouse"]
    assert [
        s.name for s in await database_sync_to_async(sources.granted_sources)(bob)
    ] == ["warehouse"]
    assert await database_sync_to_async(tools_of)(eve) == {}
    with pytest.raises(DbSourceError, match="no database source 'warehouse'"):
        await database_sync_to_async(sources.granted_source)(eve, "warehouse")

    # alice's tool, edited to name a source she has no grant for, is refused at call time
    tools = await database_sync_to_async(tools_of)(alice)
    refused = await call(tools["db_query"], source="disabled_one", sql="SELECT 1")
    assert refused.is_error
    # and a grant revoked after the notebook was built counts on the next call
    await database_sync_to_async(
        lambda: DataSource.objects.get(name="warehouse").users.clear()
    )()
    revoked = await call(tools["db_query"], source="warehouse", sql="SELECT 1")
    assert revoked.is_error and "no database source" in revoked.content


@pytest.mark.postgres
async def test_an_unreachable_source_is_an_error_of_that_call_without_the_password(
    pg: PgSource,
) -> None:
    user = await database_sync_to_async(make_user)("alice")
    down = pg.url.replace(f":{pg.admin.get('port') or 5432}/", ":1/")
    await database_sync_to_async(
        lambda: DataSource.objects.create(name="down", url=down, everyone=True)
    )()
    tools = await database_sync_to_async(tools_of)(user.pk)
    result = await call(tools["db_query"], source="down", sql="SELECT 1")
    assert result.is_error and "could not connect to source 'down'" in result.content
    assert pg.password not in result.content


@pytest.mark.postgres
def test_nothing_stored_or_listed_carries_the_password(pg: PgSource) -> None:
    source = register(pg, everyone=True)
    spec = sources.spec_of(source)
    said = dbsource.test_connection(spec)
    assert pg.role in said and pg.password not in said
    # the test's role may INSERT into visits (to show the session refuses it): said so
    assert "WARNING: the role may write to 1 table(s)" in said, said
    assert pg.password not in json.dumps(sources.describe(spec))
    assert pg.password not in str(Event.objects.values_list("payload", flat=True))


@pytest.mark.postgres
async def test_a_notebook_queries_a_source_and_its_trace_names_the_tables(
    pg: PgSource, scripted_server: Any
) -> None:
    from tests.rest_support import user_with_token

    user, token = await user_with_token("alice")
    await database_sync_to_async(register)(pg, everyone=True)
    sql = f"SELECT shop, SUM(visitors) AS visitors FROM {pg.schema}.visits GROUP BY shop ORDER BY 2 DESC LIMIT 3"
    model = scripted_server(query_then_answer(sql, "shop 3 leads."))
    api, pk, detail = await answered(model, token, "Which shop leads?")
    assert detail["response"] == "shop 3 leads."
    offered = [t["function"]["name"] for t in model.requests[0].body["tools"]]
    assert "db_query" in offered and "db_tables" in offered

    body, exported, result = await trace_of(api, pk)
    assert exported["task"]["data_tables"] == [f"warehouse:{pg.schema}.visits"]
    assert json.loads(result["tool_output"]["content"])["rows"][0][0] == "shop 3"
    listed = await api.get("/data/sources")
    assert listed.json() == [
        {
            "name": "warehouse",
            "description": "shop visits",
            "timeout_s": 2.0,
            "dialect": "PostgreSQL",
        }
    ]
    tables = await api.get("/data/sources/warehouse/tables")
    assert f"{pg.schema}.visits" in [t["name"] for t in tables.json()]
    preview = await api.get(
        f"/data/sources/warehouse/tables/{pg.schema}.visits", rows=3
    )
    assert preview.status_code == 200 and len(preview.json()["preview"]) == 3
    assert (await api.get("/data/sources/nope/tables")).status_code == 404
    for text in (body, listed.content, tables.content, preview.content):
        assert pg.password.encode() not in text
    assert pg.password not in str(
        await database_sync_to_async(
            lambda: list(Event.objects.values_list("payload", flat=True))
        )()
    )


@pytest.mark.postgres
def test_the_admin_registers_a_source_tests_it_and_never_shows_the_password(
    pg: PgSource, client: Any
) -> None:
    from django.contrib.auth import get_user_model

    admin_user = get_user_model().objects.create_superuser("root", "", "pw")
    client.force_login(admin_user)
    added = client.post(
        "/admin/runs/datasource/add/",
        {
            "name": "warehouse",
            "description": "shop visits",
            "kind": "postgres",
            "url": pg.url,
            "timeout_s": "3",
            "enabled": "on",
            "everyone": "on",
        },
        follow=True,
    )
    assert added.status_code == 200
    page = added.content.decode()
    assert f"Source warehouse: connected as {pg.role}" in page, page[:3000]
    source = DataSource.objects.get(name="warehouse")
    assert source.url == pg.url
    assert pg.password not in page

    change = client.get(f"/admin/runs/datasource/{source.pk}/change/").content.decode()
    assert pg.password not in change and f"{pg.role}:***@" in change
    listing = client.get("/admin/runs/datasource/").content.decode()
    assert pg.password not in listing

    # a change that leaves the URL empty keeps the stored one
    kept = client.post(
        f"/admin/runs/datasource/{source.pk}/change/",
        {
            "name": "warehouse",
            "description": "renamed",
            "kind": "postgres",
            "url": "",
            "timeout_s": "3",
            "enabled": "on",
        },
        follow=True,
    )
    assert kept.status_code == 200
    source.refresh_from_db()
    assert source.url == pg.url and source.description == "renamed"
    refused = client.post(
        "/admin/runs/datasource/add/",
        {"name": "other", "kind": "postgres", "url": "sqlite:///z", "timeout_s": "3"},
    )
    assert "use a postgresql:// URL" in refused.content.decode()
    assert "or a mysql:// (or mariadb://) URL" in refused.content.decode()

    tested = client.post(
        "/admin/runs/datasource/",
        {"action": "check_connection", "_selected_action": [source.pk]},
        follow=True,
    ).content.decode()
    assert f"connected as {pg.role}" in tested and pg.password not in tested


def test_the_demo_offers_its_source_example_only_to_people_with_a_source() -> None:
    from runs import service
    from runs.demo import register_demo_scripts
    from runs.demo.sources import DB_PROMPT

    register_demo_scripts()
    alice, bob = make_user("alice"), make_user("bob")
    source = DataSource.objects.create(
        name="warehouse", url="postgresql://r:secret@127.0.0.1:1/x"
    )
    source.users.add(alice)
    assert DB_PROMPT in [e.prompt for e in service.demo_examples_for(alice.pk)]
    assert DB_PROMPT not in [e.prompt for e in service.demo_examples_for(bob.pk)]
    assert DB_PROMPT not in [e.prompt for e in service.demo_examples_for(None)]


@pytest.mark.postgres
async def test_the_demo_prompt_answers_from_a_granted_source(
    pg: PgSource, scripted_server: Any
) -> None:
    from runs import service
    from runs.demo.sources import DB_PROMPT, db_source_rules
    from runs.engine.testing import Script
    from tests.live_support import llm_at
    from tests.rest_support import Api, user_with_token

    user, token = await user_with_token("alice")
    await database_sync_to_async(register)(pg, everyone=True)
    model = scripted_server(Script(rules=db_source_rules()))
    api = Api(token)
    with llm_at(model):
        created = await api.post(
            "/notebooks/", {"text": DB_PROMPT, "agent": "function_calling"}
        )
        assert created.status_code == 201, created.content
        detail = await api.wait(created.json()["id"])
        await service.wait_idle()
    assert detail["response"].startswith(
        f"The source has 1 table(s): {pg.schema}.visits. The first, {pg.schema}.visits,"
        " holds 500 rows."
    ), detail["response"]


def _running_sleeps(pg: PgSource) -> int:
    """How many statements the source's role is running now (the query itself is a FETCH
    from the cursor the tool declared)."""
    with psycopg.connect(**pg.admin, autocommit=True) as admin:
        row = admin.execute(
            "SELECT COUNT(*) FROM pg_stat_activity WHERE usename = %s AND state = 'active'",
            (pg.role,),
        ).fetchone()
    assert row is not None
    return int(row[0])


async def until(check: Any, what: str, within_s: float = 10.0) -> None:
    deadline = time.monotonic() + within_s
    while not await database_sync_to_async(check)():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.05)


@pytest.mark.postgres
async def test_cancelling_the_tool_cancels_the_query_in_postgresql(
    pg: PgSource,
) -> None:
    """A cancelled call (Stop) leaves nothing running on the source: PostgreSQL is asked to
    cancel the statement rather than let it run on to its timeout on an abandoned thread."""
    user = await database_sync_to_async(make_user)("alice")
    await database_sync_to_async(register)(pg, everyone=True, timeout_s=60.0)
    tools = await database_sync_to_async(tools_of)(user.pk)
    call_task = asyncio.create_task(
        call(tools["db_query"], source="warehouse", sql="SELECT pg_sleep(30)")
    )
    await until(lambda: _running_sleeps(pg) == 1, "the query never started")
    call_task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call_task
    await until(lambda: _running_sleeps(pg) == 0, "the query ran on", within_s=5)


def stop_after_arming(
    arm: Callable[..., Any], cancel: dbsource.Cancel, landed: threading.Event
) -> Callable[..., Any]:
    """`arm` (a backend's "set the timeouts for the next statement"), which, when arming the
    query itself, stops the session from another thread and waits until that first stop was
    sent: it lands between two statements, where there is nothing to cancel."""

    def arm_then_stop(*args: Any) -> Any:
        armed = arm(*args)
        # PostgreSQL arms the query's statements through run_query's `arm`; MySQL in
        # `_bounded` (its LIMIT 0 look at the columns runs a constant query) and `_read`
        if sys._getframe(1).f_code.co_name in ("run_query", "arm", "_bounded", "_read"):
            threading.Thread(target=cancel, daemon=True).start()
            assert landed.wait(10), "the stop was never sent"
        return armed

    return arm_then_stop


def signalled(
    stop: Callable[..., None], landed: threading.Event
) -> Callable[..., None]:
    """A backend's stop that says when it was sent (the real one runs)."""

    def stop_and_say(*args: Any) -> None:
        stop(*args)
        landed.set()

    return stop_and_say


@pytest.mark.postgres
async def test_a_stop_between_two_statements_still_cancels_the_query(
    pg: PgSource, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cancel request that lands after the timeouts are set and before the query starts finds
    nothing to cancel: it is sent again while the session runs, so the query does not run on
    to the source's timeout (here it slept its 10 s, and returned its row)."""
    user = await database_sync_to_async(make_user)("alice")
    await database_sync_to_async(register)(pg, everyone=True, timeout_s=60.0)
    spec = await database_sync_to_async(
        lambda: sources.granted_source(user.pk, "warehouse")
    )()
    cancel, landed = dbsource.Cancel(), threading.Event()
    monkeypatch.setattr(
        postgres, "_cancel_request", signalled(postgres._cancel_request, landed)
    )
    monkeypatch.setattr(
        postgres, "_arm", stop_after_arming(postgres._arm, cancel, landed)
    )
    started = time.monotonic()
    with pytest.raises(DbSourceError) as stopped:
        await asyncio.to_thread(dbsource.run_query, spec, "SELECT pg_sleep(10)", cancel)
    assert stopped.value.kind == "cancelled", stopped.value
    assert time.monotonic() - started < 5
    assert await database_sync_to_async(_running_sleeps)(pg) == 0


async def stop_a_sleeping_notebook(
    scripted_server: Any, sleep_sql: str, running: Callable[[], int]
) -> None:
    """The person's Stop, through REST as the page's would go through the service, on a
    notebook whose `db_query` runs `sleep_sql` (on the source named warehouse): `running()`
    counts the source's statements in flight, 1 before Stop and 0 soon after; the step ends,
    and the stopped call's result never reaches the model."""
    from runs import service
    from tests.live_support import llm_at
    from tests.rest_support import Api, user_with_token

    _, token = await user_with_token("alice")
    model = scripted_server(query_then_answer(sleep_sql, "done"))
    api = Api(token)
    with llm_at(model):
        pk = await start_notebook(api, "Sleep on it")
        await until(lambda: running() == 1, "the query never started")
        stopped = await api.post(f"/notebooks/{pk}/stop")
        assert stopped.status_code == 202, stopped.content
        await until(lambda: running() == 0, "the query ran on", within_s=5)
        detail = await api.wait(pk)
        await service.wait_idle()
    assert detail["status"] != "running", detail
    assert len(model.requests) == 1


@pytest.mark.postgres
async def test_stop_on_a_notebook_cancels_its_running_source_query(
    pg: PgSource, scripted_server: Any
) -> None:
    """Stop on a notebook cancels the source's statement in PostgreSQL."""
    await database_sync_to_async(register)(pg, everyone=True, timeout_s=60.0)
    await stop_a_sleeping_notebook(
        scripted_server, "SELECT pg_sleep(30)", lambda: _running_sleeps(pg)
    )


def _status_mb(key: str) -> float:
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith(key + ":"))
    return int(line.split()[1]) / 1024


async def huge_values_are_cut(tool: Any, sql: str, size: int, timeout_s: float) -> Any:
    """`sql` (two columns `a`, `b` of `size`-character values, and `n`, an integer) through
    `tool`: the values reach this process cut, so it grows by far less than one of them while
    the query runs (its peak RSS, reset first) and keeps nothing after; the call keeps the
    source's timeout, and the cut is said in each value and in the result. Its result."""
    gc.collect()
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")  # the process's peak RSS starts again from now
    before = _status_mb("VmRSS")
    started = time.monotonic()
    result = await call(tool, source="warehouse", sql=sql)
    took = time.monotonic() - started
    gc.collect()
    peak, kept = _status_mb("VmHWM") - before, _status_mb("VmRSS") - before
    assert not result.is_error, result.content
    assert peak < size / 2**20 / 2, f"grew by {peak:.0f} MB reading the values"
    assert kept < 16, f"kept {kept:.0f} MB"
    assert took < timeout_s + 2, took
    out = result.raw_output
    assert out["columns"] == ["a", "b", "n"]
    cut = f"… (value cut at 2,000 bytes of {size:,})"
    for a, b, n in out["rows"]:
        assert a == "x" * 2000 + cut and b == "y" * 2000 + cut, (a[-60:], b[-60:])
        assert isinstance(n, int)
    assert f"{2 * out['row_count']} value(s) were cut at 2,000 bytes" in out["note"]
    read = json.loads(result.content)  # what the model reads
    assert read["rows"] == out["rows"] and read["note"] == out["note"]
    return result


@pytest.mark.postgres
async def test_huge_values_are_cut_by_the_server_before_they_are_read(
    pg: PgSource,
) -> None:
    """The hostile query of issue 44 (`repeat('x', 300000000)` × 3 took the process to 2.78 GB
    and 17.9 s against a 3 s timeout), smaller: each value is cut by PostgreSQL before it is
    sent; short values, numbers, bytes and two columns of one name come as before."""
    user = await database_sync_to_async(make_user)("alice")
    await database_sync_to_async(register)(pg, everyone=True, timeout_s=10.0)
    tools = await database_sync_to_async(tools_of)(user.pk)
    size = 60_000_000
    await huge_values_are_cut(
        tools["db_query"],
        f"SELECT repeat('x', {size}) AS a, repeat('y', {size}) AS b, id AS n"
        f" FROM {pg.schema}.visits WHERE id <= 2 ORDER BY id -- a comment to its end",
        size,
        10.0,
    )
    small = await call(
        tools["db_query"],
        source="warehouse",
        sql="SELECT 1 AS a, 'two' AS a, ARRAY[1, 2] AS c, decode(repeat('ff', 5000), 'hex')"
        " AS d, '\\x0102'::bytea AS e, NULL AS f",
    )
    assert not small.is_error, small.content
    assert small.raw_output["columns"] == ["a", "a", "c", "d", "e", "f"]
    assert small.raw_output["rows"] == [
        [1, "two", "[1, 2]", "<5000 bytes>", "<2 bytes>", None]
    ]
    assert "note" not in small.raw_output
    many = await call(  # read in several fetches
        tools["db_query"],
        source="warehouse",
        sql=f"SELECT id FROM {pg.schema}.visits ORDER BY id",
    )
    assert not many.is_error, many.content
    assert many.raw_output["rows"] == [[i] for i in range(1, 201)]
    assert many.raw_output["total_rows"] == 500


@pytest.mark.postgres
async def test_a_query_cannot_step_out_of_the_select_that_bounds_its_values(
    pg: PgSource,
) -> None:
    """A text that would close the bounding SELECT's parentheses and add a branch of its own
    (unbounded) is not one whole statement: PostgreSQL's parse of it alone refuses it."""
    user = await database_sync_to_async(make_user)("alice")
    await database_sync_to_async(register)(pg, everyone=True, timeout_s=10.0)
    tools = await database_sync_to_async(tools_of)(user.pk)
    escape = await call(
        tools["db_query"],
        source="warehouse",
        sql="SELECT 1 AS c0\n) AS agentui_q0 OFFSET 0) AS agentui_q(c0)"
        " UNION ALL SELECT repeat('x', 3000000), NULL, NULL FROM (SELECT (SELECT 1",
    )
    assert escape.is_error and "syntax error" in escape.content, escape.content
