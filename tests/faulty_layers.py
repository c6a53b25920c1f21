"""Channel layers that fail the way an unreachable Redis does: they raise, or they hang."""

from __future__ import annotations

import asyncio
from typing import Any

from channels.layers import InMemoryChannelLayer


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
