"""How each notebook's last turn ended and how big it was, for the traces list.

Derived from the stored rows and the event log in a few aggregate queries per page of notebooks:
the outcome (answered / stopped, by whom and where / failed / max iterations / still going), the
steps that ran (a stopped one too), tool calls, the tokens and cost of every model call (as the
budgets count them: runs.store.cost), wall time, the number of human actions and the first line
of the answer.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from django.db.models import Count, Max, Min, Q

from runs.models import Event, NotebookStatus, Step, StepStatusChoices, Turn, TurnStatus
from runs.store.cost import call_usage, cost_usd, model_of, price_of
from runs.store.load import shown_step_ids
from runs.traces.corrections import correction_counts

# How the engine says a turn hit its limit (the ReAct worker's answer, function calling's tool result).
MAX_ITERATIONS_ANSWER = "Stopped: the agent reached max_iterations"
CALL_LIMIT_RESULT = "Error: the limit of "
ANSWER_LINE_CHARS = 160


def first_line(text: str | None) -> str:
    line = next(
        (part.strip() for part in (text or "").splitlines() if part.strip()), ""
    )
    return (
        line if len(line) <= ANSWER_LINE_CHARS else line[: ANSWER_LINE_CHARS - 1] + "…"
    )


def _stop_of(turn: Turn) -> dict[str, Any]:
    """Who stopped the turn and at which of its steps (1-based among the steps shown): every
    step that was running when Stop was pressed (parallel branches), or the one that waited."""
    stops = list(
        Event.objects.filter(turn=turn, type="human_action", payload__action="stopped")
        .order_by("seq")
        .values_list("payload", flat=True)
    )
    if not stops:
        return {"by": None, "step": None, "stopped_steps": [], "while_running": False}
    ids = shown_step_ids(turn)
    steps = sorted(
        {ids.index(s["step_id"]) + 1 for s in stops if s.get("step_id") in ids}
    )
    return {
        "by": stops[-1].get("by"),
        "step": steps[0] if steps else None,
        "stopped_steps": steps,
        "while_running": any(s.get("while_running") for s in stops),
    }


def _outcome(turn: Turn | None, status: str, hit_limit: bool) -> dict[str, Any]:
    if turn is None:
        return {"outcome": "empty"}
    if turn.status == TurnStatus.COMPLETED:
        limited = hit_limit or (turn.response or "").startswith(MAX_ITERATIONS_ANSWER)
        return {"outcome": "max_iterations" if limited else "answered"}
    if turn.status == TurnStatus.ABANDONED:
        return {"outcome": "stopped", **_stop_of(turn)}
    if status in (NotebookStatus.FAILED, NotebookStatus.INTERRUPTED):
        return {
            "outcome": "failed" if status == NotebookStatus.FAILED else "interrupted"
        }
    return {"outcome": "waiting" if status == NotebookStatus.WAITING else "running"}


def _wall_time(task: Any, event_row: dict[str, Any]) -> float:
    """From the first event to the last; a fork's from its own start (the events it copied
    from its source keep the source's times, which are not the fork's)."""
    if not event_row:
        return 0.0
    first = event_row["first"]
    if task.fork_turn_index is not None:
        first = max(first, task.created_at.timestamp())
    return max(0.0, event_row["last"] - first)


def _price(prices: dict[str | None, Any], model: str | None) -> Any:
    if model not in prices:
        prices[model] = price_of(model)
    return prices[model]


def summaries(
    tasks: Iterable[Any], model: str | None = None
) -> dict[int, dict[str, Any]]:
    """Per notebook pk: outcome, steps, tool_calls, tokens, cost_usd (at the price of the
    notebook's own model, else `model`'s; None without one), wall_time_s, human_actions, corrections (edits, rejections, corrected answers), answer."""
    prices: dict[str | None, Any] = {}  # a composed notebook may call its own model
    tasks = list(tasks)
    pks = [t.pk for t in tasks]
    # the steps that ran: completed, or stopped part way (interrupted), as the cards show them
    steps = dict(
        Step.objects.filter(
            task_id__in=pks,
            status__in=(StepStatusChoices.COMPLETED, StepStatusChoices.INTERRUPTED),
            runs__gt=0,
        )
        .values("task_id")
        .annotate(n=Count("pk"))
        .values_list("task_id", "n")
    )
    usage = call_usage(Event.objects.filter(task_id__in=pks), "task_id")
    events = {
        row["task_id"]: row
        for row in Event.objects.filter(task_id__in=pks)
        .values("task_id")
        .annotate(
            first=Min("at"),
            last=Max("at"),
            calls=Count("pk", filter=Q(type="tool_call_result")),
            human=Count("pk", filter=Q(type="human_action")),
        )
    }
    last_turns: dict[int, Turn] = {}
    for turn in Turn.objects.filter(task_id__in=pks).order_by("task_id", "-index"):
        last_turns.setdefault(turn.task_id, turn)
    corrected = correction_counts(pks)
    none = {"edits": 0, "rejections": 0, "corrected_answers": 0}
    limited: defaultdict[int, bool] = defaultdict(bool)
    for turn_id in (
        Event.objects.filter(
            turn__in=list(last_turns.values()),
            type="tool_call_result",
            payload__tool_output__content__startswith=CALL_LIMIT_RESULT,
        )
        .values_list("turn_id", flat=True)
        .distinct()
    ):
        limited[turn_id] = True
    result = {}
    for task in tasks:
        turn = last_turns.get(task.pk)
        used = usage.get(task.pk, {})
        event_row = events.get(task.pk, {})
        wall = _wall_time(task, event_row)
        result[task.pk] = {
            **_outcome(turn, task.status, bool(turn and limited[turn.pk])),
            "steps": steps.get(task.pk, 0),
            "tokens": used.get("total_tokens", 0),
            "cost_usd": cost_usd(
                _price(prices, model_of(task, model)),
                used.get("prompt_tokens"),
                used.get("completion_tokens"),
            ),
            "tool_calls": event_row.get("calls", 0),
            "human_actions": event_row.get("human", 0),
            "corrections": corrected.get(task.pk, none),
            "wall_time_s": round(wall, 3),
            "answer": first_line(turn.response if turn else None),
        }
    return result
