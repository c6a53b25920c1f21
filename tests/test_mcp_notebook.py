"""MCP tools in notebooks: granted per user or group, picked per notebook, and each call an
ordinary step (approved, edited, rejected with a reason, undone, recorded and exported).
The model is the scripted server over HTTP; the MCP servers are real processes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth.models import Group
from django.test import override_settings

from runs import service
from runs.demo.mcp import MCP_PROMPT, mcp_rules
from runs.engine.testing import Match, Reply, Rule, Script, ToolCallSpec
from runs.models import McpServer, Task
from runs.presets.mcp import notebook_mcp_tools, refresh_listing
from runs.protocol import ProtocolError
from runs.service import surfaces
from runs.traces.export import trace_head, trace_stream
from tests.live_support import (
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    llm_at,
    make_user,
)
from tests.mcp_support import (  # noqa: F401  (fixture)
    APP,
    BIN,
    notebook_servers,
    payloads_of,
    server_children,
)
from tests.rest_support import Api, user_with_token

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]

QUESTION = "Add 2 and 3 with the MCP tool, and wait a bit."


@pytest.fixture(autouse=True)
def no_server_left(notebook_servers: None) -> None:
    """Every test here ends with no MCP server left (tests.mcp_support)."""


def configure_servers() -> tuple[Any, Any]:
    """`own` (the tests' server) granted to the group analysts, `time` to everyone."""
    import sys

    ana, bob = make_user("ana"), make_user("bob")
    analysts = Group.objects.create(name="analysts")
    ana.groups.add(analysts)
    own = McpServer.objects.create(name="own", command=sys.executable, args=[APP, "ok"])
    own.groups.add(analysts)
    time = McpServer.objects.create(
        name="time",
        command=str(BIN / "mcp-server-time"),
        args=["--local-timezone", "UTC"],
        everyone=True,
    )
    for server in (own, time):
        assert refresh_listing(server).startswith("fetched"), server.tools_note
    return ana, bob


def _add_rules() -> list[Rule]:
    asks = Match(last_user_contains=QUESTION)
    return [
        Rule(
            name="calls",
            match=asks.model_copy(update={"tool_results_since_user": 0}),
            reply=Reply(
                tool_calls=[
                    ToolCallSpec(name="own__add", arguments={"a": 2, "b": 3}),
                    ToolCallSpec(name="own__hang", arguments={}),
                ]
            ),
        ),
        Rule(
            name="answer",
            match=asks.model_copy(update={"tool_results_since_user": 2}),
            reply=Reply(text="The sum is in."),
        ),
    ]


async def test_grants_decide_who_may_pick_which_tools() -> None:
    ana, bob = await database_sync_to_async(configure_servers)()
    ana_tools = {
        t.name
        for t in await database_sync_to_async(surfaces.available_mcp_tools)(ana.pk)
    }
    bob_tools = {
        t.name
        for t in await database_sync_to_async(surfaces.available_mcp_tools)(bob.pk)
    }
    assert {"own__add", "own__hang", "time__get_current_time"} <= ana_tools
    assert "time__convert_time" in bob_tools and not any(
        n.startswith("own__") for n in bob_tools
    )
    with pytest.raises(
        ProtocolError, match="the MCP tool 'own__add' is not available to you"
    ):
        await database_sync_to_async(service.create_notebook_row)(
            bob, "function_calling", "auto", ["own__add"]
        )
    # fetching a list again rebuilds the notebooks' runners with it (their key changes)
    _, before = await database_sync_to_async(notebook_mcp_tools)(ana.pk, ["own__add"])
    own = await McpServer.objects.aget(name="own")
    await database_sync_to_async(refresh_listing)(own)
    _, after = await database_sync_to_async(notebook_mcp_tools)(ana.pk, ["own__add"])
    assert before and after != before
    await McpServer.objects.filter(name="time").aupdate(enabled=False)
    assert not await database_sync_to_async(surfaces.available_mcp_tools)(bob.pk)


async def test_an_mcp_call_is_edited_rejected_approved_undone_and_exported(
    scripted_server: Any,
) -> None:
    ana, _ = await database_sync_to_async(configure_servers)()
    model = scripted_server(Script(rules=_add_rules()))
    with llm_at(model):
        task = await database_sync_to_async(service.create_notebook_row)(
            ana, "function_calling", "tools", ["own__add", "own__hang"]
        )
        await service.send_message(task.pk, QUESTION)
        await service.wait_idle()
        waiting = (await payloads_of(task.pk, "step_waiting"))[-1]["step_id"]
        offered = {
            t["function"]["name"]: t["function"] for t in model.requests[0].tools
        }
        assert offered["own__add"]["parameters"]["required"] == ["a", "b"]
        assert "(from the MCP server 'own')" in offered["own__add"]["description"]
        assert "time__get_current_time" not in offered  # not picked for this notebook

        step = await Task.objects.aget(pk=task.pk)
        calls = json.loads(await _step_input(step.pk, waiting))
        add_id = next(c["tool_id"] for c in calls if c["tool_name"] == "own__add")
        hang_id = next(c["tool_id"] for c in calls if c["tool_name"] == "own__hang")
        bad = [
            dict(c, tool_kwargs={"a": "twenty", "b": 22})
            if c["tool_id"] == add_id
            else c
            for c in calls
        ]
        with pytest.raises(ProtocolError, match="a: 'twenty' is not of type 'integer'"):
            await service.edit_input(task.pk, waiting, json.dumps(bad))
        edited = [
            dict(c, tool_kwargs={"a": 20, "b": 22}) if c["tool_id"] == add_id else c
            for c in calls
        ]
        await service.edit_input(task.pk, waiting, json.dumps(edited))
        await service.reject_tool_call(task.pk, waiting, hang_id, "it never answers")
        await service.approve(task.pk, waiting)
        await service.wait_idle()

        results = await payloads_of(task.pk, "tool_call_result")
        assert sorted(
            (r["tool_name"], r["tool_kwargs"], r["tool_output"]["content"])
            for r in results
        ) == [
            ("own__add", {"a": 20, "b": 22}, "42"),
            ("own__hang", {}, "rejected by user: it never answers"),
        ]
        told = [m for m in model.requests[-1].messages if m.get("role") == "tool"]
        assert [m["content"] for m in told][0] == "42"
        assert "it never answers" in told[1]["content"]

        head = await database_sync_to_async(trace_head)(
            await Task.objects.aget(pk=task.pk)
        )
        exported = json.loads(
            "".join([part async for part in trace_stream(task, head)])
        )
        text = json.dumps(exported)
        assert '"own__add"' in text and '"reason": "it never answers"' in text

        # undo takes the calls back: they wait again, as the person left them
        tool_step = results[0]["step_id"]
        assert {r["step_id"] for r in results} == {tool_step}
        await service.undo(task.pk)  # the answer
        await service.wait_idle()
        await service.undo(task.pk, tool_step)
        await service.wait_idle()
        undone = await payloads_of(task.pk, "step_undone")
        assert undone[-1]["step_id"] == tool_step
        assert (await payloads_of(task.pk, "step_waiting"))[-1]["step_id"] == tool_step


async def test_a_hanging_tool_fails_its_call_and_the_turn_goes_on(
    scripted_server: Any,
) -> None:
    ana, _ = await database_sync_to_async(configure_servers)()
    model = scripted_server(Script(rules=_add_rules()))
    with llm_at(model), override_settings(AGENTUI_MCP_TIMEOUT_S=2.0):
        task = await database_sync_to_async(service.create_notebook_row)(
            ana, "function_calling", "auto", ["own__add", "own__hang"]
        )
        await service.send_message(task.pk, QUESTION)
        await service.wait_idle()
    outputs = {
        r["tool_name"]: r["tool_output"]
        for r in await payloads_of(task.pk, "tool_call_result")
    }
    assert outputs["own__add"]["content"] == "5" and not outputs["own__add"]["is_error"]
    assert outputs["own__hang"]["is_error"]
    assert "did not answer hang within 2 s" in outputs["own__hang"]["content"]
    done = await Task.objects.aget(pk=task.pk)
    assert (await done.turns.aget()).response == "The sum is in."


async def test_the_demo_example_asks_the_time_server(scripted_server: Any) -> None:
    ana, _ = await database_sync_to_async(configure_servers)()
    model = scripted_server(Script(rules=mcp_rules()))
    with llm_at(model):
        task = await service.create_notebook(
            ana,
            MCP_PROMPT,
            "function_calling",
            "auto",
            mcp_tools=["time__get_current_time"],
        )
        await service.wait_idle()
        plain = await service.create_notebook(
            ana, MCP_PROMPT, "function_calling", "auto"
        )
        await service.wait_idle()
    answer = (await (await Task.objects.aget(pk=task.pk)).turns.aget()).response
    assert answer.startswith("In Asia/Tokyo it is 20") and "+09:00" in answer
    without = (await (await Task.objects.aget(pk=plain.pk)).turns.aget()).response
    assert without.startswith("This notebook has no MCP time tool.")


async def _step_input(task_pk: int, step_id: str) -> str:
    from runs.models import Step

    step = await Step.objects.aget(task_id=task_pk, step_id=step_id)
    return str(step.input)


async def test_rest_starts_a_notebook_with_mcp_tools(scripted_server: Any) -> None:
    await database_sync_to_async(configure_servers)()
    _, token = await user_with_token("ana")  # in the group analysts
    api = Api(token)
    model = scripted_server(Script(rules=mcp_rules()))
    with llm_at(model):
        refused = await api.post(
            "/notebooks/",
            {
                "text": MCP_PROMPT,
                "agent": "function_calling",
                "mcp_tools": ["own__nope"],
            },
        )
        assert refused.status_code == 422
        assert (
            "the MCP tool 'own__nope' is not available to you"
            in refused.content.decode()
        )
        created = await api.post(
            "/notebooks/",
            {
                "text": MCP_PROMPT,
                "agent": "function_calling",
                "mcp_tools": ["time__get_current_time", "own__add"],
            },
        )
        assert created.status_code == 201, created.content
        detail = await api.wait(created.json()["id"])
        await service.wait_idle()
    assert detail["mcp_tools"] == ["time__get_current_time", "own__add"]
    assert detail["response"].startswith("In Asia/Tokyo it is")


def test_a_schema_that_cannot_be_checked_safely_is_left_out_and_the_admin_told() -> (
    None
):
    import sys

    ana = make_user("ana")
    server = McpServer.objects.create(
        name="patterns", command=sys.executable, args=[APP, "patterns"], everyone=True
    )
    note = refresh_listing(server)
    assert note.splitlines() == [
        "fetched 1 tool",
        "left out 'strong': its input schema has the pattern '^(?=.*[0-9]).{8,}$', which "
        "cannot be checked safely (invalid perl operator: (?=: backreferences and "
        "lookarounds are not supported)",
    ]
    assert McpServer.objects.get(pk=server.pk).tools_note == note  # the admin's page
    # a listing stored before such schemas were refused: its notebooks leave the tool out
    lookup = server.tools[0]
    strong = {
        **lookup,
        "name": "patterns__strong",
        "tool": "strong",
        "input_schema": {
            "type": "object",
            "properties": {"password": {"type": "string", "pattern": "(?=.*[0-9])"}},
        },
    }
    McpServer.objects.filter(pk=server.pk).update(tools=[lookup, strong])
    tools, _ = notebook_mcp_tools(ana.pk, ["patterns__lookup", "patterns__strong"])
    assert [t.metadata.name for t in tools] == ["patterns__lookup"]
