"""`manage.py example_policies [username]`: the approval rules the offline demo's example shows.

With them, the function-calling example ("Which city had the highest sales revenue in 2024 ...")
in *tools* mode asks before its SQL query, and its `multiply` call runs without asking: its card
says "Approved automatically by rule #N: always allow multiply, set by <you>".
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from runs.service import RuleSpec, set_policy

EXAMPLES = (
    RuleSpec("multiply", "allow", "mine"),
    RuleSpec("add", "allow", "mine"),
)


class Command(BaseCommand):
    help = "Add the demo's example approval rules (always allow multiply and add) for a user."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username", nargs="?", help="default: the first admin")

    def handle(self, *args: Any, **options: Any) -> None:
        users = get_user_model().objects
        name = options.get("username")
        user = (
            users.filter(username=name).first()
            if name
            else users.filter(is_superuser=True).order_by("pk").first()
        )
        if user is None:
            raise CommandError(f"no user {name!r}" if name else "there is no admin yet")
        for spec in EXAMPLES:
            made = async_to_sync(set_policy)(user, spec)
            self.stdout.write(
                f"rule #{made['id']}: {made['summary']} ({made['scope']})"
            )
