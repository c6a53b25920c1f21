"""MySQL / MariaDB database sources on the machine's real server (AGENTUI_TEST_MYSQL_URL, by
default root at 127.0.0.1:3306, which `.ci/run` starts): a user and a database made for the
test, registered as a `mysql://` source, queried through the notebook's tools.

The same guarantees as PostgreSQL's (tests/test_db_sources.py): the server refuses a write in
the read-only transaction, its statement limit stops a long query, Stop kills the statement in
flight, at most the row cap is read, and the password never appears. Without a reachable
server these tests skip, and fail under AGENTUI_REQUIRE_SERVICES=1 (CI).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.test import override_settings

from runs.models import DataSource, Event
from runs.presets import sources
from runs.presets.tools import dbsource
from runs.presets.tools.dbsource import DbSourceError, mysql
from tests.live_support import (
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    make_user,
)
from tests.mysql_source_support import MySource, mysql_source
from tests.test_db_sources import (
    answered,
    call,
    huge_values_are_cut,
    query_then_answer,
    signalled,
    stop_a_sleeping_notebook,
    stop_after_arming,
    tools_of,
    trace_of,
    until,
)

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def my(require_service: Callable[[str, str], Any]) -> Iterator[MySource]:
    with mysql_source(require_service) as made:
        yield made


def register(my: MySource, name: str = "warehouse", **fields: Any) -> DataSource:
    fields.setdefault("timeout_s", 2.0)
    return DataSource.objects.create(
        name=name, description="shop visits", url=my.url, kind="mysql", **fields
    )


def test_both_schemes_are_sources_and_the_message_says_so() -> None:
    for url in (
        "mysql://reader:x@db.example:3306/shop",
        "mariadb://reader:x@db.example/shop",
    ):
        assert dbsource.url_problem(url) is None, url
        assert dbsource.kind_of(url) == "mysql"
    assert dbsource.kind_of("postgresql://r@h/d") == "postgres"
    refused = dbsource.url_problem("sqlite:///x.db")
    assert refused is not None and "mysql://" in refused and "postgresql://" in refused
    assert dbsource.url_problem("mysql://reader@db.example") is not None
    masked = dbsource.masked_url("mysql://reader:s3cr%40t@db.example:3306/shop")
    assert masked == "mysql://reader:***@db.example:3306/shop"


async def test_queries_are_read_only_capped_and_name_their_tables(my: MySource) -> None:
    user = await database_sync_to_async(make_user)("alice")
    await database_sync_to_async(register)(my, everyone=True)
    tools = await database_sync_to_async(tools_of)(user.pk)
    assert "(MySQL: shop visits)" in tools["db_query"].metadata.description

    listed = await call(tools["db_tables"], source="warehouse")
    assert not listed.is_error, listed.content
    assert [t["name"] for t in listed.raw_output] == ["visits"]  # not secrets
    assert [c["name"] for c in listed.raw_output[0]["columns"]] == [
        "id",
        "shop",
        "visitors",
    ]

    with override_settings(AGENTUI_SQL_MAX_ROWS=25):
        result = await call(
            tools["db_query"],
            source="warehouse",
            sql="SELECT id, shop FROM visits ORDER BY id;",
        )
    assert not result.is_error, result.content
    out = result.raw_output
    assert out["row_count"] == 25 and out["truncated"]
    assert out["total_rows"] == 500 and out["rows_left_out"] == 475
    assert out["rows"][0] == [1, "shop 1"]
    assert out["source"] == "warehouse" and out["tables"] == ["visits"]

    # wide rows: fetching stops past the byte cap, long before the row cap
    with override_settings(AGENTUI_SQL_MAX_ROWS=200, AGENTUI_SQL_MAX_BYTES=20_000):
        wide = await call(
            tools["db_query"],
            source="warehouse",
            sql="SELECT id, REPEAT('x', 1000) AS pad FROM visits ORDER BY id",
        )
    assert not wide.is_error, wide.content
    assert wide.raw_output["truncated"]
    assert 10 <= wide.raw_output["row_count"] < 25, wide.raw_output["row_count"]

    # the user may INSERT into visits: the read-only transaction is what refuses a write
    spec = await database_sync_to_async(
        lambda: sources.granted_source(user.pk, "warehouse")
    )()
    with pytest.raises(DbSourceError) as locked:
        dbsource.run_query(spec, "SELECT * FROM visits WHERE id = 1 FOR UPDATE")
    assert locked.value.kind == "read_only", locked.value
    assert "READ ONLY transaction" in str(locked.value)
    insert = await call(
        tools["db_query"],
        source="warehouse",
        sql="INSERT INTO visits VALUES (9999, 'y', 1)",
    )
    assert insert.is_error and "read-only" in insert.content, insert.content
    two = await call(
        tools["db_query"], source="warehouse", sql="SELECT 1; DELETE FROM visits"
    )
    assert two.is_error, two.content
    assert await database_sync_to_async(my.count_visits)() == 500

    # a table read under an alias is named by its own name
    aliased = dbsource.run_query(spec, "SELECT v.id FROM visits AS v LIMIT 1")
    assert aliased["rows"] == [[1]] and aliased["tables"] == ["visits"]

    with pytest.raises(DbSourceError) as denied:
        dbsource.run_query(spec, "SELECT * FROM secrets")
    assert denied.value.kind == "permission", denied.value


async def test_the_tables_read_are_the_tables_the_server_read_not_their_aliases(
    my: MySource,
) -> None:
    """A query can give one table the name of another as its alias, and spell a third in a
    string: the audit's tables are still the ones the server read (the plan's JSON named the
    alias, so this recorded `shops` for a read of `visits`)."""
    await database_sync_to_async(my.query)(
        f"CREATE TABLE `{my.database}`.shops (id INT PRIMARY KEY, city TEXT)"
    )
    await database_sync_to_async(my.query)(
        f"INSERT INTO `{my.database}`.shops VALUES (1, 'Oslo')"
    )
    await database_sync_to_async(my.query)(
        f"GRANT SELECT ON `{my.database}`.shops TO %s@'%%'", (my.user,)
    )
    user = await database_sync_to_async(make_user)("alice")
    await database_sync_to_async(register)(my, everyone=True)
    spec = await database_sync_to_async(
        lambda: sources.granted_source(user.pk, "warehouse")
    )()
    spelled = f"`{my.database}`.`shops`"
    disguised = dbsource.run_query(
        spec,
        f"SELECT shops.visitors FROM visits AS shops WHERE shops.id = 2"
        f" AND 'x' <> '{spelled}' AND 'it''s' <> 'y\\'{spelled}'",
    )
    assert disguised["rows"] == [[6]], disguised  # visits 2 had 2 * 3 visitors
    assert disguised["tables"] == ["visits"], disguised
    both = dbsource.run_query(
        spec,
        "SELECT v.shop, s.city FROM visits v JOIN (SELECT id, city FROM shops) AS s"
        " ON s.id = v.id",
    )
    assert both["rows"] and both["tables"] == ["shops", "visits"], both
    cte = dbsource.run_query(
        spec, "WITH secrets AS (SELECT id FROM visits) SELECT COUNT(*) FROM secrets"
    )
    assert cte["rows"] == [[500]] and cte["tables"] == ["visits"], cte


async def test_the_statement_limit_stops_a_long_query(my: MySource) -> None:
    user = await database_sync_to_async(make_user)("alice")
    await database_sync_to_async(register)(my, everyone=True, timeout_s=1.0)
    spec = await database_sync_to_async(
        lambda: sources.granted_source(user.pk, "warehouse")
    )()
    started = time.monotonic()
    with pytest.raises(DbSourceError) as slept:
        await asyncio.to_thread(dbsource.run_query, spec, "SELECT SLEEP(5)")
    took = time.monotonic() - started
    assert slept.value.kind == "timeout", slept.value
    assert "took longer than 1 s" in str(slept.value)
    assert took < 4, took


@pytest.mark.parametrize(
    "sql",
    [
        "/*!SET STATEMENT max_statement_time=0 FOR*/ SELECT SLEEP(3)",
        "SELECT /*+ MAX_EXECUTION_TIME(100000) */ SLEEP(3)",
    ],
)
async def test_a_query_cannot_lift_the_statement_limit_from_a_comment(
    my: MySource, sql: str
) -> None:
    """The server runs what a `/*! */` comment holds (MariaDB's `SET STATEMENT ... FOR` then
    lifts the limit for the query: seen running its 3 s under a 1 s limit) and MySQL reads
    `/*+ */` hints: such a query is refused before it is sent."""
    user = await database_sync_to_async(make_user)("alice")
    await database_sync_to_async(register)(my, everyone=True, timeout_s=1.0)
    spec = await database_sync_to_async(
        lambda: sources.granted_source(user.pk, "warehouse")
    )()
    with pytest.raises(DbSourceError) as refused:
        await asyncio.to_thread(dbsource.run_query, spec, sql)
    assert refused.value.kind == "invalid", refused.value
    assert "could lift its time limit" in str(refused.value)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT shop FROM visits INTO OUTFILE '/tmp/agentui-visits.csv'",
        "SELECT '#' AS a INTO/**/DumpFile '/tmp/agentui-visits.bin'",
        "SELECT load_file('/etc/passwd')",
    ],
)
async def test_a_query_cannot_read_or_write_files_on_the_server(
    my: MySource, sql: str
) -> None:
    """A read-only transaction does not stop `INTO OUTFILE` (a user with FILE writes a file on
    the database server) or `LOAD_FILE()`: such a query is refused before it is sent."""
    user = await database_sync_to_async(make_user)("alice")
    await database_sync_to_async(register)(my, everyone=True)
    tools = await database_sync_to_async(tools_of)(user.pk)
    result = await call(tools["db_query"], source="warehouse", sql=sql)
    assert result.is_error, result.content
    assert "read or write files on the database server" in result.content


async def test_cancelling_the_tool_kills_the_query_on_the_server(my: MySource) -> None:
    """A cancelled call (Stop) leaves nothing running: KILL QUERY from a second connection,
    not the 60 s statement limit, ends the SLEEP."""
    user = await database_sync_to_async(make_user)("alice")
    await database_sync_to_async(register)(my, everyone=True, timeout_s=60.0)
    tools = await database_sync_to_async(tools_of)(user.pk)
    call_task = asyncio.create_task(
        call(tools["db_query"], source="warehouse", sql="SELECT SLEEP(30)")
    )
    await until(lambda: my.running() == 1, "the query never started")
    call_task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call_task
    await until(lambda: my.running() == 0, "the query ran on", within_s=5)


async def test_stop_on_a_notebook_kills_its_running_source_query(
    my: MySource, scripted_server: Any
) -> None:
    await database_sync_to_async(register)(my, everyone=True, timeout_s=60.0)
    await stop_a_sleeping_notebook(scripted_server, "SELECT SLEEP(30)", my.running)


async def test_a_stop_between_two_statements_still_kills_the_query(
    my: MySource, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `KILL QUERY` that lands after the statement limit is set and before the query reaches
    the server kills nothing: it is sent again while the session runs (here the query slept
    its 10 s before the stop was seen)."""
    user = await database_sync_to_async(make_user)("alice")
    await database_sync_to_async(register)(my, everyone=True, timeout_s=60.0)
    spec = await database_sync_to_async(
        lambda: sources.granted_source(user.pk, "warehouse")
    )()
    cancel, landed = dbsource.Cancel(), threading.Event()
    monkeypatch.setattr(mysql, "_kill_query", signalled(mysql._kill_query, landed))
    arm = stop_after_arming(mysql._Session.arm, cancel, landed)
    monkeypatch.setattr(mysql._Session, "arm", arm)
    started = time.monotonic()
    with pytest.raises(DbSourceError) as stopped:
        await asyncio.to_thread(dbsource.run_query, spec, "SELECT SLEEP(10)", cancel)
    assert stopped.value.kind == "cancelled", stopped.value
    assert time.monotonic() - started < 5
    assert await database_sync_to_async(my.running)() == 0


async def test_the_password_is_scrubbed_from_errors(my: MySource) -> None:
    user = await database_sync_to_async(make_user)("alice")
    wrong = "pw-wrong-" + my.password[3:]
    url = my.url.replace(my.password, wrong)
    await database_sync_to_async(
        lambda: DataSource.objects.create(name="down", url=url, everyone=True)
    )()
    tools = await database_sync_to_async(tools_of)(user.pk)
    result = await call(tools["db_query"], source="down", sql="SELECT 1")
    assert result.is_error and "could not connect to source 'down'" in result.content
    assert "Access denied" in result.content, result.content
    assert wrong not in result.content and my.password not in result.content

    # the server's own message quoting the password (as a table's name here) is scrubbed
    await database_sync_to_async(register)(my, everyone=True)
    tools = await database_sync_to_async(tools_of)(user.pk)
    quoted = await call(
        tools["db_query"], source="warehouse", sql=f"SELECT 1 FROM `{my.password}`"
    )
    assert quoted.is_error and "denied" in quoted.content, quoted.content
    assert my.password not in quoted.content and "***" in quoted.content


def test_the_connection_test_names_the_user_and_warns_of_its_writes(
    my: MySource,
) -> None:
    source = register(my, everyone=True)
    said = dbsource.test_connection(sources.spec_of(source))
    assert said.startswith(f"connected as {my.user}@") and my.password not in said
    assert "1 table(s) visible" in said, said
    assert "WARNING: the user may write to 0 database(s) and 1 table(s)" in said, said
    preview = dbsource.preview(sources.spec_of(source), "visits", rows=3)
    assert preview["preview"] == [[1, "shop 1", 3], [2, "shop 2", 6], [3, "shop 3", 9]]
    assert my.password not in json.dumps(sources.describe(sources.spec_of(source)))


async def test_a_notebook_queries_a_mysql_source_and_its_trace_names_the_table(
    my: MySource, scripted_server: Any
) -> None:
    from tests.rest_support import user_with_token

    user, token = await user_with_token("alice")
    await database_sync_to_async(register)(my, everyone=True)
    sql = "SELECT shop, SUM(visitors) AS visitors FROM visits GROUP BY shop ORDER BY 2 DESC LIMIT 3"
    model = scripted_server(query_then_answer(sql, "shop 3 leads."))
    api, pk, detail = await answered(model, token, "Which shop leads?")
    assert detail["response"] == "shop 3 leads."
    body, exported, result = await trace_of(api, pk)
    assert exported["task"]["data_tables"] == ["warehouse:visits"]
    assert json.loads(result["tool_output"]["content"])["rows"][0][0] == "shop 3"
    assert my.password.encode() not in body
    assert my.password not in str(
        await database_sync_to_async(
            lambda: list(Event.objects.values_list("payload", flat=True))
        )()
    )


def test_the_admin_registers_a_mysql_source_of_that_kind(
    my: MySource, client: Any
) -> None:
    from django.contrib.auth import get_user_model

    admin_user = get_user_model().objects.create_superuser("root", "", "pw")
    client.force_login(admin_user)
    added = client.post(
        "/admin/runs/datasource/add/",
        {"name": "warehouse", "url": my.url, "timeout_s": "3", "enabled": "on"},
        follow=True,
    )
    page = added.content.decode()
    assert f"Source warehouse: connected as {my.user}@" in page, page[:3000]
    assert my.password not in page
    assert DataSource.objects.get(name="warehouse").kind == "mysql"


async def test_huge_values_are_cut_by_the_server_before_they_are_read(
    my: MySource,
) -> None:
    """As on PostgreSQL: each value is cut by the server before it is sent (here 20 rows of
    10 MB values were read whole, 50 to a batch); numbers and short values come as before; a
    result naming two columns alike is refused with a message that says how to fix it."""
    user = await database_sync_to_async(make_user)("alice")
    await database_sync_to_async(register)(my, everyone=True, timeout_s=20.0)
    tools = await database_sync_to_async(tools_of)(user.pk)
    size = 10_000_000
    await huge_values_are_cut(
        tools["db_query"],
        f"SELECT REPEAT('x', {size}) AS a, REPEAT('y', {size}) AS b, id AS n"
        " FROM visits WHERE id <= 20 ORDER BY id -- a comment to its end",
        size,
        20.0,
    )
    small = await call(
        tools["db_query"],
        source="warehouse",
        sql="SELECT 1 AS a, 'two' AS b, UNHEX(REPEAT('ff', 5000)) AS c, NULL AS d,"
        " CAST(18446744073709551615 AS UNSIGNED) AS e, CAST('2020-01-02' AS DATE) AS f",
    )
    assert not small.is_error, small.content
    assert small.raw_output["rows"] == [
        [1, "two", "<5000 bytes>", None, 18446744073709551615, "2020-01-02"]
    ]
    # closing the wrap early, as the derived table it was or as the CTE it is, to read a
    # value of its own unbounded: the server parses the query alone first and refuses it
    for escape in (
        "SELECT 1 AS a\n) AS agentui_q UNION ALL SELECT REPEAT('x', 3000000), 1, 1"
        " FROM (SELECT 1",
        "SELECT 1 AS a\n) SELECT REPEAT('x', 3000000), 1, 1 UNION ALL SELECT 1, 1, 1"
        " FROM agentui_q WHERE (1",
    ):
        out = await call(tools["db_query"], source="warehouse", sql=escape)
        assert out.is_error and "SQL syntax" in out.content, out.content


async def test_two_columns_of_one_name_are_both_read_under_that_name(
    my: MySource,
) -> None:
    """`SELECT * FROM a JOIN b ON a.id = b.id` names `id` twice: each value read by its
    position, under its own name, still bounded by the server (a derived table refused the
    result, asking the model for aliases), in a query that starts with WITH too, and counted
    when there are more rows than the cap."""
    for table, text in (("a", "REPEAT('x', 3000)"), ("b", "CONCAT('b', id)")):
        my.query(f"CREATE TABLE `{my.database}`.{table} (id INT, v TEXT)")
        my.query(
            f"INSERT INTO `{my.database}`.{table} SELECT id, {text}"
            f" FROM `{my.database}`.visits"
        )
        my.query(f"GRANT SELECT ON `{my.database}`.{table} TO %s@'%%'", (my.user,))
    user = await database_sync_to_async(make_user)("alice")
    await database_sync_to_async(register)(my, everyone=True, timeout_s=20.0)
    tools = await database_sync_to_async(tools_of)(user.pk)
    joined = await call(
        tools["db_query"],
        source="warehouse",
        sql="SELECT * FROM a JOIN b ON a.id = b.id WHERE a.id <= 2 ORDER BY a.id",
    )
    assert not joined.is_error, joined.content
    out = joined.raw_output
    assert out["columns"] == ["id", "v", "id", "v"], out["columns"]
    cut = "x" * 2000 + "… (value cut at 2,000 bytes of 3,000)"
    assert out["rows"] == [[1, cut, 1, "b1"], [2, cut, 2, "b2"]], out["rows"]
    assert sorted(out["tables"]) == ["a", "b"], out["tables"]
    assert "2 value(s) were cut" in out["note"], out["note"]
    many = await call(
        tools["db_query"],
        source="warehouse",
        sql="WITH j AS (SELECT a.id, b.id AS bid FROM a JOIN b ON a.id = b.id)"
        " SELECT id, bid AS id, 'same' AS id FROM j ORDER BY j.id",
    )
    assert not many.is_error, many.content
    out = many.raw_output
    assert out["columns"] == ["id", "id", "id"], out["columns"]
    assert out["rows"][:2] == [[1, 1, "same"], [2, 2, "same"]], out["rows"]
    assert out["truncated"] and out["total_rows"] == 500, out
