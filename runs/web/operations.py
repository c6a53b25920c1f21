"""Endpoints for whoever runs the server: `/healthz`, `/readyz` and `/metrics` (docs/operations.md).

`/healthz` and `/readyz` need no login (a load balancer or Kubernetes asks them). `/metrics`
needs the bearer token `AGENTUI_METRICS_TOKEN` and is off (404) without one: not "loopback
only", because behind a reverse proxy on the same machine every request comes from loopback.
"""

from __future__ import annotations

import hmac
from collections import Counter

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from runs import service
from runs.conf import conf
from runs.service import surfaces


@login_not_required
@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """The process is up and answers HTTP: no database, no other service asked."""
    return JsonResponse({"status": "ok"})


@login_not_required
@never_cache
@require_GET
async def readyz(request: HttpRequest) -> JsonResponse:
    """200 when the database, the channel layer and the model server all answer, each within
    AGENTUI_READY_TIMEOUT_S; else 503 naming the ones that did not (reasons go to the log).
    The enabled MCP servers' states are in the body; a failing one makes the status
    "degraded", still 200: only its tools' calls fail. Anyone may ask, so anyone gets how many
    servers are in each state; a logged-in staff member gets each server's by name."""
    ready = await service.readiness()
    failed, degraded = ready.failed, ready.degraded
    status = "not ready" if failed else "degraded" if degraded else "ready"
    user = await request.auser()
    named = bool(user.is_authenticated and user.is_staff)
    body: dict[str, object] = {
        "status": status,
        "checks": ready.checks,
        "mcp": ready.mcp if named else dict(Counter(ready.mcp.values())),
    }
    if failed:
        body["failed"] = failed
    if degraded:
        body["degraded"] = degraded if named else len(degraded)
    return JsonResponse(body, status=503 if failed else 200)


def _bearer(request: HttpRequest) -> str:
    scheme, _, value = request.headers.get("Authorization", "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" else ""


@login_not_required
@never_cache
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    """This process's Prometheus metrics, for a scraper that sends the metrics token."""
    token = conf().metrics_token
    if not token:
        return HttpResponse(
            "metrics are off: set AGENTUI_METRICS_TOKEN to serve them\n",
            status=404,
            content_type="text/plain; charset=utf-8",
        )
    if not hmac.compare_digest(_bearer(request).encode(), token.encode()):
        response = HttpResponse(
            "metrics need 'Authorization: Bearer <AGENTUI_METRICS_TOKEN>'\n",
            status=401,
            content_type="text/plain; charset=utf-8",
        )
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    return HttpResponse(
        surfaces.metrics.exposition(), content_type=surfaces.metrics.CONTENT_TYPE
    )
