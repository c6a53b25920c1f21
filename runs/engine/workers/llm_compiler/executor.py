"""Running a plan's calls as a dependency graph: each call starts when its own dependencies are done.

Every submitted call becomes an asyncio task whose result is the call's ToolOutput; a call awaits
the tasks of the calls it depends on (no polling, no waves), so calls can be submitted one by one
while the planner is still streaming the rest of the plan. A failed dependency is not a crash:
the dependant is answered with that error instead of running.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

from ...tools import BaseTool, ToolOutput
from ...types import PendingToolCall, Task, TaskStep, ToolCallDecision
from ..tool_calls import run_one_call
from .plan import PlannedCall
from .refs import substitute
from .rounds import RoundRecord


def call_tool_id(step: TaskStep, index: int) -> str:
    """The tool_id a planned call runs under: stable per step and plan index."""
    return f"{step.step_id[:8]}-{index}"


class PlanExecutor:
    """Runs planned calls as soon as their dependencies have results.

    ``earlier`` holds results of calls from earlier rounds, which this round's calls may use.
    Events (ToolCall, ToolCallResult with ``plan_index`` and ``depends_on``) go through ``task``.
    """

    def __init__(
        self,
        task: Task,
        step: TaskStep,
        tools: Mapping[str, BaseTool],
        earlier: Mapping[int, ToolOutput] | None = None,
    ) -> None:
        self._task = task
        self._step = step
        self._tools = dict(tools)
        self._earlier = dict(earlier or {})
        self._running: dict[int, asyncio.Task[ToolOutput]] = {}

    def submit(
        self, call: PlannedCall, approval: PendingToolCall | None = None
    ) -> None:
        """Start ``call``: it waits for its dependencies, then runs (or is answered with their error).

        ``approval`` carries a person's decision on the call (and its edited arguments) when
        tool calls need approval.
        """
        if call.index in self._running or call.index in self._earlier:
            raise ValueError(f"call {call.index} was submitted twice")
        self._running[call.index] = asyncio.create_task(
            self._run(call, approval), name=f"plan-call-{call.index}"
        )

    async def _run(
        self, call: PlannedCall, approval: PendingToolCall | None
    ) -> ToolOutput:
        results = {
            index: self._earlier[index]
            for index in call.depends_on
            if index in self._earlier
        }
        for index in call.depends_on:
            dependency = self._running.get(index)
            if dependency is not None:
                # shield: cancelling this call must not cancel the call it waits for
                results[index] = await asyncio.shield(dependency)
        pending = PendingToolCall(
            tool_id=approval.tool_id
            if approval
            else call_tool_id(self._step, call.index),
            tool_name=call.tool_name,
            tool_kwargs=substitute(call.kwargs, results, set(call.depends_on)),
            decision=approval.decision if approval else ToolCallDecision.APPROVED,
            reason=approval.reason if approval else None,
            arguments_error=call.error or _failed_dependency(call, results),
        )
        return await run_one_call(
            self._task,
            self._step,
            self._tools,
            pending,
            plan_index=call.index,
            depends_on=list(call.depends_on),
        )

    async def wait(self) -> dict[int, ToolOutput]:
        """Wait for every submitted call; outputs by plan index. Cancels the rest if one raises."""
        try:
            await asyncio.gather(*self._running.values())
        except BaseException:
            await self.cancel()
            raise
        return {index: running.result() for index, running in self._running.items()}

    async def cancel(self) -> None:
        """Stop every call still running (a plain ``def`` tool's thread finishes on its own)."""
        for running in self._running.values():
            running.cancel()
        await asyncio.gather(*self._running.values(), return_exceptions=True)


def _failed_dependency(
    call: PlannedCall, results: Mapping[int, ToolOutput]
) -> str | None:
    for index in call.depends_on:
        output = results.get(index)
        if output is not None and output.is_error:
            return f"not run because call {index} ({output.tool_name}) failed: {output.content}"
    return None


# --- with approval: the calls that can run now, each shown with the values it will run with ---


def ready_calls(
    record: RoundRecord, earlier: Mapping[int, ToolOutput]
) -> list[PlannedCall]:
    """The round's calls that have not run and whose dependencies all have results, in plan order."""
    known = {**earlier, **record.outputs()}
    return [
        call
        for call in record.calls
        if call.output is None and all(index in known for index in call.depends_on)
    ]


def offered_call(call: PlannedCall, known: Mapping[int, ToolOutput]) -> PendingToolCall:
    """``call`` as a person approves it: its references replaced by the results they name (what
    will run), the plan's own arguments kept in ``planned_kwargs`` when they differ, and its
    place in the plan (``plan_index``, ``depends_on``) so its edges show while it waits."""
    kwargs = substitute(call.kwargs, known, set(call.depends_on))
    return PendingToolCall(
        tool_id=call.tool_id or "",
        tool_name=call.tool_name,
        tool_kwargs=kwargs,
        arguments_error=call.error or _failed_dependency(call, known),
        planned_kwargs=dict(call.kwargs) if kwargs != call.kwargs else None,
        plan_index=call.index,
        depends_on=list(call.depends_on),
    )


async def run_wave(
    task: Task,
    step: TaskStep,
    tools: Mapping[str, BaseTool],
    calls: Sequence[PlannedCall],
    approvals: Mapping[str, PendingToolCall],
) -> list[ToolOutput]:
    """Run ``calls`` at once, each exactly as the person left its approval (arguments, decision,
    problem): their dependencies have results already, so nothing is substituted here."""

    def as_approved(call: PlannedCall) -> PendingToolCall:
        approval = approvals[str(call.tool_id)]
        return approval.model_copy(update={"tool_name": call.tool_name})

    return list(
        await asyncio.gather(
            *(
                run_one_call(
                    task,
                    step,
                    dict(tools),
                    as_approved(call),
                    plan_index=call.index,
                    depends_on=list(call.depends_on),
                )
                for call in calls
            )
        )
    )
