"""The task a tool call runs for, for tools that read earlier results of the same task.

A tool is a plain function; the few that need the conversation (the chart tool takes its data
from an earlier call by id) ask `current_task()`. It is set around each call by the code that
runs tool calls, and is None anywhere else. Sync tools run in a worker thread and do not see it:
such a tool is an `async def`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from .messages import MessageRole
from .types import Task

_current: ContextVar[Task | None] = ContextVar("agentui_tool_task", default=None)


def current_task() -> Task | None:
    """The task whose tool call is running, or None outside a tool call."""
    return _current.get()


@contextmanager
def running_for(task: Task) -> Iterator[None]:
    token = _current.set(task)
    try:
        yield
    finally:
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
