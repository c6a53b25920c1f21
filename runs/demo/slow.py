"""The offline demo model's slow-tool example: a plain-function tool that takes a while.

The model asks `archive_report` to archive a report, which takes a few seconds: long enough to
press Stop while it runs and see what Stop cannot stop (the function runs on in its thread; the
card says its effect may have happened and adds what it returned when it ends).
"""

from __future__ import annotations

from runs.demo.rules import scripted, staged_rules, tool_results
from runs.engine.testing import RecordedRequest, Reply, Rule, ToolCallSpec

SLOW_PROMPT = "Archive the quarterly sales report (it takes a few seconds; try Stop)."
SLOW_SECONDS = 6


def _slow_answer(request: RecordedRequest) -> Reply:
    results = tool_results(request)
    return Reply(text=scripted(f"Done: {results[-1] if results else 'no result'}"))


def slow_rules(seconds: float = SLOW_SECONDS) -> list[Rule]:
    archive = Reply(
        text="I'll archive the report; this takes a few seconds.",
        tool_calls=[
            ToolCallSpec(
                name="archive_report",
                arguments={"title": "Quarterly sales", "seconds": seconds},
            )
        ],
    )
    return staged_rules(
        SLOW_PROMPT,
        [("demo-slow-archive", archive), ("demo-slow-answer", _slow_answer)],
    )
