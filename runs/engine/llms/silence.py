"""Giving up on a model stream that goes quiet, with one timer per stream instead of one per read.

``asyncio.timeout`` around every read of a streamed reply built a context manager, a timer
handle and a heap entry per chunk (a third of the client's own time per chunk). Here a read
only notes its deadline; the one timer, when it comes due, looks at the deadline then and moves
itself to it if the stream has spoken since. Only the waits count: while the stream's reader is
busy with a chunk (or its own reader is slow), no read is armed and the timer does nothing.

    silence = Silence()
    silence.arm(30.0)
    try:
        piece = await anext(pieces)
    except asyncio.CancelledError:
        if silence.timed_out():
            raise SomeError("nothing for 30 s") from None
        raise
    finally:
        silence.disarm()
    ...
    silence.close()
"""

from __future__ import annotations

import asyncio
from typing import Any


class Silence:
    """A deadline for the current task's reads; on it, the task is cancelled at its read."""

    __slots__ = ("_loop", "_task", "_cancelling", "_deadline", "_handle", "_expired")

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._task: asyncio.Task[Any] | None = None
        self._cancelling = 0  # cancel requests from elsewhere before ours
        self._deadline: float | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._expired = False

    def arm(self, seconds: float | None) -> None:
        """The next wait may last ``seconds`` (None: no limit)."""
        if seconds is None:
            self._deadline = None
            return
        task = asyncio.current_task(self._loop)
        if task is not self._task:
            # the first read, or the stream is read from another task now
            self._task = task
            self._cancelling = task.cancelling() if task is not None else 0
        deadline = self._deadline = self._loop.time() + seconds
        handle = self._handle
        if handle is None or deadline < handle.when():
            if handle is not None:
                handle.cancel()
            self._handle = self._loop.call_at(deadline, self._due)

    def disarm(self) -> None:
        """The wait is over (whatever its outcome); nothing is timed until the next ``arm``."""
        self._deadline = None

    def timed_out(self) -> bool:
        """After a CancelledError at a read: whether this deadline caused it and nothing else.

        Then the cancel request is withdrawn and the caller raises its own timeout error; when
        another cancel came as well (Stop, a shutdown) the CancelledError must go on.
        """
        if not self._expired or self._task is None:
            return False
        self._expired = False
        return self._task.uncancel() <= self._cancelling

    def close(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._deadline = None

    def _due(self) -> None:
        self._handle = None
        deadline = self._deadline
        if deadline is None:  # not waiting now: the next arm sets a timer again
            return
        if self._loop.time() < deadline:
            # the stream spoke since: wait for its new deadline
            self._handle = self._loop.call_at(deadline, self._due)
            return
        if self._task is not None:  # a read outside any task cannot be cut short
            self._expired = True
            self._task.cancel()
