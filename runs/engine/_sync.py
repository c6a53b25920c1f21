"""Run the engine's coroutines from synchronous code on one long-lived event loop.

The async LLM client keeps connections bound to the loop that opened them; running every sync
call on the same background loop (instead of ``asyncio.run`` per call) keeps them valid.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator
from typing import Any, TypeVar

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


def _refuse_inside_loop() -> None:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
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


def iterate_sync(agen: AsyncIterator[T]) -> Iterator[T]:
    """Iterate an async iterator from synchronous code, item by item."""
    _refuse_inside_loop()
    loop = _background_loop()

    async def next_item() -> T:
        return await agen.__anext__()

    while True:
        try:
            yield asyncio.run_coroutine_threadsafe(next_item(), loop).result()
        except StopAsyncIteration:
            return
