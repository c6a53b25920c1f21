"""Counting and logging the messages a channel layer drops for sockets whose queue is full.

A layer drops a message silently when a socket's queue is full; ours count each drop in the
Prometheus metrics (`agentui_layer_lost{reason="queue_full"}`) and log them, at most once per
`REPORT_EVERY_S`. The socket heals from the database (runs.realtime.catch_up), a dropped token
delta with the step's next whole reply.
"""

from __future__ import annotations

import logging
import time

from runs.telemetry import metrics

logger = logging.getLogger(__name__)


class DropCounter:
    REPORT_EVERY_S = 60.0

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.dropped = 0  # messages a full socket queue missed, since the start
        # when the drops were last logged, and how many there were by then
        self._reported = (0.0, 0)

    def dropped_one(self) -> None:
        self.dropped += 1
        metrics.lost("queue_full")
        at, count = self._reported
        now = time.monotonic()
        if now - at < self.REPORT_EVERY_S:
            return
        logger.warning(
            "%d message(s) dropped for sockets whose queue was full (capacity %d), "
            "%d since the start; they catch up from the database",
            self.dropped - count,
            self.capacity,
            self.dropped,
        )
        self._reported = (now, self.dropped)
