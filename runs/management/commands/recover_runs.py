"""`manage.py recover_runs [--force]`: mark steps left running by a stopped server `interrupted`.

Without --force only steps whose notebook lease went stale are touched, so it is safe while
other server processes run. With --force every lease counts as dead: run it that way just
before starting the only server process (e.g. from `make run`).
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from django.core.management.base import BaseCommand, CommandParser

from runs.service import recover_interrupted


class Command(BaseCommand):
    help = "Mark steps left running by a stopped server as interrupted (they can be approved again)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--force",
            action="store_true",
            help="treat every lease as dead (single server only)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        count = async_to_sync(recover_interrupted)(force=options["force"])
        if count or options["verbosity"] > 1:
            self.stdout.write(f"{count} interrupted step(s) recovered")
