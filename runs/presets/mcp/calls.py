"""The tool calls running on each MCP session, and the limits each call runs under.

Sessions are shared by every notebook of a process, and what a stdio server sends during a
call (a question to the person, a log message) names no call, so a call registers itself on
its session while it runs (`running_on`): what the session hears then belongs to the calls
running on it. Progress names its call (its token), so it needs no guessing.

A call ends for one of two limits (`CallClock`): its server said nothing (no answer, progress
or log message) for the idle timeout, or it ran for the hard maximum. While a question of the
server waits for the person, neither runs (the question has its own deadline).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from runs.engine import AgentEvent
from runs.engine.tool_context import RunningCall

Limit = Literal["idle", "max"]


class CallClock:
    """Moves a call's `asyncio.Timeout` to whichever limit comes first, as the server speaks."""

    def __init__(self, timeout: asyncio.Timeout, idle_s: float, max_s: float) -> None:
        self._timeout = timeout
        self.idle_s = idle_s
        self.max_s = max_s
        self._loop = asyncio.get_running_loop()
        self.started = self._last = self._loop.time()
        self.heard_anything = False  # a progress or log message came during the call
        self._holds = 0
        self._held_since = 0.0
        self._held_total = 0.0
        self.limit: Limit = "idle"
        self._schedule()

    def heard(self) -> None:
        """The server said something about the call: the idle timeout starts again."""
        self.heard_anything = True
        self._last = self._loop.time()
        if not self._holds:
            self._schedule()

    def hold(self) -> None:
        """A question of the server waits for the person: no limit runs meanwhile."""
        if not self._holds:
            self._held_since = self._loop.time()
            self._timeout.reschedule(None)
        self._holds += 1

    def release(self) -> None:
        self._holds -= 1
        if not self._holds:
            now = self._loop.time()
            self._held_total += now - self._held_since
            self._last = now
            self._schedule()

    def _schedule(self) -> None:
        idle_at = self._last + self.idle_s
        max_at = self.started + self._held_total + self.max_s
        self.limit = "idle" if idle_at < max_at else "max"
        self._timeout.reschedule(min(idle_at, max_at))


@dataclass
class McpCall:
    """A tool call running on a session: where what its server says goes, and its clock."""

    running: RunningCall
    server: str
    context: contextvars.Context
    clock: CallClock | None
    waits: set[str] = field(default_factory=set)  # its server's open questions
    logs_shown: int = 0  # log messages its card got
    logs_omitted: int = 0  # and those heard after the card's cap


_calls: dict[int, list[McpCall]] = {}  # by id(session)


@contextmanager
def running_on(
    session: Any, server: str, running: RunningCall | None, clock: CallClock | None
) -> Iterator[McpCall | None]:
    """While this runs, what `session` hears may belong to `running`'s call (None: no call,
    e.g. a tool called outside a notebook's runner)."""
    if running is None:
        yield None
        return
    call = McpCall(running, server, contextvars.copy_context(), clock)
    calls = _calls.setdefault(id(session), [])
    calls.append(call)
    try:
        yield call
    finally:
        calls.remove(call)
        if not calls:
            _calls.pop(id(session), None)


def calls_on(session: Any) -> list[McpCall]:
    """The calls running on `session` now, oldest first."""
    return list(_calls.get(id(session), []))


async def emit(call: McpCall, event: AgentEvent) -> None:
    """Into the run's stream, from the call's own context (its lease, its turn)."""
    sending = asyncio.get_running_loop().create_task(
        call.running.task.emit(event), context=call.context.copy()
    )
    await asyncio.shield(sending)
