"""Password checks a client address may ask for, per minute: `POST /login/` needs no session.

Each attempt costs the server a password hash (PBKDF2, ~0.5 s of CPU here) whether the user
exists or not, so without a limit anyone could keep the server's cores busy, and guess
passwords at that rate. Over `AGENTUI_LOGIN_ATTEMPTS_PER_MINUTE` from one address (a fixed
window per process, as the CSP report log's) the login page answers 429 with `Retry-After`
and says when to try again, without checking the password. The address is the one the
server sees (behind a proxy: daphne's `--proxy-headers` makes it the client's).
"""

from __future__ import annotations

import math
import threading
import time

from django.contrib.auth.views import LoginView
from django.http import HttpRequest, HttpResponse

from runs.conf import conf

WINDOW_S = 60.0
# More addresses than this trying within a minute is an attack from everywhere: all wait.
MAX_ADDRESSES = 10_000


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


class LimitedLoginView(LoginView):
    """Django's login page, with the password checks of one address per minute limited."""

    def post(
        self, request: HttpRequest, *args: object, **kwargs: object
    ) -> HttpResponse:
        limit = conf().login_attempts_per_minute
        if limit > 0:
            address = request.META.get("REMOTE_ADDR") or "unknown"
            wait = ATTEMPTS.take(address, limit, time.monotonic())
            if wait > 0:
                return self._too_many(math.ceil(wait))
        return super().post(request, *args, **kwargs)

    def _too_many(self, seconds: int) -> HttpResponse:
        form = self.get_form_class()(self.request)  # unbound: nothing is checked
        context = self.get_context_data(form=form, retry_after=seconds)
        response = self.render_to_response(context, status=429)
        response["Retry-After"] = str(seconds)
        return response
