"""The demo's slow plain-function tool, made to wait on a folder a test controls.

A live app (daphne in a child process) runs its tools where the test cannot reach them; with
`gated_settings` as its settings module, the function-calling agent's `archive_report` writes
`started` in the folder named by `AGENTUI_TEST_TOOL_GATE` as its thread begins, and ends (as the
real tool would, archiving the report) once `finish` appears there, so a test presses Stop while
the thread surely runs and lets it end when it chooses, with no sleeps.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from runs.presets.tools import slow

GATE_VARIABLE = "AGENTUI_TEST_TOOL_GATE"
POLL_S = 0.05


def archive_report(title: str, seconds: float = 4.0) -> str:
    """Archive a report under `title`. Slow: it takes `seconds` (at most 60) to finish."""
    gate = Path(os.environ[GATE_VARIABLE])
    (gate / "started").write_text(title)
    idle = threading.Event()  # never set: a wait that the poll interval ends
    while not (gate / "finish").exists():
        idle.wait(POLL_S)
    return slow.archive_report(title, 0)
