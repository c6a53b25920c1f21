"""A slow tool that is a plain function, to see what Stop can and cannot stop.

`archive_report` takes `seconds` (at most `MAX_SECONDS`) to archive a report, then says so. It
runs in a worker thread, like every plain-function tool: Stop stops the step, but not the
thread, so the function runs on. The call's card says its effect may have happened, and adds
what it returned once it ends (runs.engine.workers.stopped_calls).
"""

from __future__ import annotations

import time

MAX_SECONDS = 60.0


def archive_report(title: str, seconds: float = 4.0) -> str:
    """Archive a report under `title`. Slow: it takes `seconds` (at most 60) to finish."""
    if not 0 <= seconds <= MAX_SECONDS:
        raise ValueError(f"seconds must be between 0 and {MAX_SECONDS:g}")
    began = time.monotonic()
    time.sleep(seconds)
    return f"Archived the report {title!r} (it took {time.monotonic() - began:.1f} s)."
