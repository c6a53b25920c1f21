"""Evaluators for experiments: each takes what an example expected and what a rerun did, and
returns a `Score` with an explanation a person can read (docs/evaluators.md).

Plain Python like the rest of the engine: the service hands in the example, the rerun's calls,
answer and figures, and the custom evaluators' paths from `runs.conf`.
"""

from runs.engine.evals.answers import AnswerMode, answer_match
from runs.engine.evals.custom import (
    CustomEvaluator,
    EvaluatorPathError,
    load_evaluators,
)
from runs.engine.evals.figures import FigureLimits, figure_scores
from runs.engine.evals.judge import JudgeVerdict, judge_messages, parse_verdict
from runs.engine.evals.score import Score
from runs.engine.evals.trajectory import (
    ArgumentRule,
    Call,
    TrajectoryMode,
    calls_of,
    must_not_call,
    trajectory_match,
)

__all__ = [
    "AnswerMode",
    "ArgumentRule",
    "Call",
    "CustomEvaluator",
    "EvaluatorPathError",
    "FigureLimits",
    "JudgeVerdict",
    "Score",
    "TrajectoryMode",
    "answer_match",
    "calls_of",
    "figure_scores",
    "judge_messages",
    "load_evaluators",
    "must_not_call",
    "parse_verdict",
    "trajectory_match",
]
