"""One HTTP client per event loop, closed on its loop when the loop ends or its owner goes away.

A client's connection pool belongs to the loop that opened it, and an aiohttp pool that is
garbage-collected unclosed is a leak aiohttp complains about ("Unclosed client session"). So:

- each client is held by a small async generator, started on the client's loop, that closes
  the client in its ``finally``. The loop tracks every async generator started on it and
  closes those still open when it shuts down (``asyncio.run`` and ``asyncio.Runner`` call
  ``shutdown_asyncgens``);
- when the owner is garbage-collected, a finalizer (``weakref.finalize``) has each open
  client's loop close it. The clients hang off that finalizer rather than off the owner alone,
  so they are never part of the owner's garbage: collected with it, aiohttp's own ``__del__``
  would complain before anything could close them.

    clients = PerLoop(close=lambda c: c.aclose())
    client = await clients.get(SomeClient)  # the running loop's client, made the first time
    await clients.aclose()                  # close the running loop's client now
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")

# loop -> (its value, the generator that holds and closes it), while the value is open
_Open = dict[asyncio.AbstractEventLoop, tuple[T, AsyncGenerator[T, None]]]

_closing: set[asyncio.Task[Any]] = set()  # asyncio keeps only weak references to tasks


class PerLoop(Generic[T]):
    """A value per event loop, made on first use on that loop and closed on that loop."""

    __slots__ = ("_close", "_open", "__weakref__")

    def __init__(self, close: Callable[[T], Awaitable[object]]) -> None:
        self._close = close
        self._open: _Open[T] = {}
        weakref.finalize(self, _close_all, self._open)

    async def get(self, make: Callable[[], T]) -> T:
        """The running loop's value, made with ``make`` the first time."""
        loop = asyncio.get_running_loop()
        entry = self._open.get(loop)
        if entry is not None:
            return entry[0]
        value = make()
        keeper = _hold(value, self._close, self._open, loop)
        await anext(keeper)  # runs to its yield at once: from now on the loop tracks it
        self._open[loop] = (value, keeper)
        return value

    async def aclose(self) -> None:
        """Close the running loop's value now; the next ``get`` on this loop makes a new one."""
        entry = self._open.get(asyncio.get_running_loop())
        if entry is not None:
            await entry[1].aclose()

    def __len__(self) -> int:
        """How many values are open."""
        return len(self._open)


async def _hold(
    value: T,
    close: Callable[[T], Awaitable[object]],
    open_: _Open[T],
    loop: asyncio.AbstractEventLoop,
) -> AsyncGenerator[T, None]:
    try:
        yield value
    finally:
        entry = open_.get(loop)
        if entry is not None and entry[0] is value:
            del open_[loop]
        await close(value)


def _close_all(open_: _Open[Any]) -> None:
    """The owner is gone (this may run in any thread): each loop closes its value."""
    for loop, (_, keeper) in list(open_.items()):
        try:
            loop.call_soon_threadsafe(_close_on_loop, keeper)
        except RuntimeError:  # the loop is closed: nothing can close the value now
            open_.pop(loop, None)


def _close_on_loop(keeper: AsyncGenerator[Any, None]) -> None:
    task = asyncio.get_running_loop().create_task(keeper.aclose())
    _closing.add(task)
    task.add_done_callback(_closing.discard)
