"""The offline demo model as an LLM judge: a scripted grader for experiments' `llm_judge`.

A request whose system prompt is the judge's (runs/engine/evals/judge.py, `JUDGE_MARK`) is
graded here, by rule rather than by reading: with an expected answer, the answer passes when
it contains it (case aside) or gives its numbers; without one, when it says anything. The reply
is the JSON verdict a real judge is asked for, so the same parsing reads both.
"""

from __future__ import annotations

import json
from typing import Any

from runs.engine.evals import answer_match
from runs.engine.evals.judge import JUDGE_MARK
from runs.engine.testing import Match, RecordedRequest, Reply, Rule


def _graded(request: RecordedRequest) -> dict[str, Any]:
    try:
        sent = json.loads(request.last_user_text)
    except ValueError:
        sent = None
    if not isinstance(sent, dict):
        return {"score": 0, "passed": False, "reasoning": "Nothing to grade was sent."}
    answer, expected = sent.get("answer"), sent.get("expected_answer")
    answer = answer if isinstance(answer, str) else None
    if not isinstance(expected, str) or not expected.strip():
        passed = bool(answer and answer.strip())
        told = "An answer was given." if passed else "No answer was given."
        return {"score": int(passed), "passed": passed, "reasoning": told}
    contains = answer_match(answer, expected, "contains", ignore_case=True)
    numeric = answer_match(answer, expected, "numeric")
    passed = bool(contains.passed or numeric.passed)
    told = (
        "The answer agrees with the reference answer."
        if passed
        else "The answer does not give the reference answer."
    )
    return {"score": int(passed), "passed": passed, "reasoning": told}


def _judge(request: RecordedRequest) -> Reply:
    return Reply(text=json.dumps(_graded(request)))


def judge_rules() -> list[Rule]:
    """The demo judge's rule: any request carrying the judge's system prompt."""
    return [
        Rule(name="demo-judge", match=Match(system_contains=JUDGE_MARK), respond=_judge)
    ]
