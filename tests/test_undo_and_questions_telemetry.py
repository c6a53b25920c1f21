"""Undo as a person's action (stored, exported, on its span) and a Team question's span (issue 25, 6, 8)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.test import override_settings
from opentelemetry.trace import StatusCode

from runs import service
from runs.demo.team import TEAM_PROMPT, team_rules
from runs.engine.testing import Script
from runs.service import Origin
from tests.audit_support import stored_events
from tests.live_support import (
    QUESTION,
    analyst_script,
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    llm_at,
    make_notebook,
    make_user,
)
from tests.test_stop_branches import spans_of

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]


def kind(span: Any) -> str:
    return str(span.attributes["openinference.span.kind"])


async def _waiting(pk: int) -> str:
    events = await database_sync_to_async(stored_events)(pk)
    return str([e for e in events if e["type"] == "step_waiting"][-1]["step_id"])


async def test_an_undo_is_a_human_action_in_the_trail_the_export_and_on_the_undone_span(
    scripted_server: Any, async_client: Any
) -> None:
    ana = Origin(by="ana")
    with llm_at(scripted_server(analyst_script())):
        user = await database_sync_to_async(make_user)("ana")
        task = await database_sync_to_async(make_notebook)(user, mode="step")
        await service.send_message(task.pk, QUESTION, ana)
        first = await _waiting(task.pk)
        await service.approve(task.pk, first, ana)
        await service.wait_idle()
        await service.undo(task.pk, first, ana)
        assert await _waiting(task.pk) == first
        await service.approve(task.pk, first, ana)
        await service.wait_idle()
        while (await database_sync_to_async(stored_events)(task.pk))[-1][
            "type"
        ] == "step_waiting":
            await service.approve(task.pk, await _waiting(task.pk), ana)
            await service.wait_idle()
    events = await database_sync_to_async(stored_events)(task.pk)
    actions = [
        (e["action"], e["by"], e["step_id"])
        for e in events
        if e["type"] == "human_action"
    ]
    assert ("undone", "ana", first) in actions
    # in order: approved, undone, approved again
    assert [a for a in actions if a[2] == first] == [
        ("approved", "ana", first),
        ("undone", "ana", first),
        ("approved", "ana", first),
    ]

    # the trace export a reviewer downloads has it
    await async_client.aforce_login(user)
    response = await async_client.get(f"/api/tasks/{task.pk}/trace.json")
    assert response.status_code == 200
    exported = json.loads(b"".join([c async for c in response.streaming_content]))
    assert [
        e["event"]["by"]
        for e in exported["events"]
        if e["event"]["type"] == "human_action" and e["event"]["action"] == "undone"
    ] == ["ana"]

    # telemetry: the undone run's span says so, and who undid it
    spans = spans_of(events)
    runs = [
        s
        for s in spans
        if kind(s) == "CHAIN" and s.attributes["graph.node.id"] == first
    ]
    assert len(runs) == 2
    undone, again = runs
    assert (
        undone.attributes["agentui.undone"],
        undone.attributes["agentui.undone_by"],
    ) == (True, "ana")
    assert [e.name for e in undone.events][-1] == "human.undone"
    assert "agentui.undone" not in again.attributes
    assert [s.attributes["agentui.outcome"] for s in spans if kind(s) == "AGENT"] == [
        "answered"
    ]


async def test_a_team_question_answered_is_one_tool_span_not_an_error(
    scripted_server: Any, tmp_path: Any
) -> None:
    with (
        llm_at(scripted_server(Script(rules=team_rules()))),
        override_settings(AGENTUI_DATA_DIR=str(tmp_path)),
    ):
        user = await database_sync_to_async(make_user)()
        task = await database_sync_to_async(make_notebook)(user, agent="team")
        await service.send_message(task.pk, TEAM_PROMPT)
        await service.wait_idle()
        waiting = await _waiting(task.pk)
        await service.edit_input(task.pk, waiting, "Europe please")
        await service.approve(task.pk, waiting)
        await service.wait_idle()
    events = await database_sync_to_async(stored_events)(task.pk)
    assert [e for e in events if e["type"] == "task_completed"]
    spans = spans_of(events)
    asked = [s for s in spans if kind(s) == "TOOL" and s.name == "ask_person"]
    assert len(asked) == 1
    assert asked[0].status.status_code is StatusCode.OK
    assert "Europe please" in str(asked[0].attributes["output.value"])
    # under the step that asked, which ended before the answer came
    question = next(e for e in events if e["type"] == "input_required")
    asking = next(
        s
        for s in spans
        if kind(s) == "CHAIN" and s.attributes["graph.node.id"] == question["step_id"]
    )
    assert asked[0].parent is not None
    assert asked[0].parent.span_id == asking.context.span_id
    assert not [s for s in spans if s.status.status_code is StatusCode.ERROR]
    # every span of the Team's steps names the member that acted, not only its model calls
    members = {str(s.attributes["agent.name"]) for s in spans if kind(s) == "LLM"}
    assert len(members) >= 2, members  # a handoff happened
    for span in spans:
        if kind(span) in ("CHAIN", "TOOL"):
            assert span.attributes.get("agent.name") in members, span.name
    step_agent = {
        s.context.span_id: s.attributes["agent.name"]
        for s in spans
        if kind(s) == "CHAIN"
    }
    for call in (s for s in spans if kind(s) == "LLM"):
        assert call.parent is not None
        assert step_agent[call.parent.span_id] == call.attributes["agent.name"]
