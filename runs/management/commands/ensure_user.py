"""`manage.py ensure_user`: on first run, create a local user and print a login link."""

from __future__ import annotations

import getpass
import re
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

from runs.conf import conf
from runs.management.commands.login_link import login_link


def _local_username() -> str:
    try:
        name = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry, e.g. in a container with a bare uid
        name = ""
    name = re.sub(r"[^\w.@+-]", "", name)[:150]
    return name or "agentui"


class Command(BaseCommand):
    help = "Create a local admin user if there is none, and print a one-time login link for it."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--username", help="name of the user to create (default: your login)"
        )
        parser.add_argument(
            "--base-url", help="server address (default http://$HOST:$PORT)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        User = get_user_model()
        if User.objects.exists():
            self.stdout.write(
                "Log in with your account; `make login-link` prints a one-time login link."
            )
            return
        username = options["username"] or _local_username()
        user = User(**{User.USERNAME_FIELD: username}, is_staff=True, is_superuser=True)
        user.set_unusable_password()  # the link is the way in; `manage.py changepassword` adds one
        user.save()
        hours = conf().login_link_max_age // 3600
        self.stdout.write(
            f"Created user {username!r}. Open this link to log in "
            f"(works once, for {hours} hours):\n\n    {login_link(user, options['base_url'])}\n"
        )
