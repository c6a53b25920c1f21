"""Streamed tokens: relayed to the notebook's sockets as they come, and kept for late sockets.

Deltas are not stored as events. `StreamRelay` keeps a step's unsent tokens and asks the
notebook's publisher to send them (`request_send`, which never waits): they leave from the
publisher's one sender task, in the order they were emitted among the stored events, and never
hold up the step. When tokens arrive faster than they can be sent (a fast model, a busy server,
a slow layer), the ones waiting are merged into a single `delta`, so the number of messages
adapts to the load instead of overflowing the layer's per-socket queues. A `delta` carries
`response`, the whole text so far, on the first message of a stream and then at most every
`RESPONSE_EVERY_S`, so a client that missed something heals without every message growing
with the answer.

The text so far is also flushed to `Step.stream_text` at most every `FLUSH_EVERY_S` (and in
full when the model turn ends), for sockets that connect mid-stream to any server process. One
`StreamFlusher` per event loop does that for every stream of the process at once: one database
call and one prepared UPDATE run over the changed streams per flush, however many notebooks
stream (with one write per stream every 0.2 s, 500 streaming notebooks queued 2,500 writes a
second on the thread every database call of the process goes through).

Two orderings make a page draw each token once. A delta leaves only after every stored event
emitted before its tokens has gone to the group (the publisher's sender keeps emission order),
so a page never sees a model call's tokens before the `agent_input` that opens it. And a delta carries its `offset` in the
stream's text, so a page that already has those characters (from a `stream_snapshot` taken
while the delta was on its way) keeps only what is new.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
from channels.db import database_sync_to_async
from django.db import connection, transaction

from runs.engine import AgentStream
from runs.models import Step
from runs.protocol import delta_text
from runs.protocol.wire import js_length
from runs.realtime.pacing import per_loop
from runs.store.columns import column, table

logger = logging.getLogger(__name__)

FLUSH_EVERY_S = 0.2
RESPONSE_EVERY_S = 0.25
# steps per executemany
FLUSH_BATCH = 250


def write_stream(step_id: str, phase: str, text: str) -> None:
    write_streams([(step_id, phase, text)])


def write_streams(rows: list[tuple[str, str, str]]) -> None:
    """Store several steps' (step_id, phase, text) at once: one prepared UPDATE run for every
    row (`executemany`: one round trip per batch on PostgreSQL, no ORM expression to build)."""
    sql = (
        f"UPDATE {table(Step)} SET {column(Step, 'stream_text')} = %s, "
        f"{column(Step, 'stream_phase')} = %s "
        f"WHERE {column(Step, 'step_id')} = %s"
    )
    with transaction.atomic(), connection.cursor() as cursor:
        for start in range(0, len(rows), FLUSH_BATCH):
            batch = rows[start : start + FLUSH_BATCH]
            cursor.executemany(
                sql, [(text, phase, step) for step, phase, text in batch]
            )


@dataclass
class StreamBuffer:
    """One step's stream: its text so far."""

    phase: str
    text: str


class StreamFlusher:
    """Stores the text of every stream of one event loop that changed, every FLUSH_EVERY_S.

    One write at a time: the next is due FLUSH_EVERY_S after the last one ended, so a slow
    database spaces the writes out instead of queueing them.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.dirty: dict[str, StreamBuffer] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._writing: asyncio.Task[None] | None = None

    def mark(self, step_id: str, buffer: StreamBuffer) -> None:
        self.dirty[step_id] = buffer
        if self._timer is None and self._writing is None:
            self._timer = self.loop.call_later(FLUSH_EVERY_S, self._start)

    def forget(self, step_id: str) -> None:
        """The stream ended (its full text is stored by the caller): nothing more to flush."""
        self.dirty.pop(step_id, None)

    def _start(self) -> None:
        self._timer = None
        rows = [(step_id, b.phase, b.text) for step_id, b in self.dirty.items()]
        self.dirty.clear()
        self._writing = self.loop.create_task(self._write(rows))

    async def _write(self, rows: list[tuple[str, str, str]]) -> None:
        try:
            await database_sync_to_async(write_streams)(rows)
        except Exception:  # noqa: BLE001 - a lost flush only delays a reconnecting socket's text
            logger.warning("could not store %d streams' text", len(rows), exc_info=True)
        finally:
            self._writing = None
            if self.dirty:
                self._timer = self.loop.call_later(FLUSH_EVERY_S, self._start)


# this event loop's flusher
flusher = per_loop(StreamFlusher)


class StreamRelay:
    """The streams of one notebook in this process."""

    def __init__(self, request_send: Callable[[str], None]) -> None:
        # queues "send this step's waiting tokens" with the publisher's sender
        self._request_send = request_send
        self.buffers: dict[str, StreamBuffer] = {}
        # unsent tokens by step; they outlive the buffer until the sender takes them
        self._unsent: dict[str, list[AgentStream]] = {}
        self._response_sent_at: dict[str, float] = {}
        # when each stream's last delta left, and where it ended (code points, UTF-16 units):
        # the next offset without measuring the whole text again
        self._sent_at: dict[str, float] = {}
        self._sent_end: dict[str, tuple[int, int]] = {}
        # the flusher of the loop this relay streams on (its publisher's: one per loop), found
        # at the first token instead of once per token
        self._flusher: StreamFlusher | None = None

    def add(self, event: AgentStream) -> None:
        """Take one token; it leaves from the sender task (merged with others if they pile up)."""
        step_id = event.step_id or ""
        buffer = self.buffers.get(step_id)
        if buffer is None:
            buffer = self.buffers[step_id] = StreamBuffer(
                event.phase or "", event.response
            )
        buffer.phase, buffer.text = event.phase or "", event.response
        unsent = self._unsent.get(step_id)
        if unsent is None:
            self._unsent[step_id] = [event]
            self._request_send(step_id)
        else:
            unsent.append(event)
        if step_id:
            if self._flusher is None:
                self._flusher = flusher()
            self._flusher.mark(step_id, buffer)

    def due_in(self, step_id: str, gather_s: float) -> float:
        """Seconds until the step's waiting tokens should leave, gathering for `gather_s`."""
        sent_at = self._sent_at.get(step_id)
        if sent_at is None or gather_s <= 0:
            return 0.0
        return sent_at + gather_s - time.monotonic()

    def take(self, step_id: str, after_seq: int) -> str | None:
        """The step's waiting tokens as one encoded `delta` message (None if there are none)."""
        events = self._unsent.pop(step_id, None)
        if not events:
            return None
        now = time.monotonic()
        sent_at = self._response_sent_at.get(step_id)
        with_response = sent_at is None or now - sent_at >= RESPONSE_EVERY_S
        if with_response:
            self._response_sent_at[step_id] = now
        merged = "".join(e.delta for e in events)
        offset = self._offset(step_id, events[-1].response, merged)
        if step_id in self.buffers:
            self._sent_at[step_id] = now
        else:  # the stream ended before its last tokens left
            self._sent_at.pop(step_id, None)
            self._sent_end.pop(step_id, None)
        return delta_text(_merged(events, merged, with_response), after_seq, offset)

    def _offset(self, step_id: str, response: str, merged: str) -> int:
        """Where `merged`, the end of `response`, starts in it, in UTF-16 units.

        A stream only grows, so it starts where the last delta ended: measuring the whole text
        on every delta was O(n) per token. Measured again if the text did not grow as expected.
        """
        start = len(response) - len(merged)
        ended = self._sent_end.get(step_id)
        if ended is not None and ended[0] == start:
            offset = ended[1]
        else:
            offset = js_length(response) - js_length(merged)
        self._sent_end[step_id] = (len(response), offset + js_length(merged))
        return offset

    async def end(self, step_id: str, text: str, phase: str) -> None:
        """A model turn finished: store its full text, forget the buffer (queued tokens still go)."""
        buffer = self.drop(step_id)
        if buffer is not None or text:
            await database_sync_to_async(write_stream)(step_id, phase, text)

    def drop(self, step_id: str) -> StreamBuffer | None:
        """Forget a step's stream (its run ended, with or without a final model output)."""
        buffer = self.buffers.pop(step_id, None)
        self._response_sent_at.pop(step_id, None)
        if step_id not in self._unsent:  # else take() forgets them with the last tokens
            self._sent_at.pop(step_id, None)
            self._sent_end.pop(step_id, None)
        if buffer is not None and self._flusher is not None:
            self._flusher.forget(step_id)
        return buffer

    def snapshots(self) -> list[tuple[str, str, str]]:
        """(step_id, phase, text) of every step streaming in this process right now."""
        return [
            (step_id, b.phase, b.text) for step_id, b in self.buffers.items() if step_id
        ]


def _merged(events: list[AgentStream], delta: str, with_response: bool) -> str:
    """One `agent_stream` event as JSON for consecutive deltas of one stream."""
    first, last = events[0], events[-1]
    payload: dict[str, Any] = {
        "task_id": first.task_id,
        "step_id": first.step_id,
        "at": first.at,
        "type": "agent_stream",
        "delta": delta,
        "current_agent_name": last.current_agent_name,
        "phase": last.phase,
    }
    if last.tool_calls:
        payload["tool_calls"] = [
            call.model_dump(mode="json") for call in last.tool_calls
        ]
    if with_response:
        payload["response"] = last.response
    try:
        # once per frame: orjson is several times quicker than json.dumps (UTF-8 as it is,
        # where json.dumps escaped it; the page parses either)
        return orjson.dumps(payload).decode()
    except TypeError:  # e.g. a lone surrogate, which orjson refuses and json escapes
        return json.dumps(payload, separators=(",", ":"))
