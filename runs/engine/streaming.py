"""A chat response whose text arrives as the model writes it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from .tools import ToolOutput
from .types import AgentChatResponse

_END = object()


class StreamingAgentChatResponse:
    """Deltas of the answer as they arrive; ``response`` and ``sources`` once the run has finished."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._future: asyncio.Future[None] | None = None
        self._final: AgentChatResponse | None = None
        self._error: BaseException | None = None
        self._iterate_sync: Callable[[AsyncIterator[str]], Iterator[str]] | None = None
        self.deltas_sent = 0

    # fed by the runner
    def put_delta(self, delta: str) -> None:
        self.deltas_sent += 1
        self._queue.put_nowait(delta)

    def finish(self, response: AgentChatResponse) -> None:
        self._final = response
        self._queue.put_nowait(_END)

    def fail(self, error: BaseException) -> None:
        self._error = error
        self._queue.put_nowait(_END)

    def attach(self, future: asyncio.Future[None]) -> None:
        self._future = future
        # the error is re-raised to whoever reads the stream; don't also log it as unretrieved
        future.add_done_callback(lambda f: f.cancelled() or f.exception())

    def bind_sync(self, iterate: Callable[[AsyncIterator[str]], Iterator[str]]) -> None:
        self._iterate_sync = iterate

    # read by the caller
    async def async_response_gen(self) -> AsyncIterator[str]:
        while True:
            item = await self._queue.get()
            if item is _END:
                if self._error is not None:
                    raise self._error
                return
            yield item

    @property
    def response_gen(self) -> Iterator[str]:
        if self._iterate_sync is None:
            raise RuntimeError(
                "use async_response_gen() for a stream started with astream_chat"
            )
        return self._iterate_sync(self.async_response_gen())

    async def aget_response(self) -> AgentChatResponse:
        async for _ in self.async_response_gen():
            pass
        assert self._final is not None
        return self._final

    @property
    def response(self) -> str:
        return self._final.response if self._final else ""

    @property
    def sources(self) -> list[ToolOutput]:
        return self._final.sources if self._final else []

    def __str__(self) -> str:
        return self.response
