"""What the model is told when a step Stop cut off runs again: the tool calls it had begun.

Stop rolls the step back and its retry asks the model exactly as before, yet a call whose tool
had begun (a plain function's thread runs on; an ``async`` tool was cut off part way) may have
taken effect: asked the same, the model would make it again. So such calls are kept in the
task's ``extra_state`` under the step's id (stored with the task, and checkpointed and undone
with it), and the step's next model request ends with a system note naming them. The note is
the application's, not the person's; a StoppedCallsNote event records exactly its text, so every
surface shows what the model was told.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .events import StoppedCallsNote
from .messages import ChatMessage
from .types import BegunCall, PendingToolCall, Task, TaskStep

_KEY = "stopped_calls:"  # + the step's id: the calls its stopped runs had begun
_STATES = {
    "left_running": "it was still running when stopped, and runs on",
    "cancelled": "it was cancelled part way",
}


def _key(step_id: str) -> str:
    return f"{_KEY}{step_id}"


def remember(task: Task, step: TaskStep, call: PendingToolCall, state: str) -> None:
    """In the stopped run: keep ``call`` if its tool had begun (``state`` from CallProgress)."""
    if state not in _STATES:
        return  # not_started: nothing happened
    begun = BegunCall(
        tool_id=call.tool_id,
        tool_name=call.tool_name,
        tool_kwargs=call.tool_kwargs,
        state=state,  # type: ignore[arg-type]
    )
    task.extra_state.setdefault(_key(step.step_id), []).append(
        begun.model_dump(mode="json")
    )


def carry_over(stopped: dict[str, Any], restored: dict[str, Any], step_id: str) -> None:
    """After a rollback to ``restored``: keep the calls the stopped run noted in ``stopped``.

    Added to those of earlier stopped runs (a retry stopped again still owes the first note).
    """
    key = _key(step_id)
    new = [c for c in stopped.get(key, []) if c not in restored.get(key, [])]
    if new:
        restored[key] = [*restored.get(key, []), *new]


def note_text(calls: Sequence[BegunCall]) -> str:
    """The note the model is sent, naming each call and its arguments."""
    lines = [
        f"- {c.tool_name}({json.dumps(c.tool_kwargs, ensure_ascii=False)}): {_STATES[c.state]}"
        for c in calls
    ]
    return "\n".join(
        [
            "Note from the application (not from the person): an earlier attempt at this step "
            "was stopped by the person after these tool calls had begun. Their effect may "
            "already have happened (or may still happen):",
            *lines,
            "Do not call them again unless the person asks you to.",
        ]
    )


def take_note(task: Task, step: TaskStep) -> StoppedCallsNote | None:
    """The note for the step's request, if a stopped run of it had begun calls; taken once per run
    (the run's checkpoint keeps it, so an undo or another Stop gives it to the next run)."""
    kept = task.extra_state.pop(_key(step.step_id), None)
    if not kept:
        return None
    calls = [BegunCall.model_validate(c) for c in kept]
    return StoppedCallsNote(
        task_id=task.task_id, step_id=step.step_id, text=note_text(calls), calls=calls
    )


def with_note(
    messages: Sequence[ChatMessage], note: StoppedCallsNote | None
) -> list[ChatMessage]:
    """The request's messages, ending with the note as a system message when there is one."""
    if note is None:
        return list(messages)
    return [*messages, ChatMessage.system(note.text)]
