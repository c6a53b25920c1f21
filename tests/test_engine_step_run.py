"""Both runners run a step by one routine (runs/engine/step_run.py): a failing step or branch
leaves the task as it was and waits to run again, and undo takes a step back the same way."""

from __future__ import annotations

import pytest
from engine_helpers import SEED_QUESTION, Recorder, arithmetic_tools, llm_for, serving

from runs.engine import (
    AgentRunner,
    FunctionCallingAgentWorker,
    ParallelAgentRunner,
    StepFailedError,
    StepStatus,
)
from runs.engine.testing import Fault, Match, Reply, Rule, ScriptedServer

RUNNERS = [AgentRunner, ParallelAgentRunner]


def make(
    runner_class: type[AgentRunner], server: ScriptedServer
) -> tuple[AgentRunner, Recorder]:
    recorder = Recorder()
    worker = FunctionCallingAgentWorker.from_tools(
        arithmetic_tools(), llm=llm_for(server)
    )
    return runner_class(worker, on_event=recorder), recorder


@pytest.mark.parametrize("runner_class", RUNNERS, ids=lambda c: c.__name__)
def test_a_failing_step_rolls_back_the_same_way_under_both_runners(
    runner_class: type[AgentRunner],
) -> None:
    rules = [
        Rule(name="refused", match=Match(), fault=Fault(status=400), max_uses=1),
        Rule(name="answer", match=Match(), reply=Reply(text="405")),
    ]
    with serving(*rules) as server:
        agent, recorder = make(runner_class, server)
        task = agent.create_task(SEED_QUESTION)
        before = agent.get_task_state(task.task_id)
        step_id = before.step_queue[0].step_id

        with pytest.raises(StepFailedError):
            agent.run_step(task.task_id)

        # the worker put the question into memory before the model refused: it is taken back
        after = agent.get_task_state(task.task_id)
        assert after.task.memory.get_all() == before.task.memory.get_all() == []
        assert after.task.extra_state == before.task.extra_state
        assert [s.step_id for s in after.step_queue] == [step_id]
        assert after.step_status == {step_id: StepStatus.FAILED}
        assert after.completed_steps == [] and after.checkpoints == []
        kinds = recorder.types()
        assert kinds[-1] == "step_failed" and "step_started" in kinds
        assert recorder.of("step_failed")[0].step_id == step_id  # type: ignore[attr-defined]

        # run again, the model sees the question once: nothing of the failed run stays
        output = agent.run_step(task.task_id)
        assert output.output.response == "405"
        users = [m for m in server.requests[1].messages if m["role"] == "user"]
        assert [m["content"] for m in users] == [SEED_QUESTION]
        assert agent.get_task_state(task.task_id).step_status == {}


@pytest.mark.parametrize("runner_class", RUNNERS, ids=lambda c: c.__name__)
def test_undo_step_names_a_step_under_both_runners(
    runner_class: type[AgentRunner],
) -> None:
    with serving(Rule(name="answer", match=Match(), reply=Reply(text="405"))) as server:
        agent, recorder = make(runner_class, server)
        task = agent.create_task(SEED_QUESTION)
        step_id = agent.get_task_state(task.task_id).step_queue[0].step_id
        agent.run_step(task.task_id)

        undone = agent.undo_step(task.task_id, step_id)

        state = agent.get_task_state(task.task_id)
        assert undone.step_id == step_id
        assert state.task.memory.get_all() == []
        assert [s.step_id for s in state.step_queue] == [step_id]
        assert state.completed_steps == [] and state.checkpoints == []
        assert recorder.types()[-1] == "step_undone"
