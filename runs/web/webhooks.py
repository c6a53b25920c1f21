"""The webhooks settings page: register a URL for notebook events (its secret shown once),
delete one, and read the latest deliveries with each attempt's outcome (runs.service.webhooks)."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from runs.models import Webhook, WebhookDelivery, WebhookEvent
from runs.protocol import ProtocolError
from runs.service import add_webhook, remove_webhook
from runs.web.confirming import Question, ask, is_confirmed

LOG_ROWS = 50
GONE = "No such webhook."


def _page(
    request: HttpRequest,
    *,
    created: Webhook | None = None,
    url: str = "",
    chosen: list[str] | None = None,
    error: str = "",
    status: int = 200,
) -> HttpResponse:
    context = {
        "hooks": Webhook.objects.filter(owner=request.user),
        "deliveries": WebhookDelivery.objects.filter(webhook__owner=request.user)
        .select_related("webhook")
        .order_by("-created_at", "-pk")[:LOG_ROWS],
        "events": WebhookEvent.choices,
        "created": created,
        "url": url,
        "chosen": chosen if chosen is not None else [WebhookEvent.WAITING.value],
        "error": error,
    }
    return render(request, "runs/webhooks.html", context, status=status)


@require_http_methods(["GET", "POST"])
def webhooks(request: HttpRequest) -> HttpResponse:
    """GET: the person's webhooks and their deliveries. POST (url, events): register one."""
    if request.method == "GET":
        return _page(request)
    url = (request.POST.get("url") or "").strip()
    chosen = request.POST.getlist("events")
    try:
        hook = add_webhook(request.user, url, chosen)  # type: ignore[arg-type]
    except ProtocolError as exc:
        code = 409 if exc.code == "quota_exceeded" else 400
        return _page(request, url=url, chosen=chosen, error=exc.reason, status=code)
    # rendered, not redirected: the secret must not sit in a session or a URL
    return _page(request, created=hook, status=201)


@require_POST
def delete(request: HttpRequest, pk: int) -> HttpResponse:
    """Delete one of the person's webhooks, its delivery log with it.
    Unconfirmed (the page's script had not run): nothing changes, a page asks first."""
    if not is_confirmed(request):
        hook = Webhook.objects.filter(owner=request.user, pk=pk).first()
        question = (
            Question(
                title=f"Delete the webhook to {hook.url}?",
                text="Nothing more is sent to it, and its delivery log goes with it.",
                confirm="Delete webhook",
            )
            if hook is not None
            else None
        )
        return ask(request, question, back=reverse("runs:webhooks"), missing=GONE)
    if remove_webhook(request.user, pk):  # type: ignore[arg-type]
        messages.success(request, "Webhook deleted: nothing more is sent to it.")
    else:
        messages.error(request, GONE)
    return redirect("runs:webhooks")
