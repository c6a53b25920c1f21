"""WorkflowHandler: a running workflow; stream its events, await its answer, or cancel it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine, Generator
from typing import Any

from ..errors import WorkflowCancelledError, WorkflowTimeoutError
from ..events import AgentEvent, AgentOutput
from .context import Context
from .options import RunSlots

_END = None


class WorkflowHandler:
    """``async for ev in handler.stream_events()``; ``await handler`` gives the final AgentOutput.

    ``handler.ctx`` answers questions (``send_event``) and saves the run (``to_dict``).
    """

    def __init__(
        self,
        ctx: Context,
        start: Coroutine[Any, Any, None],
        timeout: float | None,
        slots: RunSlots | None = None,
    ) -> None:
        self.ctx = ctx
        self._queue: asyncio.Queue[AgentEvent | None] = asyncio.Queue()
        self._timeout = timeout
        self._slots = slots or RunSlots(None)
        self._future: asyncio.Task[AgentOutput] = asyncio.ensure_future(
            self._main(start)
        )

    async def _main(self, start: Coroutine[Any, Any, None]) -> AgentOutput:
        session = self.ctx._session
        session.listeners.append(self._queue.put_nowait)
        try:
            # a run waiting for a slot (num_concurrent_runs) has not begun: its timeout starts after
            async with self._slots.taken(), asyncio.timeout(self._timeout):
                await start
                return await session.drive()
        except TimeoutError:
            session.settle()
            raise WorkflowTimeoutError(
                f"the run took longer than its timeout of {self._timeout} s"
            ) from None
        except asyncio.CancelledError:
            session.settle()
            raise WorkflowCancelledError(
                "the run was cancelled; its context can be saved and resumed"
            ) from None
        finally:
            start.close()  # a no-op once awaited; a run cancelled while it waited never starts
            session.listeners.remove(self._queue.put_nowait)
            self._queue.put_nowait(_END)

    def __await__(self) -> Generator[Any, None, AgentOutput]:
        return self._future.__await__()

    async def stream_events(self) -> AsyncIterator[AgentEvent]:
        """Every event of the run as it happens; raises the run's error, if any, at the end."""
        while (event := await self._queue.get()) is not _END:
            yield event
        await self._future

    def cancel_run(self) -> None:
        """Stop the run; a step that was running counts as not run, so ``ctx`` can be saved and resumed."""
        self._future.cancel()

    def done(self) -> bool:
        return self._future.done()
