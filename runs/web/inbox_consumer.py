"""The inbox websocket, `ws/inbox/`: every step waiting for the person, live, and decisions on them.

On connect and whenever one of the person's notebooks starts or stops waiting (the service's
`inbox.changed` on their group; a group reviewer's socket also joins the groups of the people
they review, runs.service.reviewers), it sends the whole list again (`inbox`): a list read fresh
cannot drift from the rows. The nav's count on other pages connects with `?list=0` and gets
only the count (one query), so many open tabs cost little.
A `decide` frame (runs.protocol.inbox) is carried out by the service's `decide_from_inbox`,
the same decision the notebook page makes; a `decide_request` frame decides a request another
agent made over agentui's MCP server (`decide_external`). Each answers `ack` or `error`, like the
notebook socket.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from runs import service
from runs.models import inbox_group_name
from runs.protocol import ErrorCode, ProtocolError, ack_message, error_message
from runs.protocol.inbox import RequestDecision, inbox_message, parse_inbox_frame
from runs.web import open_sockets

logger = logging.getLogger(__name__)

CLOSE_UNAUTHENTICATED = 4401
CLOSE_TRY_AGAIN = 1013  # the channel layer is down: reconnect later
JOIN_TIMEOUT_S = 5.0
RETRY_S = 2.0


def _inbox(
    user_pk: int, with_list: bool, started: int | None, asked: int | None
) -> dict[str, object]:
    items = (
        [step.as_json() for step in service.inbox_of(user_pk)] if with_list else None
    )
    requests = service.inbox_requests(user_pk) if with_list else None
    count = (
        len(items) + len(requests)
        if items is not None and requests is not None
        else service.inbox_count(user_pk)
    )
    new = (
        service.request_title(user_pk, asked)
        if asked is not None
        else service.waiting_title(user_pk, started)
    )
    return inbox_message(count, items, new, requests)


class InboxConsumer(open_sockets.CountedSocket, AsyncJsonWebsocketConsumer):  # type: ignore[misc]
    """One page of a person's (the inbox, or any page's nav count) watching what waits for them."""

    groups: list[
        str
    ] = []  # the person's own inbox group, and those of whom they review

    # Channels reads `channel_receive` once per connection; every read goes through
    # `_layer_messages`, which survives the channel layer failing (as the notebook socket's).
    @property
    def channel_receive(self) -> Callable[[], Awaitable[dict[str, Any]]]:
        return self._layer_messages

    @channel_receive.setter
    def channel_receive(self, receive: Callable[[], Awaitable[dict[str, Any]]]) -> None:
        self._layer_receive = receive

    async def _layer_messages(self) -> dict[str, Any]:
        """The next group message; while the layer fails, join again every RETRY_S and then
        send the list as it is now (what changed meanwhile was not heard)."""
        while True:
            try:
                return await self._layer_receive()
            except Exception as exc:  # noqa: BLE001 - Redis went away: try again later
                logger.warning("inbox: channel layer failed (%r)", exc)
            while True:
                await asyncio.sleep(RETRY_S)
                try:
                    await self._join(self.groups)
                except Exception:  # noqa: BLE001 - still down
                    continue
                return {"type": "inbox.changed", "notebook": None, "waiting": False}

    with_list = True

    async def connect(self) -> None:
        await self.accept()
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        if not self.hold_socket(user.pk):
            await self.close(code=open_sockets.CLOSE_TOO_MANY)
            return
        self.with_list = b"list=0" not in self.scope.get("query_string", b"").split(
            b"&"
        )
        owners = await database_sync_to_async(service.inbox_owners)(user.pk)
        groups = [inbox_group_name(owner) for owner in owners]
        try:
            await self._join(groups)
        except Exception as exc:  # noqa: BLE001 - the layer is down: the list, then try later
            logger.warning(
                "inbox of user %s: channel layer unavailable (%r)", user.pk, exc
            )
            await self._send_list(None)
            await self.close(
                code=CLOSE_TRY_AGAIN
            )  # the page's socket comes back by itself
            return
        self.groups = groups
        await self._send_list(None)

    async def _join(self, groups: list[str]) -> None:
        for group in groups:
            await asyncio.wait_for(
                self.channel_layer.group_add(group, self.channel_name), JOIN_TIMEOUT_S
            )

    async def disconnect(self, code: int) -> None:
        self.release_socket()
        await self._leave(self.groups)

    async def _leave(self, groups: list[str]) -> None:
        for group in groups:
            try:
                await asyncio.wait_for(
                    self.channel_layer.group_discard(group, self.channel_name),
                    JOIN_TIMEOUT_S,
                )
            except Exception:  # noqa: BLE001 - the layer forgets the membership by itself
                logger.info("inbox: could not leave %s", group)

    async def _send_list(self, started: int | None, asked: int | None = None) -> None:
        user_pk = self.scope["user"].pk
        message = await database_sync_to_async(_inbox)(
            user_pk, self.with_list, started, asked
        )
        await self.send_json(message)

    async def inbox_changed(self, message: dict[str, Any]) -> None:
        await self._send_list(
            message["notebook"] if message.get("waiting") else None,
            message.get("request"),
        )

    async def inbox_regroup(self, message: dict[str, Any]) -> None:
        """Who reviews whom changed (runs.service.regroup): follow the owners as they are now."""
        user_pk = self.scope["user"].pk
        if message.get("user") != user_pk:  # heard on a reviewee's group: not for us
            return
        owners = await database_sync_to_async(service.inbox_owners)(user_pk)
        wanted = [inbox_group_name(owner) for owner in owners]
        try:
            await self._join([g for g in wanted if g not in self.groups])
        except Exception as exc:  # noqa: BLE001 - the layer failed: its retry joins again
            logger.warning("inbox: could not follow new reviewees (%r)", exc)
        await self._leave([g for g in self.groups if g not in wanted])
        self.groups = wanted
        await self._send_list(None)

    async def receive(
        self, text_data: str | None = None, bytes_data: bytes | None = None
    ) -> None:
        if not self.groups:
            return
        request_id = None
        action = "decide"
        try:
            frame = parse_inbox_frame(
                text_data if text_data is not None else bytes_data
            )
            request_id = frame.request_id
            action = frame.action
            if isinstance(frame, RequestDecision):
                await service.decide_external(
                    self.scope["user"],
                    frame.request,
                    frame.verdict,
                    frame.text,
                    frame.content if frame.content is not None else frame.text,
                )
            else:
                await service.decide_from_inbox(
                    self.scope["user"],
                    frame.notebook,
                    frame.step_id,
                    frame.verdict,
                    frame.text,
                    frame.edited,
                )
        except ProtocolError as exc:
            exc.request_id, exc.action = request_id, action
            await self.send_json(error_message(exc))
            return
        except Exception:
            logger.exception("an inbox decision failed")
            failure = ProtocolError(
                ErrorCode.INTERNAL,
                "the server failed to carry out the decision",
                request_id=request_id,
                action=action,
            )
            await self.send_json(error_message(failure))
            return
        await self.send_json(ack_message(action, request_id))
