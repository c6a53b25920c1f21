"""A long-lived Django process beside a live app, for the tests' seeding and management calls.

`LiveApp.shell(code)` and `LiveApp.call(command, ...)` used to start `manage.py` each time: a
Django boot (2-4 s on a loaded 2-core machine) per seed, some fifty per run. This process boots
once with the app's own environment (its database, settings module and secret key) and then
answers requests, one JSON line each way, over its stdin and stdout:

    {"code": "<python>"}            -> exec'd as `manage.py shell -c` would, fresh globals
    {"command": ["login_link", ...]} -> django.core.management.call_command
                                    <- {"out": "<what it printed>", "error": "<traceback>" | null}

After each request the process closes its database connections, so it never holds a lock or a
stale read between two requests of a test, and what it wrote is committed before it answers.
Run as `python -m live_seeder` with the live app's environment (tests/ on PYTHONPATH).
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import traceback
from typing import Any


def _answer(request: dict[str, Any]) -> dict[str, Any]:
    from django.core.management import call_command
    from django.db import connections

    printed = io.StringIO()
    error = None
    try:
        with contextlib.redirect_stdout(printed):
            if "command" in request:
                call_command(*request["command"], stdout=printed)
            else:
                code = compile(request["code"], "<seed>", "exec")
                exec(code, {"__name__": "__main__"})  # noqa: S102 - the tests' own code
    except (
        BaseException
    ):  # a SystemExit or CommandError is the caller's to see, as a failure
        error = traceback.format_exc()
    finally:
        connections.close_all()
    return {"out": printed.getvalue(), "error": error}


def main() -> None:
    import django

    django.setup()
    replies = sys.stdout
    sys.stdout = sys.stderr  # stray prints go to the log, never into the replies
    replies.write(json.dumps({"ready": True}) + "\n")
    replies.flush()
    for line in sys.stdin:
        if line.strip():
            replies.write(json.dumps(_answer(json.loads(line))) + "\n")
            replies.flush()


if __name__ == "__main__":
    main()
