"""Stop during a tool call: the trace says how far the tool got, and a plain function's thread,
which no cancellation reaches, has its late outcome recorded for the audit (not for the model)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from engine_helpers import Recorder, make_agent, serving

from runs.engine import FunctionTool, ToolCallLateOutcome, ToolCallStopped
from runs.engine.testing import Match, Reply, Rule, ToolCallSpec


class Gate:
    """A tool that says when it began and returns when the test lets it."""

    def __init__(self) -> None:
        self.began = threading.Event()
        self.release = threading.Event()
        self.runs = 0

    def sync_tool(self) -> FunctionTool:
        def archive(name: str) -> str:
            """Archive a file (slowly)."""
            self.runs += 1
            self.began.set()
            self.release.wait(30)
            if name == "bad":
                raise OSError("disk full")
            return f"archived {name}"

        return FunctionTool.from_defaults(fn=archive)

    def async_tool(self) -> FunctionTool:
        async def archive(name: str) -> str:
            """Archive a file (slowly)."""
            self.runs += 1
            self.began.set()
            await asyncio.Event().wait()
            return "never"

        return FunctionTool.from_defaults(fn=archive)


def _calls(name: str) -> Rule:
    return Rule(
        match=Match(last_user_contains="archive"),
        reply=Reply(
            text="Archiving.",
            tool_calls=[ToolCallSpec(name="archive", arguments={"name": name})],
        ),
    )


async def _stop_while_running(agent: object, gate: Gate) -> str:
    task = await agent.acreate_task("archive it")  # type: ignore[attr-defined]
    running = asyncio.ensure_future(agent.arun_step(task.task_id))  # type: ignore[attr-defined]
    await asyncio.to_thread(gate.began.wait, 10)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    return str(task.task_id)


async def _late(recorder: object) -> ToolCallLateOutcome:
    while True:
        found = recorder.of("tool_call_late_outcome")  # type: ignore[attr-defined]
        if found:
            return found[0]  # type: ignore[no-any-return]
        await asyncio.sleep(0.01)


@pytest.mark.parametrize(
    ("name", "content", "is_error"),
    [("a.txt", "archived a.txt", False), ("bad", "Error: OSError: disk full", True)],
)
async def test_a_plain_function_left_running_by_stop_has_its_late_outcome_recorded(
    name: str, content: str, is_error: bool
) -> None:
    gate = Gate()
    with serving(_calls(name)) as server:
        agent, recorder = make_agent(server, tools=[gate.sync_tool()])
        await _stop_while_running(agent, gate)
        (stopped,) = recorder.of("tool_call_stopped")
        assert isinstance(stopped, ToolCallStopped)
        assert stopped.state == "left_running"
        assert recorder.types()[-2:] == ["tool_call_stopped", "step_interrupted"]
        assert not recorder.of("tool_call_result")

        gate.release.set()
        late = await asyncio.wait_for(_late(recorder), 10)
        assert late.tool_id == stopped.tool_id and late.step_id == stopped.step_id
        assert late.tool_output.content == content
        assert late.tool_output.is_error is is_error
        assert late.ended_at >= late.stopped_at == stopped.stopped_at
        # only recorded: the model was asked once, the tool ran once, the step stays stopped
        assert len(server.requests) == 1
        assert gate.runs == 1
        assert recorder.types()[-1] == "tool_call_late_outcome"


async def test_an_async_tool_stopped_is_cancelled_and_has_no_late_outcome() -> None:
    gate = Gate()
    with serving(_calls("a.txt")) as server:
        agent, recorder = make_agent(server, tools=[gate.async_tool()])
        await _stop_while_running(agent, gate)
        (stopped,) = recorder.of("tool_call_stopped")
        assert stopped.state == "cancelled"
        await asyncio.sleep(0)
        assert not recorder.of("tool_call_late_outcome")


async def _stop_while_announced(agent: Any, recorder: Recorder) -> str:
    """Start a task and stop its step while its first call is being announced (not yet run)."""
    announced = asyncio.Event()

    async def on_event(event: object) -> None:
        recorder(event)  # type: ignore[arg-type]
        if getattr(event, "type", "") == "tool_call" and not announced.is_set():
            announced.set()
            await asyncio.Event().wait()  # Stop comes while the call is being announced

    agent.on_event = on_event
    task = await agent.acreate_task("archive it")
    running = asyncio.ensure_future(agent.arun_step(task.task_id))
    await asyncio.wait_for(announced.wait(), 10)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    return str(task.task_id)


async def test_a_call_stopped_before_its_tool_began_says_it_did_not_run() -> None:
    gate = Gate()
    with serving(_calls("a.txt")) as server:
        agent, recorder = make_agent(server, tools=[gate.sync_tool()])
        await _stop_while_announced(agent, recorder)
        (stopped,) = recorder.of("tool_call_stopped")
        assert stopped.state == "not_started"
        assert gate.runs == 0 and not gate.began.is_set()
