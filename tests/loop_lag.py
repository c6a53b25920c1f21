"""How long the event loop was held while some work ran: a ticker task measures it.

A coroutine that blocks the loop (a regular expression backtracking in C, say) delays every
other task, and with it every user's request on that server process; the ticker's wake-ups come
late by as much, and the largest delay is the lag.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")
TICK_S = 0.005


async def max_lag_while(work: Awaitable[T]) -> tuple[T, float]:
    """`work`'s result, and the longest the loop was held past a tick while it ran."""
    loop = asyncio.get_running_loop()
    lags: list[float] = []
    ticked = asyncio.Event()

    async def ticker() -> None:
        while True:
            before = loop.time()
            await asyncio.sleep(TICK_S)
            lags.append(loop.time() - before - TICK_S)
            ticked.set()

    task = asyncio.create_task(ticker())
    try:
        await ticked.wait()  # the ticker runs before the work starts
        result = await work
        ticked.clear()
        await (
            ticked.wait()
        )  # and wakes once after it, to record a delay the work caused
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return result, max(lags)
