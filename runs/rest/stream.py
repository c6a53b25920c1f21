"""`GET /notebooks/{id}/stream`: a notebook's events as Server-Sent Events, resumable by seq.

A script (or a browser's `EventSource`) follows a notebook here instead of polling
`/events/`: first the stored events after the point it names, then each new one as it is
stored, and the model's tokens as they stream. Every stored event is an SSE message with
`id: <seq>`, so a client that reconnects with `Last-Event-ID` (EventSource does it by itself)
gets exactly the events it missed, each once and in order; tokens carry no id (they are not
stored: a step's text comes whole in its stored events).

The stream is a `runs.surfaces.NotebookFeed`, the same follower AG-UI runs use: it fills gaps
the channel layer left from the Event table and reads that table alone while the layer fails.
How many streams one person may hold open in one server process is bounded
(`AGENTUI_STREAMS_PER_USER`); each closes after `AGENTUI_STREAM_MAX_S` (a client reconnects
and goes on from its `Last-Event-ID`).
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest, StreamingHttpResponse
from ninja import Query

from runs.conf import conf
from runs.protocol import ErrorCode, ProtocolError
from runs.rest.reading import MAX_SEQ, NOT_FOUND, own_notebook, wire_event
from runs.rest.router import router
from runs.rest.schemas import ErrorOut
from runs.service import surfaces

KEEPALIVE_S = 15.0
REPLAY_BATCH = 200
RETRY_MS = 2000
_open: Counter[int] = Counter()  # open streams per user id, in this process

STREAM_DOC = """Server-Sent Events, one per line group:

* `event: event`, `id: <seq>`, `data: {"seq", "event"}`: a stored event (docs/protocol.md);
* `event: ready`, `data: {"last_seq"}`: the stored events up to `last_seq` have been sent,
  what follows is live;
* `event: delta`, `data: {"offset", "event"}`: a streamed token (no id), `event` being
  the `agent_stream` event (`step_id`, `delta`) and `offset` its place in the model call's text;
* `event: deleted`, `data: {"notebook", "title", "deleted_by", "deleted_at"}`: the notebook
  was deleted; the stream ends;
* `: keepalive` comments while nothing happens.

Resume with the `Last-Event-ID` header (or `?after=`): the events after that seq follow.
An event too large for a stream comes cut, as in `/events/`; its `truncated` list names
where each value downloads whole."""


def _event(task_pk: int, item: surfaces.FeedItem) -> str:
    assert item.seq is not None
    payload = wire_event(task_pk, item.seq, item.payload)
    return _message("event", {"seq": item.seq, "event": payload}, item.seq)


def _message(kind: str, data: dict[str, Any], seq: int | None = None) -> str:
    head = f"id: {seq}\n" if seq is not None else ""
    return f"{head}event: {kind}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


def _start(request: HttpRequest, after: int | None) -> int:
    """Where the stream starts: `Last-Event-ID` wins over `?after=` (a reconnect sends both)."""
    header = request.headers.get("Last-Event-ID", "").strip()
    if header:
        if not header.isdigit() or int(header) > MAX_SEQ:
            raise ProtocolError(
                ErrorCode.INVALID_INPUT,
                f"Last-Event-ID: expected the seq of an event, got {header[:40]!r}",
            )
        return int(header)
    return after or 0


class _Stream:
    """One open stream: counted against its person from the request until Django closes the
    response (whether or not a byte of it was sent)."""

    def __init__(self, task_pk: int, after: int, user_id: int) -> None:
        most = conf().streams_per_user
        if _open[user_id] >= most:
            raise ProtocolError(
                ErrorCode.RATE_LIMITED,
                f"You have {most} event streams open on this server, the most one person "
                "may; close one first.",
                retry_after=int(KEEPALIVE_S),
            )
        _open[user_id] += 1
        self.user_id = user_id
        self.counted = True
        self.feed = surfaces.NotebookFeed(task_pk)
        self.after = after

    def close(self) -> None:  # Django calls it when the response is done
        if self.counted:
            self.counted = False
            _open[self.user_id] -= 1
            if _open[self.user_id] <= 0:
                del _open[self.user_id]

    def __aiter__(self) -> AsyncIterator[str]:
        return _follow(self.feed, self.after)


async def _follow(feed: surfaces.NotebookFeed, after: int) -> AsyncIterator[str]:
    loop = asyncio.get_running_loop()
    ends_at = loop.time() + conf().stream_max_s
    try:
        await feed.open(after)
        yield f"retry: {RETRY_MS}\n\n"
        while batch := await feed.stored_until(limit=REPLAY_BATCH):
            for item in batch:
                yield _event(feed.task_pk, item)
        yield _message("ready", {"last_seq": feed.sent_seq})
        while loop.time() < ends_at:
            receiving = feed.receiving()
            wait = min(KEEPALIVE_S, max(0.0, ends_at - loop.time()))
            done, _ = await asyncio.wait({receiving}, timeout=wait)
            if not done:
                # a keepalive, and a look at the table: heals an event the layer dropped
                # when no later one came to reveal the gap
                yield ": keepalive\n\n"
                for item in await feed.stored_until(limit=REPLAY_BATCH):
                    yield _event(feed.task_pk, item)
                continue
            for item in await feed.take():
                if item.kind == "event":
                    yield _event(feed.task_pk, item)
                elif item.kind == "delta":
                    yield _message(
                        "delta", {"offset": item.offset, "event": item.payload}
                    )
                elif item.kind == "deleted":  # the notebook is gone: the stream ends
                    yield _message("deleted", item.payload)
                    return
    finally:
        await feed.close()


@router.get(
    "/notebooks/{int:pk}/stream",
    tags=["read"],
    response={
        200: None,
        **NOT_FOUND,
        422: ErrorOut,
        429: ErrorOut,
    },
    openapi_extra={
        "description": STREAM_DOC,
        "parameters": [
            {
                "name": "Last-Event-ID",
                "in": "header",
                "required": False,
                "description": "the seq of the last event received; "
                "the stream goes on after it",
                "schema": {"type": "string", "pattern": "^[0-9]{1,10}$"},
            }
        ],
        "responses": {
            200: {
                "description": "the event stream",
                "content": {"text/event-stream": {"schema": {"type": "string"}}},
            }
        },
    },
)
async def stream_notebook(
    request: HttpRequest,
    pk: int,
    after: int = Query(  # type: ignore[type-arg]
        0, ge=0, le=MAX_SEQ, description="only events with a larger seq"
    ),
) -> StreamingHttpResponse:
    """Follow the notebook: its stored events after `after` (or `Last-Event-ID`), then new
    events and streamed tokens live, as Server-Sent Events."""
    task = await sync_to_async(own_notebook)(request, pk)
    start = _start(request, after)
    if start > task.last_seq:
        raise ProtocolError(
            ErrorCode.INVALID_INPUT,
            f"after {start} is ahead of the notebook's last event ({task.last_seq})",
        )
    stream = _Stream(task.pk, start, request.auth.pk)  # type: ignore[attr-defined]
    response = StreamingHttpResponse(stream, content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = (
        "no"  # a proxy in front must not hold the stream back
    )
    return response
