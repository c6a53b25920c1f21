"""The server's side of runs/presets/tools/duckdb_worker.py: one request (a query, an .xlsx to
read) in a process of its own whose memory and CPU the kernel caps, killed when it takes too
long or is stopped; how many run now, and the memory the last ones peaked at.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from runs.conf import conf
from runs.presets.tools.duckdb_worker import peak_kb
from runs.presets.tools.sql import SQLError

# DuckDB's threads in a worker (and in this process's read-only connections)
THREADS = 2
WORKER = Path(__file__).with_name("duckdb_worker.py")
_live: set[subprocess.Popen[bytes]] = set()
_live_changed = threading.Condition()


_peaks: deque[int] = deque(maxlen=100)


def recent_peaks_kb() -> list[int]:
    """The peak resident memory (KiB) of the last worker processes that ran, oldest first."""
    return list(_peaks)


def running_queries() -> int:
    """How many query processes are running now."""
    with _live_changed:
        return len(_live)


def wait_for_queries(until: Callable[[int], bool], timeout: float) -> bool:
    """Wait until `until(the number of query processes running)` holds; False on timeout."""
    with _live_changed:
        return _live_changed.wait_for(lambda: until(len(_live)), timeout)


class Stopper:
    """Stops a query's process from another thread: the person pressed Stop, or the tool call
    was cancelled. Stopped before its process started, the query does not start."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self.stopped = False

    def attach(self, process: subprocess.Popen[bytes] | None) -> None:
        with self._lock:
            self._process = process
            if self.stopped and process is not None:
                process.kill()

    def stop(self) -> None:
        with self._lock:
            self.stopped = True
            if self._process is not None:
                self._process.kill()


def memory_text(size: int) -> str:
    return f"{size / 1024**2:,.0f} MB"


def run_worker(
    payload: dict[str, Any],
    cwd: Path,
    time_limit: float,
    stopper: Stopper | None,
    too_long: str,
) -> tuple[dict[str, Any] | None, int]:
    """Run one request in a new worker process, killed after `time_limit` s (SQLError
    `too_long`) or when stopped; its answer (None when it ended without one) and exit status."""
    if stopper is not None and stopper.stopped:
        raise SQLError("the query was stopped")
    process = subprocess.Popen(
        [sys.executable, "-I", str(WORKER)],
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    with _live_changed:
        _live.add(process)
        _live_changed.notify_all()
    if stopper is not None:
        stopper.attach(process)
    try:
        out, _ = process.communicate(json.dumps(payload).encode(), timeout=time_limit)
    except subprocess.TimeoutExpired:
        _peaks.append(peak_kb(process.pid))
        process.kill()
        process.communicate()
        raise SQLError(too_long) from None
    finally:
        if stopper is not None:
            stopper.attach(None)
        with _live_changed:
            _live.discard(process)
            _live_changed.notify_all()
    if stopper is not None and stopper.stopped:
        raise SQLError("the query was stopped")
    if process.returncode == -signal.SIGXCPU:
        raise SQLError(too_long)
    try:
        answer = json.loads(out)
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        return None, process.returncode
    _peaks.append(int(answer.get("peak_kb") or 0))
    return answer, process.returncode


def worker_limits(time_limit: float) -> dict[str, Any]:
    """A worker's memory and CPU: `AGENTUI_DATA_QUERY_MEMORY_BYTES`, DuckDB half of it."""
    memory = conf().data_query_memory_bytes
    threads = THREADS
    return {
        "memory_bytes": memory,
        "duckdb_memory": f"{memory // 2 // 1024**2}MB",
        "threads": threads,
        # CPU seconds: every thread busy the whole time, and a little to start
        "cpu_seconds": int(time_limit * threads) + 2,
    }
