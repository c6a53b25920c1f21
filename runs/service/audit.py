"""The audit trail of what people did: `human_action` events beside the engine's own.

The engine records the effect of a decision (`step_input_edited`, `tool_call_decided`); these
events add who made it and what the value was before, so a reviewer can see every edit as
before → after, every rejection with its reason, every approval and every stop.
"""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async

from runs.models import Step
from runs.protocol import HumanAction, HumanActionKind
from runs.service.runtime import NotebookRuntime


def step_inputs(step_id: str) -> tuple[str | None, list[dict[str, Any]] | None]:
    """A step's input text and pending tool calls, as stored now."""
    row = (
        Step.objects.filter(step_id=step_id).values_list("input", "tool_calls").first()
    )
    return (row[0], row[1]) if row else (None, None)


def edit_actions(
    turn_id: str,
    step_id: str,
    before: tuple[str | None, list[dict[str, Any]] | None],
    after: tuple[str | None, list[dict[str, Any]] | None],
    by: str,
) -> list[HumanAction]:
    """One action per thing an edit changed: each call's arguments, or else the input text.

    A tool-call step's input is its calls as JSON, so an edit of their arguments changes both:
    the calls say what changed. A Team question's step holds the question's call, unchanged,
    and takes the person's answer as its input: that is its text edit (once recorded only by
    its calls, the answer left no trace in the audit)."""
    actions = []
    if after[1] is not None:
        old = {c["tool_id"]: c.get("tool_kwargs") for c in before[1] or []}
        actions = [
            HumanAction(
                task_id=turn_id,
                step_id=step_id,
                by=by,
                action=HumanActionKind.EDITED_ARGUMENTS,
                tool_id=call["tool_id"],
                before=old.get(call["tool_id"]),
                after=call.get("tool_kwargs"),
            )
            for call in after[1]
            if old.get(call["tool_id"]) != call.get("tool_kwargs")
        ]
    if actions or before[0] == after[0]:
        return actions
    edit = HumanAction(
        task_id=turn_id,
        step_id=step_id,
        by=by,
        action=HumanActionKind.EDITED_INPUT,
        before=before[0],
        after=after[0],
    )
    return [*actions, edit]


async def record(runtime: NotebookRuntime, actions: list[HumanAction]) -> None:
    """Store and broadcast the actions (the caller holds the notebook's lease)."""
    for action in actions:
        await runtime.publisher.publish(action)


async def inputs_of(step_id: str) -> tuple[str | None, list[dict[str, Any]] | None]:
    return await database_sync_to_async(step_inputs)(step_id)
