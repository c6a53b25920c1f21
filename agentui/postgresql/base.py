"""Django's PostgreSQL backend, checking a reused connection's health at most every few seconds.

With `CONN_HEALTH_CHECKS`, Django checks a reused connection (`SELECT 1`) at its first use after
every request start or end, and Channels' `database_sync_to_async` counts as a request on both
sides of every call: some 40 extra round trips a turn, each costing the one thread that runs all
database calls of the process. Checked at most every `HEALTH_CHECK_EVERY_S` instead: a connection
that broke since (PostgreSQL restarted) fails one query, after which Django closes it at the next
request boundary (`errors_occurred`) and opens a new one, as without health checks.
"""

from __future__ import annotations

import time

from django.db.backends.postgresql import base

HEALTH_CHECK_EVERY_S = 5.0


class DatabaseWrapper(base.DatabaseWrapper):
    _checked_at = float("-inf")

    def close_if_health_check_failed(self) -> None:
        if (
            self.connection is not None
            and self.health_check_enabled
            and not self.health_check_done
            and time.monotonic() - self._checked_at < HEALTH_CHECK_EVERY_S
        ):
            self.health_check_done = True  # checked a moment ago
            return
        super().close_if_health_check_failed()
        self._checked_at = time.monotonic()

    def connect(self) -> None:
        super().connect()
        self._checked_at = time.monotonic()  # a new connection is healthy
