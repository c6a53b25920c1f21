"""How many websockets (notebook pages and inboxes) each person holds open in this process.

Every open socket holds a file descriptor, a channel and its group memberships; with no limit,
one logged-in person could open sockets until daphne ran out of file descriptors and refused
everyone (2,000 of them took 30 s and 76 MB). Past `AGENTUI_SOCKETS_PER_USER` a new socket is
closed with `CLOSE_TOO_MANY`; the page says so and tries again later. Consumers run on the
event loop only, so the counts need no lock.
"""

from __future__ import annotations

from collections import Counter

from runs.conf import conf

CLOSE_TOO_MANY = 4429
_open: Counter[int] = Counter()


def hold(user_id: int) -> bool:
    """Count one more socket of `user_id`; False (nothing counted) when they are at the limit."""
    if _open[user_id] >= conf().sockets_per_user:
        return False
    _open[user_id] += 1
    return True


def release(user_id: int) -> None:
    _open[user_id] -= 1
    if _open[user_id] <= 0:
        del _open[user_id]


class CountedSocket:
    """A consumer counted against its person's limit: `hold_socket` on connect, and
    `release_socket` on disconnect (safe to call when nothing was held)."""

    held_for: int | None = None  # the person this socket is counted for

    def hold_socket(self, user_id: int) -> bool:
        if not hold(user_id):
            return False
        self.held_for = user_id
        return True

    def release_socket(self) -> None:
        if self.held_for is not None:
            release(self.held_for)
            self.held_for = None
