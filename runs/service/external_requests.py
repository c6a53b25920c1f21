"""Requests other agents make of a person over agentui's MCP server (runs.mcpserver): asking
approval for an action, or a question (text, or a form from a JSON schema).

Each is an `ExternalRequest` row of the person whose API token the agent used; it shows in
their inbox (and their reviewers', runs.service.reviewers) until someone decides it or its
deadline (`AGENTUI_MCP_REQUEST_TIMEOUT_S`) passes; its webhooks (`request.waiting`) and the
opt-in "waiting for you" email are told as for a waiting step. The call that asked waits by reading the
row every `AGENTUI_MCP_REQUEST_POLL_S`, so the decision may be made in any server process
and a waiting request survives a restart of the process that decides. A decision is taken
once: the update names the row's waiting status, and a second decision is refused. The
waiting call renews the row's `alive_at`; a request whose call ended with its server process
leaves the inbox, and deciding it is refused saying the agent stopped waiting.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
from dataclasses import dataclass
from typing import Any

from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from runs.conf import conf
from runs.engine import ElicitationField
from runs.models import (
    ApiToken,
    ExternalKind,
    ExternalRequest,
    ExternalStatus,
    inbox_group_name,
)
from runs.presets.mcp.eliciting import (
    AnswerRefused,
    FormRefused,
    check_answer,
    form_fields,
)
from runs.protocol import MAX_TEXT_CHARS, ErrorCode, ProtocolError
from runs.realtime import broadcast
from runs.service import webhooks
from runs.service.notify import email_request
from runs.service.reviewers import may_review
from runs.service.runtime import detach
from runs.service.status import INBOX_MESSAGE

logger = logging.getLogger(__name__)

MAX_DESCRIPTION_CHARS = 4000
MAX_ARGUMENTS_BYTES = 32 * 1024
MAX_REASON_CHARS = 2000
MAX_CLIENT_NAME_CHARS = 200


def _heartbeat() -> dt.timedelta:
    """How often the waiting call renews `alive_at` (AGENTUI_MCP_REQUEST_HEARTBEAT_S)."""
    return dt.timedelta(seconds=conf().mcp_request_heartbeat_s)


def _stale() -> dt.timedelta:
    """A request not renewed for this long has no caller any more."""
    return 3 * _heartbeat()


def _invalid(reason: str) -> ProtocolError:
    return ProtocolError(ErrorCode.INVALID_INPUT, reason)


@dataclass(frozen=True)
class Asker:
    """Who asks: the person whose token the agent sent, the token, and the client's own name."""

    user: User
    token: ApiToken | None
    client_name: str = ""


@dataclass(frozen=True)
class Outcome:
    """How a request ended, as the asking agent is told."""

    status: str
    reason: str
    answer: Any
    decided_by: str

    def as_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "reason": self.reason,
            "answer": self.answer,
            "decided_by": self.decided_by,
        }


def _text(value: Any, name: str, cap: int, *, required: bool) -> str:
    if not isinstance(value, str):
        raise _invalid(f"{name} must be text")
    text = value.strip()
    if required and not text:
        raise _invalid(f"{name} is empty: say what the person is asked")
    if len(text) > cap:
        raise _invalid(f"{name} may be at most {cap:,} characters")
    if "\x00" in text:
        raise _invalid(f"{name} holds a NUL character")
    return text


def _arguments(value: Any) -> Any:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _invalid("arguments must be a JSON object of the action's details")
    try:
        size = len(json.dumps(value))
    except (TypeError, ValueError, RecursionError):
        raise _invalid("arguments must be JSON data") from None
    if size > MAX_ARGUMENTS_BYTES:
        raise _invalid(
            f"arguments may be at most {MAX_ARGUMENTS_BYTES:,} bytes as JSON"
        )
    return value


def create_request(
    asker: Asker,
    kind: str,
    description: Any,
    arguments: Any = None,
    schema: Any = None,
) -> ExternalRequest:
    """Check and store a request; ProtocolError says what does not fit (invalid_input), or
    that as many wait for the person as may (quota_exceeded: AGENTUI_MCP_MAX_WAITING_REQUESTS)."""
    text = _text(description, "the description", MAX_DESCRIPTION_CHARS, required=True)
    fields: list[dict[str, Any]] = []
    if schema is not None:
        try:
            fields = [f.model_dump() for f in form_fields(schema)]
        except FormRefused as exc:
            raise _invalid(f"schema: {exc}") from None
        if not fields:
            raise _invalid("schema: its form has no fields")
    details = _arguments(arguments)
    cap = conf().mcp_max_waiting_requests
    with transaction.atomic():
        # the person's row held: requests made at once cannot pass the limit together
        get_user_model().objects.select_for_update().filter(pk=asker.user.pk).first()
        if _waiting_rows([asker.user.pk]).count() >= cap:
            raise ProtocolError(
                ErrorCode.QUOTA_EXCEEDED,
                f"{cap} requests already wait for this person, the most that may: "
                "wait for one to be decided",
            )
        return _stored(asker, kind, text, details, fields)


def _stored(
    asker: Asker, kind: str, text: str, arguments: Any, fields: list[dict[str, Any]]
) -> ExternalRequest:
    token = asker.token
    return ExternalRequest.objects.create(
        owner=asker.user,
        kind=ExternalKind(kind).value,
        token=token,
        token_name=token.name if token is not None else "",
        client_name=asker.client_name[:MAX_CLIENT_NAME_CHARS],
        description=text,
        arguments=arguments,
        fields=fields,
        deadline_at=timezone.now() + dt.timedelta(seconds=conf().mcp_request_timeout_s),
        alive_at=timezone.now(),
    )


def outcome_of(row: ExternalRequest) -> Outcome | None:
    """The request's outcome; None while it waits."""
    if row.status == ExternalStatus.WAITING:
        return None
    return Outcome(
        status=row.status,
        reason=row.reason,
        answer=row.answer,
        decided_by=row.decided_by_name,
    )


def _time_out(pk: int, reason: str = "nobody decided before the deadline") -> None:
    ExternalRequest.objects.filter(pk=pk, status=ExternalStatus.WAITING).update(
        status=ExternalStatus.TIMED_OUT, reason=reason, decided_at=timezone.now()
    )


async def tell_inbox(owner_pk: int, asked: int | None = None) -> None:
    """Tell the owner's open inbox pages (and their reviewers', on the same group) to read the
    list again; `asked`: the request that has just begun waiting (for notifications)."""
    message = {
        "type": INBOX_MESSAGE,
        "notebook": None,
        "waiting": False,
        "request": asked,
    }
    await broadcast.group_send(inbox_group_name(owner_pk), message)


def request_title(user_pk: int, pk: int) -> dict[str, object] | None:
    """`{request, title}` of a request waiting in the person's inbox, for a notification: it
    names the token, never the agent's own words (they may carry anything)."""
    row = _waiting_rows([user_pk]).filter(pk=pk).first()
    if row is None:
        return None
    what = "approval" if row.kind == ExternalKind.APPROVAL else "an answer"
    return {"request": row.pk, "title": f"An agent ({row.token_name}) asks for {what}"}


async def ask_and_wait(
    asker: Asker,
    kind: str,
    description: Any,
    arguments: Any = None,
    schema: Any = None,
) -> tuple[int, Outcome]:
    """Store the request, show it in the inbox, and wait until it is decided or times out.

    If the waiting call is cancelled (the agent went away), the request is withdrawn as timed
    out, so it does not wait in the inbox for nobody."""
    creating = asyncio.ensure_future(
        database_sync_to_async(create_request)(
            asker, kind, description, arguments, schema
        )
    )
    try:
        row = await asyncio.shield(creating)
    except asyncio.CancelledError:
        # the agent hung up as its row was being stored: the row is stored all the same (the
        # inbox may already show it), so it is withdrawn before the cancel goes on
        stored = await _stored_anyway(creating)
        if stored is not None:
            await asyncio.shield(_withdraw(stored.pk, stored.owner_id))
        raise
    logger.info(
        "external %s request %s of user %s (token %r, client %r)",
        row.kind,
        row.pk,
        row.owner_id,
        row.token_name,
        row.client_name,
    )
    # from the row on, a cancel withdraws it: the agent may hang up while the inbox is told
    try:
        await tell_inbox(row.owner_id, row.pk)
        # told on their own, as for a waiting step: a hanging receiver never holds the call up
        told = (row.owner_id, row.pk, row.kind, row.token_name)
        detach(webhooks.tell_request(*told), name=f"webhooks-request-{row.pk}")
        detach(email_request(row.owner_id, row.token_name, row.kind), f"mail-{row.pk}")
        outcome = await _wait(row.pk, row.deadline_at)
    except asyncio.CancelledError:
        await asyncio.shield(_withdraw(row.pk, row.owner_id))
        raise
    return row.pk, outcome


GONE = "the agent that asked stopped waiting"


async def _stored_anyway(
    creating: asyncio.Future[ExternalRequest],
) -> ExternalRequest | None:
    """The row `creating` stores, once it has (None if storing it failed)."""
    try:
        return await asyncio.shield(creating)
    except asyncio.CancelledError:
        raise
    except Exception:  # noqa: BLE001 - refused or failed: no row to withdraw
        return None


async def _withdraw(pk: int, owner_pk: int) -> None:
    await database_sync_to_async(_time_out)(pk, GONE)
    await tell_inbox(owner_pk)


async def _wait(pk: int, deadline_at: dt.datetime) -> Outcome:
    poll = conf().mcp_request_poll_s
    heartbeat = _heartbeat()
    renewed = timezone.now()
    while True:
        row = await ExternalRequest.objects.aget(pk=pk)
        outcome = outcome_of(row)
        if outcome is not None:
            return outcome
        now = timezone.now()
        if now - renewed >= heartbeat:
            renewed = now
            await ExternalRequest.objects.filter(
                pk=pk, status=ExternalStatus.WAITING
            ).aupdate(alive_at=now)
        if now >= deadline_at:
            await database_sync_to_async(_time_out)(pk)
            await tell_inbox(row.owner_id)
            continue  # read back what holds: a decision may have come first
        await asyncio.sleep(poll)


# --- deciding, from the inbox -----------------------------------------------------------------


def _decided_row(
    user: User, pk: int, verdict: str, reason: Any, answer: Any
) -> ExternalRequest:
    row = ExternalRequest.objects.filter(pk=pk).first()
    if row is None or (
        row.owner_id != user.pk and not may_review(user.pk, row.owner_id)
    ):
        raise ProtocolError(ErrorCode.NOT_FOUND, "No such request.")
    if (
        row.status == ExternalStatus.WAITING
        and row.alive_at < timezone.now() - _stale()
    ):
        _time_out(
            row.pk, GONE
        )  # its call ended with its server process: nobody would hear
        row.refresh_from_db()
    if row.status != ExternalStatus.WAITING:
        why = f": {row.reason}" if row.status == ExternalStatus.TIMED_OUT else ""
        raise ProtocolError(
            ErrorCode.NOT_ALLOWED,
            f"this request no longer waits (it is {row.get_status_display()}{why})",
        )
    why = _text(
        reason if reason is not None else "",
        "the reason",
        MAX_REASON_CHARS,
        required=False,
    )
    value: Any = None
    if row.kind == ExternalKind.APPROVAL:
        if verdict not in ("approve", "reject"):
            raise ProtocolError(
                ErrorCode.UNKNOWN_ACTION, "approve or reject this request"
            )
        if verdict == "reject" and not why:
            raise _invalid("give a reason: the agent that asked is told why")
        status = (
            ExternalStatus.APPROVED if verdict == "approve" else ExternalStatus.REJECTED
        )
    else:
        if verdict not in ("answer", "reject"):
            raise ProtocolError(
                ErrorCode.UNKNOWN_ACTION, "answer or decline this question"
            )
        if verdict == "answer":
            value = _answer(row, answer)
            status = ExternalStatus.ANSWERED
        else:
            status = ExternalStatus.REJECTED
    updated = ExternalRequest.objects.filter(
        pk=pk, status=ExternalStatus.WAITING
    ).update(
        status=status,
        reason=why,
        answer=value,
        decided_by=user,
        decided_by_name=user.get_username(),
        decided_at=timezone.now(),
    )
    if updated != 1:
        raise ProtocolError(
            ErrorCode.NOT_ALLOWED, "this request no longer waits (decided elsewhere?)"
        )
    row.refresh_from_db()
    return row


def _answer(row: ExternalRequest, answer: Any) -> Any:
    """A question's answer as the agent gets it: text, or the form's checked values."""
    if not row.fields:
        return _text(answer, "the answer", MAX_TEXT_CHARS, required=True)
    fields = [ElicitationField.model_validate(f) for f in row.fields]
    try:
        return check_answer(fields, answer)
    except AnswerRefused as exc:
        raise _invalid(str(exc)) from None


async def decide_external(
    user: User, pk: int, verdict: str, reason: Any = "", answer: Any = None
) -> None:
    """The person's (or a reviewer's) decision on request `pk`: `approve` or `reject` (with a
    reason) an approval, `answer` or `reject` a question. ProtocolError says why not; a refused
    decision changes nothing."""
    row = await database_sync_to_async(_decided_row)(user, pk, verdict, reason, answer)
    logger.info("external request %s %s by %s", row.pk, row.status, row.decided_by_name)
    await tell_inbox(row.owner_id)


# --- what the inbox shows ---------------------------------------------------------------------


def external_json(row: ExternalRequest) -> dict[str, Any]:
    """A waiting request as the inbox shows it (the agent's text is data: shown as text)."""
    return {
        "request": row.pk,
        "kind": row.kind,
        "owner": row.owner_id,
        "owner_name": row.owner.get_username(),
        "token_name": row.token_name,
        "client_name": row.client_name,
        "description": row.description,
        "arguments": row.arguments,
        "fields": row.fields,
        "since": row.created_at.timestamp(),
        "deadline_at": row.deadline_at.timestamp(),
    }


def _waiting_rows(owner_pks: list[int]) -> Any:
    """Requests that wait, with a caller still waiting for them."""
    now = timezone.now()
    return ExternalRequest.objects.filter(
        owner_id__in=owner_pks,
        status=ExternalStatus.WAITING,
        deadline_at__gt=now,
        alive_at__gt=now - _stale(),
    )


def external_waiting(owner_pks: list[int], limit: int = 200) -> list[dict[str, Any]]:
    """The requests waiting for these people, the longest-waiting first."""
    rows = _waiting_rows(owner_pks).select_related("owner").order_by("created_at")
    return [external_json(row) for row in rows[:limit]]


def external_waiting_count(owner_pks: list[int]) -> int:
    count: int = _waiting_rows(owner_pks).count()
    return count
