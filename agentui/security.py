"""The Content-Security-Policy on every response, and the endpoint browsers report violations to.

The policy itself is `CONTENT_SECURITY_POLICY` in settings (django-csp); this adds what depends on
the request: the page's websocket origin (`ws://` or `wss://` and the host it was served from) to
`connect-src`. Reports (`report-uri`) are counted and logged, a line each, at most
`REPORTS_LOGGED_PER_MINUTE` lines a minute per process (the endpoint needs no login, so anyone
could send them).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any

from csp.middleware import CSPMiddleware, PolicyParts
from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import DisallowedHost
from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

logger = logging.getLogger("agentui.csp")

MAX_REPORT_BYTES = 16 * 1024
REPORTS_LOGGED_PER_MINUTE = 60


class ContentSecurityPolicyMiddleware(CSPMiddleware):
    """django-csp's middleware, with this request's websocket origin allowed to connect."""

    def get_policy_parts(
        self,
        request: HttpRequest,
        response: HttpResponseBase,
        report_only: bool = False,
    ) -> PolicyParts:
        parts = super().get_policy_parts(request, response, report_only)
        if report_only:
            return parts
        try:
            host = request.get_host()
        except DisallowedHost:
            return parts
        socket_origin = f"{'wss' if request.is_secure() else 'ws'}://{host}"
        update = dict(parts.update or {})
        update["connect-src"] = [*update.get("connect-src", ()), socket_origin]
        parts.update = update
        return parts


class _Counter:
    """Reports received by this process, and how many were logged in the current minute."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.total = 0
        self.minute = 0
        self.logged_this_minute = 0

    def count(self) -> bool:
        """Count one report; whether it may be logged."""
        with self.lock:
            self.total += 1
            minute = int(time.monotonic() // 60)
            if minute != self.minute:
                self.minute, self.logged_this_minute = minute, 0
            self.logged_this_minute += 1
            return self.logged_this_minute <= REPORTS_LOGGED_PER_MINUTE


REPORTS = _Counter()


def _summary(body: bytes) -> dict[str, Any]:
    """The parts of a report worth a log line (report-uri's `csp-report` object)."""
    try:
        report = json.loads(body)
    except (ValueError, RecursionError):  # not JSON, or nested too deep to read
        return {"unreadable": body[:200].decode("utf-8", "replace")}
    if isinstance(report, dict) and isinstance(report.get("csp-report"), dict):
        report = report["csp-report"]
    if not isinstance(report, dict):
        return {"unreadable": str(report)[:200]}
    keys = (
        "document-uri",
        "violated-directive",
        "effective-directive",
        "blocked-uri",
        "source-file",
        "line-number",
        "script-sample",
    )
    return {key: str(report[key])[:300] for key in keys if key in report}


@csrf_exempt
@login_not_required
@require_POST
def csp_report(request: HttpRequest) -> HttpResponse:
    """Where browsers send CSP violation reports: counted, and logged as one line."""
    body = request.read(MAX_REPORT_BYTES + 1)
    if len(body) > MAX_REPORT_BYTES:
        return HttpResponse(status=413)
    if REPORTS.count():
        logger.warning(
            "CSP violation #%d: %s",
            REPORTS.total,
            json.dumps(_summary(body), sort_keys=True),
        )
    return HttpResponse(status=204)
