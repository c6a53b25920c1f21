"""Undo: k steps then k undos give back the state right after create_task; redo sees the edit."""

from __future__ import annotations

import json

import pytest
from engine_helpers import make_agent, serving
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runs.engine import FunctionTool, NothingToUndoError, StepFailedError
from runs.engine.testing import Fault, Match, Reply, Rule, ToolCallSpec


def count(n: int) -> int:
    """Return n."""
    return n


LOOP_RULES = [
    # keep calling tools until five results are in, then answer
    *[
        Rule(
            match=Match(tool_results_since_user=i),
            reply=Reply(tool_calls=[ToolCallSpec(name="count", arguments={"n": i})]),
        )
        for i in range(5)
    ],
    Rule(match=Match(tool_results_since_user=5), reply=Reply(text="five")),
]


def _snapshot(agent, task_id):  # type: ignore[no-untyped-def]
    state = agent.get_task_state(task_id)
    return (
        [m.model_dump() for m in state.task.memory.get_all()],
        json.loads(json.dumps(state.task.extra_state)),
        [s.model_dump() for s in state.step_queue],
        len(state.completed_steps),
        state.status,
    )


@pytest.fixture(scope="module")
def loop_server():  # type: ignore[no-untyped-def]
    with serving(*LOOP_RULES) as server:
        yield server


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    k=st.integers(min_value=1, max_value=6),
    approve=st.booleans(),
    history=st.booleans(),
)
def test_k_steps_then_k_undos_restore_the_start(
    loop_server, k: int, approve: bool, history: bool
) -> None:  # type: ignore[no-untyped-def]
    agent, _ = make_agent(loop_server, tools=[FunctionTool.from_defaults(count)])
    if history:
        agent.chat("warm up")  # the agent has an earlier conversation
    task = agent.create_task("count to five", approve_tool_calls=approve)
    start = _snapshot(agent, task.task_id)
    ran = 0
    for _ in range(k):
        output = agent.run_step(task.task_id)
        ran += 1
        if output.is_last:
            agent.finalize_response(task.task_id)
            break
    memory_after_run = agent.chat_history
    for _ in range(ran):
        agent.undo_step(task.task_id)
    assert _snapshot(agent, task.task_id) == start
    with pytest.raises(NothingToUndoError):
        agent.undo_step(task.task_id)
    if ran and memory_after_run != agent.chat_history:
        # undoing a finalized task gives the agent its memory from before the task
        assert len(agent.chat_history) == agent.get_task(task.task_id).history_length


def test_undo_then_redo_with_an_edited_input_changes_what_the_model_is_sent() -> None:
    rules = [
        Rule(match=Match(last_user_contains="Paris"), reply=Reply(text="Paris it is.")),
        Rule(match=Match(last_user_contains="Rome"), reply=Reply(text="Rome it is.")),
    ]
    with serving(*rules) as server:
        agent, recorder = make_agent(server)
        task = agent.create_task("Tell me about Paris")
        assert agent.run_step(task.task_id).output.response == "Paris it is."
        undone = agent.undo_step(task.task_id)
        assert undone.input == "Tell me about Paris"
        agent.update_step_input(task.task_id, undone.step_id, "Tell me about Rome")
        redo = agent.run_step(task.task_id)
        first, second = server.requests[0].messages, server.requests[1].messages
    assert redo.output.response == "Rome it is."
    assert first[-1]["content"] == "Tell me about Paris"
    assert second[-1]["content"] == "Tell me about Rome"
    assert all(m["content"] != "Tell me about Paris" for m in second)
    assert recorder.of("step_undone")[0].step_id == undone.step_id
    assert recorder.of("step_input_edited")[0].input == "Tell me about Rome"  # type: ignore[union-attr]


def test_undo_drops_the_steps_the_undone_step_queued() -> None:
    with serving(*LOOP_RULES) as server:
        agent, recorder = make_agent(server, tools=[FunctionTool.from_defaults(count)])
        task = agent.create_task("count")
        output = agent.run_step(task.task_id)
        queued = output.next_steps[0].step_id
        agent.undo_step(task.task_id)
        upcoming = agent.get_upcoming_steps(task.task_id)
    assert [s.step_id for s in upcoming] == [output.task_step.step_id]
    assert recorder.of("step_undone")[0].dropped_steps == [queued]  # type: ignore[union-attr]


def _producer_sees_the_queued_step(agent, task_id: str) -> None:  # type: ignore[no-untyped-def]
    """The completed step's next_steps hold the queued step itself, as a database's rows do."""
    state = agent.get_task_state(task_id)
    queued = state.step_queue[0]
    agent.update_step_input(task_id, queued.step_id, "count differently")
    state = agent.get_task_state(task_id)
    produced = state.completed_steps[-1].next_steps
    assert [s.model_dump() for s in produced] == [state.step_queue[0].model_dump()]
    assert produced[0].input == "count differently"


def test_after_an_undo_a_queued_step_and_its_producers_next_steps_are_one_step() -> (
    None
):
    with serving(*LOOP_RULES) as server:
        agent, _ = make_agent(server, tools=[FunctionTool.from_defaults(count)])
        task = agent.create_task("count")
        agent.run_step(task.task_id)
        agent.run_step(task.task_id)
        agent.undo_step(
            task.task_id
        )  # the second step is queued again (a checkpoint's copy)
        _producer_sees_the_queued_step(agent, task.task_id)


def test_after_a_failed_step_a_queued_step_and_its_producers_next_steps_are_one_step() -> (
    None
):
    rules = [
        Rule(
            match=Match(tool_results_since_user=0),
            reply=Reply(tool_calls=[ToolCallSpec(name="count", arguments={"n": 0})]),
        ),
        Rule(
            match=Match(tool_results_since_user=1), fault=Fault(status=400), max_uses=1
        ),
        Rule(match=Match(tool_results_since_user=1), reply=Reply(text="one")),
    ]
    with serving(*rules) as server:
        agent, _ = make_agent(server, tools=[FunctionTool.from_defaults(count)])
        task = agent.create_task("count")
        agent.run_step(task.task_id)
        with pytest.raises(StepFailedError):
            agent.run_step(task.task_id)  # the queue goes back to the checkpoint's copy
        _producer_sees_the_queued_step(agent, task.task_id)
