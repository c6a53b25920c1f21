"""A notebook as a dataset example: what it was asked, the answer it should have given, and the
tool calls it should (and must not) make — from its event log and its corrected answer.

`dataset_example` is pure: it takes the log's payloads in order, so it can be checked on any
log. `example_of` reads a stored notebook's rows for it and adds what a rerun needs (agent, mode,
model, setup, tools, tables, images), as runs.service.datasets stores it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from runs.engine.workers.tool_calls import REJECTION_PREFIX
from runs.models import Annotation, AnnotationTarget, CorrectedAnswer, Event, Task, Turn
from runs.presets import get_preset
from runs.presets.compose import tool_names
from runs.traces.data_used import data_tables_used
from runs.traces.export import composed_setup


def _is_rejection(result: dict[str, Any]) -> bool:
    return str(result.get("tool_output", {}).get("content", "")).startswith(
        REJECTION_PREFIX
    )


def expected_trajectory(
    events: Iterable[dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The calls as they ran after the person's edits (a step's runs taken back by an undo
    left out), and the rejected calls with the reason given: (calls, must_not_call)."""
    ran: dict[str, list[dict[str, Any]]] = {}  # per step, in order
    order: list[str] = []
    reasons: dict[tuple[str, str], str] = {}
    for event in events:
        kind, step = event.get("type"), event.get("step_id") or ""
        if kind == "human_action" and event.get("action") == "undone":
            ran.pop(step, None)
        elif kind == "human_action" and event.get("action") in (
            "rejected_call",
            "auto_refused",
        ):
            reasons[(step, event.get("tool_id") or "")] = event.get("reason") or ""
        elif kind == "tool_call_result":
            if step not in ran:
                ran[step] = []
                order.append(step)
            ran[step].append(event)
    calls, refused = [], []
    for step in dict.fromkeys(order):
        for result in ran.get(step, []):
            call = {
                "tool": result.get("tool_name"),
                "arguments": result.get("tool_kwargs") or {},
                "step_id": step,
                "tool_id": result.get("tool_id"),
            }
            if _is_rejection(result):
                reason = reasons.get((step, result.get("tool_id") or ""), "")
                refused.append({**call, "reason": reason})
            else:
                calls.append(call)
    return calls, refused


def dataset_example(
    events: list[dict[str, Any]],
    corrected_answer: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The example a notebook makes: `input` (its first message and later ones),
    `expected_output` (the corrected answer, else the last answer the agent gave, with the
    trajectory) and `metadata` (given, plus where the answer came from)."""
    messages = [e["input"] for e in events if e.get("type") == "task_created"]
    answers = [e["response"] for e in events if e.get("type") == "task_completed"]
    calls, refused = expected_trajectory(events)
    if corrected_answer is not None:
        answer, source = corrected_answer, "corrected"
    elif answers:
        answer, source = answers[-1], "agent"
    else:
        answer, source = None, "none"
    return {
        "input": {"message": messages[0] if messages else "", "messages": messages},
        "expected_output": {
            "answer": answer,
            "trajectory": calls,
            "must_not_call": refused,
        },
        "metadata": {**(metadata or {}), "answer_from": source},
    }


# --- a stored notebook as an example (the rows `dataset_example` and a rerun need) ------------


def notebook_tools(task: Task) -> list[str]:
    """The tools the notebook's model was offered: its preset's built-in tools (those it kept,
    when composed) and the MCP tools picked."""
    preset = get_preset(task.agent)
    own = tool_names(preset) if preset is not None else []
    if task.tools is not None:
        own = [name for name in own if name in task.tools]
    return [*own, *(task.mcp_tools or [])]


def notebook_input(task: Task, default_model: str) -> dict[str, Any]:
    """What a rerun of `task` takes besides its messages: the agent and mode, the model (the
    configured `default_model` when the notebook did not pick one), the setup it was composed
    with, the tools it had, the data tables it read and its images (by reference)."""
    images = task.attachments.order_by("pk").values(
        "pk", "name", "mime", "size", "turn_engine_id"
    )
    turns = dict(task.turns.values_list("engine_id", "index"))
    return {
        "agent": task.agent,
        "mode": task.mode,
        "model": task.model or default_model,
        "setup": composed_setup(task),
        "tools": notebook_tools(task),
        "data_tables": data_tables_used(task),
        "attachments": [
            {
                "id": image["pk"],
                "name": image["name"],
                "mime": image["mime"],
                "size": image["size"],
                "turn": turns.get(image["turn_engine_id"]),
            }
            for image in images
        ],
    }


def _verdict(task: Task, turn: Turn | None) -> str | None:
    """ "pass" or "fail" by the newest thumbs up or down on the final answer; None: no verdict."""
    if turn is None:
        return None
    note = (
        Annotation.objects.filter(
            task=task, target=AnnotationTarget.ANSWER, turn_id=turn.engine_id
        )
        .exclude(rating=0)
        .order_by("-created_at", "-pk")
        .first()
    )
    return None if note is None else ("pass" if note.rating > 0 else "fail")


def example_of(task: Task, default_model: str, added_by: str) -> dict[str, Any]:
    """`task` as a dataset example: `dataset_example` over its log (the final answer's corrected
    answer, if it has one, as the expected answer) with the rest of its input, and metadata
    naming the notebook, who reviewed it and the verdict on its answer."""
    events = list(
        Event.objects.filter(task=task)
        .order_by("seq")
        .values_list("payload", flat=True)
    )
    final = (
        Turn.objects.filter(task=task, deleted_at__isnull=True, response__isnull=False)
        .order_by("-index")
        .first()
    )
    corrected = (
        CorrectedAnswer.objects.filter(turn=final)
        .select_related("author")
        .order_by("-created_at", "-pk")
        .first()
        if final is not None
        else None
    )
    example = dataset_example(
        events,
        corrected.text if corrected else None,
        {
            "source_notebook": task.pk,
            "source_title": str(task),
            "owner": task.owner.get_username(),
            "reviewer": corrected.author.get_username() if corrected else added_by,
            "categories": [],
            "verdict": _verdict(task, final),
        },
    )
    return {
        **example,
        "input": {**example["input"], **notebook_input(task, default_model)},
    }


def notebook_examples(
    tasks: list[Task], default_model: str, added_by: str
) -> list[tuple[int, dict[str, Any]]]:
    """`example_of` each of `tasks` (which the caller may review), with its pk, in order."""
    return [(task.pk, example_of(task, default_model, added_by)) for task in tasks]
