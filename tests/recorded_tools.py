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
from pathlib import Path
from typing import Any

from runs.engine import BaseTool, ToolOutput
from runs.presets.catalog import resolve_tools
from runs.presets.tools import ARITHMETIC_TOOLS, SQL_TOOLS

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
