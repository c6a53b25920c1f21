"""Publishing a notebook's events: stored with the next seq, then sent to its channel-layer group.

Stored events get `seq` from `Task.last_seq` under the notebook's row lock, in the same
transaction as the `Event` insert, so seqs are contiguous and commit in order on PostgreSQL and
SQLite alike. Storing and sending are two tasks: an event's caller goes on once it is stored,
and one sender task sends events, streamed tokens and replies in the order they were emitted
(an event once it is stored). A channel layer that fails or hangs (runs.realtime.broadcast)
delays or drops only those live copies, which sockets then fill from the Event table by seq. Streamed token deltas (`agent_stream`) are not stored: `runs.realtime.streams` relays
them and keeps the text so far for sockets that connect mid-stream.
"""

from __future__ import annotations

import asyncio
import weakref
from collections import deque
from typing import Any

from channels.db import database_sync_to_async
from django.db import transaction
from pydantic import BaseModel

from runs.conf import conf
from runs.engine import AgentEvent, AgentOutput, AgentStream, StepCompleted, StepFailed
from runs.engine.messages import new_in_call
from runs.models import Event, Step, Turn, group_name
from runs.protocol.wire import bounded
from runs.realtime import broadcast
from runs.realtime.pacing import loop_lag
from runs.realtime.streams import StreamRelay
from runs.store import events
from runs.store.fence import advance, fence_token
from runs.store.stored_once import store_once
from runs.telemetry import metrics
from runs.telemetry import recorder as telemetry

EVENT_MESSAGE = "notebook.event"
CATCH_UP_MESSAGE = "notebook.catch_up"
DELTA_MESSAGE = "notebook.delta"


def store_events(
    task_pk: int, rows: list[tuple[dict[str, Any], int | None]], token: str | None
) -> list[int]:
    """Insert Events with the notebook's next seqs, in one transaction; returns the seqs."""
    failures = [p for p, _ in rows if p["type"] == "step_failed" and p.get("step_id")]
    if events.supported() and not failures:  # one statement (runs.store.events)
        first = events.insert_at_once(
            task_pk,
            [
                (turn_pk, p.get("step_id"), p["type"], p, p.get("at") or 0.0)
                for p, turn_pk in rows
            ],
            token,
        )
        return list(range(first, first + len(rows)))
    with transaction.atomic():
        # a run that lost its lease adds nothing to the trace (LeaseLost rolls this back)
        first = advance(task_pk, "last_seq", len(rows), token=token) - len(rows) + 1
        Event.objects.bulk_create(
            Event(
                task_id=task_pk,
                seq=first + n,
                turn_id=turn_pk,
                step_id=payload.get("step_id"),
                type=payload["type"],
                payload=payload,
                at=payload.get("at") or 0.0,
            )
            for n, (payload, turn_pk) in enumerate(rows)
        )
        for payload in failures:
            # the reason a step failed belongs on its row too (the store never sees it)
            Step.objects.filter(step_id=payload["step_id"]).update(
                error=str(payload.get("error", ""))[:10_000]
            )
    return list(range(first, first + len(rows)))


def store_and_shape(
    task_pk: int, rows: list[tuple[dict[str, Any], int | None]], token: str | None
) -> list[tuple[int, dict[str, Any]]]:
    """`store_events`, then each event as sockets are sent it (runs.protocol.wire): the seq
    and the shaped payload of each, from one hand-over to the database thread instead of two
    per event (a turn stores ~7 events; each hand-over wakes the loop from another thread)."""
    seqs = store_events(task_pk, rows, token)
    return [
        (seq, bounded(payload, task_pk, seq)) for (payload, _), seq in zip(rows, seqs)
    ]


def store_event(task_pk: int, payload: dict[str, Any], turn_pk: int | None) -> int:
    """Insert one Event with the notebook's next seq (fenced by this context's lease); returns the seq."""
    return store_events(task_pk, [(payload, turn_pk)], fence_token.get())[0]


def compact_agent_input(payload: dict[str, Any]) -> dict[str, Any]:
    """Keep what is new in a model call: its system messages and what follows the last reply.

    Every call resends the whole conversation, which is already stored as Message rows; storing
    and broadcasting it again per call would grow a long notebook's trace quadratically.
    """
    messages: list[dict[str, Any]] = [
        _image_data_left_out(m) for m in payload.get("input") or []
    ]
    payload = {**payload, "input": messages}
    keep = new_in_call([str(m.get("role")) for m in messages])
    if len(keep) == len(messages):
        return payload
    kept = [messages[i] for i in keep]
    return {**payload, "input": kept, "input_omitted": len(messages) - len(kept)}


def _image_data_left_out(message: dict[str, Any]) -> dict[str, Any]:
    """An image's data URL (megabytes) is stored with its message, not again in each call's event."""
    images = message.get("images") or []
    if not any(str(i.get("url", "")).startswith("data:") for i in images):
        return message
    shown = [
        {
            **i,
            "url": i["url"].split(",", 1)[0]
            + f",… ({len(i['url'])} characters, kept with the message)",
        }
        if str(i.get("url", "")).startswith("data:")
        else i
        for i in images
    ]
    return {**message, "images": shown}


def gather_floor() -> float:
    return conf().delta_gather_s


async def _bounded(payload: dict[str, Any], task_pk: int, seq: int) -> dict[str, Any]:
    """The event as the channel layer and sockets carry it (runs.protocol.wire), measured and cut
    in a worker thread: a large one would hold up the loop every socket shares. The writer
    shapes what it stores already (`store_and_shape`); this is for an event it did not."""
    return await asyncio.to_thread(bounded, payload, task_pk, seq)


def _turn_pk(task_pk: int, engine_id: str) -> int | None:
    return (
        Turn.objects.filter(task_id=task_pk, engine_id=engine_id)
        .values_list("pk", flat=True)
        .first()
    )


def _finish(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


# An event (the future of its seq, and its payload), a step's waiting tokens (its step_id),
# or a reply to one socket (its channel and the message).
Outgoing = tuple["asyncio.Future[int] | str", dict[str, Any]] | str


class Publisher:
    """Stores and broadcasts one notebook's events (one per notebook per process and loop)."""

    def __init__(self, task_pk: int) -> None:
        self.task_pk = task_pk
        self.group = group_name(task_pk)
        # the last seq sent to the group (deltas carry it as after_seq)
        self.last_seq = 0
        self.streams = StreamRelay(self._queue_deltas)
        # Events wait here for the writer task, which stores each run of them in one transaction
        # (a group commit): a turn's parallel tool calls do not queue behind each other's writes.
        self._queue: list[tuple[dict[str, Any], str | None, asyncio.Future[int]]] = []
        self._writer: asyncio.Task[None] | None = None
        # What the sender task sends, in the order it was emitted: an event (the future of its
        # seq and its payload, sent once stored), the waiting tokens of a step (its step_id;
        # taken from the relay when their turn comes), or a reply to one socket (channel, message).
        self._outbox: deque[Outgoing] = deque()
        self._sender: asyncio.Task[None] | None = None
        # when the sender task was asked to start (how late it starts tells the loop's lag),
        # and what it waits on while a stream's tokens gather (set when something is queued)
        self._sender_asked_at = 0.0
        self._gathering: asyncio.Future[None] | None = None
        # nudges the sockets after a lost send
        self._healer: asyncio.Task[None] | None = None
        self._turns: dict[str, int] = {}
        # each stored event as sockets are sent it, shaped by the writer (by its seq's future),
        # until the sender takes it
        self._shown: dict[asyncio.Future[int], dict[str, Any]] = {}

    async def __call__(self, event: AgentEvent) -> None:
        """The runner's on_event: every engine event comes through here."""
        if isinstance(event, AgentStream):
            self.streams.add(event)  # the hot path: no await, no database
            return
        if isinstance(event, AgentOutput) and event.step_id:
            # the last deltas go out before the output, and the full text is stored
            await self.streams.end(
                event.step_id, event.response.text, event.phase or ""
            )
        elif isinstance(event, (StepCompleted, StepFailed)) and event.step_id:
            # e.g. a model call that broke off mid-stream
            self.streams.drop(event.step_id)
        await self.publish(event)

    async def publish(self, event: BaseModel) -> int:
        """Store `event` with the next seq and send it to every socket watching the notebook."""
        telemetry.observe(self.task_pk, event)  # a no-op unless spans are exported
        metrics.observe(event)
        payload = event.model_dump(mode="json")
        if payload.get("type") == "agent_input":
            payload = compact_agent_input(payload)
        payload = store_once(payload)
        loop = asyncio.get_running_loop()
        stored: asyncio.Future[int] = loop.create_future()
        # a caller cancelled meanwhile cannot read a failure; don't report it as never retrieved
        stored.add_done_callback(lambda f: f.cancelled() or f.exception())
        # the lease this event is written under travels with it: the writer runs in another context
        self._queue.append((payload, fence_token.get(), stored))
        self._send_later((stored, payload))
        if self._writer is None or self._writer.done():
            self._writer = loop.create_task(self._write_queued())
        # stored (and then sent) even if the caller is cancelled
        return await asyncio.shield(stored)

    async def _write_queued(self) -> None:
        """Store queued events in order: each run with the same lease in one transaction."""
        while self._queue:
            token = self._queue[0][1]
            size = next(
                (n for n, item in enumerate(self._queue) if item[1] != token),
                len(self._queue),
            )
            batch, self._queue = self._queue[:size], self._queue[size:]
            try:
                rows = [
                    (payload, await self._turn_of(payload.get("task_id")))
                    for payload, _, _ in batch
                ]
                stored_rows = await database_sync_to_async(store_and_shape)(
                    self.task_pk, rows, token
                )
            except BaseException as exc:
                for _, _, stored in batch:
                    if not stored.done():
                        stored.set_exception(exc)
                if isinstance(exc, Exception):
                    continue
                raise
            for (_, _, stored), (seq, shown) in zip(batch, stored_rows):
                if (
                    not stored.done()
                ):  # every writer of the batch goes on together (e.g. parallel tools)
                    self._shown[stored] = shown
                    stored.set_result(seq)

    def sending(self) -> bool:
        """Whether something emitted (an event, tokens, a reply) has not been sent yet."""
        return bool(self._outbox) or not (self._sender is None or self._sender.done())

    def reply(self, channel: str, message: dict[str, Any]) -> None:
        """Send `message` to one socket's channel after the events emitted before it."""
        self._send_later((channel, message))

    def _queue_deltas(self, step_id: str) -> None:
        self._send_later(step_id)

    def _send_later(self, item: Outgoing) -> None:
        self._outbox.append(item)
        if self._gathering is not None and not self._gathering.done():
            self._gathering.set_result(None)  # it goes now, with what gathered so far
        if self._sender is None or self._sender.done():
            loop = asyncio.get_running_loop()
            self._sender_asked_at = loop.time()
            self._sender = loop.create_task(self._send_outbox())

    async def _send_outbox(self) -> None:
        """Send what was emitted, in order; never raises (a lost copy is healed by seq)."""
        loop = asyncio.get_running_loop()
        lag = loop_lag()
        lag.observe(loop.time() - self._sender_asked_at)
        while self._outbox:
            item = self._outbox.popleft()
            if isinstance(item, str):
                wait = self.streams.due_in(item, lag.gather_s(gather_floor()))
                if wait > 0 and not self._outbox:
                    await self._gather(loop, wait)
                text = self.streams.take(item, self.last_seq)
                if text is not None:
                    message = {"type": DELTA_MESSAGE, "text": text}
                    metrics.delta(await broadcast.group_send(self.group, message))
                continue
            target, payload = item
            if isinstance(target, str):
                await broadcast.channel_send(target, payload)
                continue
            try:
                seq = await asyncio.shield(target)
            except Exception:  # noqa: BLE001 - not stored: nothing to send
                continue
            shown = self._shown.pop(target, None)
            if shown is None:
                shown = await _bounded(payload, self.task_pk, seq)
            event = {"type": EVENT_MESSAGE, "seq": seq, "event": shown}
            sent = await broadcast.group_send(self.group, event)
            self.last_seq = seq  # deltas name the last event sent before them
            if not sent and (self._healer is None or self._healer.done()):
                self._healer = asyncio.get_running_loop().create_task(self._heal())

    async def _gather(self, loop: asyncio.AbstractEventLoop, wait: float) -> None:
        """Let a stream's tokens gather for `wait` s (runs.realtime.pacing), or until more is queued."""
        gathering = self._gathering = loop.create_future()
        timer = loop.call_later(wait, _finish, gathering)
        try:
            await gathering
        finally:
            timer.cancel()
            self._gathering = None

    async def _heal(self) -> None:
        """After an event was not sent, nudge the sockets until the layer carries it.

        A socket fills a gap when the next event arrives; this nudge covers the last events of
        a run, after which nothing else may arrive for a long time.
        """
        while True:
            await asyncio.sleep(broadcast.PROBE_EVERY_S)
            nudge = {"type": CATCH_UP_MESSAGE, "last_seq": self.last_seq}
            if await broadcast.group_send(self.group, nudge):
                metrics.catch_up("heal")
                return

    async def _turn_of(self, engine_id: str | None) -> int | None:
        if not engine_id:
            return None
        if engine_id not in self._turns:
            pk = await database_sync_to_async(_turn_pk)(self.task_pk, engine_id)
            if pk is None:
                return None
            self._turns[engine_id] = pk
        return self._turns[engine_id]

    # --- streaming ------------------------------------------------------------------------------

    def snapshots(self) -> list[tuple[str, str, str]]:
        """(step_id, phase, text) of every step streaming in this process right now."""
        return self.streams.snapshots()


# Each loop's publishers (a closed loop's go with it), each kept only while something uses it: a
# cached runtime, a running step, its writer or stream timers. A later one is then a fresh start,
# as in a new process; there is never more than one at a time, so events keep their order.
_publishers: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, weakref.WeakValueDictionary[int, Publisher]
] = weakref.WeakKeyDictionary()


def publisher_for(task_pk: int) -> Publisher:
    """The notebook's publisher in this event loop (one, so its events keep their order)."""
    loop = asyncio.get_running_loop()
    publishers = _publishers.get(loop)
    if publishers is None:
        publishers = _publishers[loop] = weakref.WeakValueDictionary()
    publisher = publishers.get(task_pk)
    if publisher is None:
        publisher = publishers[task_pk] = Publisher(task_pk)
    return publisher


def existing_publisher(task_pk: int) -> Publisher | None:
    """The notebook's publisher in this loop if one was made (it knows live stream text)."""
    publishers = _publishers.get(asyncio.get_running_loop())
    return publishers.get(task_pk) if publishers is not None else None


def forget_publishers() -> None:
    """Drop every loop's publishers (tests switch loops and settings)."""
    _publishers.clear()
