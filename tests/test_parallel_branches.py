"""Parallel research in step mode: each waiting branch is approved, edited or undone on its own,
in any order, while other branches run (issue 25, item 5; the README promises it)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from channels.db import database_sync_to_async

from runs import service
from runs.demo.research import RESEARCH_PROMPT, SUBQUESTIONS, research_rules
from runs.engine.testing import Script
from runs.protocol import ErrorCode, ProtocolError
from runs.service import Origin
from tests.audit_support import stored_events
from tests.live_support import (
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    llm_at,
    make_notebook,
    make_user,
)

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]


def of(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == kind]


async def test_branches_are_approved_in_any_order_while_others_run(
    scripted_server: Any,
) -> None:
    ana = Origin(by="ana")
    model = scripted_server(
        Script(rules=research_rules())
    )  # a branch answers after 1 s
    questions = list(SUBQUESTIONS)
    with llm_at(model):
        user = await database_sync_to_async(make_user)("ana")
        task = await database_sync_to_async(make_notebook)(
            user, agent="parallel_research", mode="step"
        )
        await service.send_message(task.pk, RESEARCH_PROMPT, ana)
        events = await database_sync_to_async(stored_events)(task.pk)
        await service.approve(task.pk, of(events, "step_waiting")[-1]["step_id"], ana)
        await service.wait_run(task.pk)
        events = await database_sync_to_async(stored_events)(task.pk)
        first, second, third = (e["step_id"] for e in of(events, "step_waiting")[-3:])

        # the third first; while it runs, edit the first, then approve the first and the
        # second at once (and the second twice: one of those is refused)
        await service.approve(task.pk, third, ana)
        await asyncio.to_thread(
            model.wait_for_requests, 2
        )  # its model call is in flight
        await service.edit_input(task.pk, first, questions[1], ana)
        outcomes = await asyncio.gather(
            service.approve(task.pk, first, ana),
            service.approve(task.pk, second, ana),
            service.approve(task.pk, second, ana),
            return_exceptions=True,
        )
        assert outcomes[:2] == [None, None]
        assert isinstance(outcomes[2], ProtocolError)
        assert outcomes[2].code is ErrorCode.ALREADY_RUNNING
        await service.wait_run(task.pk)
        events = await database_sync_to_async(stored_events)(task.pk)
        ends = [e["step_id"] for e in of(events, "step_completed")]
        starts = [e["step_id"] for e in of(events, "step_started")]
        # all three ran side by side: the first two started before the third had ended
        assert starts[-3:] == [third, first, second]
        completed_third = next(
            i
            for i, e in enumerate(events)
            if e["type"] == "step_completed" and e["step_id"] == third
        )
        started_second = next(
            i
            for i, e in enumerate(events)
            if e["type"] == "step_started" and e["step_id"] == second
        )
        assert started_second < completed_third
        assert sorted(ends[-3:]) == sorted([first, second, third])
        # the edit reached the model; each branch was asked once
        branch_asks = [r.last_user_text for r in model.requests[1:4]]
        assert sorted(branch_asks) == sorted([questions[1], questions[1], questions[2]])

        # undo a finished branch on its own, approve it again, then the synthesis
        await service.undo(task.pk, second, ana)
        await service.approve(task.pk, second, ana)
        await service.wait_run(task.pk)
        events = await database_sync_to_async(stored_events)(task.pk)
        synthesis = of(events, "step_waiting")[-1]["step_id"]
        await service.approve(task.pk, synthesis, ana)
        await service.wait_run(task.pk)
    events = await database_sync_to_async(stored_events)(task.pk)
    assert of(events, "task_completed")
    assert (
        len(model.requests) == 1 + 3 + 1 + 1
    )  # split, branches, the redone one, synthesis
    actions = [(e["action"], e["step_id"]) for e in of(events, "human_action")]
    assert (
        actions.count(("approved", second)) == 2
    )  # the refused approval left no trace
    assert ("undone", second) in actions
    assert ("edited_input", first) in actions


async def test_the_synthesis_cannot_be_approved_while_branches_wait(
    scripted_server: Any,
) -> None:
    """Found by tests/test_invariant.py: the synthesis step is queued from the start, and its
    approval was recorded in the audit though the engine then refused to run it."""
    ana = Origin(by="ana")
    with llm_at(scripted_server(Script(rules=research_rules()))):
        user = await database_sync_to_async(make_user)("ana")
        task = await database_sync_to_async(make_notebook)(
            user, agent="parallel_research", mode="step"
        )
        await service.send_message(task.pk, RESEARCH_PROMPT, ana)
        events = await database_sync_to_async(stored_events)(task.pk)
        await service.approve(task.pk, of(events, "step_waiting")[-1]["step_id"], ana)
        await service.wait_run(task.pk)
        events = await database_sync_to_async(stored_events)(task.pk)
        waiting = {e["step_id"] for e in of(events, "step_waiting")}
        synthesis = next(
            e["step_id"]
            for e in of(events, "step_created")
            if e["step_id"] not in waiting
        )
        with pytest.raises(ProtocolError) as refused:
            await service.approve(task.pk, synthesis, ana)
        assert refused.value.code is ErrorCode.NOT_ALLOWED
        await service.wait_idle()
        after = await database_sync_to_async(stored_events)(task.pk)
    assert [e for e in of(after, "human_action") if e["step_id"] == synthesis] == []
    assert of(after, "step_started") == of(events, "step_started")
