"""Streamed tokens: relayed to the notebook's sockets as they come, and kept for late sockets.

Deltas are not stored as events. `StreamRelay` sends them to the channel-layer group from one
sender task per notebook: when tokens arrive faster than they can be sent (a fast model, a busy
server), the ones waiting are merged into a single `delta`, so the number of messages adapts to
the load instead of overflowing the layer's per-socket queues. A `delta` carries `response`, the
whole text so far, on the first message of a stream and then at most every `RESPONSE_EVERY_S`,
so a client that missed something heals without every message growing with the answer.

The text so far is also flushed to `Step.stream_text` at most every `FLUSH_EVERY_S` (and in
full when the model turn ends), for sockets that connect mid-stream to any server process.

Two orderings make a page draw each token once. A delta leaves only after every stored event
emitted before its tokens has gone to the group (`wait_events`), so a page never sees a model
call's tokens before the `agent_input` that opens it. And a delta carries its `offset` in the
stream's text, so a page that already has those characters (from a `stream_snapshot` taken
while the delta was on its way) keeps only what is new.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from channels.db import database_sync_to_async

from runs.engine import AgentStream
from runs.models import Step
from runs.protocol import delta_text

logger = logging.getLogger(__name__)

FLUSH_EVERY_S = 0.2
RESPONSE_EVERY_S = 0.25


def js_length(text: str) -> int:
    """Length of `text` as a browser counts it (UTF-16 code units), for delta offsets."""
    return len(text.encode("utf-16-le")) // 2


def write_stream(step_id: str, phase: str, text: str) -> None:
    Step.objects.filter(step_id=step_id).update(stream_text=text, stream_phase=phase)


@dataclass
class StreamBuffer:
    """One step's stream: its text so far, the deltas not sent yet, and its timers."""

    phase: str
    text: str
    pending: list[AgentStream] = field(default_factory=list)
    events_before: int = 0  # stored events emitted before the newest pending token
    response_sent_at: float | None = None
    flush: asyncio.TimerHandle | None = field(default=None, repr=False)


class StreamRelay:
    """The streams of one notebook in this process."""

    def __init__(
        self,
        send: Callable[[str], Awaitable[None]],
        after_seq: Callable[[], int],
        events_emitted: Callable[[], int] = lambda: 0,
        wait_events: Callable[[int], Awaitable[None]] | None = None,
    ) -> None:
        self._send = send  # sends one encoded `delta` message to the group
        self._after_seq = after_seq
        self._events_emitted = (
            events_emitted  # how many stored events were emitted so far
        )
        self._wait_events = (
            wait_events  # returns once that many of them went to the group
        )
        self.buffers: dict[str, StreamBuffer] = {}
        self._waiting: dict[str, None] = {}  # steps with unsent deltas, oldest first
        self._sender: asyncio.Task[None] | None = None
        self._sending = asyncio.Lock()  # one message at a time, in order
        self._flushes: set[asyncio.Task[None]] = set()

    def add(self, event: AgentStream) -> None:
        """Take one token; it leaves from the sender task (merged with others if they pile up)."""
        step_id = event.step_id or ""
        buffer = self.buffers.get(step_id)
        if buffer is None:
            buffer = self.buffers[step_id] = StreamBuffer(
                event.phase or "", event.response
            )
        buffer.phase, buffer.text = event.phase or "", event.response
        buffer.pending.append(event)
        buffer.events_before = self._events_emitted()
        self._waiting[step_id] = None
        loop = asyncio.get_running_loop()
        if self._sender is None:
            self._sender = loop.create_task(self._send_waiting())
        if buffer.flush is None and step_id:
            buffer.flush = loop.call_later(FLUSH_EVERY_S, self._start_flush, step_id)

    async def _send_waiting(self) -> None:
        try:
            while self._waiting:
                await self.send_pending(next(iter(self._waiting)))
        finally:
            self._sender = None

    async def send_pending(self, step_id: str) -> None:
        """Send the step's unsent deltas now, as one message."""
        async with self._sending:
            buffer = self.buffers.get(step_id)
            if buffer is not None and buffer.pending and self._wait_events is not None:
                await self._wait_events(
                    buffer.events_before
                )  # e.g. the call's agent_input first
            self._waiting.pop(step_id, None)
            buffer = self.buffers.get(step_id)
            if buffer is None or not buffer.pending:
                return
            events, buffer.pending = buffer.pending, []
            now = time.monotonic()
            with_response = (
                buffer.response_sent_at is None
                or now - buffer.response_sent_at >= RESPONSE_EVERY_S
            )
            if with_response:
                buffer.response_sent_at = now
            try:
                merged = "".join(e.delta for e in events)
                offset = js_length(events[-1].response) - js_length(merged)
                await self._send(
                    delta_text(
                        _merged(events, merged, with_response),
                        self._after_seq(),
                        offset,
                    )
                )
            except Exception:  # noqa: BLE001 - a lost delta heals with the next `response`
                logger.warning(
                    "could not send a delta of step %s", step_id, exc_info=True
                )

    async def end(self, step_id: str, text: str, phase: str) -> None:
        """A model turn finished: send what is left, store its full text, forget the buffer."""
        await self.send_pending(step_id)
        buffer = self.drop(step_id)
        if buffer is not None or text:
            await database_sync_to_async(write_stream)(step_id, phase, text)

    def drop(self, step_id: str) -> StreamBuffer | None:
        """Forget a step's stream (its run ended, with or without a final model output)."""
        buffer = self.buffers.pop(step_id, None)
        self._waiting.pop(step_id, None)
        if buffer is not None and buffer.flush is not None:
            buffer.flush.cancel()
        return buffer

    def snapshots(self) -> list[tuple[str, str, str]]:
        """(step_id, phase, text) of every step streaming in this process right now."""
        return [
            (step_id, b.phase, b.text) for step_id, b in self.buffers.items() if step_id
        ]

    def _start_flush(self, step_id: str) -> None:
        buffer = self.buffers.get(step_id)
        if buffer is None:
            return
        buffer.flush = None
        task = asyncio.get_running_loop().create_task(
            self._flush(step_id, buffer.phase, buffer.text)
        )
        self._flushes.add(task)
        task.add_done_callback(self._flushes.discard)

    async def _flush(self, step_id: str, phase: str, text: str) -> None:
        try:
            await database_sync_to_async(write_stream)(step_id, phase, text)
        except Exception:  # noqa: BLE001 - a lost flush only delays a reconnecting socket's text
            logger.warning(
                "could not store the stream of step %s", step_id, exc_info=True
            )


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
    return json.dumps(payload, separators=(",", ":"))
