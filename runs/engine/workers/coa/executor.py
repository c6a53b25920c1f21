"""Running a chain's placeholders in waves: each wave is every call whose inputs are known.

A call is shown (and, when calls need approval, approved or edited) with the values of the
results it uses in place of its ``yN`` references, so a wave holds exactly the calls whose inputs
have all run; it runs them at the same time, each as the person left it, and the next wave
follows from their results. A placeholder with a problem waits for nothing (so a cycle cannot
hang): it is in the first wave and is answered with its error, and a call that uses a failed
result is answered with that failure unless a person gives it arguments of their own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence

from ...tools import BaseTool, ToolOutput
from ...types import PendingToolCall, Task, TaskStep
from ..tool_calls import run_one_call
from .chain import Chain, ChainCall, substitute


def _failed_input(call: ChainCall, inputs: Mapping[str, ToolOutput]) -> str | None:
    for name in call.depends_on:
        output = inputs.get(name)
        if output is not None and output.is_error:
            return f"not run because {name} ({output.tool_name}) failed: {output.content.removeprefix('Error: ')}"
    return None


def ready_calls(chain: Chain) -> list[ChainCall]:
    """The placeholders without a result whose inputs all have one (or that wait for nothing
    because they cannot run), in the chain's order."""
    defined = chain.defined()

    def known(name: str) -> bool:
        return name in defined and defined[name].result is not None

    return [
        call
        for call in chain.calls
        if call.result is None
        and (call.problem is not None or all(known(n) for n in call.depends_on))
    ]


def _place(
    call: ChainCall, defined: Mapping[str, ChainCall]
) -> tuple[int | None, list[int]]:
    """Where ``call`` sits in the DAG: its index (only the placeholder that defines its name has
    one) and the indexes of the results it uses that some placeholder defines."""
    first = call.output is not None and defined.get(call.output) is call
    return (
        call.index if first else None,
        [int(name[1:]) for name in call.depends_on if name in defined],
    )


def offered_call(call: ChainCall, chain: Chain, tool_id: str) -> PendingToolCall:
    """A ready placeholder as a person sees and approves it: its references replaced by the
    results they name (what runs), the chain's own arguments kept in ``planned_kwargs``, and
    its place in the DAG (``plan_index``, ``depends_on``) so its edges show while it waits."""
    defined = chain.defined()
    plan_index, depends_on = _place(call, defined)
    problem = call.problem
    inputs: dict[str, ToolOutput] = {}
    if problem is None:
        inputs = {
            name: result
            for name in call.depends_on
            if (result := defined[name].result) is not None
        }
        problem = _failed_input(call, inputs)
    kwargs = substitute(call.kwargs, inputs) if problem is None else dict(call.kwargs)
    return PendingToolCall(
        tool_id=tool_id,
        tool_name=call.tool_name,
        tool_kwargs=kwargs,
        arguments_error=problem,
        output_name=call.output,
        planned_kwargs=dict(call.kwargs) if kwargs != call.kwargs else None,
        plan_index=plan_index,
        depends_on=depends_on,
    )


async def run_wave(
    task: Task,
    step: TaskStep,
    tools: Mapping[str, BaseTool],
    chain: Chain,
    calls: Sequence[ChainCall],
    tool_id: Callable[[ChainCall], str],
    decisions: Mapping[str, PendingToolCall],
) -> None:
    """Run ``calls`` at once, each exactly as its call in ``decisions`` stands (arguments,
    decision, problem), setting each one's ``result`` and emitting ToolCall/ToolCallResult."""
    defined = chain.defined()

    async def run(call: ChainCall) -> ToolOutput:
        if not call.tool_name:  # too malformed to be a call: nothing to show as one
            return ToolOutput(
                content=f"Error: {call.problem}", tool_name="", is_error=True
            )
        decided = decisions[tool_id(call)]
        plan_index, depends_on = _place(call, defined)
        return await run_one_call(
            task,
            step,
            dict(tools),
            decided.model_copy(update={"tool_name": call.tool_name}),
            plan_index=plan_index,
            depends_on=depends_on,
            output_name=call.output,
            depends_on_names=list(call.depends_on),
        )

    outputs = await asyncio.gather(*(run(call) for call in calls))
    for call, output in zip(calls, outputs):
        call.result = output
