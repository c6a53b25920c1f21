"""Password checks a client address may ask for, per minute: `POST /login/` needs no session.

Each attempt costs the server a password hash (PBKDF2, ~0.5 s of CPU here) whether the user
exists or not, so without a limit anyone could keep the server's cores busy, and guess
passwords at that rate. Over `AGENTUI_LOGIN_ATTEMPTS_PER_MINUTE` from one client (a fixed
window per process, as the CSP report log's), on our login page and the admin's, the answer
is 429 with `Retry-After`, saying when to try again, and the password is not checked. The
address is the one the server sees (behind a proxy: daphne's `--proxy-headers` makes it the
client's).

**Who is one client** (`client_key`): an IPv4 address as it is; an IPv6 address by its /64,
the block one subscriber or one host is given (rotating addresses within it is free, so
counting them apart would be no limit at all); an IPv4-mapped IPv6 address
(`::ffff:203.0.113.7`, what a dual-stack socket reports) as the IPv4 address.

**When many clients try at once**: the windows are kept for at most `MAX_CLIENTS` clients, in
the order their windows began. A new client, with the table full, takes the place of the
oldest window: one that has ended costs nothing to forget; if none has ended, the oldest
running one is forgotten (that client starts a new count at its next attempt). An earlier
version refused every new client while the table was full; then one attacker with more
addresses than that (a large IPv4 range, or IPv6 /64s, which come by the 65,536 in a /48)
could lock every other person out of logging in, for as long as they kept trying. Forgetting
the oldest gives such an attacker nothing they did not have already: each of their addresses
gets its own attempts anyway, and a per-address count cannot slow a flood from that many
addresses (a proxy in front of the server must); everyone else can still log in.
"""

from __future__ import annotations

import ipaddress
import math
import threading
import time
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from runs.conf import conf

WINDOW_S = 60.0
# The most clients whose windows are kept; past it the oldest window is forgotten.
MAX_CLIENTS = 10_000
IPV6_CLIENT_PREFIX = 64

View = Callable[..., HttpResponse]


def client_key(address: str) -> str:
    """Who is counted for `address` (module docstring): an IPv4 address as is, an IPv6 address
    as its /64 network, an IPv4-mapped IPv6 address as the IPv4 one; anything else as given."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, IPV6_CLIENT_PREFIX), strict=False))
    return str(ip)


class _Attempts:
    """Password checks per client in the current minute of each (a fixed window), the
    windows in the order they began."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        # client -> (started, count); oldest window first
        self.windows: dict[str, tuple[float, int]] = {}

    def take(self, client: str, limit: int, now: float) -> float:
        """0 when one more attempt from `client` is allowed (and counted), else the
        seconds until its minute ends."""
        with self.lock:
            window = self.windows.get(client)
            if window is not None and now - window[0] < WINDOW_S:
                started, count = window
                if count >= limit:
                    return started + WINDOW_S - now
                self.windows[client] = (started, count + 1)
                return 0.0
            # a new window: it goes last, behind every window that began earlier
            self.windows.pop(client, None)
            if len(self.windows) >= MAX_CLIENTS:
                del self.windows[
                    next(iter(self.windows))
                ]  # the oldest: ended, or else running
            self.windows[client] = (now, 1)
            return 0.0


ATTEMPTS = _Attempts()


def limit_password_checks(view: View) -> View:
    """`view` (a login page: ours or the admin's), with its POSTs counted per client;
    past the limit the answer is our login page, 429, saying when to try again."""

    @wraps(view)
    def limited(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        limit = conf().login_attempts_per_minute
        if request.method == "POST" and limit > 0:
            client = client_key(request.META.get("REMOTE_ADDR") or "unknown")
            wait = ATTEMPTS.take(client, limit, time.monotonic())
            if wait > 0:
                return _too_many(request, math.ceil(wait))
        return view(request, *args, **kwargs)

    return limited


def _too_many(request: HttpRequest, seconds: int) -> HttpResponse:
    context = {"form": AuthenticationForm(request), "retry_after": seconds}
    response = render(request, "registration/login.html", context, status=429)
    response["Retry-After"] = str(seconds)
    return response
