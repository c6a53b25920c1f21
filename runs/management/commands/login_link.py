"""`manage.py login_link [username]`: print a one-time login link."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.urls import reverse

from runs.service import make_login_token


def served_file() -> Path:
    """Where `make run` notes the HOST and PORT it serves on (one line: `HOST PORT`)."""
    return Path(settings.BASE_DIR) / ".local" / "served"


def default_base_url() -> str:
    """Where the server is: http://HOST:PORT, with a wildcard HOST shown as 127.0.0.1.

    HOST and PORT from the environment win; otherwise the address the last `make run` served
    on (so `make login-link` in another terminal matches `make run PORT=8080`); else the defaults.
    """
    host, port = os.environ.get("HOST", "").strip(), os.environ.get("PORT", "").strip()
    try:
        noted = served_file().read_text().split()
    except OSError:
        noted = []
    if len(noted) == 2:
        host, port = host or noted[0], port or noted[1]
    host = host or "127.0.0.1"
    if host in {"0.0.0.0", "::", "[::]"}:
        host = "127.0.0.1"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port or '8000'}"


def login_link(user: AbstractBaseUser, base_url: str | None = None) -> str:
    """A full URL that logs `user` in once."""
    path = reverse("login_link", kwargs={"token": make_login_token(user)})
    return f"{(base_url or default_base_url()).rstrip('/')}{path}"


class Command(BaseCommand):
    help = "Print a one-time login link (works once, expires after a day)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "username", nargs="?", help="whose link; optional when one user exists"
        )
        parser.add_argument(
            "--base-url", help="server address (default http://$HOST:$PORT)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        users = get_user_model().objects.filter(is_active=True)
        username = options["username"]
        if username:
            user = users.filter(**{get_user_model().USERNAME_FIELD: username}).first()
            if user is None:
                raise CommandError(f"no active user {username!r}")
        else:
            candidates = list(users.order_by("-is_superuser", "pk")[:2])
            if not candidates:
                raise CommandError("no users yet: `make run` creates one")
            if (
                len(candidates) > 1
                and candidates[0].is_superuser == candidates[1].is_superuser
            ):
                raise CommandError(
                    "several users: name one, e.g. `manage.py login_link alice`"
                )
            user = candidates[0]
        self.stdout.write(login_link(user, options["base_url"]))
