"""Webhooks (issue 29): a person's URL hears when their notebook waits, finishes or fails —
signed, retried with backoff, logged — and cannot be pointed into the server's own network.

A real HTTP receiver on 127.0.0.1 (tests/webhook_receiver.py) takes the deliveries; runs on
SQLite and, in make test's services pass, on PostgreSQL with Redis.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import socket
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.test import override_settings
from django.utils import timezone

from runs import service
from runs.models import (
    DeliveryStatus,
    Event,
    NotebookStatus,
    Webhook,
    WebhookDelivery,
)
from runs.protocol import ProtocolError
from runs.service import webhooks
from tests.conftest import take_remote_attempts
from tests.live_support import (
    QUESTION,
    analyst_script,
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    llm_at,
    make_notebook,
    make_user,
)
from tests.rest_support import Api, user_with_token
from tests.webhook_receiver import receiver

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]

LOCAL = override_settings(
    AGENTUI_WEBHOOK_ALLOW_PRIVATE="yes", AGENTUI_WEBHOOK_RETRY_S=0.1
)


def deliveries() -> list[WebhookDelivery]:
    return list(WebhookDelivery.objects.order_by("pk"))


async def tried(count: int, attempts: int) -> list[WebhookDelivery]:
    """The delivery rows once there are `count` and each was tried `attempts` times
    (a delivery is sent on its own, after the run that caused it: wait on the rows)."""
    for _ in range(600):
        rows = await database_sync_to_async(deliveries)()
        if len(rows) == count and min(r.attempts for r in rows) >= attempts:
            return rows
        await asyncio.sleep(0.05)
    raise AssertionError(f"deliveries: {[(r.event, r.attempts) for r in rows]}")


async def waiting_step(pk: int) -> str:
    events = [
        e.payload
        async for e in Event.objects.filter(task_id=pk, type="step_waiting").order_by(
            "seq"
        )
    ]
    return str(events[-1]["step_id"])


@LOCAL
async def test_a_waiting_step_is_signed_retried_and_logged_and_a_finished_turn_told(
    scripted_server: Any,
) -> None:
    user, token = await user_with_token("ana")
    api = Api(token)
    with receiver(statuses=[500]) as hook_site:
        created = await api.post(
            "/webhooks/",
            {"url": hook_site.url, "events": ["step.waiting", "turn.finished"]},
        )
        assert created.status_code == 201, created.content
        secret = created.json()["secret"]
        listed = (await api.get("/webhooks/")).json()
        assert [h["url"] for h in listed] == [hook_site.url]
        assert "secret" not in listed[0] or listed[0]["secret"] is None

        with llm_at(scripted_server(analyst_script())):
            task = await database_sync_to_async(make_notebook)(user, mode="tools")
            await service.send_message(task.pk, QUESTION)
            await service.wait_idle()
            [first] = await asyncio.to_thread(hook_site.wait_for, 1)
            # the receiver answered 500: logged, due again after the backoff
            [row] = await tried(1, attempts=1)
            assert (row.status, row.attempts, row.last_status_code) == (
                DeliveryStatus.PENDING,
                1,
                500,
            )
            later = timezone.now() + dt.timedelta(seconds=5)
            assert await service.deliver_due(later) == 1
            [_, second] = await asyncio.to_thread(hook_site.wait_for, 2)
            await database_sync_to_async(row.refresh_from_db)()
            assert (row.status, row.attempts, row.last_status_code) == (
                DeliveryStatus.DELIVERED,
                2,
                200,
            )

            # the same signed message both times, and nothing a model wrote in it
            assert first.body == second.body
            assert first.signed_by(secret) and second.signed_by(secret)
            assert not first.signed_by("another secret")
            assert first.headers["x-agentui-event"] == "step.waiting"
            assert first.headers["x-agentui-delivery"] == str(row.pk)
            body = first.json
            assert body["event"] == "step.waiting" and body["id"] == row.pk
            assert body["notebook"]["id"] == task.pk
            assert body["notebook"]["url"].endswith(f"/tasks/{task.pk}/")
            step_id = await waiting_step(task.pk)
            assert body["step"] == {"id": step_id, "kind": "tool_calls"}
            assert set(body) == {"id", "event", "at", "notebook", "step"}
            assert set(body["notebook"]) == {"id", "title", "url", "agent", "status"}
            assert b"Let me compute" not in first.body  # the model's words stay out

            # approving it runs the turn to its answer: turn.finished follows
            await service.approve(task.pk, step_id)
            await service.wait_idle()
            received = await asyncio.to_thread(hook_site.wait_for, 3)
            await tried(2, attempts=1)
        assert received[-1].json["event"] == "turn.finished"
        assert received[-1].signed_by(secret)

    log = (await api.get(f"/webhooks/{created.json()['id']}/deliveries/")).json()
    assert [(d["event"], d["status"], d["attempts"]) for d in log] == [
        ("turn.finished", "delivered", 1),
        ("step.waiting", "delivered", 2),
    ]
    other = Api((await user_with_token("bob"))[1])
    hook_id = created.json()["id"]
    assert (await other.get(f"/webhooks/{hook_id}/deliveries/")).status_code == 404
    gone = await api.client.delete(f"/api/v1/webhooks/{hook_id}", headers=api.headers)
    assert gone.status_code == 204
    assert not await Webhook.objects.aexists()


@LOCAL
async def test_a_receiver_that_never_answers_well_is_tried_as_often_as_allowed_then_failed(
    scripted_server: Any,
) -> None:
    user = await database_sync_to_async(make_user)("ana")
    with (
        receiver(statuses=[503] * 10) as hook_site,
        override_settings(AGENTUI_WEBHOOK_ATTEMPTS=3),
    ):
        await database_sync_to_async(webhooks.add_webhook)(
            user, hook_site.url, ["step.waiting"]
        )
        with llm_at(scripted_server(analyst_script())):
            task = await database_sync_to_async(make_notebook)(user, mode="tools")
            await service.send_message(task.pk, QUESTION)
            await service.wait_idle()
        await asyncio.to_thread(hook_site.wait_for, 1)
        await tried(1, attempts=1)
        for minutes in (1, 2, 3):  # later and later: the backoff has passed each time
            await service.deliver_due(timezone.now() + dt.timedelta(minutes=minutes))
        [row] = await database_sync_to_async(deliveries)()
    assert (row.status, row.attempts, row.last_error) == (
        DeliveryStatus.FAILED,
        3,
        "HTTP 503",
    )
    assert len(hook_site.received) == 3


async def test_urls_into_the_servers_own_network_and_bad_input_are_refused() -> None:
    user = await database_sync_to_async(make_user)("ana")
    add = database_sync_to_async(webhooks.add_webhook)
    for url in (
        "http://127.0.0.1:5432/",
        "http://localhost/hook",
        "http://10.0.0.7/x",
        "http://[::1]/x",
        "http://169.254.169.254/latest/meta-data",
    ):
        with pytest.raises(ProtocolError, match="own network"):
            await add(user, url, ["step.waiting"])
    with pytest.raises(ProtocolError, match="http:// or https://"):
        await add(user, "file:///etc/passwd", ["step.waiting"])
    with pytest.raises(ProtocolError, match="no user or password"):
        await add(user, "https://me:pw@hooks.example.com/", ["step.waiting"])
    with pytest.raises(ProtocolError, match="events"):
        await add(user, "https://hooks.example.com/", ["everything"])
    assert not await Webhook.objects.aexists()

    _, token = await user_with_token("bob")
    api = Api(token)
    refused = await api.post(
        "/webhooks/", {"url": "http://127.0.0.1/x", "events": ["turn.failed"]}
    )
    assert refused.status_code == 422 and "own network" in refused.json()["detail"]
    with override_settings(AGENTUI_MAX_WEBHOOKS=1):
        ok = await api.post(
            "/webhooks/",
            {"url": "https://hooks.example.com/a", "events": ["turn.failed"]},
        )
        assert ok.status_code == 201
        over = await api.post(
            "/webhooks/",
            {"url": "https://hooks.example.com/b", "events": ["turn.failed"]},
        )
        assert over.status_code == 409 and over.json()["code"] == "quota_exceeded"


def rebinding_dns(
    monkeypatch: pytest.MonkeyPatch, checked: str, connected: str
) -> None:
    """`hooks.rebind.test` answers `checked` to a lookup without a port (the check's) and
    `connected` to one with a port (an HTTP client's, when it connects by name): a DNS answer
    that changes between the check and the connection."""
    real = socket.getaddrinfo

    def lookup(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else host  # anyio passes bytes
        if name != "hooks.rebind.test":
            return real(host, port, *args, **kwargs)
        address = checked if port is None else connected
        return real(address, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", lookup)


async def deliver_once(user: Any) -> WebhookDelivery:
    task = await database_sync_to_async(make_notebook)(user)
    enqueue = database_sync_to_async(webhooks.enqueue)
    assert await enqueue(task.pk, user.pk, NotebookStatus.WAITING) == 1
    await service.deliver_due()
    [row] = await database_sync_to_async(deliveries)()
    return row


@override_settings(AGENTUI_WEBHOOK_TIMEOUT_S=1)
async def test_a_name_that_rebinds_to_the_server_after_its_check_is_never_connected_to(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    user = await database_sync_to_async(make_user)("ana")
    with receiver() as hook_site:
        port = hook_site.url.split(":")[2].split("/")[0]
        # checked: an address outside the server's network (the tests' guard refuses the
        # connection before anything is sent, and notes where it went)
        rebinding_dns(monkeypatch, checked="93.184.215.14", connected="127.0.0.1")
        await database_sync_to_async(webhooks.add_webhook)(
            user, f"http://hooks.rebind.test:{port}/hook", ["step.waiting"]
        )
        row = await deliver_once(user)
    assert hook_site.received == []  # the rebound answer (127.0.0.1) was never used
    assert ["93.184.215.14:" in attempt for attempt in take_remote_attempts()] == [True]
    assert row.attempts == 1 and "ConnectError" in row.last_error


@override_settings(AGENTUI_WEBHOOK_ALLOW_PRIVATE="yes")
async def test_a_delivery_goes_to_the_address_checked_and_names_the_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    user = await database_sync_to_async(make_user)("ana")
    with receiver() as hook_site:
        port = hook_site.url.split(":")[2].split("/")[0]
        rebinding_dns(monkeypatch, checked="127.0.0.1", connected="192.0.0.170")
        await database_sync_to_async(webhooks.add_webhook)(
            user, f"http://hooks.rebind.test:{port}/hook", ["step.waiting"]
        )
        row = await deliver_once(user)
        [received] = hook_site.received
    assert received.headers["host"] == f"hooks.rebind.test:{port}"
    assert (row.status, row.last_error) == (DeliveryStatus.DELIVERED, "")


# issue 44: ranges that `is_private` (and partly `is_global`) on Python 3.11 let through
NOT_PUBLIC = [
    "100.64.0.1",  # shared address space
    "100.100.100.200",  # a cloud's metadata service, inside it
    "100.127.255.254",
    "192.0.0.8",  # IETF protocol assignments
    "192.0.0.170",
    "198.18.0.1",  # benchmarking
    "192.88.99.1",  # the 6to4 relay anycast
    "224.0.0.251",  # multicast
    "240.0.0.1",
    "[2002:7f00:1::]",  # 6to4 around 127.0.0.1
    "[2002:a00:7::1]",  # 6to4 around 10.0.0.7
    "[2002:6464:64c8::]",  # 6to4 around 100.100.100.200
    "[2001::1]",  # Teredo
    "[2001:0:4136:e378:8000:63bf:3fff:fdd2]",
    "[::ffff:100.100.100.200]",  # IPv4-mapped
    "[::ffff:192.0.0.8]",
    "[::ffff:127.0.0.1]",
    "[64:ff9b::a00:7]",  # NAT64 around 10.0.0.7
    "[64:ff9b::6464:64c8]",  # NAT64 around 100.100.100.200
    "[64:ff9b:1::808:808]",  # local-use NAT64
    "[::127.0.0.1]",  # IPv4-compatible, deprecated
    "[::ffff:0:a00:7]",  # IPv4-translated
    "[fec0::1]",  # site-local
    "[ff0e::1]",  # multicast
    "[3fff::1]",  # documentation
]
PUBLIC = ["8.8.8.8", "[2606:4700::1111]", "[2002:808:808::1]", "[64:ff9b::808:808]"]


@pytest.mark.parametrize("host", NOT_PUBLIC)
def test_every_non_global_address_is_refused(host: str) -> None:
    user = make_user("ana")
    with pytest.raises(ProtocolError, match="own network"):
        webhooks.add_webhook(user, f"http://{host}/hook", ["step.waiting"])
    assert webhooks.pinned(f"https://{host}:8443/hook") == webhooks.OWN_NETWORK
    assert not Webhook.objects.exists()


@pytest.mark.parametrize("host", PUBLIC)
def test_global_addresses_and_the_ipv6_forms_of_global_ipv4_are_taken(
    host: str,
) -> None:
    hook = webhooks.add_webhook(
        make_user("ana"), f"http://{host}/hook", ["turn.failed"]
    )
    assert hook.url == f"http://{host}/hook"
    target, headers, _ = webhooks.pinned(f"http://{host}/hook")  # type: ignore[misc]
    assert target == f"http://{host}:80/hook" and headers == {"Host": host}


def stored_then_moved(monkeypatch: pytest.MonkeyPatch, then: str) -> None:
    """`hooks.moved.test` is a public address when registered, `then` from the next lookup on
    (a name its owner pointed elsewhere after registering it)."""
    real = socket.getaddrinfo
    answers = iter(["93.184.215.14"])

    def lookup(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else host
        if name != "hooks.moved.test":
            return real(host, port, *args, **kwargs)
        return real(next(answers, then), port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", lookup)


@pytest.mark.parametrize("then", ["100.100.100.200", "2002:7f00:1::", "192.0.0.8"])
async def test_a_delivery_to_a_host_that_moved_into_the_network_is_refused_not_probed(
    monkeypatch: pytest.MonkeyPatch, then: str
) -> None:
    user, token = await user_with_token("ana")
    stored_then_moved(monkeypatch, then)
    hook = await database_sync_to_async(webhooks.add_webhook)(
        user, "https://hooks.moved.test/hook", ["step.waiting"]
    )
    row = await deliver_once(user)
    # nothing was connected to (the tests' guard would fail the test), nor will be again
    assert (row.status, row.attempts, row.last_status_code) == (
        DeliveryStatus.REFUSED,
        1,
        None,
    )
    assert row.last_error == webhooks.OWN_NETWORK
    assert await service.deliver_due(timezone.now() + dt.timedelta(days=1)) == 0
    [logged] = (await Api(token).get(f"/webhooks/{hook.pk}/deliveries/")).json()
    assert (logged["status"], logged["last_status_code"]) == ("refused", None)
    assert logged["next_attempt_at"] is None
    page = await database_sync_to_async(webhooks_page)(user)
    assert f'data-delivery-id="{row.pk}" data-status="refused"' in page
    assert "refused</span>" in page and "not sent: url: it points into" in page
    assert "HTTP " not in page


def webhooks_page(user: Any) -> str:
    from django.test import Client

    client = Client()
    client.force_login(user)
    response = client.get("/settings/webhooks/")
    assert response.status_code == 200
    return response.content.decode()


async def test_a_host_that_does_not_resolve_is_tried_again_not_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    user = await database_sync_to_async(make_user)("ana")
    stored_then_moved(monkeypatch, "nowhere.invalid")
    await database_sync_to_async(webhooks.add_webhook)(
        user, "https://hooks.moved.test/hook", ["step.waiting"]
    )
    row = await deliver_once(user)
    assert (row.status, row.attempts, row.last_error) == (
        DeliveryStatus.PENDING,
        1,
        "url: the host 'hooks.moved.test' does not resolve",
    )
