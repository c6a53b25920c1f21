"""Run the engine's coroutines from synchronous code on one long-lived event loop.

The async LLM client keeps connections bound to the loop that opened them; running every sync
call on the same background loop (instead of ``asyncio.run`` per call) keeps them valid.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import AsyncIterator, Coroutine, Iterator
from typing import Any, Generic, TypeVar

T = TypeVar("T")

_loop: asyncio.AbstractEventLoop | None = None
_lock = threading.Lock()


def _background_loop() -> asyncio.AbstractEventLoop:
    global _loop
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            threading.Thread(
                target=loop.run_forever, name="agent-sync-loop", daemon=True
            ).start()
            _loop = loop
        return _loop


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _refuse_inside_loop() -> None:
    if _running_loop() is None:
        return
    raise RuntimeError(
        "this is the synchronous API; inside an event loop use the async variant (a*)"
    )


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion from synchronous code and return its result."""
    try:
        _refuse_inside_loop()
    except RuntimeError:
        coro.close()
        raise
    return asyncio.run_coroutine_threadsafe(coro, _background_loop()).result()


# How many items the background loop may read ahead of a synchronous reader before it waits.
HANDOVER_LIMIT = 256


class _Handover(Generic[T]):
    """Items crossing from the background loop to one synchronous reader, in batches.

    The loop side appends each item under a lock and wakes the reader only when it is waiting;
    the reader takes everything that has accumulated in one go. (A thread hop per item, one
    ``run_coroutine_threadsafe`` and a wait on its result, cost more than decoding a streamed
    chunk.) At ``limit`` items the loop side waits until the reader has taken them.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, limit: int) -> None:
        self.loop = loop
        self.limit = limit
        self.items: deque[T] = deque()
        self.error: BaseException | None = None
        self.done = False  # the pump has ended and closed its source
        self.reader_waiting = False
        self.pump_waiting = False
        self.changed = threading.Condition(threading.Lock())
        # the loop's side, touched on the loop only
        self.room = asyncio.Event()
        self.stopping = False
        self.task: asyncio.Task[None] | None = None

    async def pump(self, source: AsyncIterator[T]) -> None:
        """On the loop: read ``source`` into the handover until it ends or the reader stops."""
        self.task = asyncio.current_task()
        try:
            if self.stopping:  # the reader left before the pump first ran
                return
            async for item in source:
                with self.changed:
                    self.items.append(item)
                    if self.reader_waiting:
                        self.changed.notify()
                    full = len(self.items) >= self.limit
                    self.pump_waiting = full
                if self.stopping:
                    break
                if full:
                    self.room.clear()
                    await self.room.wait()
        except (Exception, asyncio.CancelledError) as exc:
            self.error = exc
        finally:
            try:
                # stopped while it waited for room, the source is still open: close it
                aclose = getattr(source, "aclose", None)
                if aclose is not None:
                    await aclose()
            finally:
                with self.changed:
                    self.done = True
                    self.changed.notify()

    def stop(self) -> None:
        """On the loop: the reader is gone; end the pump (it then closes the source)."""
        self.stopping = True
        self.room.set()
        if self.task is not None and not self.task.done():
            self.task.cancel()

    def take(self) -> deque[T]:
        """In the reader's thread: every item so far, waiting for one; empty once all are read."""
        with self.changed:
            while not self.items and not self.done:
                self.reader_waiting = True
                self.changed.wait()
                self.reader_waiting = False
            batch, self.items = self.items, deque()
            wake, self.pump_waiting = self.pump_waiting, False
        if wake:
            self.loop.call_soon_threadsafe(self.room.set)
        return batch

    def close(self) -> None:
        """In the reader's thread: stop the pump and wait until it has closed the source."""
        self.loop.call_soon_threadsafe(self.stop)
        if _running_loop() is self.loop:
            return  # collected on the loop's own thread: it cannot wait for itself
        with self.changed:
            while not self.done and self.loop.is_running():
                self.changed.wait(0.1)


def iterate_sync(agen: AsyncIterator[T], limit: int = HANDOVER_LIMIT) -> Iterator[T]:
    """Iterate an async iterator from synchronous code.

    The engine's background loop reads ``agen`` ahead of the caller, at most ``limit`` items,
    and the caller takes them in batches: order is kept, and ``agen``'s exception is raised after
    the items before it. Closing the iterator early (``break``, ``close()``) stops ``agen`` (it is
    cancelled, or closed where it waits) and waits until it has closed.
    """
    _refuse_inside_loop()
    loop = _background_loop()
    handover: _Handover[T] = _Handover(loop, limit)
    asyncio.run_coroutine_threadsafe(handover.pump(agen), loop)
    try:
        while batch := handover.take():
            yield from batch
    finally:
        if not handover.done:
            handover.close()
    if handover.error is not None:
        raise handover.error
