"""Bad input: each gives a clear exception or an error observation, and no corrupted state."""

from __future__ import annotations

import pytest
from engine_helpers import SEED_QUESTION, make_agent, seed_rules, serving

from runs.engine import (
    FunctionTool,
    NothingToUndoError,
    StepFailedError,
    StepNotEditableError,
    TaskFinishedError,
    TaskNotDoneError,
    UnknownStepError,
    UnknownTaskError,
)
from runs.engine.llms import Transport
from runs.engine.testing import Fault, Match, Reply, Rule, Script, ToolCallSpec


def explode(x: int) -> int:
    """Always fails."""
    raise RuntimeError(f"disk on fire at {x}")


def echo(text: str) -> str:
    """Echo text."""
    return text


def test_unknown_ids() -> None:
    with serving(*seed_rules()) as server:
        agent, _ = make_agent(server)
        with pytest.raises(UnknownTaskError, match="no task with id 'nope'"):
            agent.run_step("nope")
        with pytest.raises(UnknownTaskError):
            agent.undo_step("nope")
        with pytest.raises(UnknownTaskError):
            agent.delete_task("nope")
        task = agent.create_task(SEED_QUESTION)
        with pytest.raises(UnknownStepError, match="no upcoming step with id 'zzz'"):
            agent.run_step(task.task_id, step="zzz")
        with pytest.raises(UnknownStepError):
            agent.update_step_input(task.task_id, "zzz", "hi")
        assert len(agent.get_upcoming_steps(task.task_id)) == 1


def test_finished_task_edited_step_and_nothing_to_undo() -> None:
    with serving(*seed_rules()) as server:
        agent, _ = make_agent(server)
        task = agent.create_task(SEED_QUESTION)
        with pytest.raises(NothingToUndoError):
            agent.undo_step(task.task_id)
        with pytest.raises(TaskNotDoneError, match="not done"):
            agent.finalize_response(task.task_id)
        first = agent.run_step(task.task_id)
        with pytest.raises(StepNotEditableError, match="already run"):
            agent.update_step_input(task.task_id, first.task_step.step_id, "changed")
        while not agent.run_step(task.task_id).is_last:
            pass
        with pytest.raises(TaskFinishedError):
            agent.run_step(task.task_id)
        agent.finalize_response(task.task_id)
        with pytest.raises(TaskFinishedError):
            agent.run_step(task.task_id)
        assert len(agent.get_completed_steps(task.task_id)) == 3


def _one_call(name: str, arguments: object) -> list[Rule]:
    return [
        Rule(
            match=Match(tool_results_since_user=0),
            reply=Reply(
                tool_calls=[ToolCallSpec(name=name, arguments=arguments, id="c1")]
            ),
        ),  # type: ignore[arg-type]
        Rule(match=Match(tool_results_since_user=1), reply=Reply(text="ok")),
    ]


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("explode", {"x": 3}, "Error: RuntimeError: disk on fire at 3"),
        (
            "teleport",
            {"to": "Mars"},
            "there is no tool named 'teleport'. Available tools: echo, explode",
        ),
        ("echo", '{"text": "unterminated', "not valid JSON"),
        ("echo", "[1, 2]", "must be a JSON object"),
        # deeper than the JSON decoder recurses: said to the model like any malformed JSON
        (
            "echo",
            '{"text": ' + "[" * 50_000 + "]" * 50_000 + "}",
            "nested more than 100 levels deep",
        ),
        # readable, but deeper than storing and showing it can go
        (
            "echo",
            '{"text": ' + "[" * 500 + "]" * 500 + "}",
            "nested more than 100 levels deep",
        ),
        ("echo", {"text": 5, "extra": 1}, "do not fit its schema"),
        ("echo", {}, "text: Field required"),
    ],
)
def test_tool_problems_become_error_observations(
    name: str, arguments: object, expected: str
) -> None:
    tools = [FunctionTool.from_defaults(echo), FunctionTool.from_defaults(explode)]
    with serving(*_one_call(name, arguments)) as server:
        agent, recorder = make_agent(server, tools=tools)
        response = agent.chat("go")
        sent = server.requests[-1].messages
    assert response.response == "ok"
    observation = next(m for m in sent if m["role"] == "tool")
    assert expected in observation["content"]
    result = recorder.of("tool_call_result")[0]
    assert result.tool_output.is_error  # type: ignore[union-attr]


def _failing_then_ok(fault: Fault, uses: int) -> list[Rule]:
    return [
        Rule(name="fault", fault=fault, max_uses=uses),
        Rule(name="ok", reply=Reply(text="recovered")),
    ]


@pytest.mark.parametrize(
    ("fault", "cause"),
    [
        (Fault(status=429, retry_after_s=0), "HTTP 429"),
        (Fault(status=500), "HTTP 500"),
        (Fault(hang_s=3), "timeout"),
        (Fault(cut_after_chunks=2), "cut off"),
    ],
)
def test_llm_failures_fail_the_step_with_the_cause_and_a_rerun_works(
    fault: Fault, cause: str, llm_transport: Transport
) -> None:
    # the client retries once; the fault answers twice, so the step fails, and the third request succeeds
    rules = _failing_then_ok(fault, uses=2)
    rules[1] = rules[1].model_copy(
        update={"reply": Reply(text="recovered after a long answer")}
    )
    if fault.cut_after_chunks is not None:
        rules[0] = rules[0].model_copy(
            update={"reply": Reply(text="this answer is cut off half way through")}
        )
    with serving(*rules) as server:
        from engine_helpers import Recorder, llm_for

        from runs.engine import AgentRunner, FunctionCallingAgentWorker

        recorder = Recorder()
        retries = 0 if fault.cut_after_chunks is not None else 1
        worker = FunctionCallingAgentWorker.from_tools(
            [],
            llm=llm_for(
                server, max_retries=retries, timeout=0.5, transport=llm_transport
            ),
        )
        agent = AgentRunner(worker, on_event=recorder)
        task = agent.create_task("hello")
        before = agent.get_task_state(task.task_id).model_dump()
        with pytest.raises(StepFailedError, match=cause):
            agent.run_step(task.task_id)
        assert agent.get_task_state(task.task_id).task.memory.get_all() == []
        failed = recorder.of("step_failed")[0]
        assert cause in failed.error  # type: ignore[union-attr]
        if fault.cut_after_chunks is not None:
            server.load(
                Script(rules=[rules[1]])
            )  # without retries the fault still has a turn left
        output = agent.run_step(task.task_id)
        sent_count = len(server.requests)
    after = agent.get_task_state(task.task_id).model_dump()
    assert output.is_last and output.output.response == "recovered after a long answer"
    assert (
        after["step_queue"] == []
        and before["step_queue"][0]["step_id"] == output.task_step.step_id
    )
    assert sent_count >= 2


def test_max_function_calls_is_reported_not_silent() -> None:
    rules = [
        Rule(
            match=Match(has_tools=True),
            reply=Reply(
                tool_calls=[ToolCallSpec(name="echo", arguments={"text": "again"})]
            ),
        ),
        Rule(match=Match(has_tools=False), reply=Reply(text="stopping here")),
    ]
    with serving(*rules) as server:
        from engine_helpers import Recorder, llm_for

        from runs.engine import AgentRunner, FunctionCallingAgentWorker

        recorder = Recorder()
        worker = FunctionCallingAgentWorker.from_tools(
            [FunctionTool.from_defaults(echo)],
            llm=llm_for(server),
            max_function_calls=3,
        )
        response = AgentRunner(worker, on_event=recorder).chat("loop forever")
        last_request = server.requests[-1]
    results = recorder.of("tool_call_result")
    assert len(results) == 3
    assert response.response == "stopping here"
    assert (
        "tools" not in last_request.body
    )  # the model was asked to answer without tools
