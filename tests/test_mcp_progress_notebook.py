"""An MCP server's progress and log messages in a notebook, and Stop during a long MCP call.

The model is the scripted server over HTTP; the MCP servers are real processes
(tests/mcp_servers/app.py `progress`, and the demo clock). Progress and log messages are
stored on the call's step, so a reload and the trace export have them; the admin's per-server
limits and log level apply; Stop cancels the call at the server, which notes it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from channels.db import database_sync_to_async

from runs import service
from runs.demo.mcp import SYNC_PROMPT, sync_rules
from runs.engine.testing import Script
from runs.models import Event, Task
from runs.traces.export import trace_head, trace_stream
from tests.live_support import (
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    llm_at,
    make_user,
    until_true,
)
from tests.mcp_support import (  # noqa: F401  (fixture)
    APP,
    call_then_answer,
    demo_clock_notebook,
    notebook_servers,
    payloads_of,
    stdio_server,
)

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]

QUESTION = "Do the long work with the MCP tool."


@pytest.fixture(autouse=True)
def no_server_left(notebook_servers: None) -> None:
    """Every test here ends with no MCP server left (tests.mcp_support)."""


def configure(notes: Path | None = None, **fields: Any) -> Any:
    ana = make_user("ana")
    env = {"AGENTUI_TEST_NOTES": str(notes)} if notes else {}
    stdio_server("long", [APP, "progress"], 4, env=env, **fields)
    return ana


def rules(arguments: dict[str, Any]) -> list[Any]:
    return call_then_answer(QUESTION, "long__slow", arguments)


async def start(scripted_server: Any, arguments: dict[str, Any], **server: Any) -> Any:
    ana = await database_sync_to_async(configure)(**server)
    model = scripted_server(Script(rules=rules(arguments)))
    task = await database_sync_to_async(service.create_notebook_row)(
        ana, "function_calling", "auto", ["long__slow"]
    )
    return model, task


async def test_progress_and_logs_are_stored_on_the_call_and_exported(
    scripted_server: Any,
) -> None:
    model, task = await start(
        scripted_server, {"steps": 12, "every_ms": 40}, idle_timeout_s=0.5
    )
    with llm_at(model):
        await service.send_message(task.pk, QUESTION)
        await service.wait_idle()
    (result,) = await payloads_of(task.pk, "tool_call_result")
    assert (
        result["tool_output"]["content"] == "done after 12 steps"
    )  # 0.5 s idle, ~0.5 s
    shown = await payloads_of(task.pk, "tool_progress")
    assert shown and all(p["tool_id"] == result["tool_id"] for p in shown)
    assert all(p["step_id"] == result["step_id"] for p in shown)
    assert (shown[-1]["progress"], shown[-1]["total"]) == (12.0, 12.0)
    logs = await payloads_of(task.pk, "tool_log")
    assert [(log["level"], log["text"]) for log in logs] == [
        ("warning", "starting 12 steps"),
        ("warning", "all steps done"),
    ]
    # the last progress is stored before the call's result
    kinds = [
        kind
        async for kind in Event.objects.filter(
            task_id=task.pk, type__in=("tool_progress", "tool_call_result")
        )
        .order_by("seq")
        .values_list("type", flat=True)
    ]
    assert kinds[-2:] == ["tool_progress", "tool_call_result"]
    stored = await Task.objects.aget(pk=task.pk)
    head = await database_sync_to_async(trace_head)(stored)
    exported = "".join([part async for part in trace_stream(stored, head)])
    assert "tool_progress" in exported
    assert "starting 12 steps" in exported


async def test_stop_during_a_long_call_cancels_it_at_the_server(
    scripted_server: Any, tmp_path: Path
) -> None:
    notes = tmp_path / "notes.txt"
    ana = await database_sync_to_async(configure)(notes)
    model = scripted_server(Script(rules=rules({"steps": 500, "every_ms": 20})))
    task = await database_sync_to_async(service.create_notebook_row)(
        ana, "function_calling", "auto", ["long__slow"]
    )
    with llm_at(model):
        await service.send_message(task.pk, QUESTION)
        await until_true(
            lambda: payloads_of(task.pk, "tool_progress"), what="the call's progress"
        )
        await service.abandon(task.pk, service.Origin(action="abandon", by="ana"))
        await service.wait_idle()
    await until_true(
        lambda: notes.exists() and notes.read_text() == "cancelled slow\n",
        what="the server noting the cancel",
    )
    stopped = await payloads_of(task.pk, "tool_call_stopped")
    assert [s["state"] for s in stopped] == ["cancelled"]
    assert await payloads_of(task.pk, "tool_call_result") == []


async def test_the_demo_clock_reports_its_progress_in_the_demo_example(
    scripted_server: Any,
) -> None:
    task = await database_sync_to_async(demo_clock_notebook)("clock__sync_clock")
    model = scripted_server(Script(rules=sync_rules()))
    with llm_at(model):
        await service.send_message(task.pk, SYNC_PROMPT)
        await service.wait_idle()
    shown = await payloads_of(task.pk, "tool_progress")
    assert len(shown) >= 3  # four seconds, a note every 0.4 s
    assert (shown[-1]["progress"], shown[-1]["total"]) == (10.0, 10.0)
    assert shown[-1]["message"] == "compared 60 samples with the reference"
    (log,) = await payloads_of(task.pk, "tool_log")
    assert log["level"] == "warning" and "answers slowly" in log["text"]
    answer = json.dumps(await payloads_of(task.pk, "task_completed"))
    assert "the clock is in sync: 60 samples compared" in answer
