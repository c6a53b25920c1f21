"""The runner's API as the seeds fix it: signatures, return types, callbacks, verbose, streamed steps, errors."""

from __future__ import annotations

import inspect
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from engine_helpers import (
    SEED_QUESTION,
    arithmetic_tools,
    llm_for,
    make_agent,
    seed_rules,
    serving,
)

import runs.engine
from runs.engine import (
    LLM,
    AgentChatResponse,
    AgentError,
    AgentRunner,
    BaseCallbackHandler,
    BaseTool,
    CallbackManager,
    ChatMessage,
    ChatResponse,
    FunctionCallingAgentWorker,
    LLMCompilerAgentWorker,
    LLMError,
    LLMMetadata,
    NoCompletedStepError,
    StepFailedError,
    StreamingAgentChatResponse,
    Task,
    TaskNotDoneError,
    TaskState,
    UnknownTaskError,
)
from runs.engine.testing import Match, Reply, Rule, Timing

SEED_RUNNER_PARAMETERS = [
    "agent_worker",
    "chat_history",
    "state",
    "memory",
    "llm",
    "callback_manager",
    "init_task_state_kwargs",
    "delete_task_on_finish",
    "default_tool_choice",
    "verbose",
]


def test_runner_takes_the_seeds_parameters_in_order() -> None:
    parameters = inspect.signature(AgentRunner.__init__).parameters
    positional = [
        p.name for p in parameters.values() if p.kind is p.POSITIONAL_OR_KEYWORD
    ][1:]
    keyword_only = {p.name for p in parameters.values() if p.kind is p.KEYWORD_ONLY}
    assert positional == SEED_RUNNER_PARAMETERS
    # ours, beyond the seed: all keyword-only
    assert keyword_only == {
        "state_store",
        "on_event",
        "approve_tool_calls",
        "tool_output_chars",
    }
    with serving(*seed_rules()) as server:
        worker = FunctionCallingAgentWorker.from_tools(
            arithmetic_tools(), llm=llm_for(server)
        )
        history = [ChatMessage.user("earlier"), ChatMessage.assistant("noted")]
        agent = AgentRunner(
            worker, history
        )  # chat_history is the second positional parameter
        assert [m.text for m in agent.chat_history] == ["earlier", "noted"]
        agent.chat(SEED_QUESTION)
        assert server.requests[0].messages[0]["content"] == "earlier"
        with pytest.raises(ValueError, match="once"):
            AgentRunner(
                worker,
                state=runs.engine.InMemoryStateStore(),
                state_store=runs.engine.InMemoryStateStore(),
            )


def test_tasks_are_listed_as_tasks_and_states_separately() -> None:
    with serving(*seed_rules()) as server:
        agent, _ = make_agent(server)
        done = agent.create_task(SEED_QUESTION)
        while not agent.run_step(done.task_id).is_last:
            pass
        pending = agent.create_task(SEED_QUESTION)
        tasks = agent.list_tasks()
        assert all(isinstance(t, Task) for t in tasks)
        assert [t.task_id for t in tasks] == [done.task_id, pending.task_id]
        assert [t.task_id for t in agent.get_completed_tasks()] == [done.task_id]
        states = agent.list_task_states()
        assert all(isinstance(s, TaskState) for s in states) and [
            s.is_done for s in states
        ] == [True, False]


def test_from_llm_builds_a_function_calling_runner_and_passes_kwargs_on(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with serving(*seed_rules()) as server:
        agent = AgentRunner.from_llm(
            tools=arithmetic_tools(),
            llm=llm_for(server),
            system_prompt="Be exact.",
            verbose=True,
            delete_task_on_finish=True,
        )
        assert (
            isinstance(agent.agent_worker, FunctionCallingAgentWorker)
            and agent.delete_task_on_finish
        )
        response = agent.chat(SEED_QUESTION)
        assert server.requests[0].messages[0] == {
            "role": "system",
            "content": "Be exact.",
        }
    assert "405" in response.response
    assert "Calling function: add" in capsys.readouterr().out


def test_delete_task_on_finish_drops_the_task_and_keeps_the_conversation() -> None:
    with serving(*seed_rules()) as server:
        agent, recorder = make_agent(server, delete_task_on_finish=True)
        agent.chat(SEED_QUESTION)
        assert agent.list_tasks() == []
        assert recorder.types()[-2:] == ["task_completed", "task_deleted"]
        assert [m.role.value for m in agent.chat_history][0] == "user" and len(
            agent.chat_history
        ) == 6


def test_tool_choice_applies_to_the_first_step_only() -> None:
    with serving(*seed_rules()) as server:
        agent, _ = make_agent(server)
        agent.chat(SEED_QUESTION, tool_choice="multiply")
        assert server.requests[0].body["tool_choice"] == {
            "type": "function",
            "function": {"name": "multiply"},
        }
        assert [r.body["tool_choice"] for r in server.requests[1:]] == ["auto", "auto"]
        server.clear_requests()
        forced, _ = make_agent(server, default_tool_choice="required")
        forced.chat(SEED_QUESTION)
        assert server.requests[0].body["tool_choice"] == "required"


class Spans(BaseCallbackHandler):
    def __init__(self) -> None:
        self.open: dict[str, str] = {}
        self.closed: list[tuple[str, dict[str, Any]]] = []

    def on_event_start(
        self,
        event_type: Any,
        payload: dict[str, Any] | None = None,
        event_id: str = "",
        parent_id: str = "",
        **kwargs: Any,
    ) -> str:
        self.open[event_id] = event_type
        return event_id

    def on_event_end(
        self,
        event_type: Any,
        payload: dict[str, Any] | None = None,
        event_id: str = "",
        **kwargs: Any,
    ) -> None:
        assert self.open.pop(event_id) == event_type  # every end pairs with its start
        self.closed.append((event_type, payload or {}))


def test_callback_manager_hears_steps_model_calls_and_tool_calls() -> None:
    with serving(*seed_rules()) as server:
        spans = Spans()
        manager = CallbackManager([spans])
        worker = FunctionCallingAgentWorker.from_tools(
            arithmetic_tools(), llm=llm_for(server)
        )
        agent = AgentRunner(worker, callback_manager=manager)
        assert worker.callback_manager is manager
        agent.chat(SEED_QUESTION)
    kinds = [kind for kind, _ in spans.closed]
    assert (
        kinds.count("agent_step") == 3
        and kinds.count("llm") == 3
        and kinds.count("function_call") == 2
    )
    outputs = [
        payload["function_call_response"]
        for kind, payload in spans.closed
        if kind == "function_call"
    ]
    assert outputs == ["363", "405"] and spans.open == {}


def test_a_workers_own_callback_manager_is_the_runners() -> None:
    with serving(*seed_rules()) as server:
        spans = Spans()
        worker = FunctionCallingAgentWorker.from_tools(
            arithmetic_tools(),
            llm=llm_for(server),
            callback_manager=CallbackManager([spans]),
        )
        AgentRunner(worker).chat(SEED_QUESTION)
        assert len(spans.closed) == 8
        later = Spans()
        worker.set_callback_manager(CallbackManager([later]))
        AgentRunner(worker).chat(SEED_QUESTION)
        assert len(later.closed) == 8
        compiler = LLMCompilerAgentWorker(
            arithmetic_tools(), llm_for(server), CallbackManager([later]), True
        )
        assert compiler.callback_manager.handlers == [later] and compiler.verbose


def test_verbose_prints_thoughts_tool_calls_and_results(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with serving(*seed_rules()) as server:
        worker = FunctionCallingAgentWorker.from_tools(
            arithmetic_tools(), llm=llm_for(server), verbose=True
        )
        AgentRunner(worker).chat(SEED_QUESTION)
    out = capsys.readouterr().out
    assert 'Calling function: multiply with args: {"a": 121, "b": 3}' in out
    assert (
        "=== Function Output ===\n363" in out and "=== Function Output ===\n405" in out
    )
    assert "(121 * 3) + 42 = 405" in out
    assert (
        "> Running step" not in out
    )  # the runner's own lines are the runner's verbose


def test_a_verbose_runner_prints_each_step(capsys: pytest.CaptureFixture[str]) -> None:
    with serving(*seed_rules()) as server:
        worker = FunctionCallingAgentWorker.from_tools(
            arithmetic_tools(), llm=llm_for(server)
        )
        AgentRunner(worker, verbose=True).chat(SEED_QUESTION)
    out = capsys.readouterr().out
    assert out.count("> Running step") == 3
    assert f"Step input: {SEED_QUESTION}" in out and "Calling function" not in out


def _slow_answer() -> list[Rule]:
    rules = seed_rules()
    rules[-1] = rules[-1].model_copy(update={"timing": Timing(token_delay_s=0.05)})
    return rules


def test_stream_step_streams_the_answer_while_the_step_runs() -> None:
    with serving(*_slow_answer()) as server:
        agent, recorder = make_agent(server)
        task = agent.create_task(SEED_QUESTION)
        step_output = agent.stream_step(task.task_id)
        while not step_output.is_last:
            step_output = agent.stream_step(task.task_id)
        stream = step_output.output
        assert isinstance(stream, StreamingAgentChatResponse)
        arrivals, pieces = [], []
        for delta in stream.response_gen:
            arrivals.append(time.time())
            pieces.append(delta)
        response = agent.finalize_response(task.task_id, step_output)
    completed_at = recorder.of("step_completed")[-1].at
    assert (
        len(pieces) > 3 and arrivals[0] < completed_at - 0.1
    )  # tokens came while the step ran
    assert (
        response is stream
        and response.response == "".join(pieces) == "(121 * 3) + 42 = 405"
    )
    assert [s.content for s in response.sources] == ["363", "405"]
    # the stored output is a plain response, the same as run_step's
    stored = agent.get_task_output(task.task_id).output
    assert type(stored) is AgentChatResponse and stored.response == response.response


async def test_astream_step_returns_before_the_step_ends() -> None:
    with serving(*_slow_answer()) as server:
        agent, recorder = make_agent(server)
        task = await agent.acreate_task(SEED_QUESTION)
        for _ in range(2):
            assert not (await agent.astream_step(task.task_id)).is_last
        step_output = await agent.astream_step(task.task_id)
        assert (
            step_output.is_last and recorder.of("step_completed")[-1].is_last is False
        )  # still running
        text = "".join([d async for d in step_output.output.async_response_gen()])  # type: ignore[attr-defined]
        response = await agent.afinalize_response(task.task_id, step_output=step_output)
    assert text == response.response == "(121 * 3) + 42 = 405"


def test_finalize_response_uses_the_given_step_output() -> None:
    with serving(*seed_rules()) as server:
        agent, _ = make_agent(server)
        task = agent.create_task(SEED_QUESTION)
        first = agent.run_step(task.task_id)
        with pytest.raises(TaskNotDoneError):
            agent.finalize_response(task.task_id, step_output=first)
        out = first
        while not out.is_last:
            out = agent.run_step(task.task_id)
        given = out.model_copy(
            update={"output": AgentChatResponse(response="as given")}
        )
        assert (
            agent.finalize_response(task.task_id, step_output=given).response
            == "as given"
        )


def test_errors_are_agent_errors_and_value_errors_where_the_seed_raises_value_error() -> (
    None
):
    with serving(*seed_rules()) as server:
        agent, _ = make_agent(server)
        with pytest.raises(UnknownTaskError) as unknown:
            agent.get_task("nope")
        assert isinstance(unknown.value, KeyError) and isinstance(
            unknown.value, ValueError
        )
        task = agent.create_task(SEED_QUESTION)
        with pytest.raises(NoCompletedStepError) as no_step:
            agent.get_task_output(task.task_id)
        with pytest.raises(TaskNotDoneError) as not_done:
            agent.finalize_response(task.task_id)
    for error in (no_step.value, not_done.value):
        assert isinstance(error, AgentError) and isinstance(error, ValueError)
    assert runs.engine.PlanError.__module__.startswith("runs.engine")


class SilentLLM(LLM):
    """A model that answers with an empty stream."""

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="silent")

    async def astream_chat(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[BaseTool] | None = None,
        stop: Sequence[str] | None = None,
        **options: Any,
    ) -> AsyncIterator[ChatResponse]:
        return
        yield  # an async generator that yields nothing


def test_a_model_that_sends_nothing_is_an_llm_error() -> None:
    agent = AgentRunner(
        FunctionCallingAgentWorker.from_tools(arithmetic_tools(), llm=SilentLLM())
    )
    with pytest.raises(StepFailedError) as failed:
        agent.chat(SEED_QUESTION)
    assert isinstance(failed.value.__cause__, LLMError)
    with pytest.raises(LLMError):
        SilentLLM().chat([ChatMessage.user("hi")])


def test_init_task_state_kwargs_seed_every_task() -> None:
    with serving(Rule(match=Match(), reply=Reply(text="ok"))) as server:
        agent, _ = make_agent(server, init_task_state_kwargs={"topic": "sales"})
        task = agent.create_task("hi")
        assert task.extra_state["topic"] == "sales"
        with pytest.raises(ValueError, match="extra_state"):
            agent.create_task("hi", extra_state={"x": 1})
