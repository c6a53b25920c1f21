"""The in-process channel layer (one daphne, no Redis), without a sweep of everything per message.

Channels' `InMemoryChannelLayer` walks every channel and every group membership of the process on
each `receive()` and each `group_send()`, to drop expired messages and memberships: work that
grows with the number of open sockets, paid for every message. With 500 notebooks open, every
streamed token paid a walk over ~1,000 entries per send and per receive, and one daphne stopped
delivering anything (bench/bench_load.py: 0 of 500 turns finished in 373 s). This layer sweeps
at most once per `SWEEP_EVERY_S` (expiry is counted in seconds anyway) and sends to a group's
members directly instead of starting a task per member.

Every streamed token is one message per socket, so the per-message work is cut further:

- Channels builds a new `asyncio.Queue` on every `send()` and `receive()` (the default argument
  of `setdefault` is built whether or not the channel has one), and drops a channel's queue
  whenever a `receive()` empties it: a socket reads every message as it comes, so each one cost
  a new queue (and its first wait, a lock to bind it to the loop). Here a queue is built only
  for a channel that has none, and an empty one is dropped by the sweep, once nobody is
  receiving on it (a closed socket's channel), not after every message.
- Channels deep-copies every message it queues, so that no receiver can change what another one
  (or the sender) holds. A message whose values are all immutable scalars (str, int, float,
  bool, None, bytes: a `delta`'s type and text, a catch-up nudge) gets a shallow copy instead,
  which isolates receivers just as well: there is nothing nested to share. Anything else (a stored
  event's payload is a nested dict) is still deep-copied.

What it delivers, to whom, in what order, and what it drops when a socket's queue is full
(`ChannelFull` from `send()`; silently, per member, from `group_send()`) are Channels' own; the
drops are counted (`dropped`) and logged (agentui.layer_drops). A socket that missed
a stored event catches up from the database (runs.realtime.catch_up); a dropped token delta is
healed by the step's next reply.
"""

from __future__ import annotations

import asyncio
import time
from copy import deepcopy
from typing import Any

from channels.exceptions import ChannelFull
from channels.layers import InMemoryChannelLayer

from agentui.layer_drops import DropCounter

# values a message may hold and still be copied shallowly: none of them can be changed in place
FLAT = (str, int, float, bool, bytes, type(None))


def copied(message: dict[str, Any]) -> dict[str, Any]:
    """A copy of `message` no receiver can change for another: shallow when nothing is nested."""
    if all(isinstance(value, FLAT) for value in message.values()):
        return dict(message)
    return deepcopy(message)


class InMemoryLayer(InMemoryChannelLayer):
    SWEEP_EVERY_S = 1.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._swept_at = 0.0
        self.drops = DropCounter(self.capacity)
        # channel -> how many receive() calls wait on it (their queue is kept while any does)
        self._receivers: dict[str, int] = {}

    @property
    def dropped(self) -> int:
        """Group messages a full socket queue missed, since the start."""
        return self.drops.dropped

    def _clean_expired(self) -> None:
        now = time.monotonic()
        if now - self._swept_at < self.SWEEP_EVERY_S:
            return
        self._swept_at = now
        super()._clean_expired()  # type: ignore[misc]  # not in the stubs
        for channel, queue in list(self.channels.items()):
            if queue.empty() and channel not in self._receivers:
                del self.channels[channel]  # an idle channel holds no queue

    def _queue(self, channel: str) -> asyncio.Queue[tuple[float, dict[str, Any]]]:
        queue = self.channels.get(channel)
        if queue is None:
            queue = self.channels[channel] = asyncio.Queue(
                maxsize=self.get_capacity(channel)
            )
        return queue

    def _put(self, channel: str, message: dict[str, Any]) -> None:
        try:
            self._queue(channel).put_nowait(
                (time.time() + self.expiry, copied(message))
            )
        except asyncio.QueueFull:
            raise ChannelFull(channel) from None

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        assert isinstance(message, dict), "message is not a dict"
        self.require_valid_channel_name(channel)
        assert "__asgi_channel__" not in message
        self._put(channel, message)

    async def receive(self, channel: str) -> dict[str, Any]:
        self.require_valid_channel_name(channel)
        self._clean_expired()
        queue = self._queue(channel)
        self._receivers[channel] = self._receivers.get(channel, 0) + 1
        try:
            _, message = await queue.get()
        finally:
            left = self._receivers.pop(channel) - 1
            if left:
                self._receivers[channel] = left
        return message

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        assert isinstance(message, dict), "message is not a dict"
        self.require_valid_group_name(group)
        self._clean_expired()
        members = list(self.groups.get(group, ()))
        assert not members or "__asgi_channel__" not in message
        # the members' names were checked when they joined (group_add)
        for channel in members:
            try:
                self._put(channel, message)
            except ChannelFull:  # as Channels does: that socket misses the copy
                self.drops.dropped_one()
