"""`manage.py settings_table [--write]`: the table of every AGENTUI_* setting, from runs/conf.py.

Prints it as Markdown; with --write puts it into docs/operations.md between its two markers
(tests/test_conf.py fails while the two differ).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from runs.conf import table

BEGIN = "<!-- settings table: made by `manage.py settings_table --write` from runs/conf.py -->"
END = "<!-- end of settings table -->"


def docs_path() -> Path:
    return Path(settings.BASE_DIR) / "docs" / "operations.md"


def with_table(text: str, rows: str) -> str:
    """`text` with what stands between BEGIN and END replaced by `rows`."""
    try:
        head, rest = text.split(BEGIN + "\n", 1)
        _, tail = rest.split(END, 1)
    except ValueError:
        raise CommandError(f"{docs_path()}: no {BEGIN} ... {END} markers") from None
    return f"{head}{BEGIN}\n{rows}{END}{tail}"


class Command(BaseCommand):
    help = (
        "Print the table of every AGENTUI_* setting (--write: into docs/operations.md)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--write", action="store_true", help="update docs/operations.md in place"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        rows = table()
        if not options["write"]:
            self.stdout.write(rows, ending="")
            return
        path = docs_path()
        path.write_text(with_table(path.read_text(), rows))
        self.stdout.write(f"wrote the settings table into {path}")
