"""What Stop does to a tool call that had not returned, said in the trace.

A cancelled step rolls the task back, but a plain ``def`` tool runs in a worker thread that no
cancellation reaches: the function runs on, and whatever it does still happens. So a stopped
call gets a ToolCallStopped saying how far its tool had got, and a call left running gets a
ToolCallLateOutcome when its thread ends: the audit's record of what the tool finally did (only
recorded: the model is not given it, and nothing runs again). A call whose tool had begun is also
kept: the model's next request tells it of the call (runs.engine.stopped_note).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from concurrent.futures import Future
from typing import Any

from ..events import ToolCallLateOutcome, ToolCallStopped
from ..stopped_note import remember
from ..tools import failure_output, returned_output
from ..types import PendingToolCall, Task, TaskStep

logger = logging.getLogger(__name__)

# late outcomes being stored (a task nobody holds could be collected before it ends)
_reporting: set[asyncio.Task[None]] = set()


class CallProgress:
    """How far one call's tool got before a cancellation; ``watch`` hears from its thread."""

    def __init__(self) -> None:
        self.started_at = time.time()  # reset once the call is announced
        self.began = False  # the tool was invoked
        self.thread: Future[Any] | None = None  # its worker thread, left running
        self.never_began = False  # its thread was still queued, and was dropped

    def watch(self, thread: Future[Any] | None) -> None:
        if thread is None:
            self.never_began = True
        else:
            self.thread = thread

    @property
    def state(self) -> str:
        if self.thread is not None:
            return "left_running"
        if self.began and not self.never_began:
            return "cancelled"
        return "not_started"


async def report_stopped(
    task: Task,
    step: TaskStep,
    call: PendingToolCall,
    progress: CallProgress,
) -> None:
    """Record how far the cancelled call got; a thread left running reports its end later."""
    stopped = time.time()
    remember(task, call, progress.state)  # the next request tells the model of it
    event = ToolCallStopped(
        task_id=task.task_id,
        step_id=step.step_id,
        tool_name=call.tool_name,
        tool_id=call.tool_id,
        state=progress.state,  # type: ignore[arg-type]
        started_at=progress.started_at,
        stopped_at=stopped,
    )
    await task.emit(event)
    if progress.thread is not None:
        report = _LateOutcome(task, event, call.tool_kwargs, asyncio.get_running_loop())
        progress.thread.add_done_callback(report.thread_ended)


class _LateOutcome:
    """Hands a left-running thread's outcome back to the loop, and records it there."""

    def __init__(
        self,
        task: Task,
        stopped: ToolCallStopped,
        kwargs: dict[str, Any],
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.task = task
        self.stopped = stopped
        self.kwargs = kwargs
        self.loop = loop

    def thread_ended(self, thread: Future[Any]) -> None:
        """In the worker thread (or at once, if it had ended): record the outcome on the loop."""
        ended = time.time()
        try:
            self.loop.call_soon_threadsafe(self._record, thread, ended)
        except RuntimeError:
            # the loop closed: the process is ending; the trace keeps saying "may have"
            logger.warning(
                "tool call %s ended after its loop closed; its outcome is not recorded",
                self.stopped.tool_id,
            )

    def _record(self, thread: Future[Any], ended: float) -> None:
        name = self.stopped.tool_name
        exc = thread.exception()
        output = (
            failure_output(name, self.kwargs, exc)
            if exc is not None
            else returned_output(name, self.kwargs, thread.result())
        )
        event = ToolCallLateOutcome(
            task_id=self.stopped.task_id,
            step_id=self.stopped.step_id,
            tool_name=name,
            tool_id=self.stopped.tool_id,
            tool_output=output,
            started_at=self.stopped.started_at,
            stopped_at=self.stopped.stopped_at,
            ended_at=ended,
        )
        # a context of its own: not the stopped run's (its lease, its cancelled scope)
        pending = self.loop.create_task(
            self._emit(event), context=contextvars.Context()
        )
        _reporting.add(pending)
        pending.add_done_callback(_reporting.discard)

    async def _emit(self, event: ToolCallLateOutcome) -> None:
        try:
            await self.task.emit(event)
        except Exception:  # noqa: BLE001 - the audit misses it; the trace still says "may have"
            logger.warning(
                "could not record the late outcome of tool call %s",
                event.tool_id,
                exc_info=True,
            )
