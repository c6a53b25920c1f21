"""A chat response whose text arrives as the model writes it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from pydantic import PrivateAttr

from .types import AgentChatResponse

_END = object()


class StreamingAgentChatResponse(AgentChatResponse):
    """Deltas of the answer as they arrive; ``response``, ``sources`` and ``usage`` once it finished.

    It is an ``AgentChatResponse`` (so a streamed step's ``TaskStepOutput.output`` is one): its
    fields fill in when the run behind it ends. Read the text with ``async_response_gen()`` (or
    ``response_gen`` from synchronous code); ``aget_response()`` waits for the end either way.
    """

    _queue: asyncio.Queue[Any] = PrivateAttr(default_factory=asyncio.Queue)
    _done: asyncio.Event = PrivateAttr(default_factory=asyncio.Event)
    _future: asyncio.Future[Any] | None = PrivateAttr(default=None)
    _error: BaseException | None = PrivateAttr(default=None)
    _iterate_sync: Callable[[AsyncIterator[str]], Iterator[str]] | None = PrivateAttr(
        default=None
    )
    _deltas_sent: int = PrivateAttr(default=0)

    @property
    def deltas_sent(self) -> int:
        return self._deltas_sent

    @property
    def is_done(self) -> bool:
        return self._done.is_set()

    # fed by the runner
    def put_delta(self, delta: str) -> None:
        self._deltas_sent += 1
        self._queue.put_nowait(delta)

    def finish(self, response: AgentChatResponse) -> None:
        if self._done.is_set():
            return
        self.response = response.response
        self.sources = list(response.sources)
        self.usage = response.usage
        self._done.set()
        self._queue.put_nowait(_END)

    def fail(self, error: BaseException) -> None:
        if self._done.is_set():
            return
        self._error = error
        self._done.set()
        self._queue.put_nowait(_END)

    def attach(self, future: asyncio.Future[Any]) -> None:
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
                self._queue.put_nowait(
                    _END
                )  # a second reader (or aget_response) ends too
                if self._error is not None:
                    raise self._error
                return
            yield item

    @property
    def response_gen(self) -> Iterator[str]:
        if self._iterate_sync is None:
            raise RuntimeError(
                "use async_response_gen() for a stream started from async code"
            )
        return self._iterate_sync(self.async_response_gen())

    async def aget_response(self) -> AgentChatResponse:
        """Wait for the end of the run (whether or not the text was read) and return the response."""
        await self._done.wait()
        if self._error is not None:
            raise self._error
        return AgentChatResponse(
            response=self.response, sources=list(self.sources), usage=self.usage
        )

    def __str__(self) -> str:
        return self.response
