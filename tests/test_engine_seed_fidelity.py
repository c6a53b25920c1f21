"""Where the engine follows the seeds more closely than it did (issue 43, item 5).

Each test names one difference that was closed; docs/engine.md's Differences table lists those kept.
"""

from __future__ import annotations

import asyncio
import inspect
import typing
from typing import Any

import pytest
from engine_helpers import (
    SEED_QUESTION,
    Recorder,
    arithmetic_tools,
    llm_for,
    make_agent,
    seed_rules,
    serving,
)

from runs.engine import (
    LLM,
    AgentChatResponse,
    AgentOutput,
    AgentRunner,
    AgentStream,
    BaseAgentWorker,
    BaseCallbackHandler,
    CallbackManager,
    ChatMessage,
    ChatResponseMode,
    LLMCompilerAgentWorker,
    MultimodalReActAgentWorker,
    ParallelAgentRunner,
    StreamingAgentChatResponse,
    Task,
    TaskStep,
    TaskStepOutput,
    ToolOutput,
)
from runs.engine.events import AgentEvent, BaseEvent, StateChange, parse_event
from runs.engine.testing import Match, Reply, Rule
from runs.engine.workers.llm_compiler import parse_plan
from runs.engine.workers.llm_compiler.worker import tool_params


class Ends(BaseCallbackHandler):
    """Records the type of every span a callback manager closes, with the task it belongs to."""

    def __init__(self) -> None:
        self.ended: list[tuple[str, str]] = []

    def on_event_end(
        self,
        event_type: Any,
        payload: dict[str, Any] | None = None,
        event_id: str = "",
        **kwargs: Any,
    ) -> None:
        assert payload is not None
        self.ended.append((str(event_type), payload["event"].task_id))


def test_agent_output_prints_as_its_reply_text() -> None:
    said = AgentOutput(task_id="t", response=ChatMessage.assistant("405"))
    silent = AgentOutput(task_id="t", response=ChatMessage.assistant(None))
    assert (str(said), f"{said}", str(silent)) == ("405", "405", "")


class ProviderChunk:
    """Something a provider's SDK hands back, which JSON cannot hold."""

    def __str__(self) -> str:
        return "chunk 7"


def test_raw_takes_anything_and_travels_as_json_or_text() -> None:
    as_dict = AgentStream(task_id="t", delta="4", response="4", raw={"id": "c1"})
    as_object = AgentOutput(
        task_id="t", response=ChatMessage.assistant("405"), raw=ProviderChunk()
    )
    assert isinstance(as_object.raw, ProviderChunk)
    assert parse_event(as_dict.model_dump_json()) == as_dict
    assert parse_event(as_object.model_dump_json()).raw == "chunk 7"  # type: ignore[union-attr]


def test_every_event_class_says_what_it_means() -> None:
    union = typing.get_args(typing.get_args(AgentEvent)[0])
    classes = [BaseEvent, StateChange, *union]
    # 24, the two of an MCP server's question (elicitation), its progress and log messages
    assert len(union) == 28
    undocumented = [cls.__name__ for cls in classes if not cls.__doc__]
    assert undocumented == []


def test_create_task_forwards_its_callback_manager_to_that_task_alone() -> None:
    runner_ends, task_ends = Ends(), Ends()
    with serving(*seed_rules()) as server:
        agent, _ = make_agent(server, callback_manager=CallbackManager([runner_ends]))
        manager = CallbackManager([task_ends])
        task = agent.create_task(SEED_QUESTION, callback_manager=manager)
        assert agent.get_task(task.task_id).callback_manager is manager
        out = agent.run_step(task.task_id)
        while not out.is_last:
            out = agent.run_step(task.task_id)
        agent.finalize_response(task.task_id)
        other = agent.create_task(SEED_QUESTION)
        assert agent.get_task(other.task_id).callback_manager is agent.callback_manager
        agent.run_step(other.task_id)
    kinds = [kind for kind, _ in task_ends.ended]
    assert kinds.count("agent_step") == 3 and kinds.count("function_call") == 2
    assert {task_id for _, task_id in task_ends.ended} == {task.task_id}
    # the runner's own manager still hears every task
    assert {task_id for _, task_id in runner_ends.ended} == {
        task.task_id,
        other.task_id,
    }


class PortedWorker(BaseAgentWorker):
    """A worker written for LlamaIndex: its astream_step returns a stream it feeds itself."""

    def __init__(self, llm: LLM) -> None:
        self.llm = llm
        self.runs: list[str] = []

    def initialize_step(self, task: Task, **kwargs: Any) -> TaskStep:
        return TaskStep(task_id=task.task_id, input=task.input)

    async def arun_step(
        self, step: TaskStep, task: Task, **kwargs: Any
    ) -> TaskStepOutput:
        self.runs.append("arun_step")
        reply = await self.llm.achat([ChatMessage.user(step.input or "")])
        response = AgentChatResponse(response=reply.message.text)
        return TaskStepOutput(output=response, task_step=step, is_last=True)

    async def astream_step(
        self, step: TaskStep, task: Task, **kwargs: Any
    ) -> TaskStepOutput:
        self.runs.append("astream_step")
        stream = StreamingAgentChatResponse()

        async def feed() -> None:
            text = ""
            async for chunk in self.llm.astream_chat(
                [ChatMessage.user(step.input or "")]
            ):
                text += chunk.delta
                if chunk.delta:
                    stream.put_delta(chunk.delta)
            stream.finish(AgentChatResponse(response=text))

        stream.attach(asyncio.ensure_future(feed()))
        return TaskStepOutput(output=stream, task_step=step, is_last=True)


ANSWER = Rule(match=Match(), reply=Reply(text="the answer is four hundred and five"))


async def test_a_streaming_caller_runs_the_workers_own_astream_step() -> None:
    with serving(ANSWER) as server:
        worker = PortedWorker(llm_for(server))
        recorder = Recorder()
        agent = AgentRunner(worker, on_event=recorder)
        streamed = await agent.astream_chat(SEED_QUESTION)
        text = "".join([delta async for delta in streamed.async_response_gen()])
        task = await agent.acreate_task(SEED_QUESTION)
        waited = await agent.arun_step(task.task_id)
    assert worker.runs == ["astream_step", "arun_step"]
    assert text == ANSWER.reply.text == waited.output.response  # type: ignore[union-attr]
    deltas = [e for e in recorder.events if isinstance(e, AgentStream)]
    assert len(deltas) > 1 and deltas[-1].response == text
    completed = recorder.of("step_completed")[0]
    assert completed.output == text  # type: ignore[union-attr]
    states = await agent.alist_task_states()
    stored = states[0].completed_steps[0].output
    assert type(stored) is AgentChatResponse and stored.response == text


def test_run_steps_in_queue_streams_when_the_mode_says_so() -> None:
    with serving(ANSWER) as server:
        worker = PortedWorker(llm_for(server))
        agent = ParallelAgentRunner(worker)
        streamed = agent.create_task(SEED_QUESTION)
        [output] = agent.run_steps_in_queue(
            streamed.task_id, mode=ChatResponseMode.STREAM
        )
        waited = agent.create_task(SEED_QUESTION)
        agent.run_steps_in_queue(waited.task_id, mode="wait")
        with pytest.raises(ValueError, match="mode must be one of 'wait', 'stream'"):
            agent.run_steps_in_queue(agent.create_task("x").task_id, mode="fast")
    assert worker.runs == ["astream_step", "arun_step"]
    assert output.output.response == ANSWER.reply.text


class SourceKeepingWorker(PortedWorker):
    """Keeps its sources in ``task.extra_state["sources"]``, as LlamaIndex's workers do."""

    async def arun_step(
        self, step: TaskStep, task: Task, **kwargs: Any
    ) -> TaskStepOutput:
        output = await super().arun_step(step, task, **kwargs)
        looked_up = ToolOutput(content="405", tool_name="lookup")
        task.extra_state.setdefault("sources", []).append(looked_up.model_dump())
        return output


def test_finalize_response_returns_the_given_output_with_the_tasks_kept_sources() -> (
    None
):
    with serving(ANSWER) as server:
        agent = AgentRunner(SourceKeepingWorker(llm_for(server)))
        task = agent.create_task(SEED_QUESTION)
        last = agent.run_step(task.task_id)
        response = agent.finalize_response(task.task_id, step_output=last)
        again = agent.finalize_response(task.task_id)
    assert response is last.output
    assert [(s.tool_name, s.content) for s in response.sources] == [("lookup", "405")]
    assert again is not response and again.sources == response.sources


def test_the_multimodal_worker_takes_the_seeds_parameters_no_app_setting_among_them() -> (
    None
):
    parameters = list(inspect.signature(MultimodalReActAgentWorker).parameters)
    assert parameters == [
        "tools",
        "multi_modal_llm",
        "max_iterations",
        "react_chat_formatter",
        "output_parser",
        "callback_manager",
        "verbose",
        "tool_retriever",
    ]


PLAN = "1. multiply(121, 3)\n2. join()"
REPLAN = "3. add(363, 42)\n4. join()"
COMPILER_RULES = [
    # the replanner's prompt also asks for parallelizability: its rule comes first
    Rule(
        match=Match(system_contains="new round of an earlier plan"),
        reply=Reply(text=REPLAN),
    ),
    Rule(
        match=Match(system_contains="utmost parallelizability"), reply=Reply(text=PLAN)
    ),
    Rule(
        match=Match(last_user_contains=["Solve a question answering task", "363"]),
        reply=Reply(text="Thought: 42 is still to add\nAction: Replan(add 42 to 363)"),
    ),
]


async def test_llm_compiler_has_the_seeds_arun_llm_and_ajoin() -> None:
    worker_class = LLMCompilerAgentWorker
    assert list(inspect.signature(worker_class.arun_llm).parameters) == [
        "self",
        "input",
        "previous_context",
        "is_replan",
    ]
    assert list(inspect.signature(worker_class.ajoin).parameters) == [
        "self",
        "input",
        "tasks",
        "is_final",
    ]
    tools = arithmetic_tools()
    with serving(*COMPILER_RULES) as server:
        worker = LLMCompilerAgentWorker.from_tools(tools, llm=llm_for(server))
        planned = await worker.arun_llm(SEED_QUESTION)
        with pytest.raises(ValueError, match="previous_context"):
            await worker.arun_llm(SEED_QUESTION, is_replan=True)
        replanned = await worker.arun_llm(
            SEED_QUESTION, previous_context="multiply(121, 3) gave 363", is_replan=True
        )
        [call] = parse_plan(planned.message.text, tool_params(tools)).calls
        call.output = ToolOutput(content="363", tool_name="multiply")
        decision = await worker.ajoin(SEED_QUESTION, {call.index: call})
        final = await worker.ajoin(SEED_QUESTION, {call.index: call}, is_final=True)
        sent = [request.messages[-1]["content"] for request in server.requests]
    assert (planned.message.text, replanned.message.text) == (PLAN, REPLAN)
    assert "multiply(121, 3) gave 363" in sent[1]
    assert decision.is_replan and decision.reason == "add 42 to 363"
    # no replan is left: the joiner's own words become the answer
    assert not final.is_replan and final.answer == "add 42 to 363"
    assert "last round" in sent[-1]
