"""mypy --strict: the engine (a library others build on) and the Django side that runs it
(runs/service, runs/realtime, runs/store, with django-stubs). What is checked is mypy.ini's `files`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_engine_service_and_store_pass_mypy_strict() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(ROOT / "mypy.ini"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
