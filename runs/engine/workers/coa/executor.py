"""Running a chain's placeholders as a dependency graph: every call starts once its inputs are ready.

Each placeholder becomes an asyncio task that awaits the tasks of the results it uses, so
independent calls run at the same time and a chain resolves in order, with no waves and no
polling. A placeholder with a problem does not wait for anything (so a cycle cannot hang): it is
answered with its error at once, and the calls that use it are answered with that failure.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

from ...tools import BaseTool, ToolOutput
from ...types import PendingToolCall, Task, TaskStep, ToolCallDecision
from ..tool_calls import run_one_call
from .chain import Chain, ChainCall, substitute


def _failed_input(call: ChainCall, inputs: Mapping[str, ToolOutput]) -> str | None:
    for name in call.depends_on:
        output = inputs.get(name)
        if output is not None and output.is_error:
            return f"not run because {name} ({output.tool_name}) failed: {output.content.removeprefix('Error: ')}"
    return None


async def run_chain(
    task: Task,
    step: TaskStep,
    tools: Mapping[str, BaseTool],
    chain: Chain,
    tool_id: Callable[[ChainCall], str],
    decisions: Mapping[str, PendingToolCall] | None = None,
) -> None:
    """Run every placeholder of ``chain`` (setting each ``result``), emitting ToolCall/ToolCallResult.

    ``decisions`` are a person's approvals and rejections by tool id, when calls needed approval.
    """
    defined = chain.defined()
    running: dict[int, asyncio.Task[ToolOutput]] = {}
    by_output: dict[str, int] = {}

    async def run(position: int, call: ChainCall) -> ToolOutput:
        problem = call.problem
        inputs: dict[str, ToolOutput] = {}
        if problem is None:
            for name in call.depends_on:
                # shield: cancelling this call must not cancel the call it waits for
                inputs[name] = await asyncio.shield(running[by_output[name]])
            problem = _failed_input(call, inputs)
        if not call.tool_name:  # too malformed to be a call: nothing to show as one
            return ToolOutput(content=f"Error: {problem}", tool_name="", is_error=True)
        decision = (decisions or {}).get(tool_id(call))
        pending = PendingToolCall(
            tool_id=tool_id(call),
            tool_name=call.tool_name,
            tool_kwargs=substitute(call.kwargs, inputs)
            if problem is None
            else dict(call.kwargs),
            decision=decision.decision if decision else ToolCallDecision.APPROVED,
            reason=decision.reason if decision else None,
            arguments_error=problem,
        )
        first = call.output is not None and defined.get(call.output) is call
        return await run_one_call(
            task,
            step,
            dict(tools),
            pending,
            plan_index=call.index if first else None,
            depends_on=[int(name[1:]) for name in call.depends_on if name in defined],
            output_name=call.output,
            depends_on_names=list(call.depends_on),
        )

    # every task exists before any of them runs, so each finds the tasks it waits for
    for position, call in enumerate(chain.calls):
        if call.output and defined.get(call.output) is call:
            by_output[call.output] = position
        running[position] = asyncio.create_task(
            run(position, call), name=f"coa-{call.label}"
        )
    try:
        await asyncio.gather(*running.values())
    except BaseException:
        for pending_task in running.values():
            pending_task.cancel()
        await asyncio.gather(*running.values(), return_exceptions=True)
        raise
    for position, call in enumerate(chain.calls):
        call.result = running[position].result()
