"""The NinjaAPI behind `/api/v1/`: who may call (runs.service.tokens), how refusals look, the docs.

Every refusal is JSON `{"code": ..., "detail": ...}` (ErrorOut): 401 for no or bad credentials,
404 for a notebook or step that is not the caller's (as for one that does not exist), 422 for
input that does not fit (naming the field), 409 for an action the notebook's state does not
allow now (a step already run, a turn still going, a double approval).
"""

from __future__ import annotations

import logging
from typing import Any

from django.contrib.auth.base_user import AbstractBaseUser
from django.core.exceptions import PermissionDenied, SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse
from django.http.multipartparser import MultiPartParserError
from django.urls import URLPattern, URLResolver
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.openapi.schema import OpenAPISchema
from ninja.operation import Operation
from ninja.parser import Parser
from ninja.security.base import AuthBase

from runs.protocol import ErrorCode, ProtocolError
from runs.rest import (  # noqa: F401  (they add their operations)
    account,
    acting,
    budgets,
    corrections,
    data,
    datasets,
    inbox,
    policies,
    presets,
    reading,
    review,
    stream,
    webhooks,
)
from runs.rest.router import router
from runs.service import (
    AuthFailed,
    auth_failed_response,
    request_user,
    unauthenticated_response,
)

# How each refusal of the service (runs.protocol.ErrorCode) answers over HTTP.
HTTP_STATUS = {
    ErrorCode.BAD_JSON: 400,
    ErrorCode.TOO_LARGE: 413,
    ErrorCode.INVALID_INPUT: 422,
    ErrorCode.UNKNOWN_ACTION: 400,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.NOT_ALLOWED: 409,
    ErrorCode.ALREADY_RUNNING: 409,
    ErrorCode.INVALID_TOOL_ARGUMENTS: 422,
    ErrorCode.LLM_ERROR: 502,
    ErrorCode.STEP_FAILED: 500,
    ErrorCode.INTERNAL: 500,
    ErrorCode.RATE_LIMITED: 429,
    ErrorCode.QUOTA_EXCEEDED: 409,
}


class TokenOrSession(AuthBase):
    """`Authorization: Bearer <API token>`, or the browser's session (with its CSRF token)."""

    openapi_type = "http"
    openapi_scheme = "bearer"
    openapi_description = "An API token from the API tokens page (/settings/tokens/)."

    def __call__(self, request: HttpRequest) -> AbstractBaseUser | None:
        return request_user(request)


# What any operation may answer besides its own responses, and when (docs/api.md "Errors").
COMMON_REFUSALS = {
    400: "The body is not JSON (or not the declared multipart form).",
    401: "No credentials, or an API token that is unknown, revoked or malformed.",
    403: "A session's POST without its CSRF token.",
    404: "Not yours, or no such notebook, step, tool call, table or upload.",
    413: "The body is larger than the server accepts.",
    422: "A parameter or a body field that does not fit, named in `detail`.",
}
log = logging.getLogger("django.request")


class Api(NinjaAPI):
    """The NinjaAPI with readable operation ids and every possible refusal in its schema."""

    def get_openapi_operation_id(self, operation: Operation) -> str:
        # the view's own name (approve_step), not module_name (runs_rest_acting_approve)
        return operation.view_func.__name__

    def get_openapi_schema(
        self,
        *,
        path_prefix: str | None = None,
        path_params: dict[str, Any] | None = None,
    ) -> OpenAPISchema:
        schema = super().get_openapi_schema(
            path_prefix=path_prefix, path_params=path_params
        )
        error = {"$ref": "#/components/schemas/ErrorOut"}
        for operations in schema["paths"].values():
            for method, operation in operations.items():
                responses = operation["responses"]
                for status in _refusals(method, operation):
                    answer = responses.setdefault(
                        status, {"description": COMMON_REFUSALS[status]}
                    )
                    answer["content"] = {"application/json": {"schema": error}}
        return schema


def _refusals(method: str, operation: dict[str, Any]) -> list[int]:
    """The statuses an operation can answer whatever it does: 401 for every one; 403 for a
    session's write without its CSRF token; 404 where the path names something; 422 where it
    takes parameters or a body; 400 where the body is parsed, 413 where one is read."""
    statuses = [401]
    parameters = operation.get("parameters", [])
    body = "requestBody" in operation
    if method != "get":
        statuses.append(403)
    if any(p["in"] == "path" for p in parameters):
        statuses.append(404)
    if parameters or body:
        statuses.append(422)
    if body:
        statuses.append(400)
    if body or method == "put":  # PUT /data/uploads/{id}: raw bytes
        statuses.append(413)
    return statuses


class ObjectBodies(Parser):
    """Every JSON body this API takes is an object: `null`, a list, a string or a number is
    refused (400), not read as an empty object whose fields all take their defaults."""

    def parse_body(self, request: HttpRequest) -> dict[str, Any]:
        body = super().parse_body(request)
        if not isinstance(body, dict):
            raise ValueError(f"expected a JSON object, got {type(body).__name__}")
        return body


api = Api(
    title="agentui REST API",
    parser=ObjectBodies(),
    version="1",
    description="Start notebooks, approve, edit, reject, undo and stop steps, and read "
    "traces from scripts. Guide: docs/api.md.",
    auth=TokenOrSession(),
    urls_namespace="api-v1",
)


def _error(request: HttpRequest, status: int, code: str, detail: str) -> HttpResponse:
    return api.create_response(request, {"code": code, "detail": detail}, status=status)


@api.exception_handler(AuthFailed)
def _auth_failed(request: HttpRequest, exc: AuthFailed) -> HttpResponse:
    return auth_failed_response(exc)


@api.exception_handler(AuthenticationError)
def _no_credentials(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    return unauthenticated_response()


@api.exception_handler(ProtocolError)
def _refused(request: HttpRequest, exc: ProtocolError) -> HttpResponse:
    response = _error(
        request, HTTP_STATUS.get(exc.code, 400), exc.code.value, exc.reason
    )
    if exc.retry_after is not None:
        response["Retry-After"] = str(exc.retry_after)
    return response


def _problem(where: str, message: str) -> str:
    message = message.removeprefix("Value error, ")
    if where == "body" and ": " in message:
        return message  # a check of the whole body, which says which field it means
    return f"{where}: {message}"


def _where(loc: list[Any]) -> str:
    # ninja's locations start with where the value came from and the parameter's own name
    parts = [str(p) for p in loc]
    if parts[:1] == ["body"] and len(parts) >= 2:
        # none left: the body as a whole (its message names the field)
        parts = parts[2:]
    elif parts[:1] in (["query"], ["path"]) and len(parts) > 1:
        parts = parts[1:]
    return ".".join(parts) or "body"


@api.exception_handler(ValidationError)
def _invalid(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    problems = [
        _problem(_where(err.get("loc", [])), str(err.get("msg", "invalid")))
        for err in exc.errors[:5]
    ]
    return _error(
        request, 422, ErrorCode.INVALID_INPUT.value, "; ".join(problems) or "invalid"
    )


@api.exception_handler(Http404)
def _not_found(request: HttpRequest, exc: Http404) -> HttpResponse:
    # the same words for someone else's notebook as for one that does not exist
    return _error(request, 404, ErrorCode.NOT_FOUND.value, "No such notebook or step.")


@api.exception_handler(HttpError)
def _http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    code = "not_found" if exc.status_code == 404 else "bad_request"
    return _error(request, exc.status_code, code, str(exc.message))


@api.exception_handler(MultiPartParserError)
def _bad_form(request: HttpRequest, exc: MultiPartParserError) -> HttpResponse:
    return _error(
        request, 400, "bad_request", f"The multipart form is malformed: {exc}"
    )


@api.exception_handler(Exception)
def _server_error(request: HttpRequest, exc: Exception) -> HttpResponse:
    # JSON even with DEBUG on (ninja would answer a text/plain traceback then); Django's own
    # refusals (a body too large, a bad host) go on to its handlers (agentui/errors.py)
    if isinstance(exc, (SuspiciousOperation, PermissionDenied)):
        raise exc
    log.error(
        "Internal Server Error: %s",
        request.path,
        exc_info=exc,
        extra={"request": request},
    )
    return _error(
        request,
        500,
        "server_error",
        "Something went wrong on the server; it is logged.",
    )


def _open_to_the_middleware(
    patterns: list[URLPattern | URLResolver],
) -> list[URLPattern | URLResolver]:
    """Mark the API's views as not needing a login page: LoginRequiredMiddleware would send a
    script to the login form; the API answers 401 JSON itself (and the docs are public)."""
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            _open_to_the_middleware(list(pattern.url_patterns))
        else:
            pattern.callback.login_required = False  # type: ignore[attr-defined]
    return patterns


api.add_router("", router)
_patterns, _app_name, _namespace = api.urls
# What `path("api/v1/", ...)` includes.
urls = (_open_to_the_middleware(_patterns), _app_name, _namespace)
