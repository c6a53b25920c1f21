"""Webhooks over REST: register a URL for a person's notebook events, list, delete, and read
each webhook's delivery log (runs.service.webhooks says what is sent and how it is signed)."""

from __future__ import annotations

from typing import Any, Literal

from django.http import HttpRequest
from django.shortcuts import get_object_or_404
from ninja import Field, Schema, Status

from runs.models import Webhook
from runs.rest.reading import NOT_FOUND
from runs.rest.router import router
from runs.rest.schemas import ErrorOut, Input
from runs.service import add_webhook, delivery_json, remove_webhook, webhook_json

EventName = Literal[
    "step.waiting", "turn.finished", "turn.failed", "turn.stopped", "request.waiting"
]


class WebhookIn(Input):
    """A URL to be told of your notebooks' events (a step waiting, a turn finished, failed or
    stopped)."""

    url: str = Field(
        min_length=1, max_length=500, examples=["https://hooks.example/agentui"]
    )
    events: list[EventName] = Field(min_length=1, max_length=5)


class WebhookOut(Schema):
    """A registered webhook; its signing secret only in the answer that creates it."""

    id: int
    url: str
    events: list[str]
    created_at: str
    secret: str | None = Field(
        None,
        description="only in the answer that creates it: sign-check deliveries with it",
    )


class DeliveryOut(Schema):
    """One delivery of an event to a webhook: its status, attempts, last answer and times."""

    id: int
    event: str
    notebook: int | None
    status: Literal["pending", "delivered", "failed", "refused"] = Field(
        description="refused: the host resolved to an address webhooks may not reach "
        "(nothing was sent; last_error says why)"
    )
    attempts: int
    last_status_code: int | None = Field(
        description="the last answer's HTTP status; null when none came (and when refused)"
    )
    last_error: str
    created_at: str
    delivered_at: str | None
    next_attempt_at: str | None


def _own(request: HttpRequest, pk: int) -> Webhook:
    hook: Webhook = get_object_or_404(Webhook, pk=pk, owner=request.auth)  # type: ignore[attr-defined]
    return hook


@router.get("/webhooks/", tags=["webhooks"], response=list[WebhookOut])
def list_webhooks(request: HttpRequest) -> list[dict[str, Any]]:
    """Your webhooks (without their secrets)."""
    rows = Webhook.objects.filter(owner=request.auth)  # type: ignore[attr-defined]
    return [webhook_json(h) for h in rows]


@router.post(
    "/webhooks/",
    tags=["webhooks"],
    response={201: WebhookOut, 409: ErrorOut, 422: ErrorOut},
)
def create_webhook(request: HttpRequest, body: WebhookIn) -> Status[Any]:
    """Register a URL for the events of your notebooks; the answer holds its signing secret,
    this once. 422 for a URL into the server's own network (unless an admin allowed it)."""
    hook = add_webhook(request.auth, body.url, list(body.events))  # type: ignore[attr-defined]
    return Status(201, webhook_json(hook, with_secret=True))


@router.delete(
    "/webhooks/{int:pk}", tags=["webhooks"], response={204: None, **NOT_FOUND}
)
def delete_webhook(request: HttpRequest, pk: int) -> Status[None]:
    """Delete a webhook and its delivery log; nothing more is sent to it."""
    _own(request, pk)
    remove_webhook(request.auth, pk)  # type: ignore[attr-defined]
    return Status(204, None)


@router.get(
    "/webhooks/{int:pk}/deliveries/",
    tags=["webhooks"],
    response={200: list[DeliveryOut], **NOT_FOUND},
)
def list_deliveries(request: HttpRequest, pk: int) -> list[dict[str, Any]]:
    """The webhook's latest 100 deliveries, newest first: each attempt's outcome."""
    hook = _own(request, pk)
    return [delivery_json(d) for d in hook.deliveries.all()[:100]]
