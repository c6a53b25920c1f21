"""ReActAgentWorker: the model reasons in text (Thought / Action / Action Input), tools answer.

One model call per step. The reply streams token by token; once complete it is parsed into a
reasoning part. An Action runs its tool in the same step (or, with ``task.approve_tool_calls``,
becomes a ``tool_calls`` step that waits for a person) and the result is the next Observation.
A reply that cannot be read, a tool that does not exist or arguments that do not fit the tool
become an Observation that tells the model what was wrong; the task goes on.

The reasoning lives in ``task.extra_state["current_reasoning"]`` as plain JSON, so the runner's
checkpoints (undo) and a database store keep it exactly; each part is also emitted as an
``AgentReasoning`` event.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...events import AgentReasoning
from ...llms.base import LLM, ChatResponse
from ...messages import ChatMessage
from ...reasoning import (
    REASONING_ADAPTER,
    ActionReasoningStep,
    BaseReasoningStep,
    ObservationReasoningStep,
    ResponseReasoningStep,
    load_reasoning,
)
from ...tools import BaseTool, ToolOutput, ToolRetriever, tools_by_name
from ...types import (
    AgentChatResponse,
    PendingToolCall,
    StepKind,
    Task,
    TaskStep,
    TaskStepOutput,
    new_id,
)
from ..base import BaseAgentWorker
from ..custom import tool_source
from ..llm_turn import stream_turn
from ..tool_calls import run_one_call
from .formatter import ReActChatFormatter
from .parser import ReActOutputParser

DEFAULT_MAX_ITERATIONS = 10
REASONING = "current_reasoning"
SOURCES = "sources"
MODEL_CALLS = "n_model_calls"
USER_FEEDBACK_PREFIX = "The user says: "


def max_iterations_message(limit: int, last: BaseReasoningStep | None) -> str:
    said = f" Its last step was:\n{last.get_content()}" if last is not None else ""
    return f"Stopped: the agent reached max_iterations={limit} model calls without giving an Answer.{said}"


class ReActAgentWorker(BaseAgentWorker):
    """ReAct over any chat model (no function calling needed): the protocol is plain text."""

    def __init__(
        self,
        tools: Sequence[BaseTool],
        llm: LLM,
        max_iterations: int = DEFAULT_MAX_ITERATIONS,
        react_chat_formatter: ReActChatFormatter | None = None,
        output_parser: ReActOutputParser | None = None,
        callback_manager: Any = None,
        verbose: bool = False,
        tool_retriever: ToolRetriever | None = None,
    ) -> None:
        if max_iterations < 1:
            raise ValueError(f"max_iterations must be at least 1, got {max_iterations}")
        self._llm = llm
        self._max_iterations = max_iterations
        self._react_chat_formatter = (
            react_chat_formatter or ReActChatFormatter.from_defaults()
        )
        self._output_parser = output_parser or ReActOutputParser()
        self.callback_manager = callback_manager
        self._verbose = verbose
        self._get_tools = tool_source(list(tools), tool_retriever)
        self._known_tools: dict[str, BaseTool] = tools_by_name(list(tools))

    @property
    def llm(self) -> LLM:
        return self._llm

    @property
    def max_iterations(self) -> int:
        return self._max_iterations

    def get_tools(self, input: str = "") -> list[BaseTool]:
        """The tools for ``input``; every tool ever offered stays known, for checking edits."""
        tools = self._get_tools(input)
        for tool in tools:
            self._known_tools.setdefault(tool.metadata.name, tool)
        return tools

    def validate_tool_kwargs(
        self, tool_name: str, kwargs: dict[str, Any]
    ) -> dict[str, Any]:
        tool = self._known_tools.get(tool_name)
        if tool is None:
            return super().validate_tool_kwargs(tool_name, kwargs)
        tool.validate(kwargs)
        return dict(kwargs)

    # --- task state ------------------------------------------------------------------------------

    def initialize_step(self, task: Task, **kwargs: Any) -> TaskStep:
        task.extra_state.setdefault(REASONING, [])
        task.extra_state.setdefault(SOURCES, [])
        task.extra_state.setdefault(MODEL_CALLS, 0)
        return TaskStep(
            task_id=task.task_id, input=task.input, step_state={"is_first": True}
        )

    def finalize_task(self, task: Task, **kwargs: Any) -> None:
        """Nothing to move: the answer joined the task's memory when it was given."""

    def user_message(self, step: TaskStep, task: Task, text: str) -> ChatMessage:
        """The message that opens the task (the multimodal worker attaches the images here)."""
        return ChatMessage.user(text)

    async def _record(
        self, task: Task, step: TaskStep, part: BaseReasoningStep
    ) -> None:
        dumped = part.model_dump(mode="json")
        task.extra_state[REASONING].append(dumped)
        if self._verbose:
            print(part.get_content(), flush=True)
        typed = REASONING_ADAPTER.validate_python(
            dumped
        )  # a custom parser's subclass as its kind
        await task.emit(
            AgentReasoning(task_id=task.task_id, step_id=step.step_id, part=typed)
        )

    # --- running ---------------------------------------------------------------------------------

    async def arun_step(
        self, step: TaskStep, task: Task, **kwargs: Any
    ) -> TaskStepOutput:
        if step.kind is StepKind.TOOL_CALLS:
            return await self._run_approved(step, task)
        if step.input is not None:
            if step.step_state.get("is_first", False):
                task.memory.put(self.user_message(step, task, step.input))
            else:  # a person's words mid-task reach the model as what they observed
                await self._record(
                    task,
                    step,
                    ObservationReasoningStep(
                        observation=USER_FEEDBACK_PREFIX + step.input
                    ),
                )
        tools = self.get_tools(task.input)
        messages = self._react_chat_formatter.format(
            tools,
            chat_history=task.memory.get(),
            current_reasoning=load_reasoning(task.extra_state[REASONING]),
        )
        reply = await stream_turn(self._llm, task, step, messages)
        task.extra_state[MODEL_CALLS] = task.extra_state.get(MODEL_CALLS, 0) + 1
        part = self._parse(reply)
        await self._record(task, step, part)
        if isinstance(part, ResponseReasoningStep):
            return self._finish(step, task, part.response, reply)
        if task.extra_state[MODEL_CALLS] >= self._max_iterations:
            return self._finish(
                step, task, max_iterations_message(self._max_iterations, part), reply
            )
        if isinstance(part, ObservationReasoningStep):  # the reply could not be read
            return self._go_on(step, task, part, reply)
        assert isinstance(part, ActionReasoningStep)
        tool = {t.metadata.name: t for t in tools}.get(part.action)
        if tool is None:
            names = ", ".join(t.metadata.name for t in tools) or "none"
            unknown = ObservationReasoningStep(
                observation=f"Error: there is no tool named {part.action!r}. Available tools: {names}.",
                is_error=True,
                tool_name=part.action,
            )
            await self._record(task, step, unknown)
            return self._go_on(step, task, unknown, reply)
        call = PendingToolCall(
            tool_id=f"react_{new_id()[:12]}",
            tool_name=part.action,
            tool_kwargs=part.action_input,
        )
        if task.approve_tool_calls:
            approval = step.get_next_step(
                kind=StepKind.TOOL_CALLS,
                tool_calls=[call],
                step_state={"is_first": False},
            )
            approval.input = approval.tool_calls_as_input()
            response = AgentChatResponse(response=part.get_content(), usage=reply.usage)
            return TaskStepOutput(
                output=response, task_step=step, next_steps=[approval]
            )
        return await self._observe(step, task, call, tool, reply)

    def _parse(self, reply: ChatResponse) -> BaseReasoningStep:
        text = reply.message.text
        try:
            return self._output_parser.parse(text, is_streaming=False)
        except Exception as exc:  # noqa: BLE001 - any parser's failure is something the model can fix
            return ObservationReasoningStep(
                observation=f"Error: I could not read your reply: {exc}", is_error=True
            )

    async def _run_approved(self, step: TaskStep, task: Task) -> TaskStepOutput:
        calls = list(step.tool_calls or [])
        if not calls:
            raise ValueError("a tool_calls step of a ReAct task has no call")
        call = calls[0]
        self._show_what_runs(task, call)
        tool = self._known_tools.get(call.tool_name)
        return await self._observe(step, task, call, tool, None)

    def _show_what_runs(self, task: Task, call: PendingToolCall) -> None:
        """The scratchpad's last Action Input becomes the arguments the call runs with: a person
        may have edited them, and the model must read what ran, not what it first wrote."""
        reasoning = list(task.extra_state[REASONING])
        for index in range(len(reasoning) - 1, -1, -1):
            part = load_reasoning([reasoning[index]])[0]
            if isinstance(part, ActionReasoningStep):
                if part.action_input != call.tool_kwargs:
                    reasoning[index] = part.model_copy(
                        update={"action_input": dict(call.tool_kwargs)}
                    ).model_dump(mode="json")
                    task.extra_state[REASONING] = reasoning
                return

    async def _observe(
        self,
        step: TaskStep,
        task: Task,
        call: PendingToolCall,
        tool: BaseTool | None,
        reply: ChatResponse | None,
    ) -> TaskStepOutput:
        output = await run_one_call(
            task, step, {call.tool_name: tool} if tool is not None else {}, call
        )
        task.extra_state[SOURCES].append(output.model_dump(mode="json"))
        direct = bool(tool and tool.metadata.return_direct and not output.is_error)
        observation = ObservationReasoningStep(
            observation=output.content,
            is_error=output.is_error,
            tool_name=call.tool_name,
            return_direct=direct,
        )
        await self._record(task, step, observation)
        if direct:
            return self._finish(step, task, output.content, reply, [output])
        return self._go_on(step, task, observation, reply, [output])

    def _go_on(
        self,
        step: TaskStep,
        task: Task,
        last: BaseReasoningStep,
        reply: ChatResponse | None,
        sources: Sequence[ToolOutput] = (),
    ) -> TaskStepOutput:
        response = AgentChatResponse(
            response=last.get_content(),
            sources=list(sources),
            usage=reply.usage if reply else None,
        )
        following = step.get_next_step(step_state={"is_first": False})
        return TaskStepOutput(output=response, task_step=step, next_steps=[following])

    def _finish(
        self,
        step: TaskStep,
        task: Task,
        answer: str,
        reply: ChatResponse | None,
        sources: Sequence[ToolOutput] = (),
    ) -> TaskStepOutput:
        task.memory.put(ChatMessage.assistant(answer))
        response = AgentChatResponse(
            response=answer, sources=list(sources), usage=reply.usage if reply else None
        )
        return TaskStepOutput(output=response, task_step=step, is_last=True)
