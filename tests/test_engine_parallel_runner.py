"""ParallelAgentRunner with the parallel research worker, through the real openai SDK."""

from __future__ import annotations

import asyncio

import pytest
from engine_helpers import Recorder, llm_for, serving

from runs.engine import (
    AgentRunner,
    InMemoryStateStore,
    ParallelAgentRunner,
    ParallelResearchWorker,
    StepFailedError,
    StepNotEditableError,
    StepNotReadyError,
    StepStatus,
    TaskState,
)
from runs.engine.testing import Fault, Match, Reply, Rule, ScriptedServer, Timing
from runs.engine.workers.research import answer_key, parse_subquestions

QUESTION = "How do the four seasons differ?"
SUBS = ["winter?", "spring?", "summer?", "autumn?"]


def research_rules(latency: float = 0.3, **answer_rule: object) -> list[Rule]:
    split = Rule(
        name="split",
        match=Match(system_contains="You plan research"),
        reply=Reply(text="\n".join(f"{i}. {q}" for i, q in enumerate(SUBS, 1))),
    )
    answers = [
        Rule(
            name=f"answer-{q}",
            match=Match(system_contains="You answer one", last_user_contains=q),
            reply=Reply(text=f"{q[:-1]} is a season"),
            timing=Timing(latency_s=latency),
            **answer_rule,  # type: ignore[arg-type]
        )
        for q in SUBS
    ]
    synthesis = Rule(
        name="synthesis",
        match=Match(system_contains="final answer"),
        reply=Reply(text="Four seasons, four findings."),
    )
    return [split, *answers, synthesis]


def make(
    server: ScriptedServer, **runner: object
) -> tuple[ParallelAgentRunner, Recorder]:
    recorder = Recorder()
    worker = ParallelResearchWorker.from_tools(llm=llm_for(server))
    return ParallelAgentRunner(worker, on_event=recorder, **runner), recorder  # type: ignore[arg-type]


def branch_ids(state: TaskState) -> list[str]:
    return [
        s.step_id for s in state.step_queue if s.step_state.get("phase") == "answer"
    ]


def test_subquestions_are_parsed_from_numbered_or_plain_lines() -> None:
    assert parse_subquestions("1. a?\n2) b?\n- c?\n\n", 8) == ["a?", "b?", "c?"]
    assert parse_subquestions("a?\nb?\na?", 8) == ["a?", "b?"]
    assert parse_subquestions("1. a\n2. b\n3. c", 2) == ["a", "b"]


async def test_four_ready_steps_run_at_once_then_the_synthesis_joins_them() -> None:
    with serving(*research_rules()) as server:
        agent, recorder = make(server)
        task = await agent.acreate_task(QUESTION)
        split = await agent.arun_step(task.task_id)
        state = await agent.aget_task_state(task.task_id)
        branches = branch_ids(state)
        synthesis = next(s for s in state.step_queue if s.step_id not in branches)
        assert len(split.next_steps) == 5 and set(synthesis.prev_steps) >= set(branches)
        with pytest.raises(StepNotReadyError, match="waits for"):
            await agent.arun_step(task.task_id, step=synthesis.step_id)
        outputs = await agent.arun_steps_in_queue(task.task_id)
        assert [o.task_step.step_id for o in outputs] == branches
        # the answers were read; the server notes each one's end just after writing it
        log = await asyncio.to_thread(server.wait_for_requests, 5, finished=True)
        answer_requests = log[1:5]
        # all four requests were in flight together: each arrived before any was answered
        assert max(r.t_received for r in answer_requests) < min(
            r.t_done or 0 for r in answer_requests
        )
        (last,) = await agent.arun_steps_in_queue(task.task_id)
        assert last.is_last and last.task_step.step_id == synthesis.step_id
        response = await agent.afinalize_response(task.task_id)
    assert response.response == "Four seasons, four findings."
    findings = server.requests[-1].messages[-1]["content"]
    assert all(f"{q}: {q[:-1]} is a season" in findings for q in SUBS)
    assert [m.text for m in agent.chat_history] == [QUESTION, response.response]
    assert len(recorder.of("step_started")) == 6


async def test_undoing_one_branch_keeps_the_others() -> None:
    with serving(*research_rules(latency=0)) as server:
        agent, recorder = make(server)
        task = await agent.acreate_task(QUESTION)
        await agent.arun_step(task.task_id)
        await agent.arun_steps_in_queue(task.task_id)
        before = await agent.aget_task_state(task.task_id)
        branches = [o.task_step.step_id for o in before.completed_steps[1:]]
        undone = branches[1]
        await agent.aundo_step(task.task_id, undone)
        state = await agent.aget_task_state(task.task_id)
        assert [o.task_step.step_id for o in state.completed_steps[1:]] == [
            b for b in branches if b != undone
        ]
        assert answer_key(undone) not in state.task.extra_state
        assert all(
            answer_key(b) in state.task.extra_state for b in branches if b != undone
        )
        assert [s.step_id for s in state.step_queue][0] == undone
        assert recorder.of("step_undone")[-1].dropped_steps == []
        # the synthesis waits for the branch again; editing the branch and running it lets it go
        with pytest.raises(StepNotReadyError):
            await agent.arun_step(task.task_id, step=state.step_queue[-1].step_id)
        await agent.aupdate_step_input(task.task_id, undone, "winter?")
        (redone,) = await agent.arun_steps_in_queue(task.task_id)
        assert redone.output.response == "winter is a season"
        (last,) = await agent.arun_steps_in_queue(task.task_id)
        assert last.is_last


async def test_the_split_cannot_be_undone_while_its_branches_have_run() -> None:
    with serving(*research_rules(latency=0)) as server:
        agent, _ = make(server)
        task = await agent.acreate_task(QUESTION)
        split = await agent.arun_step(task.task_id)
        await agent.arun_step(task.task_id)  # one branch
        with pytest.raises(StepNotEditableError, match="undo them first"):
            await agent.aundo_step(task.task_id, split.task_step.step_id)
        await agent.aundo_step(task.task_id)  # the newest: the branch
        await agent.aundo_step(task.task_id)  # now the split, with its queued steps
        state = await agent.aget_task_state(task.task_id)
        assert len(state.step_queue) == 1 and not state.completed_steps
        assert state.task.extra_state.get("question") is None


async def test_a_pending_step_can_be_edited_while_others_run() -> None:
    with serving(*research_rules(latency=0.4)) as server:
        agent, _ = make(server)
        task = await agent.acreate_task(QUESTION)
        await agent.arun_step(task.task_id)
        state = await agent.aget_task_state(task.task_id)
        first, *others = branch_ids(state)
        running = asyncio.ensure_future(agent.arun_step(task.task_id, step=first))
        await asyncio.to_thread(server.wait_for_requests, 2)
        with pytest.raises(StepNotEditableError, match="running"):
            await agent.aupdate_step_input(task.task_id, first, "changed")
        await agent.aupdate_step_input(task.task_id, others[0], "autumn?")
        await running
        outputs = await agent.arun_steps_in_queue(task.task_id)
    assert [o.output.response for o in outputs] == [
        "autumn is a season",
        "summer is a season",
        "autumn is a season",
    ]


async def test_a_failed_branch_stays_queued_and_the_others_are_kept() -> None:
    rules = research_rules(latency=0)
    flaky = Rule(
        name="flaky",
        match=Match(system_contains="You answer one", last_user_contains="summer"),
        fault=Fault(status=500),
        max_uses=1,
    )
    with serving(flaky, *rules) as server:
        agent, recorder = make(server)
        task = await agent.acreate_task(QUESTION)
        await agent.arun_step(task.task_id)
        with pytest.raises(StepFailedError):
            await agent.arun_steps_in_queue(task.task_id)
        state = await agent.aget_task_state(task.task_id)
        assert len(state.completed_steps) == 4  # the split and three branches
        (failed,) = [
            s for s in state.step_queue if s.step_id != state.step_queue[-1].step_id
        ]
        assert state.step_status[failed.step_id] is StepStatus.FAILED
        assert recorder.of("step_failed")[-1].step_id == failed.step_id
        (again,) = await agent.arun_steps_in_queue(task.task_id)
        assert again.output.response == "summer is a season"


def test_chat_runs_each_round_concurrently_and_a_plain_runner_runs_them_in_turn() -> (
    None
):
    with serving(*research_rules(latency=0)) as server:
        agent, _ = make(server)
        assert str(agent.chat(QUESTION)) == "Four seasons, four findings."
        assert agent.run_steps_in_queue  # the seed's sync name exists
        sequential = AgentRunner(ParallelResearchWorker.from_tools(llm=llm_for(server)))
        assert str(sequential.chat(QUESTION)) == "Four seasons, four findings."
        assert isinstance(agent.state, InMemoryStateStore)
