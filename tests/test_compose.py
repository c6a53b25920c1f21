"""Composed notebooks and a person's own presets: the config is checked (unknown agents and
tools, MCP tools not granted, tables one does not have, models not offered are refused with a
reason), a composed notebook's model call carries exactly its picks, its data tools read only
the tables it was given, a user preset starts through the same service path as a built-in one
(and names what went missing when a grant was revoked), and REST keeps presets to their owner.
The model is the scripted server over real HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.test import override_settings

from runs import service
from runs.engine.testing import Match, Reply, Rule, Script, ToolCallSpec
from runs.models import McpServer, Task, UserPreset
from runs.presets import get_preset
from runs.presets.compose import ComposeError, check_config, tool_names
from runs.presets.tools.data import DataError, DataScope, data_query, data_tables
from runs.protocol import ProtocolError
from runs.service.data_import import import_file as import_table
from runs.traces.export import trace_json
from tests.live_support import (
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    llm_at,
    make_user,
)
from tests.rest_support import Api, user_with_token

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]

CLOCK_TOOL = {
    "name": "clock__now",
    "tool": "now",
    "description": "The time now.",
    "input_schema": {"type": "object", "properties": {}},
}


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path) -> Iterator[Path]:
    with override_settings(AGENTUI_DATA_DIR=str(tmp_path)):
        yield tmp_path


def add_table(user_id: int, name: str, tmp_path: Path) -> None:
    source = tmp_path / f"{name}.csv"
    source.write_text("shop,visitors\nBaixa,10\nAlfama,7\n")
    import_table(user_id, source, source.name, name)


def clock_server(*users: Any) -> McpServer:
    """An MCP server granted to `users`, with its listing stored (nothing is started)."""
    server = McpServer.objects.create(name="clock", command="true", tools=[CLOCK_TOOL])
    server.users.add(*users)
    return server


# --- the config, checked ----------------------------------------------------------------------


def test_the_config_is_checked_against_the_catalog() -> None:
    ok = check_config({"agent": "function_calling", "tools": ["add", "data_query"]})
    assert ok.tools == ["add", "data_query"] and ok.mode == "auto"
    refusals = {
        "there is no agent preset 'sorcery'": {"agent": "sorcery"},
        "the mode must be one of auto, step, tools": {
            "agent": "react",
            "mode": "sometimes",
        },
        "the agent Function calling has no built-in tool 'rm_rf'; its tools: add,": {
            "agent": "function_calling",
            "tools": ["add", "rm_rf"],
        },
        "the agent Parallel research takes no tools (asked for 'add')": {
            "agent": "parallel_research",
            "tools": ["add"],
        },
        "the agent Chain of Abstraction cannot run with these tools (CoAAgentWorker "
        "needs tools": {"agent": "coa", "tools": []},
        "Extra inputs are not permitted": {"agent": "react", "shell": True},
        "agent: Field required": {"tools": []},
    }
    for reason, raw in refusals.items():
        with pytest.raises(ComposeError) as refused:
            check_config(raw)
        assert reason in str(refused.value), (raw, str(refused.value))


def test_the_config_is_checked_against_what_the_person_may_use(tmp_path: Path) -> None:
    ana, bob = make_user("ana"), make_user("bob")
    clock_server(ana)
    add_table(ana.pk, "shop_visits", tmp_path)
    raw = {
        "agent": "function_calling",
        "mcp_tools": ["clock__now", "clock__now"],
        "data_tables": ["shop_visits"],
        "model": "big",
    }
    config = check_config(raw, user_id=ana.pk, models=["small", "big"])
    assert config.mcp_tools == ["clock__now"]  # repeats dropped
    assert config.data_tables == ["shop_visits"]
    with pytest.raises(
        ComposeError, match="the MCP tool 'clock__now' is not available"
    ):
        check_config(raw, user_id=bob.pk, models=["small", "big"])
    with pytest.raises(ComposeError, match="you have no data table 'shop_visits'"):
        check_config({**raw, "mcp_tools": []}, user_id=bob.pk, models=["small", "big"])
    with pytest.raises(
        ComposeError, match="the model 'big' is not offered here; pick one of small"
    ):
        check_config(raw, user_id=ana.pk, models=["small"])


def test_data_tools_read_only_the_tables_a_notebook_was_given(tmp_path: Path) -> None:
    ana = make_user("ana")
    add_table(ana.pk, "shop_visits", tmp_path)
    add_table(ana.pk, "salaries", tmp_path)
    given = DataScope(ana.pk, ("shop_visits",))
    assert [t["name"] for t in data_tables(given)] == ["shop_visits"]
    rows = asyncio.run(data_query(given, "SELECT SUM(visitors) AS n FROM shop_visits"))
    assert rows["rows"] == [[17]] and rows["tables"] == ["shop_visits"]
    with pytest.raises(DataError, match="only the data tables it was given"):
        asyncio.run(
            data_query(given, "SELECT * FROM shop_visits JOIN salaries ON true")
        )
    every = DataScope(ana.pk)
    assert {t["name"] for t in data_tables(every)} == {"salaries", "shop_visits"}


# --- a composed notebook runs with its picks -------------------------------------------------

QUESTION = "Add 2 and 3, please."


def _add_rules() -> list[Rule]:
    asks = Match(last_user_contains=QUESTION)
    return [
        Rule(
            name="calls",
            match=asks.model_copy(update={"tool_results_since_user": 0}),
            reply=Reply(
                tool_calls=[ToolCallSpec(name="add", arguments={"a": 2, "b": 3})]
            ),
        ),
        Rule(name="answers", match=asks, reply=Reply(text="2 + 3 = 5.")),
    ]


async def test_a_composed_notebook_calls_its_model_with_its_tools_only(
    scripted_server: Any,
) -> None:
    ana = await database_sync_to_async(make_user)("ana")
    model = scripted_server(Script(rules=_add_rules()))
    with llm_at(model), override_settings(AGENTUI_MODELS="scripted-large, other"):
        assert service.offered_models() == ["scripted", "scripted-large", "other"]
        task = await service.create_notebook(
            ana,
            QUESTION,
            "function_calling",
            "auto",
            model="scripted-large",
            tools=["add", "subtract"],
        )
        await service.wait_idle()
    first = model.requests[0]
    assert first.body["model"] == "scripted-large"
    assert sorted(t["function"]["name"] for t in first.tools) == ["add", "subtract"]
    stored = await Task.objects.aget(pk=task.pk)
    assert (stored.model, stored.tools, stored.data_tables) == (
        "scripted-large",
        ["add", "subtract"],
        None,
    )
    told = [m for m in model.requests[-1].messages if m.get("role") == "tool"]
    assert told and told[0]["content"] == "5"
    # the auditor's export says what it was composed with, as the page's badges do
    exported = await database_sync_to_async(trace_json)(stored)
    assert exported["task"]["setup"] == {
        "model": "scripted-large",
        "tools": ["add", "subtract"],
        "mcp_tools": [],
        "tables": None,
        "budget_run_usd": None,
        "budget_run_tokens": None,
    }


async def test_a_user_preset_starts_like_a_built_in_one_and_names_a_revoked_tool(
    scripted_server: Any,
) -> None:
    ana = await database_sync_to_async(make_user)("ana")
    server = await database_sync_to_async(clock_server)(ana)
    saved = await database_sync_to_async(service.save_user_preset)(
        ana,
        "  Sums   and time ",
        {
            "agent": "function_calling",
            "tools": ["add"],
            "mcp_tools": ["clock__now"],
            "mode": "step",
        },
    )
    assert saved["name"] == "Sums and time"
    model = scripted_server(Script(rules=_add_rules()))
    with llm_at(model):
        task = await service.create_notebook(
            ana, QUESTION, "", "auto", preset=saved["id"]
        )
        await service.wait_idle()
        stored = await Task.objects.aget(pk=task.pk)
        assert (stored.agent, stored.mode, stored.tools, stored.mcp_tools) == (
            "function_calling",
            "step",
            ["add"],
            ["clock__now"],
        )
        exported = await database_sync_to_async(trace_json)(stored)
        assert exported["task"]["setup"]["mcp_tools"] == ["clock__now"]
        # the grant is revoked: the preset stays, but starting it says what is missing
        await database_sync_to_async(server.users.remove)(ana)
        before = await Task.objects.acount()
        with pytest.raises(ProtocolError) as refused:
            await service.create_notebook(ana, QUESTION, "", "auto", preset=saved["id"])
    assert refused.value.reason == (
        "your preset 'Sums and time' cannot start: the MCP tool 'clock__now' is not "
        "available to you. Edit the preset to go on."
    )
    assert await Task.objects.acount() == before
    assert await UserPreset.objects.filter(pk=saved["id"]).aexists()


def test_preset_names_are_per_owner_and_checked() -> None:
    ana, bob = make_user("ana"), make_user("bob")
    config = {"agent": "react"}
    first = service.save_user_preset(ana, "Mine", config)
    service.save_user_preset(bob, "Mine", config)  # another person's name is free
    with pytest.raises(ProtocolError, match="you have a preset named 'Mine' already"):
        service.save_user_preset(ana, "Mine", config)
    with pytest.raises(ProtocolError, match="name: give the preset a name"):
        service.save_user_preset(ana, "   ", config)
    with pytest.raises(ProtocolError, match="you have no preset"):
        service.save_user_preset(bob, "Taken over", config, first["id"])
    with pytest.raises(ProtocolError, match="you have no preset"):
        service.delete_user_preset(bob, first["id"])
    renamed = service.save_user_preset(ana, "Renamed", {"agent": "coa"}, first["id"])
    assert (renamed["id"], renamed["config"]["agent"]) == (first["id"], "coa")
    # a full pick of the agent's tools is stored as "all of them"
    full = service.save_user_preset(
        ana,
        "All",
        {
            "agent": "function_calling",
            "tools": tool_names(get_preset("function_calling")),
        },
    )
    assert full["config"]["tools"] is None


# --- REST -------------------------------------------------------------------------------------


async def test_rest_lists_and_changes_only_your_own_presets(tmp_path: Path) -> None:
    ana, token = await user_with_token("ana")
    _, bob_token = await user_with_token("bob")
    await database_sync_to_async(add_table)(ana.pk, "shop_visits", tmp_path)
    api, bob = Api(token), Api(bob_token)
    body = {
        "name": "Visits",
        "config": {
            "agent": "function_calling",
            "tools": ["data_query"],
            "data_tables": ["shop_visits"],
            "mode": "tools",
        },
    }
    created = await api.post("/presets/", body)
    assert created.status_code == 201, created.content
    mine = created.json()
    assert (mine["kind"], mine["name"], mine["config"]["data_tables"]) == (
        "mine",
        "Visits",
        ["shop_visits"],
    )
    listed = (await api.get("/presets/")).json()
    assert listed[0]["kind"] == "builtin"
    assert [p["id"] for p in listed if p["kind"] == "mine"] == [mine["id"]]
    assert not [p for p in (await bob.get("/presets/")).json() if p["kind"] == "mine"]

    # bob cannot see, change, delete or start ana's preset: not found, as if there were none
    put = await bob.client.put(
        f"/api/v1/presets/{mine['id']}",
        body,
        content_type="application/json",
        headers=bob.headers,
    )
    assert put.status_code == 404, put.content
    gone = await bob.client.delete(f"/api/v1/presets/{mine['id']}", headers=bob.headers)
    assert gone.status_code == 404
    started = await bob.post("/notebooks/", {"text": "hi", "preset": mine["id"]})
    assert started.status_code == 404
    assert "you have no preset" in started.json()["detail"]

    # refusals name what does not fit
    for config, reason in (
        ({"agent": "nope"}, "there is no agent preset 'nope'"),
        ({"agent": "react", "tools": ["sudo"]}, "has no built-in tool 'sudo'"),
        ({"agent": "react", "mcp_tools": ["clock__now"]}, "not available to you"),
        ({"agent": "react", "data_tables": ["salaries"]}, "no data table 'salaries'"),
    ):
        refused = await api.post("/presets/", {"name": "Bad", "config": config})
        assert refused.status_code == 422, (config, refused.content)
        assert reason in refused.json()["detail"], refused.json()
    assert (await bob.post("/presets/", {"name": "Visits"})).status_code == 422

    # the owner renames it, and deletes it
    renamed = await api.client.put(
        f"/api/v1/presets/{mine['id']}",
        {**body, "name": "Shop visits"},
        content_type="application/json",
        headers=api.headers,
    )
    assert renamed.status_code == 200 and renamed.json()["name"] == "Shop visits"
    deleted = await api.client.delete(
        f"/api/v1/presets/{mine['id']}", headers=api.headers
    )
    assert deleted.status_code == 204
    assert not await UserPreset.objects.aexists()


async def test_rest_starts_a_notebook_from_your_preset(scripted_server: Any) -> None:
    ana, token = await user_with_token("ana")
    api = Api(token)
    created = await api.post(
        "/presets/",
        {"name": "Adder", "config": {"agent": "function_calling", "tools": ["add"]}},
    )
    assert created.status_code == 201, created.content
    model = scripted_server(Script(rules=_add_rules()))
    with llm_at(model):
        started = await api.post(
            "/notebooks/", {"text": QUESTION, "preset": created.json()["id"]}
        )
        assert started.status_code == 201, started.content
        detail = await api.wait(started.json()["id"])
        await service.wait_idle()
    assert (detail["agent"], detail["tools"], detail["response"]) == (
        "function_calling",
        ["add"],
        "2 + 3 = 5.",
    )
    assert [t["function"]["name"] for t in model.requests[0].tools] == ["add"]
    no_agent = await api.post("/notebooks/", {"text": QUESTION})
    assert no_agent.status_code == 422
    assert "give a built-in preset's name" in no_agent.json()["detail"]


async def test_a_session_write_without_csrf_is_forbidden() -> None:
    from django.test import AsyncClient

    ana = await database_sync_to_async(make_user)("ana")
    client = AsyncClient(enforce_csrf_checks=True)
    await client.aforce_login(ana)
    refused = await client.post(
        "/api/v1/presets/",
        {"name": "x", "config": {"agent": "react"}},
        content_type="application/json",
    )
    assert refused.status_code == 403
    assert not await UserPreset.objects.aexists()


# --- the page's form, without its script ------------------------------------------------------


async def test_the_form_saves_refuses_with_the_reason_and_keeps_presets_private() -> (
    None
):
    from django.test import AsyncClient

    ana = await database_sync_to_async(make_user)("ana")
    bob = await database_sync_to_async(make_user)("bob")
    client = AsyncClient()
    await client.aforce_login(ana)
    form = {
        "text": "kept",
        "agent": "function_calling",
        "mode": "step",
        "model": "",
        "tools_sent": "1",
        "tools": ["add", "subtract"],
        "preset_name": "Two tools",
    }
    saved = await client.post("/presets/save", form)
    assert saved.status_code == 302 and "#my-presets" in saved["Location"]
    preset = await UserPreset.objects.aget(owner=ana)
    assert preset.config["tools"] == ["add", "subtract"]
    assert preset.config["mode"] == "step"
    page = (await client.get(saved["Location"])).content.decode()
    assert (
        "Saved your preset “Two tools”." in page
        and f'data-use-preset="{preset.pk}"' in page
    )

    # a refused save shows the form again as sent, with the reason, the part open
    refused = await client.post(
        "/presets/save", {**form, "tools": ["add", "rm_rf"], "preset_name": "Bad"}
    )
    assert refused.status_code == 400
    body = refused.content.decode()
    assert "Not saved: the agent Function calling has no built-in tool" in body
    assert '<details id="compose" class="compose" open>' in body
    assert 'value="Bad"' in body and ">kept</textarea>" in body
    assert await UserPreset.objects.acount() == 1

    # a preset's Start that is not one's own is refused on the form, nothing is made
    other = AsyncClient()
    await other.aforce_login(bob)
    started = await other.post(
        "/tasks/new", {"text": "hi", "agent": "react", "user_preset": str(preset.pk)}
    )
    assert started.status_code == 400
    assert f"you have no preset {preset.pk}" in started.content.decode()
    deleted = await other.post(f"/presets/{preset.pk}/delete")
    assert deleted.status_code == 302
    assert await UserPreset.objects.filter(pk=preset.pk).aexists()
    assert not await Task.objects.aexists()


async def test_a_preset_start_with_picks_of_ones_own_is_refused_not_dropped() -> None:
    """One's preset sets the tools and data: picks sent with it get the reason, nothing made."""
    from django.test import AsyncClient

    ana = await database_sync_to_async(make_user)("ana")
    saved = await database_sync_to_async(service.save_user_preset)(
        ana, "Sums", {"agent": "function_calling", "tools": ["add"]}
    )
    client = AsyncClient()
    await client.aforce_login(ana)
    base = {"text": "kept", "user_preset": str(saved["id"])}
    for picks in (
        {"tools_sent": "1", "tools": ["add", "subtract"]},
        {"mcp_tools": ["time_now"]},
        {"model": "scripted-large"},
        {"data_tables": ["shop_visits"]},
    ):
        refused = await client.post("/tasks/new", {**base, **picks})
        assert refused.status_code == 400, picks
        body = refused.content.decode()
        assert "your preset sets the model, tools, MCP tools and data tables" in body
        assert ">kept</textarea>" in body  # nothing lost
    assert not await Task.objects.aexists()
    started = await client.post("/tasks/new", base)
    assert started.status_code == 302
    task = await Task.objects.aget()
    assert task.agent == "function_calling"
