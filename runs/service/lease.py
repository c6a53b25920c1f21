"""Notebook leases: one holder at a time may change a notebook's engine state.

A lease is a token in `Task.lease_owner`, taken with one conditional UPDATE (free, or stale:
not renewed for `stale_after()` seconds), so two tabs, or two server processes, acting on the
same notebook at the same moment cannot both win. A step run holds its lease until the turn
stops and renews it meanwhile; if renewing fails (the lease went stale and someone took it
over), the holder cancels its work rather than keep writing.

A token names the process that holds it (host, pid namespace, pid). A lease held by a process
of this machine that no longer runs (the server was restarted) is taken over at once instead of
after `stale_after()` seconds, so a tab left open across a restart is not refused with
`already_running` meanwhile; a holder on another machine is judged by staleness alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import os
import socket
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import TypeVar

from channels.db import database_sync_to_async
from django.db.models import Q
from django.utils import timezone

from runs.conf import conf
from runs.models import Task
from runs.store.fence import fenced

T = TypeVar("T")

logger = logging.getLogger(__name__)


def _pid_namespace() -> str:
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:  # not Linux: no namespace to compare, so no holder is judged gone
        return ""


_HOST = socket.gethostname()[:20].replace(":", "_")
_PID_NS = _pid_namespace()
# Identifies this server process in lease tokens (host:pid namespace:pid).
PROCESS_ID = f"{_HOST}:{_PID_NS}:{os.getpid()}"


def holder_is_gone(token: str) -> bool:
    """Whether `token` was taken by a process of this machine (same pid namespace) that has
    ended; False when that cannot be told (another machine, an older token, this process)."""
    parts = token.split(":")
    if len(parts) != 4 or not _PID_NS or parts[:2] != [_HOST, _PID_NS]:
        return False
    try:
        pid = int(parts[2])
    except ValueError:
        return False
    if pid == os.getpid() or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # it exists (e.g. another user's process)
        return False
    return _is_zombie(pid)


def _is_zombie(pid: int) -> bool:
    """Whether `pid` has ended but its parent has not reaped it yet (a process killed under a
    supervisor that has not noticed): it runs nothing, though it still answers `kill(pid, 0)`."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # gone meanwhile, or no /proc: judged by staleness
        return False
    return stat.rsplit(")", 1)[-1].split()[:1] == ["Z"]


def lease_is_dead(owner: str, at: datetime | None) -> bool:
    """Whether a notebook's lease (its `lease_owner`, `lease_at`) protects nothing any more."""
    if not owner or at is None:
        return True
    return at < timezone.now() - timedelta(seconds=stale_after()) or holder_is_gone(
        owner
    )


def stale_after() -> float:
    """Seconds without renewal after which a lease counts as abandoned (its process died)."""
    return conf().lease_stale_s


def heartbeat_every() -> float:
    return stale_after() / 6


def try_acquire(task_pk: int) -> str | None:
    """Take the notebook's lease if it is free or stale; the new token, or None if held."""
    token = f"{PROCESS_ID}:{uuid.uuid4().hex[:16]}"
    now = timezone.now()
    stale = now - timedelta(seconds=stale_after())
    taken = (
        Task.objects.filter(pk=task_pk)
        .filter(Q(lease_owner="") | Q(lease_at__lt=stale) | Q(lease_at__isnull=True))
        .update(lease_owner=token, lease_at=now)
    )
    if taken:
        return token
    holder = (
        Task.objects.filter(pk=task_pk).values_list("lease_owner", flat=True).first()
    )
    if holder and holder_is_gone(holder):
        # its process ended (a restart) without giving the lease back
        taken = Task.objects.filter(pk=task_pk, lease_owner=holder).update(
            lease_owner=token, lease_at=now
        )
        if taken:
            logger.warning(
                "notebook %s: took over the lease of ended process %s", task_pk, holder
            )
            return token
    return None


def renew(task_pk: int, token: str) -> bool:
    """Push the lease's expiry back; False if it is no longer ours."""
    return bool(
        Task.objects.filter(pk=task_pk, lease_owner=token).update(
            lease_at=timezone.now()
        )
    )


def release(task_pk: int, token: str) -> bool:
    """Give the lease up (if still ours)."""
    return bool(
        Task.objects.filter(pk=task_pk, lease_owner=token).update(
            lease_owner="", lease_at=None
        )
    )


def is_held(task_pk: int) -> bool:
    """Whether someone holds a live lease on the notebook (not stale, its process running)."""
    row = Task.objects.filter(pk=task_pk).values_list("lease_owner", "lease_at").first()
    return row is not None and not lease_is_dead(*row)


class Lease:
    """A held lease; `keep_alive(task)` renews it while `task` runs and cancels `task` if lost."""

    def __init__(self, task_pk: int, token: str) -> None:
        self.task_pk = task_pk
        self.token = token
        self._beat: asyncio.Task[None] | None = None
        self.released = False

    @classmethod
    async def acquire(cls, task_pk: int) -> Lease | None:
        token = await database_sync_to_async(try_acquire)(task_pk)
        return cls(task_pk, token) if token else None

    def keep_alive(self, owner: asyncio.Task[object]) -> None:
        """Renew the lease every heartbeat while `owner` runs."""
        # a fresh context, like runs.service.runtime.spawn: not the caller's request thread
        self._beat = asyncio.get_running_loop().create_task(
            self._heartbeat(owner), context=contextvars.Context()
        )

    async def _heartbeat(self, owner: asyncio.Task[object]) -> None:
        while not owner.done():
            await asyncio.sleep(heartbeat_every())
            try:
                still_ours = await database_sync_to_async(renew)(
                    self.task_pk, self.token
                )
            except Exception:  # noqa: BLE001 - a database hiccup: try again next beat
                logger.warning(
                    "could not renew the lease on notebook %s",
                    self.task_pk,
                    exc_info=True,
                )
                continue
            if not still_ours:
                if await Task.objects.filter(pk=self.task_pk).aexists():
                    logger.error(
                        "lost the lease on notebook %s; stopping its run", self.task_pk
                    )
                else:  # deleted (runs.service.deletion): its pages were told
                    logger.info(
                        "notebook %s was deleted; stopping its run", self.task_pk
                    )
                owner.cancel()
                return

    def fenced(self) -> contextlib.AbstractContextManager[None]:
        """Within this, state and event writes fail (LeaseLost) if the lease is taken over."""
        return fenced(self.token)

    async def release(self) -> None:
        await self._stop_beat()
        if not self.released:
            self.released = True
            await database_sync_to_async(release)(self.task_pk, self.token)

    async def release_then(self, then: Callable[[int], T]) -> T:
        """`release`, then `then(task_pk)` (a read of what the lease's holder must look at once
        it is given back), in one database-thread call."""
        await self._stop_beat()
        holding = not self.released
        self.released = True

        def both() -> T:
            if holding:
                release(self.task_pk, self.token)
            return then(self.task_pk)

        return await database_sync_to_async(both)()

    async def _stop_beat(self) -> None:
        if self._beat is not None:
            self._beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._beat
