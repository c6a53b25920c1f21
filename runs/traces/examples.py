"""A notebook as a dataset example: what it was asked, the answer it should have given, and the
tool calls it should (and must not) make — from its event log and its corrected answer.

Pure: `dataset_example` takes the log's payloads in order, so it can be checked on any log and
later fill dataset rows (`input`, `expected_output`, `metadata`, as Langfuse and LangSmith
dataset items are shaped) without reading the database itself.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from runs.engine.workers.tool_calls import REJECTION_PREFIX


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
