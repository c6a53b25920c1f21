"""Tool calls chosen in one turn run concurrently: four take about one call's latency."""

from __future__ import annotations

import asyncio
import time

import pytest
from engine_helpers import make_agent, serving

from runs.engine import FunctionTool
from runs.engine.testing import Match, Reply, Rule, ToolCallSpec

LATENCY = 0.4


def slow_sync(item: str) -> str:
    """Blocking lookup."""
    time.sleep(LATENCY)
    return item.upper()


async def slow_async(item: str) -> str:
    """Non-blocking lookup."""
    await asyncio.sleep(LATENCY)
    return item.upper()


@pytest.mark.parametrize("fn", [slow_sync, slow_async], ids=["def", "async def"])
def test_four_calls_take_about_one_calls_latency(fn) -> None:  # type: ignore[no-untyped-def]
    name = fn.__name__
    rules = [
        Rule(
            match=Match(tool_results_since_user=0),
            reply=Reply(
                tool_calls=[
                    ToolCallSpec(name=name, arguments={"item": f"i{n}"})
                    for n in range(4)
                ]
            ),
        ),
        Rule(match=Match(tool_results_since_user=4), reply=Reply(text="done")),
    ]
    with serving(*rules) as server:
        agent, recorder = make_agent(server, tools=[FunctionTool.from_defaults(fn)])
        task = agent.create_task("look up four things")
        output = agent.run_step(task.task_id)
    results = recorder.of("tool_call_result")
    assert [s.content for s in output.output.sources] == [
        "I0",
        "I1",
        "I2",
        "I3",
    ]  # call order kept
    starts = [r.started_at for r in results]  # type: ignore[union-attr]
    ends = [r.ended_at for r in results]  # type: ignore[union-attr]
    # every call started before any finished: they overlapped instead of queueing
    assert max(starts) < min(ends)
    span = max(ends) - min(starts)
    assert span < 2 * LATENCY, f"four calls took {span:.2f}s; one takes {LATENCY}s"
