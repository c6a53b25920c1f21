"""Running a turn's tool calls: concurrently, with events, honouring a person's approvals.

Shared by every worker that calls tools, so approval behaves the same everywhere.
"""

from __future__ import annotations

import asyncio
import json
import time

from ..events import ToolCall, ToolCallResult
from ..memory import ChatMemoryBuffer
from ..messages import ChatMessage, MessageRole
from ..tool_context import running_for
from ..tools import (
    BaseTool,
    ToolOutput,
    call_tool_by_name,
    for_model,
    watching_threads,
)
from ..types import PendingToolCall, Task, TaskStep, ToolCallDecision
from .stopped_calls import CallProgress, report_stopped

REJECTION_PREFIX = "rejected by user"


def rejection_text(reason: str | None) -> str:
    return f"{REJECTION_PREFIX}: {reason or 'no reason given'}"


async def run_one_call(
    task: Task,
    step: TaskStep,
    tools: dict[str, BaseTool],
    call: PendingToolCall,
    plan_index: int | None = None,
    depends_on: list[int] | None = None,
    output_name: str | None = None,
    depends_on_names: list[str] | None = None,
) -> ToolOutput:
    """Run one call, emitting ToolCall then ToolCallResult. Never raises for a tool's failure.

    The event carries the whole output; what is returned (for the model) is cut to the task's
    ``tool_output_chars``, with a note saying so, and the event says where it was cut
    (``model_chars``), so every surface can show the person what the model was given.

    ``plan_index``/``depends_on`` place the call in a plan's DAG; ``output_name`` and
    ``depends_on_names`` name its result and the results it uses (a chain of abstraction's yN).
    """
    progress = CallProgress()
    try:
        output = await _announce_and_run(
            task,
            step,
            tools,
            call,
            progress,
            ToolCall(
                task_id=task.task_id,
                step_id=step.step_id,
                tool_name=call.tool_name,
                tool_kwargs=call.tool_kwargs,
                tool_id=call.tool_id,
                plan_index=plan_index,
                depends_on=depends_on or [],
                output_name=output_name,
                depends_on_names=depends_on_names or [],
            ),
        )
    except asyncio.CancelledError:
        # stored even if cancelled again: the trace must say what the tool was doing
        await asyncio.shield(report_stopped(task, step, call, progress))
        raise
    tool = tools.get(call.tool_name)
    given = for_model(output, task.tool_output_chars)
    await task.emit(
        ToolCallResult(
            task_id=task.task_id,
            step_id=step.step_id,
            tool_name=call.tool_name,
            tool_kwargs=call.tool_kwargs,
            tool_id=call.tool_id,
            tool_output=output,
            return_direct=bool(
                tool and tool.metadata.return_direct and not output.is_error
            ),
            started_at=progress.started_at,
            ended_at=time.time(),
            plan_index=plan_index,
            output_name=output_name,
            model_chars=None
            if given.content == output.content
            else task.tool_output_chars,
        )
    )
    return given


async def _announce_and_run(
    task: Task,
    step: TaskStep,
    tools: dict[str, BaseTool],
    call: PendingToolCall,
    progress: CallProgress,
    announce: ToolCall,
) -> ToolOutput:
    """Emit the call's ToolCall, then run it (or answer for a rejection or bad arguments)."""
    await task.emit(announce)
    progress.started_at = time.time()
    if call.decision is ToolCallDecision.REJECTED:
        return ToolOutput(
            content=rejection_text(call.reason),
            tool_name=call.tool_name,
            raw_input=call.tool_kwargs,
            is_error=True,
        )
    if call.arguments_error:
        return ToolOutput(
            content=f"Error: {call.arguments_error}",
            tool_name=call.tool_name,
            raw_input=call.tool_kwargs,
            is_error=True,
        )
    with (
        running_for(task, step.step_id, call.tool_id),
        watching_threads(progress.watch),
    ):
        progress.began = True
        return await call_tool_by_name(tools, call.tool_name, call.tool_kwargs)


async def run_calls(
    task: Task, step: TaskStep, tools: dict[str, BaseTool], calls: list[PendingToolCall]
) -> list[ToolOutput]:
    """Run all calls at once; outputs come back in call order, whatever order they finish in."""
    return list(
        await asyncio.gather(*(run_one_call(task, step, tools, call) for call in calls))
    )


def tool_messages(
    calls: list[PendingToolCall], outputs: list[ToolOutput]
) -> list[ChatMessage]:
    return [
        ChatMessage.tool(out.content, tool_call_id=call.tool_id, name=call.tool_name)
        for call, out in zip(calls, outputs)
    ]


def returns_direct(
    tools: dict[str, BaseTool], outputs: list[ToolOutput]
) -> ToolOutput | None:
    """The first successful output of a ``return_direct`` tool: it ends the task as the answer."""
    for output in outputs:
        tool = tools.get(output.tool_name)
        if tool is not None and tool.metadata.return_direct and not output.is_error:
            return output
    return None


def show_what_runs(memory: ChatMemoryBuffer, calls: list[PendingToolCall]) -> None:
    """Make the assistant message that asked for `calls` carry the arguments they run with.

    A person may have edited them; the model's next request must show what ran, not what it
    first wrote (the audit keeps both: the step's original input and the edit's human action).
    """
    edited = {call.tool_id: call.tool_kwargs for call in calls}
    messages = memory.get_all()
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.role is not MessageRole.ASSISTANT or not any(
            c.tool_id in edited for c in message.tool_calls
        ):
            continue
        selections = [
            c
            if c.tool_id not in edited or edited[c.tool_id] == c.tool_kwargs
            else c.model_copy(
                update={
                    "tool_kwargs": dict(edited[c.tool_id]),
                    "raw_arguments": json.dumps(edited[c.tool_id]),
                    "arguments_error": None,
                }
            )
            for c in message.tool_calls
        ]
        if selections != list(message.tool_calls):
            fixed = message.model_copy(update={"tool_calls": tuple(selections)})
            memory.truncate(index)
            memory.put_messages([fixed, *messages[index + 1 :]])
        return
