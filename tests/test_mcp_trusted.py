"""Tool hints and approval: a read-only tool runs without asking only on a server the admin
trusts and lets its read-only tools run unasked, never on the hint alone, never for a tool that
also says it is destructive, and never past a rule that asks. The audit says why it ran.
The model is the scripted server over HTTP; the MCP server is a real process."""

from __future__ import annotations

from typing import Any

import pytest
from channels.db import database_sync_to_async

from runs import service
from runs.engine.testing import Script
from runs.models import ToolPolicy
from tests.live_support import (
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    llm_at,
    make_user,
)
from tests.mcp_support import (
    CONTENT_APP,
    call_then_answer,
    notebook_servers,  # noqa: F401  (a fixture)
    payloads_of,
    stdio_server,
)

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]

QUESTION = "Use the content tool, please."


@pytest.fixture(autouse=True)
def no_server_left(notebook_servers: None) -> None:
    """Every test: no MCP server process left (tests.mcp_support)."""


def configure(trusted: bool, unasked: bool) -> Any:
    ana = make_user("ana")
    stdio_server(
        "content", [CONTENT_APP, "ok"], 5, trusted=trusted, read_only_unasked=unasked
    )
    return ana


def rules(tool: str) -> list[Any]:
    return call_then_answer(QUESTION, tool, {"city": "Lyon"})


async def run(scripted_server: Any, ana: Any, tool: str, mode: str = "tools") -> int:
    model = scripted_server(Script(rules=rules(tool)))
    with llm_at(model):
        task = await database_sync_to_async(service.create_notebook_row)(
            ana, "function_calling", mode, [tool]
        )
        await service.send_message(task.pk, QUESTION)
        await service.wait_idle()
    return task.pk


async def test_a_read_only_tool_of_a_trusted_server_runs_unasked_and_says_why(
    scripted_server: Any,
) -> None:
    ana = await database_sync_to_async(configure)(True, True)
    task = await run(scripted_server, ana, "content__read_weather")
    assert not await payloads_of(task, "step_waiting")
    (result,) = await payloads_of(task, "tool_call_result")
    assert result["tool_output"]["content"] == "sunny in Lyon"
    (auto,) = [
        a
        for a in await payloads_of(task, "human_action")
        if a["action"] == "auto_approved"
    ]
    assert auto["rule"] is None and auto["tool_id"] == result["tool_id"]
    assert auto["reason"] == "read-only tool of trusted server content"


@pytest.mark.parametrize(
    ("trusted", "unasked", "tool"),
    [
        (False, False, "content__read_weather"),  # the hint alone: asks
        (
            True,
            False,
            "content__read_weather",
        ),  # trusted, but the admin did not choose it
        (
            False,
            True,
            "content__read_weather",
        ),  # chosen, not trusted (the admin form refuses it)
        (True, True, "content__delete_city"),  # destructive: always asks
        (True, True, "content__sneaky_read"),  # read-only and destructive: asks
        (True, True, "content__list_cities"),  # no hints: asks
    ],
)
async def test_otherwise_the_call_waits_for_the_person(
    scripted_server: Any, trusted: bool, unasked: bool, tool: str
) -> None:
    ana = await database_sync_to_async(configure)(trusted, unasked)
    task = await run(scripted_server, ana, tool)
    (waiting,) = await payloads_of(task, "step_waiting")
    assert not await payloads_of(task, "tool_call_result")
    assert not [
        a
        for a in await payloads_of(task, "human_action")
        if a["action"] == "auto_approved"
    ]
    assert waiting["step_id"]


async def test_a_rule_that_asks_wins_over_a_trusted_hint(scripted_server: Any) -> None:
    ana = await database_sync_to_async(configure)(True, True)
    await ToolPolicy.objects.acreate(
        tool="content__read_weather", decision="ask", owner=ana, set_by="ana"
    )
    task = await run(scripted_server, ana, "content__read_weather")
    assert await payloads_of(task, "step_waiting")
    assert not await payloads_of(task, "tool_call_result")
