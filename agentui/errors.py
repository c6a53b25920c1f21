"""Error answers: JSON for the APIs, Django's plain pages elsewhere; never a traceback.

With DEBUG off (the default) Django answers 400/403/404/500 through these handlers
(agentui/urls.py) and a failed CSRF check through `csrf_failure` (CSRF_FAILURE_VIEW). Under
/api/ (the page's JSON and the REST API, /api/v1/) and /agui/ the answer is JSON: `{"error":
sentence, "code": word}`, and under /api/v1/ also `"detail"` (the REST API's ErrorOut shape).
A body over Django's own size checks (behind agentui/body_limit.py's) is a 413, not a 400.
With DEBUG on Django answers a URL that matches nothing with its HTML debug page, not through
handler404: JsonErrorsMiddleware turns any non-JSON error answer under the APIs into JSON.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django.core.exceptions import (
    RequestDataTooBig,
    TooManyFieldsSent,
    TooManyFilesSent,
)
from django.http import HttpRequest, HttpResponse
from django.utils.deprecation import MiddlewareMixin
from django.views import csrf, defaults

JSON_PREFIXES = ("/api/", "/agui/", "/mcp")
REST_PREFIX = "/api/v1/"


def wants_json(path: str) -> bool:
    return path.startswith(JSON_PREFIXES)


def error_json(path: str, code: str, message: str) -> bytes:
    """The JSON body of an API error at `path`."""
    body: dict[str, Any] = {"error": message, "code": code}
    if path.startswith(REST_PREFIX):
        body["detail"] = message
    return json.dumps(body).encode()


def _json(request: HttpRequest, status: int, code: str, message: str) -> HttpResponse:
    return HttpResponse(
        error_json(request.path, code, message),
        status=status,
        content_type="application/json",
    )


def _too_large(exception: Exception | None) -> bool:
    return isinstance(
        exception, (RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent)
    )


def bad_request(
    request: HttpRequest, exception: Exception | None = None
) -> HttpResponse:
    if _too_large(exception):
        message = "The request is too large (too many bytes, fields or files)."
        if wants_json(request.path):
            return _json(request, 413, "too_large", message)
        return HttpResponse(message, status=413, content_type="text/plain")
    if wants_json(request.path):
        return _json(
            request, 400, "bad_request", "The request could not be understood."
        )
    return defaults.bad_request(request, exception)  # type: ignore[arg-type]


def _json_or(
    status: int, code: str, message: str, page: Callable[..., HttpResponse]
) -> Callable[..., HttpResponse]:
    """A handler answering JSON under the APIs, Django's `page` elsewhere."""

    def handler(
        request: HttpRequest, exception: Exception | None = None
    ) -> HttpResponse:
        if wants_json(request.path):
            return _json(request, status, code, message)
        return page(request, exception)

    return handler


permission_denied = _json_or(
    403, "forbidden", "You may not do this.", defaults.permission_denied
)
page_not_found = _json_or(
    404, "not_found", "There is nothing at this address.", defaults.page_not_found
)


def server_error(request: HttpRequest) -> HttpResponse:
    if wants_json(request.path):
        return _json(
            request,
            500,
            "server_error",
            "Something went wrong on the server; it is logged.",
        )
    return defaults.server_error(request)


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    if wants_json(request.path):
        return _json(
            request,
            403,
            "csrf_failed",
            "The CSRF check failed; reload the page (or send the X-CSRFToken header).",
        )
    return csrf.csrf_failure(request, reason)


# The code of an error answer under the APIs that came without one, by status.
STATUS_CODES = {
    400: "bad_request",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "too_large",
}
STATUS_MESSAGES = {
    400: "The request could not be understood.",
    403: "You may not do this.",
    404: "There is nothing at this address.",
    405: "This address does not take this method.",
    413: "The request is too large.",
}


class JsonErrorsMiddleware(MiddlewareMixin):
    """Under /api/ and /agui/, an error answer that is not JSON (Django's debug 404 page, a bare
    405 from a view) becomes the APIs' JSON error of the same status; headers such as `Allow`
    and `WWW-Authenticate` stay."""

    def process_response(
        self, request: HttpRequest, response: HttpResponse
    ) -> HttpResponse:
        if (
            response.status_code < 400
            or not wants_json(request.path)
            or getattr(response, "streaming", False)
            or response.get("Content-Type", "").startswith("application/json")
        ):
            return response
        status = response.status_code
        fallback = "server_error" if status >= 500 else "bad_request"
        message = STATUS_MESSAGES.get(
            status,
            "Something went wrong on the server; it is logged."
            if status >= 500
            else "The request was refused.",
        )
        response.content = error_json(
            request.path, STATUS_CODES.get(status, fallback), message
        )
        response["Content-Type"] = "application/json"
        if response.has_header(
            "Content-Length"
        ):  # CommonMiddleware set it for the old body
            response["Content-Length"] = str(len(response.content))
        return response
