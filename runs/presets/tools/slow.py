"""A slow tool that is a plain function, to see what Stop can and cannot stop.

`archive_report` takes `seconds` (at most `MAX_SECONDS`) to archive a report, then says so. It
runs in a worker thread, like every plain-function tool: Stop stops the step, but not the
thread, so the function runs on. The call's card says its effect may have happened, and adds
what it returned once it ends (runs.engine.workers.stopped_calls).

`AGENTUI_DEMO_SLOW_GATE` (tests): a directory. The tool writes `started` there as it begins and
ends as soon as `finish` appears there (or after `seconds`, whichever comes first).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

MAX_SECONDS = 60.0
GATE_ENV = "AGENTUI_DEMO_SLOW_GATE"
_POLL_S = 0.05


def archive_report(title: str, seconds: float = 4.0) -> str:
    """Archive a report under `title`. Slow: it takes `seconds` (at most 60) to finish."""
    if not 0 <= seconds <= MAX_SECONDS:
        raise ValueError(f"seconds must be between 0 and {MAX_SECONDS:g}")
    began = time.monotonic()
    _wait(seconds)
    return f"Archived the report {title!r} (it took {time.monotonic() - began:.1f} s)."


def _wait(seconds: float) -> None:
    gate = os.environ.get(GATE_ENV)
    if not gate:
        time.sleep(seconds)
        return
    folder = Path(gate)
    (folder / "started").write_text(str(time.time()))
    finish = folder / "finish"
    ends = time.monotonic() + seconds
    wake = threading.Event()
    while not finish.exists() and time.monotonic() < ends:
        wake.wait(_POLL_S)
