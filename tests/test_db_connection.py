"""agentui.postgresql: a reused connection is health-checked at most every few seconds.

Checked before every database_sync_to_async call (Django's CONN_HEALTH_CHECKS), a turn paid some
40 extra round trips. What the throttle gives up: a connection that broke within the window
fails one query, and the next request boundary replaces it.
"""

from __future__ import annotations

import psycopg
import pytest
from django.db import OperationalError, close_old_connections, connection
from django.db.utils import InterfaceError

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.db,
    pytest.mark.django_db(transaction=True),
]


def backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return int(cursor.fetchone()[0])


def kill(pid: int) -> None:
    """End a server backend, as a PostgreSQL restart would, from a connection of our own."""
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    params.pop("prepare_threshold", None)
    with psycopg.connect(**params, autocommit=True) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [pid])


def test_reused_connection_is_checked_once_in_a_while() -> None:
    first = backend_pid()
    for _ in range(
        5
    ):  # request boundaries, as around every database_sync_to_async call
        close_old_connections()
        assert backend_pid() == first  # reused, and no check due yet
    kill(first)
    close_old_connections()
    # broken within the window: one query fails ...
    with pytest.raises((OperationalError, InterfaceError)):
        backend_pid()
    close_old_connections()  # ... and the next boundary replaces the connection
    second = backend_pid()
    assert second != first

    kill(second)
    connection._checked_at = float("-inf")  # the window passed
    close_old_connections()
    assert backend_pid() not in (
        first,
        second,
    )  # checked, found broken, replaced: no failure
