"""A workflow under the AgentRunner: one step per agent turn, undo of a handoff, approvals, answers as input."""

from __future__ import annotations

import pytest
from engine_helpers import Recorder, llm_for, serving
from workflow_helpers import collect, team, team_rules

from runs.engine import (
    AgentRunner,
    AgentWorkflow,
    Context,
    FunctionAgent,
    HumanResponseEvent,
    InputRequiredEvent,
    StepFailedError,
    StepKind,
    ToolCallResult,
)
from runs.engine.testing import Match, Reply, Rule, ToolCallSpec
from runs.engine.workflow.run_state import WorkflowRunState


def _agent_of(runner: AgentRunner, task_id: str) -> str:
    state = runner.state_store  # in-memory: the live task
    return WorkflowRunState.of(state._tasks[task_id].task).current_agent  # type: ignore[attr-defined]


async def test_each_agent_turn_is_one_step_and_undoing_a_handoff_returns_control() -> (
    None
):
    with serving(*team_rules()) as server:
        recorder = Recorder()
        runner = AgentRunner(team(server).worker, on_event=recorder)
        task = await runner.acreate_task("Write a report on Lagos")
        agents = []
        for _ in range(2):
            await runner.arun_step(task.task_id)
            agents.append(_agent_of(runner, task.task_id))
        assert agents == ["researcher", "writer"]  # turn 2 was the researcher's handoff
        assert [e.type for e in recorder.events].count("step_completed") == 2
        undone = await runner.aundo_step(task.task_id)
        assert _agent_of(runner, task.task_id) == "researcher"
        requests_before = len(server.requests)
        again = await runner.arun_step(task.task_id)
        assert again.task_step.step_id == undone.step_id
        assert _agent_of(runner, task.task_id) == "writer"
        assert len(server.requests) == requests_before + 1
        while not (await runner.arun_step(task.task_id)).is_last:
            pass
        response = await runner.afinalize_response(task.task_id)
    assert response.response == "Reviewed: Lagos has 15M people."
    # state changes per step are in the stream, undo restored the state with the rest
    assert [sorted(e.changes) for e in recorder.of("state_changed")] == [
        ["notes"],
        ["report"],
    ]


async def test_approval_edit_and_reject_in_a_workflow() -> None:
    def lookup(city: str) -> str:
        """Population of a city."""
        return f"{city}: 15M"

    rules = [
        Rule(
            match=Match(tool_results_since_user=0),
            reply=Reply(
                tool_calls=[
                    ToolCallSpec(name="lookup", arguments={"city": "Lagos"}, id="c1"),
                    ToolCallSpec(name="lookup", arguments={"city": "Paris"}, id="c2"),
                ]
            ),
        ),
        Rule(match=Match(tool_results_since_user=2), reply=Reply(text="done")),
    ]
    with serving(*rules) as server:
        workflow = AgentWorkflow(
            [FunctionAgent(name="a", tools=[lookup], llm=llm_for(server))]
        )
        handler = workflow.run(user_msg="Cities?", approve_tool_calls=True)
        async for event in handler.stream_events():
            if event.type == "step_created" and event.kind is StepKind.TOOL_CALLS:
                break
        with pytest.raises(ValueError, match="do not fit its schema"):
            await handler.ctx.approve_tool_call("c1", {"town": "Abuja"})
        await handler.ctx.approve_tool_call("c1", {"city": "Abuja"})
        await handler.ctx.reject_tool_call("c2", "not needed")
        events, result = await collect(handler)
        sent = [m for m in server.requests[-1].messages if m["role"] == "tool"]
    assert result.response.content == "done"
    assert [m["content"] for m in sent] == [
        "Abuja: 15M",
        "rejected by user: not needed",
    ]
    assert {e.tool_id: e.tool_kwargs for e in events if isinstance(e, ToolCallResult)}[
        "c1"
    ] == {"city": "Abuja"}


async def test_an_answer_is_the_input_of_a_human_input_step() -> None:
    async def confirm(ctx: Context, plan: str) -> str:
        """Ask the person to confirm a plan."""
        answer = await ctx.wait_for_event(
            HumanResponseEvent, waiter_event=InputRequiredEvent(prefix=f"OK to {plan}?")
        )
        return f"person said {answer.response}"

    rules = [
        Rule(
            match=Match(tool_results_since_user=0),
            reply=Reply(
                tool_calls=[ToolCallSpec(name="confirm", arguments={"plan": "go"})]
            ),
        ),
        Rule(match=Match(tool_results_since_user=1), reply=Reply(text="confirmed")),
    ]
    with serving(*rules) as server:
        recorder = Recorder()
        workflow = AgentWorkflow(
            [FunctionAgent(name="a", tools=[confirm], llm=llm_for(server))]
        )
        runner = AgentRunner(workflow.worker, on_event=recorder)
        task = await runner.acreate_task("Plan")
        paused = await runner.arun_step(task.task_id)
        (ask,) = paused.next_steps
        assert ask.kind is StepKind.HUMAN_INPUT and ask.input is None
        assert [c.tool_name for c in ask.tool_calls or []] == ["confirm"]
        assert paused.output.response == "Waiting for the person: OK to go?"
        with pytest.raises(StepFailedError, match="needs an answer"):
            await runner.arun_step(task.task_id)  # no answer yet: refused, nothing lost
        await runner.aupdate_step_input(task.task_id, ask.step_id, "yes")
        await runner.arun_step(task.task_id)
        final = await runner.arun_step(task.task_id)
    assert final.is_last and final.output.response == "confirmed"
    assert [e.response for e in recorder.of("human_response")] == ["yes"]
    assert [e.tool_output.content for e in recorder.of("tool_call_result")] == [
        "person said yes"
    ]


async def test_a_handoff_waiting_for_approval_can_be_edited_to_another_agent() -> None:
    with serving(*team_rules()) as server:
        runner = AgentRunner(team(server).worker, approve_tool_calls=True)
        task = await runner.acreate_task("Write a report on Lagos")
        await runner.arun_step(task.task_id)  # record_notes waits for approval
        await runner.arun_step(task.task_id)  # ... approved and run
        proposed = await runner.arun_step(
            task.task_id
        )  # the handoff waits for approval
        (approval,) = proposed.next_steps
        (call,) = approval.tool_calls or []
        edited = {"to_agent": "writer", "reason": "edited by a person"}
        with pytest.raises(ValueError, match="do not fit its schema"):
            await runner.aapprove_tool_call(
                task.task_id, approval.step_id, call.tool_id, {"to": "writer"}
            )
        await runner.aapprove_tool_call(
            task.task_id, approval.step_id, call.tool_id, edited
        )
        await runner.arun_step(task.task_id)
        assert _agent_of(runner, task.task_id) == "writer"
