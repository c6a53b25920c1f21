"""The sync API's iteration of async iterators (runs/engine/_sync.py: iterate_sync).

The engine's background loop reads the async iterator ahead of the synchronous reader and hands
items over in batches; these check what the reader sees: every item in order, the iterator's
error after the items before it, an early stop closing the iterator, and a bounded read-ahead.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from runs.engine._sync import iterate_sync


async def numbers(count: int) -> AsyncIterator[int]:
    for i in range(count):
        if i % 7 == 0:
            await asyncio.sleep(0)  # let the reader in now and then
        yield i


def test_every_item_arrives_once_and_in_order() -> None:
    # far more items than the read-ahead limit: many batches, and the loop waits for room
    assert list(iterate_sync(numbers(5000), limit=16)) == list(range(5000))


def test_an_empty_iterator_gives_nothing() -> None:
    assert list(iterate_sync(numbers(0))) == []


def test_the_error_comes_after_the_items_before_it() -> None:
    async def failing() -> AsyncIterator[int]:
        for i in range(300):
            yield i
        raise ValueError("the model's stream broke off")

    seen: list[int] = []
    with pytest.raises(ValueError, match="stream broke off"):
        for item in iterate_sync(failing(), limit=16):
            seen.append(item)
    assert seen == list(range(300))


class Watched:
    """An endless async generator that records how it ended."""

    def __init__(self, block_after: int | None = None) -> None:
        self.block_after = block_after
        self.produced = 0
        self.ended: str | None = None

    async def items(self) -> AsyncIterator[int]:
        try:
            while True:
                if self.produced == self.block_after:
                    await asyncio.Event().wait()  # a model that stops sending
                self.produced += 1
                yield self.produced
        except asyncio.CancelledError:
            self.ended = "cancelled"
            raise
        except GeneratorExit:
            self.ended = "closed"
            raise


def test_break_closes_an_iterator_waiting_for_room() -> None:
    # the loop has read ahead to the limit and waits for the reader: the generator is closed
    watched = Watched()
    source = (
        watched.items()
    )  # held here: closing it is the reader's doing, not the collector's
    stream = iterate_sync(source, limit=4)
    for item in stream:
        if item == 3:
            break
    stream.close()
    assert watched.ended == "closed"


def test_break_cancels_an_iterator_waiting_for_its_source() -> None:
    # the generator waits on something that never comes: closing the reader cancels that wait
    watched = Watched(block_after=2)
    source = watched.items()
    stream = iterate_sync(source)
    assert next(stream) == 1
    stream.close()
    assert watched.ended == "cancelled"


def test_a_slow_reader_bounds_the_read_ahead() -> None:
    limit = 8
    consumed = 0
    most_ahead = 0

    async def counted() -> AsyncIterator[int]:
        nonlocal most_ahead
        for i in range(400):
            most_ahead = max(most_ahead, i - consumed)
            yield i

    for _ in iterate_sync(counted(), limit=limit):
        consumed += 1
        time.sleep(
            0.0005
        )  # a slow reader: the loop would run far ahead if nothing held it
    assert consumed == 400
    # at most `limit` waiting in the handover plus the batch the reader is working through
    assert most_ahead <= 2 * limit + 1, most_ahead


def test_refused_inside_an_event_loop() -> None:
    async def inside() -> None:
        with pytest.raises(RuntimeError, match="synchronous API"):
            next(iterate_sync(numbers(3)))

    asyncio.run(inside())
