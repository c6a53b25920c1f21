"""Publishing a notebook's events: stored with the next seq, then sent to its channel-layer group.

Stored events get `seq` from `Task.last_seq` under the notebook's row lock, in the same
transaction as the `Event` insert, so seqs are contiguous and commit in order on PostgreSQL and
SQLite alike. Streamed token deltas (`agent_stream`) are not stored: `runs.live.streams` relays
them and keeps the text so far for sockets that connect mid-stream.
"""

from __future__ import annotations

import asyncio
from typing import Any

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.db import transaction
from pydantic import BaseModel

from runs.engine import AgentEvent, AgentOutput, AgentStream, StepCompleted, StepFailed
from runs.live.streams import StreamRelay
from runs.models import Event, Step, Task, Turn, group_name
from runs.store.fence import check as check_fence
from runs.store.fence import fence_token

EVENT_MESSAGE = "notebook.event"
DELTA_MESSAGE = "notebook.delta"


def store_events(
    task_pk: int, rows: list[tuple[dict[str, Any], int | None]], token: str | None
) -> list[int]:
    """Insert Events with the notebook's next seqs, in one transaction; returns the seqs."""
    with transaction.atomic():
        last, lease_owner = (
            Task.objects.select_for_update()
            .values_list("last_seq", "lease_owner")
            .get(pk=task_pk)
        )
        check_fence(
            task_pk, lease_owner, token
        )  # a run that lost its lease adds nothing to the trace
        first = int(last) + 1
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
        Task.objects.filter(pk=task_pk).update(last_seq=first + len(rows) - 1)
        for payload, _ in rows:
            if payload["type"] == "step_failed" and payload.get("step_id"):
                # the reason a step failed belongs on its row too (the store never sees it)
                Step.objects.filter(step_id=payload["step_id"]).update(
                    error=str(payload.get("error", ""))[:10_000]
                )
    return list(range(first, first + len(rows)))


def store_event(task_pk: int, payload: dict[str, Any], turn_pk: int | None) -> int:
    """Insert one Event with the notebook's next seq (fenced by this context's lease); returns the seq."""
    return store_events(task_pk, [(payload, turn_pk)], fence_token.get())[0]


def compact_agent_input(payload: dict[str, Any]) -> dict[str, Any]:
    """Keep what is new in a model call: its system messages and what follows the last reply.

    Every call resends the whole conversation, which is already stored as Message rows; storing
    and broadcasting it again per call would grow a long notebook's trace quadratically.
    """
    messages: list[dict[str, Any]] = payload.get("input") or []
    last_reply = max(
        (i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1
    )
    if last_reply < 0:
        return payload
    kept = [
        m for m in messages[: last_reply + 1] if m.get("role") == "system"
    ] + messages[last_reply + 1 :]
    return {**payload, "input": kept, "input_omitted": len(messages) - len(kept)}


def _turn_pk(task_pk: int, engine_id: str) -> int | None:
    return (
        Turn.objects.filter(task_id=task_pk, engine_id=engine_id)
        .values_list("pk", flat=True)
        .first()
    )


class Publisher:
    """Stores and broadcasts one notebook's events (one per notebook per process and loop)."""

    def __init__(self, task_pk: int) -> None:
        self.task_pk = task_pk
        self.group = group_name(task_pk)
        self.layer = get_channel_layer()
        self.last_seq = (
            0  # the last seq this process handed out (deltas carry it as after_seq)
        )
        self.streams = StreamRelay(
            self._send_delta,
            lambda: self.last_seq,
            lambda: self._queued,
            self.wait_events,
        )
        # Events wait here for the writer task, which stores each run of them in one transaction
        # (a group commit): a turn's parallel tool calls do not queue behind each other's writes.
        self._queue: list[tuple[dict[str, Any], str | None, asyncio.Future[int]]] = []
        self._writer: asyncio.Task[None] | None = None
        self._turns: dict[str, int] = {}
        self._queued = 0  # events handed to the writer so far
        self._written = (
            0  # of them, sent to the group (or failed to store): always a prefix
        )
        self._progress = (
            asyncio.Event()
        )  # set (and replaced) each time `_written` grows

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
            await self.streams.send_pending(event.step_id)
            self.streams.drop(
                event.step_id
            )  # e.g. a model call that broke off mid-stream
        await self.publish(event)

    async def publish(self, event: BaseModel) -> int:
        """Store `event` with the next seq and send it to every socket watching the notebook."""
        payload = event.model_dump(mode="json")
        if payload.get("type") == "agent_input":
            payload = compact_agent_input(payload)
        loop = asyncio.get_running_loop()
        stored: asyncio.Future[int] = loop.create_future()
        # a caller cancelled meanwhile cannot read a failure; don't report it as never retrieved
        stored.add_done_callback(lambda f: f.cancelled() or f.exception())
        # the lease this event is written under travels with it: the writer runs in another context
        self._queue.append((payload, fence_token.get(), stored))
        self._queued += 1
        if self._writer is None or self._writer.done():
            self._writer = loop.create_task(self._write_queued())
        return await asyncio.shield(
            stored
        )  # stored and sent even if the caller is cancelled

    async def _write_queued(self) -> None:
        """Store and send queued events in order: each run with the same lease in one transaction."""
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
                seqs = await database_sync_to_async(store_events)(
                    self.task_pk, rows, token
                )
            except BaseException as exc:
                for _, _, stored in batch:
                    if not stored.done():
                        stored.set_exception(exc)
                self._advance(
                    len(batch)
                )  # nothing will be sent for them; deltas need not wait
                if isinstance(exc, Exception):
                    continue
                raise
            for (_, _, stored), seq in zip(batch, seqs):
                if (
                    not stored.done()
                ):  # every writer of the batch goes on together (e.g. parallel tools)
                    stored.set_result(seq)
            for (payload, _, _), seq in zip(
                batch, seqs
            ):  # the seq order is this task's, whatever they do next
                await self.layer.group_send(
                    self.group, {"type": EVENT_MESSAGE, "seq": seq, "event": payload}
                )
                self.last_seq = seq  # deltas name the last event sent before them
                self._advance(1)

    def _advance(self, count: int) -> None:
        self._written += count
        self._progress.set()
        self._progress = asyncio.Event()

    async def wait_events(self, count: int, timeout: float = 5.0) -> None:
        """Return once the first `count` events emitted here went to the group (deltas wait for it).

        Bounded: a writer stuck on the database delays a stream by `timeout` at most.
        """
        while self._written < count:
            try:
                await asyncio.wait_for(self._progress.wait(), timeout)
            except TimeoutError:
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

    async def _send_delta(self, text: str) -> None:
        await self.layer.group_send(self.group, {"type": DELTA_MESSAGE, "text": text})

    def snapshots(self) -> list[tuple[str, str, str]]:
        """(step_id, phase, text) of every step streaming in this process right now."""
        return self.streams.snapshots()
