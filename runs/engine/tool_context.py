"""The task a tool call runs for, for tools that read earlier results of the same task.

A tool is a plain function; the few that need the conversation (the chart tool takes its data
from an earlier call by id) ask `current_task()`, and the few that tell the page about one call
(an MCP server's question to the person) ask `current_call()`. Both are set around each call by
the code that runs tool calls, and are None anywhere else. Sync tools run in a worker thread and
do not see them: such a tool is an `async def`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from .messages import MessageRole
from .types import Task


@dataclass(frozen=True)
class RunningCall:
    """The tool call running now: its task, step and call id."""

    task: Task
    step_id: str
    tool_id: str


_current: ContextVar[Task | None] = ContextVar("agentui_tool_task", default=None)
_call: ContextVar[RunningCall | None] = ContextVar("agentui_tool_call", default=None)


def current_task() -> Task | None:
    """The task whose tool call is running, or None outside a tool call."""
    return _current.get()


def current_call() -> RunningCall | None:
    """The tool call running now, or None outside one."""
    return _call.get()


@contextmanager
def running_for(
    task: Task, step_id: str | None = None, tool_id: str | None = None
) -> Iterator[None]:
    token = _current.set(task)
    call = RunningCall(task, step_id, tool_id) if step_id and tool_id else None
    call_token = _call.set(call)
    try:
        yield
    finally:
        _call.reset(call_token)
        _current.reset(token)


def earlier_tool_result(task: Task, tool_call_id: str) -> str | None:
    """The text a tool call of `task` returned to the model (its latest, if ids repeat)."""
    for message in reversed(task.memory.get_all()):
        if message.role == MessageRole.TOOL and message.tool_call_id == tool_call_id:
            return message.content or ""
    return None


def earlier_tool_call_ids(task: Task) -> list[str]:
    """Ids of the tool calls whose results are in `task`'s conversation, oldest first."""
    return [
        m.tool_call_id
        for m in task.memory.get_all()
        if m.role == MessageRole.TOOL and m.tool_call_id
    ]
