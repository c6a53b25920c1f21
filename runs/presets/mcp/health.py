"""How each MCP server is doing in this process: its session's state and its last error.

Kept in memory, per process (sessions are per process): `/readyz` and the admin read it. A
server starts on its first call, so `stopped` (no session yet, or closed) is no fault; `failing`
is: its last start failed, or its process stopped by itself. The last error stays, with its
time, after the server is connected again, so the admin can see what happened.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from datetime import UTC, datetime


class ServerState(enum.StrEnum):
    STOPPED = "stopped"
    STARTING = "starting"
    CONNECTED = "connected"
    FAILING = "failing"


@dataclass(frozen=True)
class ServerHealth:
    """One server's state in this process, and the last error it had (with when)."""

    state: ServerState = ServerState.STOPPED
    since: datetime | None = None
    last_error: str = ""
    last_error_at: datetime | None = None


_health: dict[int, ServerHealth] = {}  # by McpServer pk


def _now() -> datetime:
    return datetime.now(UTC)


def health_of(pk: int) -> ServerHealth:
    """Server `pk`'s state in this process (`stopped` when it never started here)."""
    return _health.get(pk, ServerHealth())


def note_state(pk: int, state: ServerState) -> None:
    current = health_of(pk)
    if current.state != state:
        _health[pk] = replace(current, state=state, since=_now())


def note_failure(pk: int, error: str) -> None:
    """Server `pk` failed (its start, or its process stopped): `failing`, with why."""
    now = _now()
    _health[pk] = replace(
        health_of(pk),
        state=ServerState.FAILING,
        since=now,
        last_error=error,
        last_error_at=now,
    )


def note_error(pk: int, error: str) -> None:
    """An error worth the admin's eye that leaves the state as it is (a refresh that failed)."""
    _health[pk] = replace(health_of(pk), last_error=error, last_error_at=_now())


def forget_all() -> None:
    """Tests: start from no server known."""
    _health.clear()
