"""The offline demo model's large-output example: 120,000 lines (about 10 MB) of server log.

The model asks `server_log` for the lines, then answers from what it was given: a bounded slice
of the output with a note that the rest was left out (AGENTUI_TOOL_OUTPUT_MODEL_CHARS). The
notebook shows a preview of the output with a link that downloads all of it.
"""

from __future__ import annotations

import re

from runs.demo.rules import scripted
from runs.engine.testing import Match, RecordedRequest, Reply, Rule, ToolCallSpec

LOG_PROMPT = "Read the last 120,000 lines of the server log and tell me what you see."
LOG_LINES = 120_000
_STATUS = re.compile(r'" (\d{3}) ')


def _log_answer(request: RecordedRequest) -> Reply:
    results = [m for m in request.messages if m.get("role") == "tool"]
    text = str(results[-1].get("content") or "") if results else ""
    statuses = _STATUS.findall(text)
    errors = sum(1 for s in statuses if s.startswith("5"))
    missing = sum(1 for s in statuses if s == "404")
    cut = "tool output cut" in text
    seen = (
        f"the first {len(statuses):,} lines" if cut else f"all {len(statuses):,} lines"
    )
    return Reply(
        text=scripted(
            f"I was given {seen} of the log"
            + (" (the output was too large to read whole)" if cut else "")
            + f": {missing:,} requests were not found (404) and {errors:,} failed with a "
            "server error (5xx); the rest succeeded or were redirects. The whole log can be "
            "downloaded from the tool result above."
        )
    )


def log_rules() -> list[Rule]:
    asks = Match(last_user_contains=LOG_PROMPT)
    return [
        Rule(
            name="demo-log-read",
            match=asks.model_copy(update={"tool_results_since_user": 0}),
            reply=Reply(
                text="I'll read the log.",
                tool_calls=[
                    ToolCallSpec(name="server_log", arguments={"lines": LOG_LINES})
                ],
            ),
        ),
        Rule(
            name="demo-log-answer",
            match=asks.model_copy(update={"tool_results_since_user": 1}),
            respond=_log_answer,
        ),
    ]
