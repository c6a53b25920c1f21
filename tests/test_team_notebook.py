"""The Team preset in the notebook service: a question answered after a restart, handoffs, state, undo."""

from __future__ import annotations

from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.test import override_settings

from runs import service
from runs.demo.server import stop_demo_server
from runs.demo.team import QUESTION, TEAM_PROMPT, team_rules
from runs.engine.testing import Script
from runs.models import Event, Task
from runs.service import runtime
from tests.live_support import (
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    llm_at,
    make_notebook,
    make_user,
)
from tests.workflow_helpers import assert_valid_openai_sequence

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]


async def _notebook(mode: str = "auto") -> Task:
    user = await database_sync_to_async(make_user)()
    return await database_sync_to_async(make_notebook)(user, agent="team", mode=mode)


async def _events(task: Task) -> list[dict[str, Any]]:
    return [e.payload async for e in Event.objects.filter(task=task).order_by("seq")]


def _of(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == kind]


async def _answer_question(task: Task, answer: str) -> None:
    waiting = _of(await _events(task), "step_waiting")[-1]["step_id"]
    await service.edit_input(task.pk, waiting, answer)
    await service.approve(task.pk, waiting)
    await service.wait_idle()


async def test_team_run_pauses_on_a_question_and_resumes_after_a_restart(
    scripted_server: Any, tmp_path: Any
) -> None:
    server = scripted_server(Script(rules=team_rules()))
    with llm_at(server), override_settings(AGENTUI_DATA_DIR=str(tmp_path)):
        task = await _notebook()
        await service.send_message(task.pk, TEAM_PROMPT)
        await service.wait_idle()
        stored = await _events(task)
        (question,) = _of(stored, "input_required")
        assert (
            question["prefix"] == QUESTION
            and question["current_agent_name"] == "planner"
        )
        waiting = _of(stored, "step_waiting")[-1]["step_id"]
        created = {e["step_id"]: e for e in _of(stored, "step_created")}
        assert created[waiting]["kind"] == "human_input"
        assert not _of(stored, "task_completed")

        runtime.forget_all()  # a restart: nothing of the run is left in this process
        await _answer_question(task, "Europe please")
        stored = await _events(task)
        rules = [r.rule_name for r in server.requests]
    # resumed at the question: the planner was asked once, and each later turn once
    assert len(rules) == len(set(rules)) and rules[0] == "demo-team-ask", rules
    (answer,) = _of(stored, "human_response")
    assert (answer["waiter_id"], answer["tool_id"]) == (
        question["waiter_id"],
        question["tool_id"],
    )
    # the answer is in the audit as the person's edit of the question's step (its step also
    # holds the question's call, whose unchanged arguments once hid the answer: no action)
    edits = [
        (e["step_id"], e["before"], e["after"])
        for e in _of(stored, "human_action")
        if e["action"] == "edited_input"
    ]
    assert edits == [(waiting, None, "Europe please")]
    (done,) = _of(stored, "task_completed")
    assert "grew most" in done["response"] and "stock more" in done["response"]
    handoffs = [
        (e["from_agent"], e["to_agent"], e["reason"])
        for e in _of(stored, "agent_handoff")
    ]
    assert [h[:2] for h in handoffs] == [
        ("planner", "analyst"),
        ("analyst", "reviewer"),
    ]
    assert all(reason for _, _, reason in handoffs)
    states = _of(stored, "state_changed")
    assert [sorted(e["changes"]) for e in states] == [["plan"], ["finding"]]
    assert "Europe region" in states[-1]["state"]["plan"]
    agents = [e["current_agent_name"] for e in _of(stored, "agent_input")]
    assert agents == ["planner"] * 3 + ["analyst"] * 4 + ["reviewer"] * 2
    for request in server.requests:
        assert_valid_openai_sequence(request.messages)


async def test_undoing_a_handoff_in_the_notebook_returns_control(
    scripted_server: Any, tmp_path: Any
) -> None:
    server = scripted_server(Script(rules=team_rules()))
    with llm_at(server), override_settings(AGENTUI_DATA_DIR=str(tmp_path)):
        task = await _notebook(mode="step")
        await service.send_message(task.pk, TEAM_PROMPT)
        for _ in range(3):  # ask, (answer), note the plan
            step_id = _of(await _events(task), "step_waiting")[-1]["step_id"]
            created = {
                e["step_id"]: e for e in _of(await _events(task), "step_created")
            }
            if created[step_id]["kind"] == "human_input":
                await service.edit_input(task.pk, step_id, "all regions")
            await service.approve(task.pk, step_id)
            await service.wait_idle()
        handoff_step = _of(await _events(task), "step_waiting")[-1]["step_id"]
        await service.approve(task.pk, handoff_step)  # the planner hands off
        await service.wait_idle()
        await service.approve(
            task.pk, _of(await _events(task), "step_waiting")[-1]["step_id"]
        )
        await service.wait_idle()
        assert (
            _of(await _events(task), "agent_input")[-1]["current_agent_name"]
            == "analyst"
        )
        await service.undo(task.pk)  # the analyst's first turn
        await service.undo(task.pk)  # the handoff
        again = _of(await _events(task), "step_waiting")[-1]["step_id"]
        assert again == handoff_step
        await service.approve(task.pk, again)
        await service.wait_idle()
        stored = await _events(task)
    last_input = _of(stored, "agent_input")[-1]
    assert (
        last_input["step_id"] == handoff_step
        and last_input["current_agent_name"] == "planner"
    )
    assert [e["type"] for e in stored].count(
        "agent_handoff"
    ) == 2  # handed off again after the undo


async def test_team_demo_works_offline(tmp_path: Any) -> None:
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
            task = await service.create_notebook(user, TEAM_PROMPT, "team", "auto")
            await service.wait_idle()
            await _answer_question(task, "Asia")
        finally:
            runtime.forget_all()
            stop_demo_server()
        stored = await _events(task)
    (done,) = _of(stored, "task_completed")
    assert "Checked against the data" in done["response"]
    assert len(_of(stored, "agent_handoff")) == 2


async def test_team_in_tools_mode_and_abandoned_while_a_question_waits(
    scripted_server: Any, tmp_path: Any
) -> None:
    server = scripted_server(Script(rules=team_rules()))
    with llm_at(server), override_settings(AGENTUI_DATA_DIR=str(tmp_path)):
        task = await _notebook(mode="tools")
        await service.send_message(task.pk, TEAM_PROMPT)
        await service.wait_idle()
        stored = await _events(task)
        waiting = _of(stored, "step_waiting")[-1]["step_id"]
        created = {e["step_id"]: e for e in _of(stored, "step_created")}
        # tools mode: the planner's ask_person call waits for approval first
        assert created[waiting]["kind"] == "tool_calls"
        assert [c["tool_name"] for c in created[waiting]["tool_calls"]] == [
            "ask_person"
        ]
        await service.approve(task.pk, waiting)
        await service.wait_idle()
        stored = await _events(task)
        waiting = _of(stored, "step_waiting")[-1]["step_id"]
        created = {e["step_id"]: e for e in _of(stored, "step_created")}
        assert created[waiting]["kind"] == "human_input"
        assert len(_of(stored, "input_required")) == 1
        await service.abandon(task.pk)
        await service.wait_idle()
        stored = await _events(task)
    assert _of(stored, "task_abandoned") or _of(stored, "task_deleted")
    assert not _of(stored, "task_completed")
