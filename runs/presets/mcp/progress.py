"""What an MCP server says about a call while it runs: its progress and its log messages.

Every call asks for progress (a progress token). Each `notifications/progress` restarts the
call's idle timeout and becomes a `tool_progress` event on its card, at most one per
`PROGRESS_EVERY_S`: a chatty server's notes in between are folded into the next one, and the
last one heard is always delivered before the call's result.

A server's `notifications/message` (its log) goes to agentui's log at the matching level, and,
when exactly one call runs on its session, to that call's card as a `tool_log` event (at most
`MAX_LOGS_PER_CALL` per call, each cut to `MAX_LOG_CHARS`; a last event says how many more there
were). Messages below the level the admin chose are dropped here too, for servers that ignore
`logging/setLevel`. All of it is the server's text: cleaned of control characters, shown as text.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from typing import TYPE_CHECKING, Any

from runs.engine import ToolLog, ToolProgress
from runs.models import McpLogLevel
from runs.presets.mcp.calls import CallClock, McpCall, calls_on, emit
from runs.presets.mcp.listing import clean_description

if TYPE_CHECKING:
    from mcp import types

logger = logging.getLogger(__name__)
server_log = logging.getLogger("runs.mcp_server")  # what the servers said, by server

PROGRESS_EVERY_S = 0.25
MAX_PROGRESS_MESSAGE_CHARS = 500
MAX_LOGS_PER_CALL = 50
MAX_LOG_CHARS = 2000
MAX_LOGGER_CHARS = 100

LEVELS = [level.value for level in McpLogLevel]  # least severe first
_PYTHON_LEVEL = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}


def _cut(text: str, cap: int) -> str:
    return text if len(text) <= cap else text[: cap - 1] + "…"


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


class ProgressReporter:
    """The SDK's progress callback for one call: restarts its clock, tells its card (throttled)."""

    def __init__(self, call: McpCall | None, clock: CallClock) -> None:
        self._call = call
        self._clock = clock
        self._loop = asyncio.get_running_loop()
        self._latest: ToolProgress | None = None
        self._sent_at = -math.inf
        self._later: asyncio.Task[None] | None = None
        self.last: ToolProgress | None = (
            None  # the latest heard, for the call's error text
        )
        self._over = (
            False  # the call ended: a note still on its way is not shown after it
        )

    async def __call__(
        self, progress: float, total: float | None, message: str | None
    ) -> None:
        if self._over:
            return
        self._clock.heard()
        call = self._call
        shown = _finite(progress)
        if shown is None:
            return
        made = ToolProgress(
            task_id=call.running.task.task_id if call else "",
            step_id=call.running.step_id if call else None,
            tool_id=call.running.tool_id if call else "",
            server=call.server if call else "",
            progress=shown,
            total=_finite(total),
            message=_cut(clean_description(message or ""), MAX_PROGRESS_MESSAGE_CHARS),
        )
        self.last = made
        if call is None:
            return
        self._latest = made
        if self._later is not None:
            return  # folded into the one already due
        wait = self._sent_at + PROGRESS_EVERY_S - self._loop.time()
        if wait <= 0:
            await self._send()
        else:
            self._later = self._loop.create_task(
                self._send_after(wait), context=call.context.copy()
            )

    async def _send_after(self, wait: float) -> None:
        await asyncio.sleep(wait)
        self._later = None
        await self._send()

    async def _send(self) -> None:
        event, self._latest = self._latest, None
        if event is None or self._call is None:
            return
        self._sent_at = self._loop.time()
        await emit(self._call, event)

    async def finish(self) -> None:
        """The call ended: the last progress heard reaches the card before its result."""
        self.drop()
        await self._send()

    def drop(self) -> None:
        """The call was cut off: nothing more is sent."""
        self._over = True
        if self._later is not None:
            self._later.cancel()
            self._later = None

    def said(self) -> str:
        """The latest progress heard, as a clause of an error message ('' if none)."""
        last = self.last
        if last is None:
            return ""
        of = f" of {last.total:g}" if last.total is not None else ""
        text = f"; its last progress was {last.progress:g}{of}"
        return text + (f" ({_cut(last.message, 200)})" if last.message else "")


def log_text(data: Any) -> str:
    """A log message's data as plain text, cut to size."""
    if isinstance(data, str):
        text = data
    else:
        try:
            text = json.dumps(data, ensure_ascii=False, default=str)
        except (TypeError, ValueError, RecursionError):
            text = repr(data)
    return _cut(clean_description(_cut(text, MAX_LOG_CHARS * 2)), MAX_LOG_CHARS)


def at_least(level: str, wanted: str) -> bool:
    """Whether `level` is `wanted` or more severe (an unknown level counts as `info`)."""
    rank = LEVELS.index(level) if level in LEVELS else LEVELS.index("info")
    floor = LEVELS.index(wanted) if wanted in LEVELS else LEVELS.index("warning")
    return rank >= floor


async def on_log(
    server: str,
    session: Any,
    wanted: str,
    params: types.LoggingMessageNotificationParams,
) -> None:
    """One log message of `server`: to agentui's log, and to the card of its call if known."""
    calls = calls_on(session) if session is not None else []
    # whose it is can be told only with one call running (not before, between or beside others)
    call = calls[0] if len(calls) == 1 else None
    if call is not None and call.clock is not None:
        call.clock.heard()  # any word from the server, even one below the level shown
    level = str(params.level)
    if not at_least(level, wanted):
        return
    text = log_text(params.data)
    name = _cut(clean_description(params.logger or ""), MAX_LOGGER_CHARS)
    server_log.log(
        _PYTHON_LEVEL.get(level, logging.CRITICAL),
        "MCP server %s %s%s: %s",
        server,
        level,
        f" ({name})" if name else "",
        text,
    )
    if call is None:
        return
    if call.logs_shown >= MAX_LOGS_PER_CALL:
        call.logs_omitted += 1
        return
    call.logs_shown += 1
    await emit(
        call,
        _log_event(call, level=level, logger=name, text=text, number=call.logs_shown),
    )


def _log_event(call: McpCall, **fields: Any) -> ToolLog:
    running = call.running
    return ToolLog(
        task_id=running.task.task_id,
        step_id=running.step_id,
        tool_id=running.tool_id,
        server=call.server,
        **fields,
    )


async def logs_done(call: McpCall | None) -> None:
    """The call ended: its card is told how many messages it did not keep."""
    if call is None or not call.logs_omitted:
        return
    total = call.logs_shown + call.logs_omitted
    await emit(
        call,
        _log_event(call, level="notice", number=total, omitted=call.logs_omitted),
    )
