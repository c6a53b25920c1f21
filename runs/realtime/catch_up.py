"""Every live socket gets every stored event, whatever the channel layer dropped on the way.

Both channel layers drop a message silently when a socket's queue is full (the in-memory one
per socket, channels-redis per process), and a socket fills a gap from the Event table only
when a later event arrives: after a turn's last event none does, and the socket would wait
for good. So every `SWEEP_EVERY_S` this process reads, in one query, the last seq of every
notebook watched by a socket that has been quiet since the previous sweep (it handled no
message: its queue is empty) and sends each such socket that is behind the database a
`notebook.catch_up` naming that seq, unless this process's publisher of the notebook still has
something to send (the live copy may be on its way); the socket then sends the stored events it
missed from the Event table, in order, each once (runs.web.consumer).

Nothing here depends on the layer telling us what it dropped (channels-redis cannot), and a
socket that is busy is left alone: its queue still holds live copies in order, and a gap it
meets is filled when the next event arrives. Cost: one query per process per sweep while
sockets are open, one message to a socket only when it actually missed something. A quiet
socket whose notebook was deleted (its `deleted` notice lost with a dropped message) is nudged
the same way, without a seq: it then finds the notebook gone and tells its page.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import weakref
from typing import Protocol

from channels.db import database_sync_to_async

from runs.realtime import broadcast
from runs.realtime.publisher import CATCH_UP_MESSAGE, existing_publisher
from runs.store import queries
from runs.telemetry import metrics

logger = logging.getLogger(__name__)

SWEEP_EVERY_S = 1.0


class Follower(Protocol):
    """A socket following a notebook (runs.web.consumer.NotebookConsumer)."""

    task_pk: int
    channel_name: str
    live: bool  # resumed: stored events flow to it
    layer_ok: bool  # False while the layer fails (it then reads the database by itself)
    sent_seq: int  # the highest seq it has sent
    heard: int  # messages it has handled so far


class _Sweep:
    """The followers of one event loop, and the task sweeping them."""

    def __init__(self) -> None:
        self.followers: weakref.WeakSet[Follower] = weakref.WeakSet()
        # what each follower had heard at the last sweep
        self.heard: weakref.WeakKeyDictionary[Follower, int] = (
            weakref.WeakKeyDictionary()
        )
        self.task: asyncio.Task[None] | None = None


_sweeps: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Sweep] = (
    weakref.WeakKeyDictionary()
)


def follow(follower: Follower) -> None:
    """Watch `follower` from now on (until `unfollow`); starts this loop's sweep if needed."""
    loop = asyncio.get_running_loop()
    sweep = _sweeps.get(loop)
    if sweep is None:
        sweep = _sweeps[loop] = _Sweep()
    sweep.followers.add(follower)
    if sweep.task is None or sweep.task.done():
        # a fresh context: the sweep outlives the socket that started it
        sweep.task = loop.create_task(
            _sweep_while_followed(sweep),
            name="catch-up-sweep",
            context=contextvars.Context(),
        )


def unfollow(follower: Follower) -> None:
    sweep = _sweeps.get(asyncio.get_running_loop())
    if sweep is not None:
        sweep.followers.discard(follower)


async def _sweep_while_followed(sweep: _Sweep) -> None:
    while sweep.followers:
        await asyncio.sleep(SWEEP_EVERY_S)
        try:
            await sweep_once(sweep)
        except Exception:  # noqa: BLE001 - the next sweep tries again
            logger.exception("the catch-up sweep failed")


def quiet_followers(sweep: _Sweep) -> list[Follower]:
    """Live followers that handled nothing since the last sweep; remembers what each heard."""
    quiet = []
    for follower in list(sweep.followers):
        if (
            follower.live
            and follower.layer_ok
            and sweep.heard.get(follower) == follower.heard
        ):
            quiet.append(follower)
        sweep.heard[follower] = follower.heard
    return quiet


async def sweep_once(sweep: _Sweep) -> int:
    """Nudge the quiet followers that are behind the database; returns how many were."""
    quiet = quiet_followers(sweep)
    if not quiet:
        return 0
    last = await database_sync_to_async(queries.last_seqs)({f.task_pk for f in quiet})
    behind = [
        f
        for f in quiet
        if last.get(f.task_pk, 0) > f.sent_seq
        and sweep.heard.get(f) == f.heard
        and not _sending_here(f.task_pk)
    ]
    # notebooks deleted meanwhile (runs.service.deletion) whose notice a socket missed: a
    # catch-up without a seq makes it read the notebook, find it gone, and say so
    gone = [f for f in quiet if f.task_pk not in last and sweep.heard.get(f) == f.heard]
    metrics.catch_up("sweep", len(behind))
    for follower in behind:
        await broadcast.channel_send(
            follower.channel_name,
            {"type": CATCH_UP_MESSAGE, "last_seq": last[follower.task_pk]},
        )
    for follower in gone:
        await broadcast.channel_send(follower.channel_name, {"type": CATCH_UP_MESSAGE})
    return len(behind) + len(gone)


def _sending_here(task_pk: int) -> bool:
    publisher = existing_publisher(task_pk)
    return publisher is not None and publisher.sending()
