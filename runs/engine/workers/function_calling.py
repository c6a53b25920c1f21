"""FunctionCallingAgentWorker: the model picks tools by OpenAI tool calling; a turn's calls run at once.

A step is one model turn plus the tool calls it chose. With ``task.approve_tool_calls`` the calls
instead become the next step (kind TOOL_CALLS), which waits for a person to approve, edit or reject
each one before it runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..events import AgentStream
from ..llms.base import LLM
from ..messages import ChatMessage, ToolSelection
from ..tools import BaseTool, ToolOutput, tools_by_name
from ..types import (
    AgentChatResponse,
    PendingToolCall,
    StepKind,
    Task,
    TaskStep,
    TaskStepOutput,
)
from .base import BaseAgentWorker
from .llm_turn import stream_turn
from .tool_calls import returns_direct, run_calls, show_what_runs, tool_messages

DEFAULT_MAX_FUNCTION_CALLS = 20
_CALLS_MADE = "n_function_calls"


def _limit_output(selection: ToolSelection, limit: int) -> ToolOutput:
    return ToolOutput(
        content=f"Error: the limit of {limit} tool calls for this task was reached; answer with what you have.",
        tool_name=selection.tool_name,
        raw_input=dict(selection.tool_kwargs),
        is_error=True,
    )


class FunctionCallingAgentWorker(BaseAgentWorker):
    verbose_events = True

    def __init__(
        self,
        tools: Sequence[BaseTool],
        llm: LLM,
        system_prompt: str | None = None,
        prefix_messages: Sequence[ChatMessage] = (),
        max_function_calls: int = DEFAULT_MAX_FUNCTION_CALLS,
        allow_parallel_tool_calls: bool = True,
        verbose: bool = False,
        callback_manager: Any | None = None,
    ) -> None:
        if not llm.metadata.is_function_calling_model:
            raise ValueError(
                f"model {llm.metadata.model_name!r} does not support function calling"
            )
        self.tools = list(tools)
        self._tools = tools_by_name(self.tools)
        self.llm = llm
        self.prefix_messages = (
            [ChatMessage.system(system_prompt)] if system_prompt else []
        ) + list(prefix_messages)
        self.max_function_calls = max_function_calls
        self.allow_parallel_tool_calls = allow_parallel_tool_calls
        self.verbose = verbose
        self.callback_manager = callback_manager

    def get_tools(self, input: str = "") -> list[BaseTool]:
        return list(self.tools)

    def streams_answer(self, event: AgentStream) -> bool:
        # text comes before any tool call in a reply, so text means the answer is being written
        return True

    def initialize_step(self, task: Task, **kwargs: Any) -> TaskStep:
        task.extra_state.setdefault(_CALLS_MADE, 0)
        return TaskStep(task_id=task.task_id, input=task.input)

    async def arun_step(
        self, step: TaskStep, task: Task, **kwargs: Any
    ) -> TaskStepOutput:
        if step.kind is StepKind.TOOL_CALLS:
            return await self._run_approved_calls(step, task)
        if step.input:
            task.memory.put(ChatMessage.user(step.input))
        budget = self.max_function_calls - task.extra_state.get(_CALLS_MADE, 0)
        tools = self.tools if budget > 0 else None
        reply = await stream_turn(
            self.llm,
            task,
            step,
            self.prefix_messages + task.memory.get(),
            tools=tools,
            tool_choice=kwargs.get("tool_choice") if tools else None,
            parallel_tool_calls=None
            if self.allow_parallel_tool_calls or not tools
            else False,
        )
        message = reply.message
        if not self.allow_parallel_tool_calls and len(message.tool_calls) > 1:
            # the model was told one call at a time; keep only the first, so every call in the
            # history has its answer (OpenAI refuses a history with an unanswered call)
            message = message.model_copy(update={"tool_calls": message.tool_calls[:1]})
        task.memory.put(message)
        usage = reply.usage
        selections = list(message.tool_calls)
        if not selections:
            return TaskStepOutput(
                output=AgentChatResponse(response=message.text, usage=usage),
                task_step=step,
                is_last=True,
            )
        allowed, over = selections[: max(budget, 0)], selections[max(budget, 0) :]
        over_outputs = [_limit_output(s, self.max_function_calls) for s in over]
        pending = [PendingToolCall.from_selection(s) for s in allowed]
        if task.approve_tool_calls and pending:
            task.memory.put_messages(
                tool_messages(
                    [PendingToolCall.from_selection(s) for s in over], over_outputs
                )
            )
            approval = step.get_next_step(
                kind=StepKind.TOOL_CALLS, tool_calls=pending, step_state={}
            )
            approval.input = approval.tool_calls_as_input()
            return TaskStepOutput(
                output=AgentChatResponse(response=message.text, usage=usage),
                task_step=step,
                next_steps=[approval],
            )
        outputs = await run_calls(task, step, self._tools, pending)
        return self._after_calls(
            step, task, pending, outputs, over, over_outputs, message.text, usage
        )

    async def _run_approved_calls(self, step: TaskStep, task: Task) -> TaskStepOutput:
        calls = list(step.tool_calls or [])
        show_what_runs(task.memory, calls)
        outputs = await run_calls(task, step, self._tools, calls)
        return self._after_calls(step, task, calls, outputs, [], [], "", None)

    def _after_calls(
        self,
        step: TaskStep,
        task: Task,
        calls: list[PendingToolCall],
        outputs: list[ToolOutput],
        over: list[ToolSelection],
        over_outputs: list[ToolOutput],
        text: str,
        usage: Any,
    ) -> TaskStepOutput:
        task.extra_state[_CALLS_MADE] = task.extra_state.get(_CALLS_MADE, 0) + len(
            calls
        )
        all_calls = calls + [PendingToolCall.from_selection(s) for s in over]
        task.memory.put_messages(tool_messages(all_calls, outputs + over_outputs))
        sources = outputs + over_outputs
        direct = returns_direct(self._tools, outputs)
        if direct is not None:
            return TaskStepOutput(
                output=AgentChatResponse(
                    response=direct.content, sources=sources, usage=usage
                ),
                task_step=step,
                is_last=True,
            )
        following = step.get_next_step(step_state={})
        return TaskStepOutput(
            output=AgentChatResponse(response=text, sources=sources, usage=usage),
            task_step=step,
            next_steps=[following],
        )
