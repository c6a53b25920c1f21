"""The offline demo model's slow-tool example: a plain-function tool that takes a while.

The model asks `archive_report` to archive a report, which takes a few seconds: long enough to
press Stop while it runs and see what Stop cannot stop (the function runs on in its thread; the
card says its effect may have happened and adds what it returned when it ends). Run the step
again (or, if the server died meanwhile, run the interrupted step again) and the model is told
that the archive had begun (runs.engine.stopped_note): the demo's model heeds it and does not
archive the report a second time.
"""

from __future__ import annotations

from runs.demo.rules import scripted, staged_rules, tool_results
from runs.engine.stopped_note import NOTE_START
from runs.engine.testing import Match, RecordedRequest, Reply, Rule, ToolCallSpec

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
    told = Rule(
        name="demo-slow-told-of-stop",
        match=Match(
            last_user_contains=SLOW_PROMPT,
            system_contains=NOTE_START,
            tool_results_since_user=0,
        ),
        reply=Reply(
            text=scripted(
                "An earlier run was cut off after the archive had begun, so the report may "
                "be archived already. I won't archive it again unless you ask me to."
            )
        ),
    )
    staged = staged_rules(
        SLOW_PROMPT,
        [("demo-slow-archive", archive), ("demo-slow-answer", _slow_answer)],
    )
    return [told, *staged]
