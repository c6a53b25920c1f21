"""Channel layers that fail the way an unreachable Redis does (they raise, or they hang), and
layers whose sockets read late, as on a busy server (their queues fill up)."""

from __future__ import annotations

import asyncio
from typing import Any

from channels.layers import InMemoryChannelLayer

from agentui.inmemory_layer import InMemoryLayer
from agentui.pubsub_layer import PubSubLayer


class RaisingLayer(InMemoryChannelLayer):
    """Every group_send and send fails, as with Redis refusing connections."""

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        raise ConnectionError("the channel layer is unreachable (test)")

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        raise ConnectionError("the channel layer is unreachable (test)")


class HangingLayer(InMemoryChannelLayer):
    """Every group_send and send waits for good, as with packets to Redis going nowhere."""

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        await asyncio.Event().wait()

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        await asyncio.Event().wait()


class _PausableReads:
    """Reads wait while paused, as in a process too busy to read its sockets' queues.

    Sending is the layer's own, so is what it does with a full queue (drop the message).
    """

    _reads_open: asyncio.Event | None = None

    def pause_reads(self) -> None:
        self._reads_open = asyncio.Event()

    def resume_reads(self) -> None:
        if self._reads_open is not None:
            self._reads_open.set()
            self._reads_open = None

    async def receive(self, channel: str) -> dict[str, Any]:
        gate = self._reads_open
        if gate is not None:
            await gate.wait()
        return await super().receive(channel)  # type: ignore[misc, no-any-return]


class PausableInMemoryLayer(_PausableReads, InMemoryLayer):
    """The project's in-memory layer (a queue per socket) whose reads can be paused."""


class PausableRedisLayer(_PausableReads, PubSubLayer):
    """The project's Redis layer (a queue per socket, fed by pub/sub) whose reads can be paused."""
