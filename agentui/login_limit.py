"""Password checks a client address may ask for, per minute: `POST /login/` needs no session.

Each attempt costs the server a password hash (PBKDF2, ~0.5 s of CPU here) whether the user
exists or not, so without a limit anyone could keep the server's cores busy, and guess
passwords at that rate. Over `AGENTUI_LOGIN_ATTEMPTS_PER_MINUTE` from one address (a fixed
window per process, as the CSP report log's), on our login page and the admin's, the answer
is 429 with `Retry-After`, saying when to try again, and the password is not checked. The
address is the one the server sees (behind a proxy: daphne's `--proxy-headers` makes it the
client's).
"""

from __future__ import annotations

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
# More addresses than this trying within a minute is an attack from everywhere: all wait.
MAX_ADDRESSES = 10_000

View = Callable[..., HttpResponse]


class _Attempts:
    """Password checks per address in the current minute of each (a fixed window)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.windows: dict[str, tuple[float, int]] = {}  # address -> (started, count)

    def take(self, address: str, limit: int, now: float) -> float:
        """0 when one more attempt from `address` is allowed (and counted), else the
        seconds until its minute ends."""
        with self.lock:
            started, count = self.windows.get(address, (now, 0))
            if now - started >= WINDOW_S:
                started, count = now, 0
            if count >= limit:
                return started + WINDOW_S - now
            if address not in self.windows and len(self.windows) >= MAX_ADDRESSES:
                self._forget_ended(now)
                if len(self.windows) >= MAX_ADDRESSES:
                    return WINDOW_S
            self.windows[address] = (started, count + 1)
            return 0.0

    def _forget_ended(self, now: float) -> None:
        ended = [a for a, (s, _) in self.windows.items() if now - s >= WINDOW_S]
        for address in ended:
            del self.windows[address]


ATTEMPTS = _Attempts()


def limit_password_checks(view: View) -> View:
    """`view` (a login page: ours or the admin's), with its POSTs counted per client address;
    past the limit the answer is our login page, 429, saying when to try again."""

    @wraps(view)
    def limited(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        limit = conf().login_attempts_per_minute
        if request.method == "POST" and limit > 0:
            address = request.META.get("REMOTE_ADDR") or "unknown"
            wait = ATTEMPTS.take(address, limit, time.monotonic())
            if wait > 0:
                return _too_many(request, math.ceil(wait))
        return view(request, *args, **kwargs)

    return limited


def _too_many(request: HttpRequest, seconds: int) -> HttpResponse:
    context = {"form": AuthenticationForm(request), "retry_after": seconds}
    response = render(request, "registration/login.html", context, status=429)
    response["Retry-After"] = str(seconds)
    return response
