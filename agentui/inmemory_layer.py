"""The in-process channel layer (one daphne, no Redis), without a sweep of everything per message.

Channels' `InMemoryChannelLayer` walks every channel and every group membership of the process on
each `receive()` and each `group_send()`, to drop expired messages and memberships: work that
grows with the number of open sockets, paid for every message. With 500 notebooks open, every
streamed token paid a walk over ~1,000 entries per send and per receive, and one daphne stopped
delivering anything (bench/bench_load.py: 0 of 500 turns finished in 373 s). This layer sweeps
at most once per `SWEEP_EVERY_S` (expiry is counted in seconds anyway) and sends to a group's
members directly instead of starting a task per member. What it delivers, and what it drops
when a socket's queue is full, is unchanged.
"""

from __future__ import annotations

import time
from typing import Any

from channels.exceptions import ChannelFull
from channels.layers import InMemoryChannelLayer


class InMemoryLayer(InMemoryChannelLayer):
    SWEEP_EVERY_S = 1.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._swept_at = 0.0

    def _clean_expired(self) -> None:
        now = time.monotonic()
        if now - self._swept_at < self.SWEEP_EVERY_S:
            return
        self._swept_at = now
        super()._clean_expired()  # type: ignore[misc]  # not in the stubs

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        assert isinstance(message, dict), "message is not a dict"
        self.require_valid_group_name(group)
        self._clean_expired()
        for channel in list(self.groups.get(group, ())):
            try:
                await self.send(channel, message)
            except ChannelFull:
                pass  # as Channels does: that socket misses the copy (stored events heal by seq)
