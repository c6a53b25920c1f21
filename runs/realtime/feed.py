"""Following a notebook from an HTTP request: its stored events in seq order, and its tokens.

Used by AG-UI's runs (runs.agui) and the REST event stream (runs.rest.stream). Like a notebook
socket (runs.web.consumer), a feed joins the notebook's channel-layer group and
reads what the publisher sends: stored events (each once, in seq order, gaps filled from the
Event table), streamed tokens, and errors replied to the feed's own channel (a run started with
it as the `Origin` reports a failing step there). While the layer fails it reads the Event
table every `POLL_S` instead; tokens then come whole with the model's reply.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from typing import Any

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer

from runs.models import group_name
from runs.store import queries

logger = logging.getLogger(__name__)

POLL_S = 0.5
JOIN_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Item:
    """One thing from the notebook: a stored event, a token delta, or an error for this feed."""

    kind: str  # "event" | "delta" | "error" | "deleted" (the notebook was deleted)
    payload: dict[str, Any]
    offset: int | None = None  # a delta's place in its model call's text
    seq: int | None = None  # a stored event's seq


class NotebookFeed:
    def __init__(self, task_pk: int) -> None:
        self.task_pk = task_pk
        self.group = group_name(task_pk)
        self.layer = get_channel_layer()
        self.channel = ""
        self.sent_seq = 0
        self.layer_ok = False
        self._receive: asyncio.Task[dict[str, Any]] | None = None

    async def open(self, after: int | None = None) -> str:
        """Join the group; returns the feed's channel.

        Without `after` the feed gives the events stored from now on; with it, those after
        seq `after` (call `stored_until()` to have the ones already stored).
        """
        if after is None:
            after = await database_sync_to_async(queries.last_seq)(self.task_pk)
        self.sent_seq = after
        if self.layer is None:
            return ""
        try:
            self.channel = await asyncio.wait_for(
                self.layer.new_channel(), JOIN_TIMEOUT_S
            )
            await asyncio.wait_for(
                self.layer.group_add(self.group, self.channel), JOIN_TIMEOUT_S
            )
            self.layer_ok = True
        except Exception as exc:  # noqa: BLE001 - the Event table has every stored event
            logger.warning(
                "AG-UI feed of notebook %s: no channel layer (%r)", self.task_pk, exc
            )
        return self.channel

    async def close(self) -> None:
        if self._receive is not None:
            self._receive.cancel()
        if self.layer_ok and self.layer is not None:
            try:
                await asyncio.wait_for(
                    self.layer.group_discard(self.group, self.channel), JOIN_TIMEOUT_S
                )
            except Exception:  # noqa: BLE001 - the layer forgets the membership by itself
                logger.info("AG-UI feed of notebook %s: could not leave", self.task_pk)

    def receiving(self) -> asyncio.Future[Any]:
        """A future that completes when the next layer message is there (or a poll is due)."""
        if self._receive is None:
            if self.layer_ok and self.layer is not None:
                self._receive = asyncio.ensure_future(self.layer.receive(self.channel))
            else:
                self._receive = asyncio.ensure_future(_poll_tick())
        return self._receive

    async def take(self) -> list[Item]:
        """What the completed `receiving()` future brought, as items in order."""
        done, self._receive = self._receive, None
        assert done is not None and done.done()
        try:
            message = done.result()
        except Exception as exc:  # noqa: BLE001 - Redis went away: carry on from the database
            logger.warning(
                "AG-UI feed of notebook %s: layer failed (%r)", self.task_pk, exc
            )
            self.layer_ok = False
            return await self.stored_until()
        kind = message.get("type")
        if kind == "notebook.event":
            seq = int(message["seq"])
            if seq <= self.sent_seq:
                return []
            items = await self.stored_until(seq - 1)  # a message the layer dropped
            self.sent_seq = seq
            return [*items, Item("event", message["event"], seq=seq)]
        if kind == "notebook.delta":
            delta = json.loads(message["text"])
            return [Item("delta", delta.get("event") or {}, delta.get("offset"))]
        if kind == "notebook.deleted":  # runs.service.deletion: nothing more will come
            return [Item("deleted", message.get("deleted") or {})]
        if kind == "notebook.reply":
            reply = message.get("message") or {}
            return [Item("error", reply)] if reply.get("type") == "error" else []
        return await self.stored_until()  # catch_up / poll tick / live

    async def stored_until(
        self, upto: int | None = None, limit: int = 10_000
    ) -> list[Item]:
        """Stored events this feed has not given yet, up to `upto` (default: all), at most
        `limit` of them (call again for the rest)."""
        if upto is not None and upto <= self.sent_seq:
            return []
        rows = await database_sync_to_async(queries.events_after)(
            self.task_pk, self.sent_seq, upto, limit
        )
        if rows:
            self.sent_seq = rows[-1][0]
        return [Item("event", payload, seq=seq) for seq, payload in rows]


async def _poll_tick() -> dict[str, Any]:
    await asyncio.sleep(POLL_S)
    return {"type": "notebook.catch_up"}
