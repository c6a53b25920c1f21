"""Sending to the channel layer without ever failing or stalling the sender.

What is sent to a notebook's group is a copy: stored events are in the Event table, streamed
tokens heal with the next `response`. So a layer that raises (Redis is down) or hangs (Redis
is unreachable) costs live updates, never a step: every send here is bounded by
`AGENTUI_BROADCAST_TIMEOUT_S`, and its failure is logged (once per outage) and swallowed.
While the layer hangs (a send timed out), further sends are skipped except for one probe per
`PROBE_EVERY_S`, so an outage neither piles messages up nor makes each one wait for a timeout;
a layer that fails fast (Redis refusing connections) is simply tried every time, so live
updates resume with the first send after it is back.
Sockets catch up from the database by seq (see runs.web.consumer).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from channels.exceptions import ChannelFull
from channels.layers import BaseChannelLayer, get_channel_layer

from runs.conf import conf
from runs.telemetry import metrics

logger = logging.getLogger(__name__)

PROBE_EVERY_S = 1.0


def send_timeout() -> float:
    return conf().broadcast_timeout_s


class LayerHealth:
    """Whether the channel layer worked the last time this process used it."""

    def __init__(self) -> None:
        self.down_since: float | None = None
        self.hanging = False  # the last failure was a timeout
        self.last_probe = 0.0

    def may_try(self) -> bool:
        """False while the layer hangs, except for one probe per PROBE_EVERY_S."""
        if not self.hanging:
            return True
        now = time.monotonic()
        if now - self.last_probe < PROBE_EVERY_S:
            return False
        self.last_probe = now
        return True

    def failed(self, what: str, exc: BaseException) -> None:
        self.hanging = isinstance(exc, TimeoutError)
        if self.down_since is None:
            self.down_since = self.last_probe = time.monotonic()
            logger.warning(
                "channel layer unavailable (%s: %r); live updates paused, events are still stored",
                what,
                exc,
            )

    def worked(self) -> None:
        if self.down_since is not None:
            logger.warning(
                "channel layer back after %.1f s; live updates resume",
                time.monotonic() - self.down_since,
            )
            self.down_since = None
            self.hanging = False


health = LayerHealth()


async def _bounded(what: str, call: Any) -> bool:
    if not health.may_try():
        call.close()  # not awaited: the coroutine is dropped unsent
        metrics.lost("skipped")
        return False
    try:
        # in this task: wait_for would start a task per send, and every streamed token is one
        async with asyncio.timeout(send_timeout()):
            await call
    except ChannelFull:
        health.worked()
        metrics.lost("queue_full")
        return False  # that socket's queue is full: the layer itself works
    except Exception as exc:  # noqa: BLE001 - any layer failure only costs a live copy
        health.failed(what, exc)
        metrics.lost("failed")
        return False
    health.worked()
    return True


def _layer() -> BaseChannelLayer:
    layer = get_channel_layer()
    assert layer is not None, "CHANNEL_LAYERS has no default layer"
    return layer


async def group_send(group: str, message: dict[str, Any]) -> bool:
    """Send `message` to `group`; False if the layer failed (the message is dropped)."""
    return await _bounded("group_send", _layer().group_send(group, message))


async def channel_send(channel: str, message: dict[str, Any]) -> bool:
    """Send `message` to one consumer's channel; False if the layer failed."""
    return await _bounded("send", _layer().send(channel, message))
