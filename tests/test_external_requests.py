"""Other agents' requests to a person (runs.service.external_requests, asked over `/mcp/`),
through the service and the inbox socket: what does not fit is refused saying why and stores
nothing; a request shows in its owner's inbox live and in nobody else's; it is decided once,
by its owner; a deadline or an agent that went away ends it as timed out."""

from __future__ import annotations

import asyncio
import io
import json
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import override_settings

from runs import service
from runs.models import ExternalRequest
from runs.protocol import ErrorCode, ProtocolError
from runs.service.tokens import create_token
from tests.live_support import (
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    inbox_socket,
    make_user,
    until_true,
)

pytestmark = [pytest.mark.db, pytest.mark.ws, pytest.mark.django_db(transaction=True)]

FAST = {"AGENTUI_MCP_REQUEST_POLL_S": 0.01}


def asker_of(name: str) -> service.Asker:
    user = make_user(name)
    row, _ = create_token(user, f"{name}-bot")
    return service.Asker(user=user, token=row, client_name="tests")


async def asker(name: str = "alice") -> service.Asker:
    return await database_sync_to_async(asker_of)(name)


async def next_inbox(ws: WebsocketCommunicator, count: int) -> dict[str, Any]:
    while True:
        message = json.loads(await ws.receive_from(timeout=10))
        if message["type"] == "inbox" and message["count"] == count:
            return message


async def reply(ws: WebsocketCommunicator) -> dict[str, Any]:
    while True:
        message = json.loads(await ws.receive_from(timeout=10))
        if message["type"] in ("ack", "error"):
            return message


def waiting_pk() -> int | None:
    return (
        ExternalRequest.objects.filter(status="waiting")
        .values_list("pk", flat=True)
        .first()
    )


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"description": "   "}, "the description is empty"),
        ({"description": 7}, "the description must be text"),
        ({"description": "x" * 4001}, "at most 4,000 characters"),
        ({"description": "d", "arguments": {"blob": "x" * 40_000}}, "at most 32,768"),
        ({"description": "d", "arguments": [1, 2]}, "must be a JSON object"),
        ({"description": "d", "schema": {"type": "array"}}, "schema: its form is not"),
        ({"description": "d", "schema": {"type": "object"}}, "has no fields"),
    ],
)
async def test_what_does_not_fit_is_refused_and_stores_nothing(
    fields: dict[str, Any], reason: str
) -> None:
    who = await asker()
    kind = "question" if "schema" in fields else "approval"
    with pytest.raises(ProtocolError) as refused:
        await service.ask_and_wait(who, kind, **fields)
    assert refused.value.code == ErrorCode.INVALID_INPUT
    assert reason in refused.value.reason
    assert await ExternalRequest.objects.acount() == 0


@override_settings(**FAST)
async def test_the_owners_inbox_shows_it_live_and_a_decision_there_answers_the_agent() -> (
    None
):
    alice = await asker("alice")
    bob = await asker("bob")
    ws = await inbox_socket(alice.user)
    other = await inbox_socket(bob.user)
    await next_inbox(ws, 0)
    await next_inbox(other, 0)
    asking = asyncio.ensure_future(
        service.ask_and_wait(alice, "approval", "Send the invoice", {"to": "acme"})
    )
    shown = await next_inbox(ws, 1)
    assert shown["items"] == []
    [item] = shown["requests"]
    assert item["description"] == "Send the invoice" and item["arguments"] == {
        "to": "acme"
    }
    assert item["token_name"] == "alice-bot" and item["client_name"] == "tests"
    # a notification names the token, not the agent's words
    assert shown["started"] == {
        "request": item["request"],
        "title": "An agent (alice-bot) asks for approval",
    }
    assert await other.receive_nothing(timeout=0.2)  # bob's inbox hears nothing
    assert await database_sync_to_async(service.inbox_count)(alice.user.pk) == 1

    # bob may not decide it; a rejection needs a reason; neither changes anything
    with pytest.raises(ProtocolError) as theirs:
        await service.decide_external(bob.user, item["request"], "approve")
    assert theirs.value.code == ErrorCode.NOT_FOUND
    frame = {"action": "decide_request", "request_id": "r1", "request": item["request"]}
    await ws.send_to(text_data=json.dumps({**frame, "verdict": "reject"}))
    refused = await reply(ws)
    assert refused["type"] == "error" and "give a reason" in refused["reason"]
    await ws.send_to(text_data=json.dumps({**frame, "verdict": "answer", "text": "x"}))
    assert "approve or reject" in (await reply(ws))["reason"]
    assert not asking.done()

    await ws.send_to(
        text_data=json.dumps({**frame, "verdict": "reject", "text": "wrong customer"})
    )
    assert (await reply(ws))["type"] == "ack"
    pk, outcome = await asyncio.wait_for(asking, 10)
    assert outcome.as_json() == {
        "status": "rejected",
        "reason": "wrong customer",
        "answer": None,
        "decided_by": "alice",
    }
    assert (await next_inbox(ws, 0))["requests"] == []
    with pytest.raises(ProtocolError) as twice:
        await service.decide_external(alice.user, pk, "approve")
    assert twice.value.code == ErrorCode.NOT_ALLOWED
    row = await ExternalRequest.objects.aget(pk=pk)
    assert row.decided_by_id == alice.user.pk and row.decided_at is not None
    await ws.disconnect()
    await other.disconnect()


@override_settings(**FAST)
async def test_a_text_question_needs_an_answer_and_gets_it() -> None:
    alice = await asker()
    asking = asyncio.ensure_future(
        service.ask_and_wait(alice, "question", "Which city?")
    )
    pk = await until_true(lambda: database_sync_to_async(waiting_pk)())
    with pytest.raises(ProtocolError, match="the answer is empty"):
        await service.decide_external(alice.user, pk, "answer", answer="  ")
    await service.decide_external(alice.user, pk, "answer", answer="Oslo")
    _, outcome = await asyncio.wait_for(asking, 10)
    assert outcome.status == "answered" and outcome.answer == "Oslo"


@override_settings(AGENTUI_MCP_REQUEST_TIMEOUT_S=1.0, **FAST)
async def test_nobody_deciding_before_the_deadline_times_it_out() -> None:
    alice = await asker()
    _, outcome = await asyncio.wait_for(
        service.ask_and_wait(alice, "approval", "Restart the server"), 10
    )
    assert outcome.status == "timed_out"
    assert outcome.reason == "nobody decided before the deadline"
    assert await database_sync_to_async(service.inbox_requests)(alice.user.pk) == []


@override_settings(**FAST)
async def ended_within(task: asyncio.Task[Any], seconds: float) -> None:
    """Wait for `task` to end; if it does not, fail with where every task of the loop waits
    (pytest-timeout would show only the threads, all idle around the loop)."""
    done, _ = await asyncio.wait({task}, timeout=seconds)
    if not done:
        stacks = io.StringIO()
        for each in asyncio.all_tasks():
            each.print_stack(file=stacks)
        raise AssertionError(f"still running after {seconds} s:\n{stacks.getvalue()}")


async def test_an_agent_that_goes_away_withdraws_its_request() -> None:
    alice = await asker()
    asking = asyncio.ensure_future(service.ask_and_wait(alice, "approval", "Wait"))
    pk = await until_true(lambda: database_sync_to_async(waiting_pk)())
    asking.cancel()
    await ended_within(asking, 20)
    with pytest.raises(asyncio.CancelledError):
        await asking
    row = await ExternalRequest.objects.aget(pk=pk)
    assert (
        row.status == "timed_out"
        and row.reason == "the agent that asked stopped waiting"
    )
    with pytest.raises(ProtocolError, match="no longer waits"):
        await service.decide_external(alice.user, pk, "approve")


async def test_an_agent_that_hangs_up_while_the_inbox_is_told_withdraws_its_request() -> (
    None
):
    """The cancel may come before the wait begins: here telling the inbox hangs (a layer that
    never answers), and the agent hangs up meanwhile. Before, the row stayed waiting."""
    from channels.layers import channel_layers

    from runs.realtime import broadcast

    alice = await asker()
    layers = {"default": {"BACKEND": "tests.faulty_layers.HangingLayer"}}
    broadcast.health.__init__()  # type: ignore[misc]
    channel_layers.backends.pop("default", None)
    try:
        with override_settings(CHANNEL_LAYERS=layers, AGENTUI_BROADCAST_TIMEOUT_S=3.0):
            asking = asyncio.ensure_future(
                service.ask_and_wait(alice, "approval", "Wait")
            )
            pk = await until_true(lambda: database_sync_to_async(waiting_pk)())
            asking.cancel()
            with pytest.raises(asyncio.CancelledError):
                await asyncio.wait_for(asking, 60)
    finally:
        channel_layers.backends.pop("default", None)
        broadcast.health.__init__()  # type: ignore[misc]
    row = await ExternalRequest.objects.aget(pk=pk)
    assert (row.status, row.reason) == (
        "timed_out",
        "the agent that asked stopped waiting",
    )


async def test_a_request_whose_caller_died_leaves_the_inbox_and_is_not_decided() -> (
    None
):
    # as when the server process holding the call ended: nothing renews the row any more
    import datetime as dt

    from django.utils import timezone

    from runs.service.external_requests import create_request

    alice = await asker()
    row = await database_sync_to_async(create_request)(alice, "approval", "Orphan")
    assert await database_sync_to_async(service.inbox_count)(alice.user.pk) == 1
    then = timezone.now() - dt.timedelta(
        seconds=16
    )  # three heartbeats of 5 s, and more
    await ExternalRequest.objects.filter(pk=row.pk).aupdate(alive_at=then)
    assert await database_sync_to_async(service.inbox_count)(alice.user.pk) == 0
    with pytest.raises(ProtocolError, match="the agent that asked stopped waiting"):
        await service.decide_external(alice.user, row.pk, "approve")
    await row.arefresh_from_db()
    assert row.status == "timed_out" and row.decided_by_id is None


@override_settings(**FAST)
async def test_scripts_list_and_decide_requests_over_rest() -> None:
    from tests.rest_support import Api

    alice = await asker()
    _, token = await database_sync_to_async(create_token)(alice.user, "script")
    api = Api(token)
    schema = {"type": "object", "properties": {"n": {"type": "integer", "maximum": 3}}}
    asking = asyncio.ensure_future(
        service.ask_and_wait(alice, "question", "How many?", schema=schema)
    )
    pk = await until_true(lambda: database_sync_to_async(waiting_pk)())
    listed = (await api.get("/inbox/requests")).json()
    assert listed["count"] == 1 and listed["items"][0]["request"] == pk
    assert listed["items"][0]["fields"][0]["name"] == "n"
    path = f"/inbox/requests/{pk}/decision"
    too_big = await api.post(path, {"verdict": "answer", "content": {"n": 9}})
    assert too_big.status_code == 422 and "at most 3" in too_big.json()["detail"]
    wrong = await api.post(path, {"verdict": "approve"})
    assert wrong.status_code == 400
    done = await api.post(path, {"verdict": "answer", "content": {"n": 2}})
    assert done.status_code == 202 and done.json() == {
        "action": "request_answer",
        "request": pk,
    }
    _, outcome = await asyncio.wait_for(asking, 10)
    assert outcome.answer == {"n": 2}
    again = await api.post(path, {"verdict": "answer", "content": {"n": 1}})
    assert again.status_code == 409
    bob = await asker("bob")
    _, bobs = await database_sync_to_async(create_token)(bob.user, "script")
    assert (await Api(bobs).post(path, {"verdict": "reject"})).status_code == 404


@override_settings(AGENTUI_WEBHOOK_ALLOW_PRIVATE=True, **FAST)
async def test_webhooks_and_the_email_are_told_without_the_agents_words() -> None:
    from django.core import mail

    from runs.models import InboxSettings, Webhook, WebhookDelivery

    alice = await asker()
    alice.user.email = "alice@example.org"
    await alice.user.asave(update_fields=["email"])
    await InboxSettings.objects.acreate(user=alice.user, email_on_wait=True)
    await Webhook.objects.acreate(
        owner=alice.user,
        url="http://127.0.0.1:9/hook",  # nothing listens: the delivery fails, it is stored
        events=["request.waiting"],
        secret="s" * 64,
    )
    asking = asyncio.ensure_future(
        service.ask_and_wait(alice, "approval", "SECRET-PLAN rm -rf /")
    )
    pk = await until_true(lambda: database_sync_to_async(waiting_pk)())
    delivery = await until_true(
        lambda: WebhookDelivery.objects.filter(event="request.waiting").afirst()
    )
    assert delivery.task_id is None
    assert delivery.payload["request"] == {
        "id": pk,
        "kind": "approval",
        "token": "alice-bot",
        "url": delivery.payload["request"]["url"],
    }
    assert delivery.payload["request"]["url"].endswith("/inbox/")
    await until_true(lambda: mail.outbox, what="the email")
    [sent] = mail.outbox
    assert sent.to == ["alice@example.org"]
    assert "alice-bot" in sent.body and "/inbox/" in sent.body
    assert "SECRET-PLAN" not in sent.body + sent.subject + json.dumps(delivery.payload)
    asking.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asking


@override_settings(AGENTUI_MCP_MAX_WAITING_REQUESTS=2, **FAST)
async def test_no_more_than_the_limit_wait_for_one_person() -> None:
    alice = await asker()
    bob = await asker("bob")
    waiting = [
        asyncio.ensure_future(service.ask_and_wait(alice, "approval", f"job {n}"))
        for n in range(2)
    ]

    async def both_wait() -> bool:
        return await ExternalRequest.objects.filter(status="waiting").acount() == 2

    await until_true(both_wait, what="two waiting requests")
    with pytest.raises(ProtocolError) as refused:
        await service.ask_and_wait(alice, "approval", "job 3")
    assert refused.value.code == ErrorCode.QUOTA_EXCEEDED
    assert "2 requests already wait" in refused.value.reason
    # someone else's inbox has room of its own
    other = asyncio.ensure_future(service.ask_and_wait(bob, "approval", "job b"))
    await until_true(
        lambda: ExternalRequest.objects.filter(owner=bob.user).aexists(),
    )
    for call in [*waiting, other]:
        call.cancel()
    await asyncio.gather(*waiting, other, return_exceptions=True)


@override_settings(**FAST)
async def test_a_group_reviewer_sees_and_decides_a_members_request() -> None:
    from tests.test_group_reviewers import people

    made = await database_sync_to_async(people)()
    ana, rita, otto = made["ana"], made["rita"], made["otto"]
    _, token = await database_sync_to_async(create_token)(ana, "ana-bot")
    row = await database_sync_to_async(service.live_token)(token)
    who = service.Asker(user=ana, token=row)
    asking = asyncio.ensure_future(service.ask_and_wait(who, "approval", "Ship it"))
    pk = await until_true(lambda: database_sync_to_async(waiting_pk)())
    [seen] = await database_sync_to_async(service.inbox_requests)(rita.pk)
    assert seen["request"] == pk and seen["owner_name"] == "ana"
    assert await database_sync_to_async(service.inbox_requests)(otto.pk) == []
    with pytest.raises(ProtocolError) as other_group:
        await service.decide_external(otto, pk, "approve")
    assert other_group.value.code == ErrorCode.NOT_FOUND
    await service.decide_external(rita, pk, "approve")
    _, outcome = await asyncio.wait_for(asking, 10)
    assert outcome.status == "approved" and outcome.decided_by == "rita"


@override_settings(AGENTUI_MCP_REQUEST_HEARTBEAT_S=0.05, **FAST)
async def test_the_waiting_call_renews_its_request() -> None:
    alice = await asker()
    asking = asyncio.ensure_future(service.ask_and_wait(alice, "approval", "Long one"))
    pk = await until_true(lambda: database_sync_to_async(waiting_pk)())
    first = (await ExternalRequest.objects.aget(pk=pk)).alive_at

    async def renewed() -> bool:
        return (await ExternalRequest.objects.aget(pk=pk)).alive_at > first

    await until_true(renewed, what="a renewed heartbeat")
    asking.cancel()
    await asyncio.gather(asking, return_exceptions=True)
