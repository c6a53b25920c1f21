"""The analyst's arithmetic and SQL tools, each execution written down where a test can read it.

A live app (daphne in a child process) runs its tools where the test cannot see them; with
`surface_settings` as its settings module, every call the engine makes reaches the real tool
through `Recorded`, which first appends one JSON line (tool name, the arguments it was called
with) to the file named by `AGENTUI_TEST_TOOL_LOG`. The tests compare that file with what each
surface says ran (tests/audit_support.py).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from runs.engine import BaseTool, ToolOutput
from runs.presets.catalog import resolve_tools
from runs.presets.tools import ARITHMETIC_TOOLS, SQL_TOOLS

if TYPE_CHECKING:
    from browser_helpers import LiveApp
    from otlp_collector import Collector

    from runs.engine.testing import Script

LOG_VARIABLE = "AGENTUI_TEST_TOOL_LOG"


class Recorded(BaseTool):
    """`inner`, noting each call (before it runs, so a call that fails is noted too)."""

    def __init__(self, inner: BaseTool) -> None:
        self.inner = inner
        self.metadata = inner.metadata

    async def acall(self, **kwargs: Any) -> ToolOutput:
        line = json.dumps({"tool": self.metadata.name, "kwargs": kwargs}) + "\n"
        # one write of one line to a file opened for appending: lines never interleave
        with open(os.environ[LOG_VARIABLE], "a", encoding="utf-8") as log:
            log.write(line)
        return await self.inner.acall(**kwargs)


RECORDED_TOOLS = [
    Recorded(tool) for tool in resolve_tools(ARITHMETIC_TOOLS + SQL_TOOLS)
]


def executions(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """What ran, in the order it ran: (tool name, arguments)."""
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line]
    return [(row["tool"], row["kwargs"]) for row in rows]


@contextmanager
def recording_app(env: dict[str, str], script: Script, log: Path) -> Iterator[LiveApp]:
    """agentui served by daphne (tests/browser_helpers.py) with these recorded tools, noting
    their runs in `log`, and `script` as its model."""
    from browser_helpers import served_app

    env = {**env, "DJANGO_SETTINGS_MODULE": "surface_settings", LOG_VARIABLE: str(log)}
    with served_app(env, script, "agentui-surface-") as app:
        yield app


@pytest.fixture
def spans() -> Iterator[Collector]:
    """An OTLP collector the ledger app exports its runs to."""
    from otlp_collector import otlp_collector

    with otlp_collector() as collector:
        yield collector


@pytest.fixture
def ledger_app(
    subprocess_env: Callable[..., dict[str, str]], tmp_path: Path, spans: Collector
) -> Iterator[LiveApp]:
    """The surface tests' app: the ledger scenario's model (tests/audit_support.py), recorded
    tools noting their runs in `tmp_path`/tools.jsonl, its spans exported to `spans`."""
    from runs.engine.testing import Script
    from tests.audit_support import ledger_rules

    env = subprocess_env(
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=spans.url, OTEL_BSP_SCHEDULE_DELAY="100"
    )
    script, log = Script(rules=ledger_rules()), tmp_path / "tools.jsonl"
    with recording_app(env, script, log) as app:
        yield app
