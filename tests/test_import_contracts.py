"""The admin, the management commands and the project package act only through runs.service
(issue 44): their import contracts in .importlinter exist and hold."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_admin_the_commands_and_agentui_are_under_the_service_contracts() -> None:
    lint = Path(sys.executable).parent / "lint-imports"
    done = subprocess.run(
        [str(lint), "--no-logo", "--no-cache", "--contract", "operators"]
        + ["--contract", "project"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    said = done.stdout + done.stderr
    assert done.returncode == 0, said
    assert "The admin and the management commands act only through runs.service" in said
    assert "Contracts: 2 kept, 0 broken." in said, said
