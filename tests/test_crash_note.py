"""A step whose server process died mid tool call: its model is told of the calls that had begun.

Crash recovery (runs.service.recovery) finds, in the stored trace of the cut-off run, the tool
calls that began (their `tool_call` stored) and never returned (no `tool_call_result`), and keeps
them in the turn's state as a Stop keeps its own (runs.engine.stopped_note): the next model
request, the step run again or the next turn's first, ends with the note, once. What the dead
process left is made here by hand, as tests/test_takeover.py does; tests/test_restart.py kills a
real process mid tool call.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from channels.db import database_sync_to_async

from runs import service
from runs.engine import AgentOutput, ChatMessage, StoppedCallsNote, ToolCall
from runs.engine.messages import ToolSelection
from runs.engine.stopped_note import NOTE_START
from runs.engine.testing import Match, Reply, Rule, Script
from runs.models import Event, Step, Task, Turn
from runs.realtime.publisher import store_event
from tests.live_support import (
    QUESTION,
    analyst_rules,
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    llm_at,
)
from tests.test_service import notebook, waiting_step
from tests.test_takeover import orphan, step_mode_notebook

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]

TOLD = "Some of that may have happened already; I will not do it again."
# a model that heeds the note, and the analyst otherwise
HEEDS = Rule(
    name="told", match=Match(system_contains=NOTE_START), reply=Reply(text=TOLD)
)
ADD = {"a": 2, "b": 3}
MUL = {"a": 4, "b": 5}


def script() -> Script:
    return Script(rules=[HEEDS, *analyst_rules()])


async def store(task: Task, step_id: str, *payloads: dict[str, Any]) -> None:
    turn_pk = (await Step.objects.aget(step_id=step_id)).turn_id
    for payload in payloads:
        await database_sync_to_async(store_event)(task.pk, payload, turn_pk)


async def cut_off_mid_call(task: Task, step_id: str, mode: str = "step") -> str:
    """What a process killed while `step_id`'s model had replied and its two tool calls ran
    leaves: `add` returned (its result stored), `multiply` had begun and not returned."""
    turn_id = (
        await Step.objects.select_related("turn").aget(step_id=step_id)
    ).turn.engine_id
    ids = {"task_id": turn_id, "step_id": step_id}
    calls = [("add", ADD, "call_add"), ("multiply", MUL, "call_mul")]
    reply = AgentOutput(
        **ids,
        response=ChatMessage.assistant("Let me compute both."),
        tool_calls=[
            ToolSelection(tool_id=i, tool_name=n, tool_kwargs=a) for n, a, i in calls
        ],
    )
    began = [
        ToolCall(**ids, tool_name=n, tool_kwargs=a, tool_id=i) for n, a, i in calls
    ]
    added = {
        "type": "tool_call_result",
        **ids,
        "tool_name": "add",
        "tool_kwargs": ADD,
        "tool_id": "call_add",
        "tool_output": {
            "content": "5",
            "tool_name": "add",
            "raw_input": ADD,
            "raw_output": 5,
        },
    }
    await store(
        task,
        step_id,
        {"type": "step_started", **ids, "at": time.time()},
        *(e.model_dump(mode="json") for e in [reply, *began]),
        added,
    )
    await orphan(task, step_id, mode)
    return turn_id


async def recovered(server: Any, mode: str) -> tuple[Task, str, str]:
    """A notebook whose step's process died mid call, taken over here: (notebook, step id, turn
    engine id)."""
    task, step_id = await step_mode_notebook(server)
    turn_id = await cut_off_mid_call(task, step_id, mode)
    assert await service.take_over(task.pk) == 1
    await service.wait_idle()
    return task, step_id, turn_id


async def owed(turn_id: str) -> list[dict[str, Any]]:
    """The calls the turn's stored state owes its model a note of."""
    turn = await Turn.objects.aget(engine_id=turn_id)
    return list(turn.extra_state.get("stopped_calls", []))


async def notes(task: Task) -> list[StoppedCallsNote]:
    rows = Event.objects.filter(task=task, type="stopped_calls_note").order_by("seq")
    return [StoppedCallsNote.model_validate(e.payload) async for e in rows]


def assert_told(server: Any, note: StoppedCallsNote) -> None:
    """The model's last request ended with exactly the note the stored event shows."""
    sent = server.requests[-1]
    assert sent.rule_name == "told"
    assert sent.messages[-1] == {"role": "system", "content": note.text}
    assert [(c.tool_name, c.tool_kwargs, c.state) for c in note.calls] == [
        ("multiply", MUL, "server_stopped")
    ]
    assert (
        "the server stopped while an earlier run was making these tool calls"
        in note.text
    )
    assert "pressed Stop" not in note.text  # nobody did
    assert '- "multiply" with arguments {"a": 4, "b": 5}:' in note.text
    assert '"add"' not in note.text  # its result was stored: it had finished


async def test_the_step_run_again_tells_the_model_of_the_call_the_dead_process_had_begun(
    scripted_server: Any,
) -> None:
    server = scripted_server(script())
    with llm_at(server):
        task, step_id, turn_id = await recovered(server, "auto")
        # a call of it had finished: not run again by itself, it waits for the person ...
        assert (await Step.objects.aget(step_id=step_id)).status == "interrupted"
        assert server.requests == []
        # ... and its turn owes the model a note of the call that had begun, once
        assert [c["tool_name"] for c in await owed(turn_id)] == ["multiply"]
        assert await service.take_over(task.pk) == 0
        assert len(await owed(turn_id)) == 1

        await service.approve(task.pk, step_id)  # the person runs it again
        await service.wait_idle()
        (note,) = await notes(task)
        assert_told(server, note)
        assert len(server.requests) == 1
        assert await owed(turn_id) == []  # given once
        types = [
            e.type
            async for e in Event.objects.filter(task=task, step_id=step_id).order_by(
                "seq"
            )
        ]
        told = types.index("stopped_calls_note")
        assert types[told + 1] == "agent_input"
        assert types.index("step_interrupted") < told

        # undo of the step that was told gives the note back to its next run
        await service.undo(task.pk, step_id)
        await service.approve(task.pk, step_id)
        await service.wait_idle()
    again = (await notes(task))[-1]
    assert len(await notes(task)) == 2 and again.text == note.text
    assert_told(server, again)


async def test_a_rerun_that_dies_too_still_owes_the_note_once(
    scripted_server: Any,
) -> None:
    server = scripted_server(script())
    with llm_at(server):
        task, step_id, turn_id = await recovered(server, "step")
        first = await owed(turn_id)
        # run again, it told its model, whose reply made the same call again (it had not
        # heeded the note), and died too before storing the task again
        ids = {"task_id": turn_id, "step_id": step_id}
        again = ToolCall(
            **ids, tool_name="multiply", tool_kwargs=MUL, tool_id="call_mul"
        )
        await store(
            task,
            step_id,
            {"type": "step_started", **ids, "at": time.time()},
            {"type": "stopped_calls_note", **ids, "text": "...", "calls": first},
            again.model_dump(mode="json"),
        )
        await orphan(task, step_id, "step")
        assert await service.take_over(task.pk) == 1
        await service.wait_idle()
        assert await owed(turn_id) == first  # kept, and not twice

        await service.approve(task.pk, step_id)
        await service.wait_idle()
    note = (await notes(task))[-1]
    assert_told(server, note)


async def test_the_next_turn_is_told_when_the_person_abandons_the_cut_off_one(
    scripted_server: Any,
) -> None:
    server = scripted_server(script())
    with llm_at(server):
        task, step_id = await step_mode_notebook(server)
        await cut_off_mid_call(task, step_id)
        await service.abandon(
            task.pk
        )  # recovers the dead process's step, then abandons
        await service.wait_idle()
        assert (await Step.objects.aget(step_id=step_id)).status == "interrupted"
        assert server.requests == []
        await service.set_mode(task.pk, "auto")
        await service.send_message(task.pk, "Hello again")
        await service.wait_idle()
    (note,) = await notes(task)
    assert_told(server, note)
    assert server.requests[-1].messages[-2]["content"] == "Hello again"
    assert len(server.requests) == 1


async def test_no_note_for_a_call_that_returned_or_never_ran_its_tool(
    scripted_server: Any,
) -> None:
    server = scripted_server(script())
    with llm_at(server):
        task = await notebook(mode="tools")
        await service.send_message(
            task.pk, QUESTION
        )  # the model asks for add and multiply
        await service.wait_idle()
        calls = await waiting_step(task)  # the tool-calls step, waiting for approval
        await service.reject_tool_call(task.pk, calls, "call_mul", "not now")
        step = await Step.objects.select_related("turn").aget(step_id=calls)
        turn_id = step.turn.engine_id
        ids = {"task_id": turn_id, "step_id": calls}
        # both calls were announced; add returned, the rejected multiply was answered without
        # its tool, and the process died before that answer was stored
        began = [
            ToolCall(**ids, tool_name=n, tool_kwargs=a, tool_id=i).model_dump(
                mode="json"
            )
            for n, a, i in [("add", ADD, "call_add"), ("multiply", MUL, "call_mul")]
        ]
        added = {
            "type": "tool_call_result",
            **ids,
            "tool_name": "add",
            "tool_kwargs": ADD,
            "tool_id": "call_add",
        }
        await store(task, calls, {"type": "step_started", **ids}, *began, added)
        await orphan(task, calls, "step")
        assert await service.take_over(task.pk) == 1
        await service.wait_idle()
        assert (await Step.objects.aget(step_id=calls)).status == "interrupted"
    assert await owed(turn_id) == []
