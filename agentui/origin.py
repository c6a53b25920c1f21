"""The websocket Origin check: a page may open a notebook socket only from this very site.

Channels' AllowedHostsOriginValidator compares the Origin's host with ALLOWED_HOSTS and ignores
its port, so a page served by another program on the same host (http://localhost:9999) could
open sockets with the analyst's cookie. Here the Origin's scheme-less host *and port* must be
the ones the browser connected to (the Host header), or be listed in CSRF_TRUSTED_ORIGINS
(e.g. behind a proxy that rewrites Host). The host must be in ALLOWED_HOSTS as well.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host

_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return str(value.decode("latin-1"))
    return None


def _host_port(netloc: str, scheme: str) -> tuple[str, int] | None:
    host, port = split_domain_port(netloc.lower())
    if not host:
        return None
    try:
        return host, int(port) if port else _DEFAULT_PORTS.get(scheme, 80)
    except ValueError:
        return None


def origin_allowed(scope: dict[str, Any]) -> bool:
    """Whether the handshake's Origin is this site (host and port), or a trusted origin."""
    origin = _header(scope, b"origin")
    if not origin:
        return False
    parts = urlsplit(origin)
    if parts.scheme not in ("http", "https"):
        return False
    if origin.rstrip("/") in getattr(settings, "CSRF_TRUSTED_ORIGINS", []):
        return True
    theirs = _host_port(parts.netloc, parts.scheme)
    if theirs is None or not validate_host(theirs[0], settings.ALLOWED_HOSTS):
        return False
    host = _header(scope, b"host")
    ours = (
        _host_port(host, "https" if scope.get("scheme") == "wss" else "http")
        if host
        else (
            theirs[0],
            _DEFAULT_PORTS[parts.scheme],
        )  # no Host header: default port only
    )
    return ours == theirs


class SameOriginValidator:
    """ASGI middleware: refuse a websocket whose Origin is not this site (see `origin_allowed`)."""

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if scope["type"] == "websocket" and not origin_allowed(scope):
            denier = WebsocketDenier()
            return await denier(scope, receive, send)
        return await self.application(scope, receive, send)
