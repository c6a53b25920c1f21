"""The inbox websocket, `ws/inbox/`: every step waiting for the person, live, and decisions on them.

On connect and whenever one of the person's notebooks starts or stops waiting (the service's
`inbox.changed` on their group), it sends the whole list again (`inbox`): a list read fresh
cannot drift from the rows. The nav's count on other pages connects with `?list=0` and gets
only the count (one query), so many open tabs cost little.
A `decide` frame (runs.protocol.inbox) is carried out by the service's `decide_from_inbox`,
the same decision the notebook page makes; it answers `ack` or `error`, like the notebook socket.
"""

from __future__ import annotations

import logging
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from runs import service
from runs.models import inbox_group_name
from runs.protocol import ErrorCode, ProtocolError, ack_message, error_message
from runs.protocol.inbox import inbox_message, parse_inbox_frame

logger = logging.getLogger(__name__)

CLOSE_UNAUTHENTICATED = 4401


def _inbox(user_pk: int, with_list: bool, started: int | None) -> dict[str, object]:
    items = (
        [step.as_json() for step in service.inbox_of(user_pk)] if with_list else None
    )
    count = len(items) if items is not None else service.inbox_count(user_pk)
    return inbox_message(count, items, service.waiting_title(user_pk, started))


class InboxConsumer(AsyncJsonWebsocketConsumer):  # type: ignore[misc]
    """One page of a person's (the inbox, or any page's nav count) watching what waits for them."""

    group = ""
    with_list = True

    async def connect(self) -> None:
        await self.accept()
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        self.with_list = b"list=0" not in self.scope.get("query_string", b"").split(
            b"&"
        )
        self.group = inbox_group_name(user.pk)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self._send_list(None)

    async def disconnect(self, code: int) -> None:
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def _send_list(self, started: int | None) -> None:
        user_pk = self.scope["user"].pk
        message = await database_sync_to_async(_inbox)(user_pk, self.with_list, started)
        await self.send_json(message)

    async def inbox_changed(self, message: dict[str, Any]) -> None:
        await self._send_list(message["notebook"] if message.get("waiting") else None)

    async def receive(
        self, text_data: str | None = None, bytes_data: bytes | None = None
    ) -> None:
        if not self.group:
            return
        request_id = None
        try:
            frame = parse_inbox_frame(
                text_data if text_data is not None else bytes_data
            )
            request_id = frame.request_id
            await service.decide_from_inbox(
                self.scope["user"],
                frame.notebook,
                frame.step_id,
                frame.verdict,
                frame.text,
                frame.edited,
            )
        except ProtocolError as exc:
            exc.request_id, exc.action = request_id, "decide"
            await self.send_json(error_message(exc))
            return
        except Exception:
            logger.exception("an inbox decision failed")
            failure = ProtocolError(
                ErrorCode.INTERNAL,
                "the server failed to carry out the decision",
                request_id=request_id,
                action="decide",
            )
            await self.send_json(error_message(failure))
            return
        await self.send_json(ack_message("decide", request_id))
