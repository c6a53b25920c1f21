"""The notebook websocket, `ws/tasks/<task id>/` (protocol: docs/protocol.md).

Thin glue: it authenticates the socket, validates each frame (runs.protocol), hands actions to
the service (runs.service) and forwards the notebook's group messages. Stored events reach the
client in seq order, each once: after a `resume` the socket replays what the client missed,
drops live copies of what it replayed, and fills any gap it notices from the Event table.

A layer also drops a message silently when a socket's queue is full; a gap is filled when the
next event arrives, and a socket that went quiet behind the database (e.g. it missed a turn's
last event) is nudged by runs.realtime.catch_up to send what it missed.

The channel layer (Redis) may go away and come back: the socket then stays open, says so
(`live` false), sends new stored events from the Event table every `CATCH_UP_EVERY_S`, and
rejoins the group once the layer answers again (`live` true).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.core.exceptions import ObjectDoesNotExist

from runs import service
from runs.models import group_name
from runs.protocol import (
    ErrorCode,
    ProtocolError,
    Resume,
    ack_message,
    deleted_message,
    error_message,
    event_message,
    hello_message,
    live_message,
    parse_client_message,
    replay_done_message,
    snapshot_message,
)
from runs.service import surfaces
from runs.web import open_sockets

logger = logging.getLogger(__name__)

CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404
# the notebook was deleted (a `deleted` message said by whom, when)
CLOSE_DELETED = 4410
REPLAY_BATCH = 500
CATCH_UP_EVERY_S = 1.0


class NotebookConsumer(open_sockets.CountedSocket, AsyncWebsocketConsumer):
    """One browser tab watching (and steering) one notebook."""

    task_pk: int
    group: str
    joined = False
    live = False  # stored events flow only after the client's first `resume`
    sent_seq = 0  # the highest seq this socket has sent
    layer_ok = True  # False while the channel layer fails: events come from the database instead
    heard = (
        0  # messages handled so far (runs.realtime.catch_up leaves a busy socket alone)
    )

    # Channels reads `channel_receive` once per connection to wait for group messages; every
    # read goes through `_layer_messages`, which survives the layer failing.
    @property
    def channel_receive(self) -> Callable[[], Awaitable[dict[str, Any]]]:
        return self._layer_messages

    @channel_receive.setter
    def channel_receive(self, receive: Callable[[], Awaitable[dict[str, Any]]]) -> None:
        self._layer_receive = receive

    async def connect(self) -> None:
        # Accept first so the close code reaches the browser (a refused handshake has none).
        await self.accept()
        code = await self._refusal()
        if code is not None:
            await self.close(code=code)
            return
        self.group = group_name(self.task_pk)
        self.joined = True
        surfaces.metrics.socket_opened()
        self.layer_ok = await self._join()
        await service.ensure_recovered()
        await service.take_over(self.task_pk)
        try:
            task, last_seq = await database_sync_to_async(service.hello_summary)(
                self.task_pk
            )
        except ObjectDoesNotExist:  # deleted a moment ago
            await self._deleted()
            return
        self.sent_seq = last_seq
        await self._send(hello_message(task, last_seq))
        if not self.layer_ok:
            await self._send(live_message(False))

    async def _refusal(self) -> int | None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            return CLOSE_UNAUTHENTICATED
        self.task_pk = int(self.scope["url_route"]["kwargs"]["task_id"])
        owner = await database_sync_to_async(service.owner_of)(self.task_pk)
        if owner is None:
            record = await database_sync_to_async(service.deletion_of)(
                self.task_pk, user.pk
            )
            if record is None:
                return CLOSE_NOT_FOUND
            await self._send(deleted_message(service.deleted_json(record)))
            return CLOSE_DELETED
        if owner != user.pk:
            return CLOSE_FORBIDDEN
        if not self.hold_socket(user.pk):
            return open_sockets.CLOSE_TOO_MANY
        return None

    async def disconnect(self, code: int) -> None:
        surfaces.unfollow(self)
        self.release_socket()
        if self.joined:
            self.joined = False
            surfaces.metrics.socket_closed()
            try:
                await asyncio.wait_for(
                    self.channel_layer.group_discard(self.group, self.channel_name), 5
                )
            except Exception:  # noqa: BLE001 - the layer forgets the membership by itself (group expiry)
                logger.info(
                    "notebook %s: could not leave the group",
                    self.task_pk,
                    exc_info=True,
                )

    async def receive(
        self, text_data: str | None = None, bytes_data: bytes | None = None
    ) -> None:
        if not self.joined:
            return
        try:
            message = parse_client_message(
                text_data if text_data is not None else bytes_data
            )
        except ProtocolError as exc:
            await self._refuse(exc)
            return
        if isinstance(message, Resume):
            await self._resume(message)
            return
        origin = service.Origin(
            self.channel_name,
            message.request_id,
            message.action,
            self.scope["user"].get_username(),
        )
        try:
            await service.perform(self.task_pk, message, origin)
        except ProtocolError as exc:
            exc.request_id, exc.action = message.request_id, message.action
            await self._refuse(exc)
            return
        except Exception:
            logger.exception(
                "action %s on notebook %s failed", message.action, self.task_pk
            )
            failure = ProtocolError(
                ErrorCode.INTERNAL,
                "the server failed to carry out the action",
                request_id=message.request_id,
                action=message.action,
            )
            await self._refuse(failure)
            return
        await self._send(ack_message(message.action, message.request_id))

    # --- replay -------------------------------------------------------------------------------

    async def _resume(self, message: Resume) -> None:
        current = await self._last_seq()
        if current is None:
            return
        if message.last_seq > current:
            error = ProtocolError(
                ErrorCode.INVALID_INPUT,
                f"last_seq {message.last_seq} is ahead of the notebook's last event ({current})",
                request_id=message.request_id,
                action=message.action,
            )
            await self._refuse(error)
            return
        await self._send_stored(message.last_seq, current)
        self.sent_seq = current
        self.live = True
        surfaces.follow(self)
        await self._send(replay_done_message(current))
        for step_id, phase, text in await service.stream_snapshots(self.task_pk):
            await self._send(snapshot_message(step_id, phase or None, text))

    async def _send_stored(self, after: int, upto: int) -> None:
        """Send stored events with seq in (after, upto], oldest first."""
        while after < upto:
            batch = await database_sync_to_async(service.events_after)(
                self.task_pk, after, upto, REPLAY_BATCH
            )
            if not batch:
                return
            for seq, payload in batch:
                await self._send(event_message(seq, payload))
            after = batch[-1][0]

    # --- the channel layer failing and coming back ----------------------------------------------

    async def _join(self) -> bool:
        try:
            await asyncio.wait_for(
                self.channel_layer.group_add(self.group, self.channel_name), 5
            )
        except Exception as exc:  # noqa: BLE001 - no live updates until it works; the database has everything
            logger.warning(
                "notebook %s: channel layer unavailable (%r); catching up from the database",
                self.task_pk,
                exc,
            )
            return False
        return True

    async def _layer_messages(self) -> dict[str, Any]:
        """The next group message; while the layer fails, a local message every CATCH_UP_EVERY_S."""
        if self.layer_ok:
            try:
                return await self._layer_receive()
            except Exception as exc:  # noqa: BLE001 - Redis went away: carry on from the database
                logger.warning(
                    "notebook %s: channel layer failed (%r); catching up from the database",
                    self.task_pk,
                    exc,
                )
                self.layer_ok = False
                return {"type": "notebook.live", "live": False}
        await asyncio.sleep(CATCH_UP_EVERY_S)
        if self.joined and await self._join():
            self.layer_ok = True
            return {"type": "notebook.live", "live": True}
        return {"type": "notebook.catch_up"}

    async def notebook_live(self, message: dict[str, Any]) -> None:
        await self.notebook_catch_up(message)
        await self._send(live_message(bool(message["live"])))

    async def notebook_catch_up(self, message: dict[str, Any]) -> None:
        """Send the stored events this socket has not sent yet (the layer may have missed them).

        A nudge that names the notebook's last seq costs a socket that has it nothing.
        """
        if not self.live:
            return
        current = message.get("last_seq")
        if current is None:
            current = await self._last_seq()
            if current is None:
                return
        if current > self.sent_seq:
            await self._send_stored(self.sent_seq, current)
            self.sent_seq = current

    # --- group messages -----------------------------------------------------------------------

    async def dispatch(self, message: dict[str, Any]) -> None:
        # Channels runs close_old_connections() in the ORM's single thread before every message;
        # for every streamed token that thread hop was the bottleneck. These handlers use no
        # connection of their own (a gap fill goes through database_sync_to_async, which checks).
        self.heard += 1
        handler = _GROUP_HANDLERS.get(message["type"])
        if handler is not None:
            await handler(self, message)
        else:
            await super().dispatch(message)

    async def notebook_event(self, message: dict[str, Any]) -> None:
        seq = int(message["seq"])
        if not self.live or seq <= self.sent_seq:
            return  # not resumed yet, or already sent by a replay
        if seq > self.sent_seq + 1:
            await self._send_stored(
                self.sent_seq, seq - 1
            )  # a message the layer dropped
        await self._send(event_message(seq, message["event"]))
        self.sent_seq = seq

    async def notebook_delta(self, message: dict[str, Any]) -> None:
        if self.live:
            await self.send(text_data=message["text"])

    async def notebook_reply(self, message: dict[str, Any]) -> None:
        await self._send(message["message"])

    async def notebook_deleted(self, message: dict[str, Any]) -> None:
        """The notebook was deleted (runs.service.deletion): say so, and close for good."""
        if not self.joined:
            return
        await self._send(deleted_message(message["deleted"]))
        await self._close_deleted()

    # --- the notebook deleted --------------------------------------------------------------------

    async def _last_seq(self) -> int | None:
        """The notebook's last seq; None (the socket told and closed) if it was deleted."""
        try:
            return await database_sync_to_async(service.last_seq)(self.task_pk)
        except ObjectDoesNotExist:
            await self._deleted()
            return None

    async def _deleted(self) -> None:
        """Found gone from the database (the layer's message may not have come): tell, close."""
        user = self.scope["user"]
        record = await database_sync_to_async(service.deletion_of)(
            self.task_pk, user.pk
        )
        if record is not None:
            await self._send(deleted_message(service.deleted_json(record)))
        await self._close_deleted()

    async def _close_deleted(self) -> None:
        await self.close(code=CLOSE_DELETED)
        await self.disconnect(CLOSE_DELETED)

    async def _refuse(self, error: ProtocolError) -> None:
        """Tell the client its message was refused, and count it (errors by kind)."""
        surfaces.metrics.error(f"refused:{error.code}")
        await self._send(error_message(error))

    async def _send(self, message: dict[str, Any]) -> None:
        await self.send(text_data=json.dumps(message, separators=(",", ":")))


_GROUP_HANDLERS = {
    "notebook.event": NotebookConsumer.notebook_event,
    "notebook.delta": NotebookConsumer.notebook_delta,
    "notebook.reply": NotebookConsumer.notebook_reply,
    "notebook.deleted": NotebookConsumer.notebook_deleted,
    "notebook.live": NotebookConsumer.notebook_live,
    "notebook.catch_up": NotebookConsumer.notebook_catch_up,
}
