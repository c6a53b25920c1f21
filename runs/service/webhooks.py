"""Webhooks: a person's URLs told when a notebook of theirs starts waiting, finishes or fails.

This is how teams plug approvals into Slack, email or a ticket queue. A person registers a
URL and the events it wants (`runs.models.WebhookEvent`); when one of their notebooks' status
changes into one of those (runs.service.status: the process whose UPDATE changed it, so once),
a `WebhookDelivery` row is stored for each matching webhook and sent:

* `POST` of JSON `{"id", "event", "at", "notebook": {"id", "title", "agent", "status", "url"},
  "step": {"id", "kind"} | null}` — no model-written text (a title is the person's own words),
  so nothing a model read or wrote leaves through it; for `request.waiting` (another agent asks
  over agentui's MCP server) `notebook` is null and `request` is `{"id", "kind", "token",
  "url"}`: the token's name is the person's, the agent's own words stay in the inbox;
* signed: `X-Agentui-Signature: sha256=<hex>`, the HMAC-SHA256 with the webhook's secret of
  `<X-Agentui-Timestamp>.<body>`; `X-Agentui-Event`, `X-Agentui-Delivery` (the row's id: a
  receiver drops repeats by it);
* retried with backoff (`AGENTUI_WEBHOOK_RETRY_S` × 2^n, up to `AGENTUI_WEBHOOK_ATTEMPTS`)
  until a 2xx; each attempt's status or error stays on the row, which the webhooks page and
  `GET /api/v1/webhooks/{id}/deliveries/` show: `delivered`, `failed` (with the last answer's
  status code or error) or `refused` (with why, never an answer: see below).

A delivery is claimed by one process at a time (a conditional UPDATE), so several server
processes never send one twice at once; every process sends what is due every
`AGENTUI_WEBHOOK_SWEEP_S` (runs.service.sweeper) and right after storing one.

URLs must be http(s) and, unless `AGENTUI_WEBHOOK_ALLOW_PRIVATE` is on, every address their host
resolves to must be a global one (`public_address`: `is_global`, and the special ranges Python
3.11 misses, IPv4 inside IPv6 judged as the IPv4 it carries). That is checked when registered and
again before each attempt, and the attempt connects to the very address checked: a person cannot
make the server probe its own network, not even with a DNS name whose answer changes between
check and connect. A delivery whose host resolves into it then is `refused`: nothing is sent,
it is not retried, and its log says why without any answer of that host (no status code, no
error of a connection that was never made), so the log is no probe either.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import hmac
import ipaddress
import json
import logging
import secrets
import socket
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from runs.conf import conf
from runs.models import (
    DeliveryStatus,
    NotebookStatus,
    Task,
    Webhook,
    WebhookDelivery,
    WebhookEvent,
)
from runs.protocol import ErrorCode, ProtocolError
from runs.service.notify import site_url
from runs.store.queries import notebook_view

if TYPE_CHECKING:  # loaded when deliveries are sent, not at every boot
    import httpx2

logger = logging.getLogger(__name__)

CLAIM_S = 120  # a claimed delivery is another process's to retry after this long
BATCH = 50
EVENT_OF_STATUS = {
    NotebookStatus.WAITING: WebhookEvent.WAITING,
    NotebookStatus.IDLE: WebhookEvent.FINISHED,
    NotebookStatus.FAILED: WebhookEvent.FAILED,
    NotebookStatus.INTERRUPTED: WebhookEvent.STOPPED,
}


# --- registering ----------------------------------------------------------------------------


def _refuse(reason: str) -> ProtocolError:
    return ProtocolError(ErrorCode.INVALID_INPUT, reason)


OWN_NETWORK = (
    "url: it points into the server's own network (not a public address: loopback, private, "
    "shared, link-local or another special range); an admin may allow that with "
    "AGENTUI_WEBHOOK_ALLOW_PRIVATE=yes"
)

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

# RFC 6890's special-purpose ranges (and later ones) that are not global but that Python 3.11's
# `is_global` takes for global, or that it judges without looking at the IPv4 address inside
NOT_GLOBAL = tuple(
    ipaddress.ip_network(net)
    for net in (
        "100.64.0.0/10",  # shared address space (carrier NAT; cloud metadata 100.100.100.200)
        "192.0.0.0/24",  # IETF protocol assignments
        "192.88.99.0/24",  # the 6to4 relay anycast, deprecated
        "198.18.0.0/15",  # benchmarking
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",  # reserved, and the broadcast address
        "::/96",  # IPv4-compatible addresses, deprecated (::a.b.c.d)
        "::ffff:0:0:0/96",  # IPv4-translated (SIIT)
        "64:ff9b:1::/48",  # local-use NAT64
        "2001::/32",  # Teredo
        "3fff::/20",  # documentation
        "5f00::/16",  # segment routing identifiers
        "fec0::/10",  # site-local, deprecated
        "ff00::/8",  # multicast
    )
)
NAT64 = ipaddress.ip_network("64:ff9b::/96")


def _carried_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one stands for: IPv4-mapped, 6to4, or NAT64's well-known prefix
    (the connection reaches that IPv4 address, so it is what must be judged)."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def public_address(address: Address) -> bool:
    """Whether a webhook may connect to `address`: a global one, by RFC 6890 and its kin."""
    if isinstance(address, ipaddress.IPv6Address):
        carried = _carried_ipv4(address)
        if carried is not None:
            return public_address(carried)
    if any(address in net for net in NOT_GLOBAL if net.version == address.version):
        return False
    return address.is_global


def _resolve(host: str) -> list[Address]:
    """Every address `host` names now (none when it does not resolve)."""
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except OSError:
        return []
    return [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]


def _form_problem(url: str) -> str | None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "url: expected an http:// or https:// URL"
    if len(url) > 500:
        return "url: at most 500 characters"
    if parts.username or parts.password:
        return "url: no user or password in the URL (the signature authenticates us)"
    return None


def url_problem(url: str) -> str | None:
    """Why `url` may not be a webhook's, or None."""
    problem = _form_problem(url)
    if problem is None and conf().webhook_allow_private != "yes":
        if not all(public_address(a) for a in _resolve(urlsplit(url).hostname or "")):
            return OWN_NETWORK
    return problem


def unresolved(host: str) -> str:
    """Why a delivery to `host` waits for its next try: its name does not resolve now."""
    return f"url: the host {host!r} does not resolve"


def pinned(url: str) -> tuple[str, dict[str, str], dict[str, Any]] | str:
    """Where to send `url`'s request: the URL with the one address checked here put in for the
    host name, the Host header and TLS name to keep, or why not to send it at all.

    Checking a name and then letting the HTTP client look it up again lets a DNS answer change
    in between (rebinding: public when checked, 127.0.0.1 when connected); the request goes to
    the address that was checked.
    """
    problem = _form_problem(url)
    if problem:
        return problem
    parts = urlsplit(url)
    host = parts.hostname or ""
    addresses = _resolve(host)
    if not addresses:
        return unresolved(host)
    if conf().webhook_allow_private != "yes" and not all(
        public_address(a) for a in addresses
    ):
        return OWN_NETWORK
    address = addresses[0]
    literal = f"[{address}]" if address.version == 6 else str(address)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    target = parts._replace(netloc=f"{literal}:{port}").geturl()
    named = f"[{host}]" if ":" in host else host
    host_header = named if parts.port is None else f"{named}:{parts.port}"
    extensions = {"sni_hostname": host} if parts.scheme == "https" else {}
    return target, {"Host": host_header}, extensions


def add_webhook(owner: User, url: str, events: list[str]) -> Webhook:
    """Register a webhook; ProtocolError (`invalid_input`, `quota_exceeded`) says why not."""
    url = url.strip()
    problem = url_problem(url)
    if problem:
        raise _refuse(problem)
    chosen = sorted(set(events))
    unknown = [e for e in chosen if e not in WebhookEvent.values]
    if not chosen or unknown:
        raise _refuse(f"events: choose from {', '.join(WebhookEvent.values)}")
    with transaction.atomic():
        # the person's row held: webhooks added at once cannot pass the limit together
        get_user_model().objects.select_for_update().filter(pk=owner.pk).first()
        if Webhook.objects.filter(owner=owner).count() >= conf().max_webhooks:
            raise ProtocolError(
                ErrorCode.QUOTA_EXCEEDED,
                f"You have {conf().max_webhooks} webhooks, the most one person may.",
            )
        return Webhook.objects.create(
            owner=owner, url=url, events=chosen, secret=secrets.token_hex(32)
        )


def remove_webhook(owner: User, pk: int) -> bool:
    deleted, _ = Webhook.objects.filter(owner=owner, pk=pk).delete()
    return bool(deleted)


def webhook_json(hook: Webhook, *, with_secret: bool = False) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": hook.pk,
        "url": hook.url,
        "events": hook.events,
        "created_at": hook.created_at.isoformat(),
    }
    if with_secret:
        data["secret"] = hook.secret
    return data


def delivery_json(row: WebhookDelivery) -> dict[str, Any]:
    return {
        "id": row.pk,
        "event": row.event,
        "notebook": row.task_id,
        "status": row.status,
        "attempts": row.attempts,
        # a refused host's answer is never shown, whatever an older row holds
        "last_status_code": (
            None if row.status == DeliveryStatus.REFUSED else row.last_status_code
        ),
        "last_error": row.last_error,
        "created_at": row.created_at.isoformat(),
        "delivered_at": row.delivered_at.isoformat() if row.delivered_at else None,
        "next_attempt_at": (
            row.next_attempt_at.isoformat()
            if row.status == DeliveryStatus.PENDING
            else None
        ),
    }


# --- storing what happened --------------------------------------------------------------------


def _payload(delivery_id: int, event: str, task: Task) -> dict[str, Any]:
    view = notebook_view(task.pk)
    step = None
    if event == WebhookEvent.WAITING and view.active and view.active.queue:
        waiting = view.active.queue[0]
        step = {"id": waiting.step_id, "kind": waiting.kind}
    return {
        "id": delivery_id,
        "event": event,
        "at": timezone.now().isoformat(),
        "notebook": {
            "id": task.pk,
            "title": task.title,
            "agent": task.agent,
            "status": task.status,
            "url": site_url() + reverse("runs:notebook", args=[task.pk]),
        },
        "step": step,
    }


def tells_of(status: str) -> bool:
    """Whether a change into `status` is an event webhooks may want."""
    return status in EVENT_OF_STATUS


def enqueue(task_pk: int, owner_id: int, status: str) -> int:
    """Store a delivery for each of the owner's webhooks that wants `status`'s event (one
    query when they have none)."""
    event = EVENT_OF_STATUS.get(NotebookStatus(status))
    if event is None:
        return 0
    hooks = [h for h in Webhook.objects.filter(owner_id=owner_id) if event in h.events]
    task = Task.objects.filter(pk=task_pk).first() if hooks else None
    if task is None:
        return 0
    now = timezone.now()
    for hook in hooks:
        row = WebhookDelivery.objects.create(
            webhook=hook, event=event, task=task, payload={}, next_attempt_at=now
        )
        row.payload = _payload(row.pk, event, task)
        row.save(update_fields=["payload"])
    return len(hooks)


def enqueue_request(owner_id: int, request_pk: int, kind: str, token_name: str) -> int:
    """Store a `request.waiting` delivery for each of the owner's webhooks that wants it."""
    event = WebhookEvent.REQUEST
    hooks = [h for h in Webhook.objects.filter(owner_id=owner_id) if event in h.events]
    now = timezone.now()
    for hook in hooks:
        row = WebhookDelivery.objects.create(
            webhook=hook, event=event, payload={}, next_attempt_at=now
        )
        row.payload = {
            "id": row.pk,
            "event": event,
            "at": now.isoformat(),
            "notebook": None,
            "step": None,
            "request": {
                "id": request_pk,
                "kind": kind,
                "token": token_name,
                "url": site_url() + reverse("runs:inbox"),
            },
        }
        row.save(update_fields=["payload"])
    return len(hooks)


async def tell_request(
    owner_id: int, request_pk: int, kind: str, token_name: str
) -> None:
    """After another agent's request began waiting: store the deliveries, send what is due."""
    stored = await database_sync_to_async(enqueue_request)(
        owner_id, request_pk, kind, token_name
    )
    if stored:
        await deliver_due()


async def tell(task_pk: int, owner_id: int, status: str) -> None:
    """After a status change: store the deliveries, then send what is due at once."""
    if await database_sync_to_async(enqueue)(task_pk, owner_id, status):
        await deliver_due()


# --- sending ---------------------------------------------------------------------------------


def sign(secret: str, timestamp: str, body: bytes) -> str:
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def _claim_due(now: dt.datetime) -> list[WebhookDelivery]:
    """Due deliveries this process now holds (each claimed by one conditional UPDATE)."""
    due = WebhookDelivery.objects.filter(
        Q(claimed_until__isnull=True) | Q(claimed_until__lt=now),
        status=DeliveryStatus.PENDING,
        next_attempt_at__lte=now,
    ).values_list("pk", "claimed_until")[:BATCH]
    held = []
    until = now + dt.timedelta(seconds=CLAIM_S)
    for pk, claimed in due:
        taken = WebhookDelivery.objects.filter(pk=pk, claimed_until=claimed).update(
            claimed_until=until
        )
        if taken:
            held.append(pk)
    return list(WebhookDelivery.objects.filter(pk__in=held).select_related("webhook"))


def _record(
    row: WebhookDelivery, code: int | None, error: str, *, refused: bool = False
) -> None:
    values = conf()
    row.attempts += 1
    row.last_status_code = code
    row.last_error = error[:300]
    row.claimed_until = None
    now = timezone.now()
    if refused:
        row.status = DeliveryStatus.REFUSED
    elif code is not None and 200 <= code < 300:
        row.status, row.delivered_at = DeliveryStatus.DELIVERED, now
    elif row.attempts >= values.webhook_attempts:
        row.status = DeliveryStatus.FAILED
    else:
        wait = values.webhook_retry_s * 2 ** (row.attempts - 1)
        row.next_attempt_at = now + dt.timedelta(seconds=wait)
    row.save()


async def _send(client: httpx2.AsyncClient, row: WebhookDelivery) -> None:
    import httpx2

    hook = row.webhook
    where = await asyncio.to_thread(pinned, hook.url)
    if isinstance(where, str):
        # a name that does not resolve may next time; any other refusal stands
        refused = where != unresolved(urlsplit(hook.url).hostname or "")
        await database_sync_to_async(_record)(row, None, where, refused=refused)
        return
    target, host_header, extensions = where
    body = json.dumps(row.payload, separators=(",", ":")).encode()
    stamp = str(int(time.time()))
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "agentui-webhooks",
        "X-Agentui-Event": row.event,
        "X-Agentui-Delivery": str(row.pk),
        "X-Agentui-Timestamp": stamp,
        "X-Agentui-Signature": sign(hook.secret, stamp, body),
        **host_header,
    }
    try:
        response = await client.post(
            target, content=body, headers=headers, extensions=extensions
        )
    except httpx2.HTTPError as exc:
        await database_sync_to_async(_record)(row, None, f"{type(exc).__name__}: {exc}")
        return
    error = "" if response.is_success else f"HTTP {response.status_code}"
    await database_sync_to_async(_record)(row, response.status_code, error)


async def deliver_due(now: dt.datetime | None = None) -> int:
    """Send every delivery due at `now` (default: now) that no other process holds."""
    rows = await database_sync_to_async(_claim_due)(now or timezone.now())
    if not rows:
        return 0
    import httpx2

    timeout = conf().webhook_timeout_s
    async with httpx2.AsyncClient(timeout=timeout, follow_redirects=False) as client:
        await asyncio.gather(*(_send(client, row) for row in rows))
    return len(rows)
