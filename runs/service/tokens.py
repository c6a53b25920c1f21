"""Who is calling an HTTP API: a per-user API token, or else the browser's session.

    user = request_user(request)          # or: await arequest_user(request)
    if user is None: ...                  # neither a token nor a session: 401

`request_user` raises `AuthFailed` (status 401) for an `Authorization` header that is not
`Bearer <token>`, or a token that is unknown or revoked: a script with a wrong token is told
so, never served as anonymous. Without the header the session decides; a session request
with an unsafe method must pass Django's CSRF check (AuthFailed, status 403), because views
using this are exempt from the middleware's check so that token callers need no CSRF token.

Tokens are `agentui_` + 43 random URL-safe characters; only their SHA-256 is stored
(`runs.models.ApiToken`), which is enough for a random secret of that length.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets

from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.middleware.csrf import CsrfViewMiddleware
from django.utils import timezone

from runs.models import ApiToken
from runs.service.quotas import hold_api_token

TOKEN_PREFIX = "agentui_"
SHOWN_PREFIX_CHARS = len(TOKEN_PREFIX) + 6
# last_used_at is written at most this often per token, not on every request.
LAST_USED_RESOLUTION = dt.timedelta(minutes=1)
_SAFE_METHODS = {"GET", "HEAD", "OPTIONS", "TRACE"}


class AuthFailed(Exception):
    """The request carried credentials that do not hold; `status` is 401 or 403."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def token_digest(token: str) -> str:
    """The stored form of `token`."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def create_token(user: User, name: str) -> tuple[ApiToken, str]:
    """A new token for `user`: the row and the token itself, which is never stored.
    ProtocolError (`quota_exceeded`) when they have as many active tokens as they may."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    with transaction.atomic():
        hold_api_token(user.pk)
        row = ApiToken.objects.create(
            user=user,
            name=name,
            prefix=token[:SHOWN_PREFIX_CHARS],
            digest=token_digest(token),
        )
    return row, token


def revoke_token(user: User, pk: int) -> bool:
    """Revoke one of `user`'s tokens; False when they have no such active token."""
    updated = ApiToken.objects.filter(user=user, pk=pk, revoked_at=None).update(
        revoked_at=timezone.now()
    )
    return updated == 1


def bearer_token(request: HttpRequest) -> str | None:
    """The token of an `Authorization: Bearer <token>` header; None without the header."""
    header = request.headers.get("Authorization")
    if header is None:
        return None
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise AuthFailed(401, "Authorization header must be 'Bearer <API token>'.")
    return token


def user_for_token(token: str) -> User:
    """The active user whose live token this is; AuthFailed(401) otherwise."""
    return live_token(token).user


def live_token(token: str) -> ApiToken:
    """The live token row (with its active user) of `token`; AuthFailed(401) otherwise."""
    row = (
        ApiToken.objects.select_related("user")
        .filter(digest=token_digest(token))
        .first()
    )
    if row is None or not row.user.is_active:
        raise AuthFailed(401, "Unknown API token.")
    if row.revoked_at is not None:
        raise AuthFailed(401, "This API token has been revoked.")
    now = timezone.now()
    if row.last_used_at is None or now - row.last_used_at >= LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=row.pk).update(last_used_at=now)
    return row


def _no_view(request: HttpRequest) -> HttpResponse:
    return HttpResponse()  # never called: only the CSRF middleware's verdict is wanted


def _passes_csrf(request: HttpRequest) -> bool:
    check = CsrfViewMiddleware(_no_view)
    check.process_request(request)
    return check.process_view(request, _no_view, (), {}) is None


def request_user(request: HttpRequest) -> User | None:
    """The user calling: by API token if the request has one, else by session; None if
    neither. Raises AuthFailed for a bad or revoked token (401) or a failed CSRF check (403)."""
    token = bearer_token(request)
    if token is not None:
        return user_for_token(token)
    user = getattr(request, "user", None)
    if not isinstance(user, User) or not user.is_authenticated:
        return None  # no session (AnonymousUser), or no auth middleware
    if request.method not in _SAFE_METHODS and not _passes_csrf(request):
        raise AuthFailed(
            403, "CSRF check failed: send the csrftoken cookie's value as X-CSRFToken."
        )
    return user


async def arequest_user(request: HttpRequest) -> User | None:
    """`request_user` for async views."""
    return await sync_to_async(request_user)(request)


def auth_failed_response(exc: AuthFailed) -> JsonResponse:
    """The JSON answer to a request whose credentials do not hold: `{code, detail}`."""
    code = "unauthenticated" if exc.status == 401 else "forbidden"
    response = JsonResponse({"code": code, "detail": exc.reason}, status=exc.status)
    if exc.status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="agentui"'
    return response


def unauthenticated_response() -> JsonResponse:
    """The JSON answer to a request with neither a token nor a session."""
    return auth_failed_response(
        AuthFailed(
            401,
            "Not logged in: send 'Authorization: Bearer <API token>' "
            "(create one on /settings/tokens/).",
        )
    )
