"""What the entrances read of a notebook's live state: the store's views of its rows, and the text
its running steps have streamed so far (fresher in this process than in the database)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from channels.db import database_sync_to_async

from runs.engine.tools import model_text
from runs.models import Task, Turn, TurnStatus
from runs.presets import get_preset
from runs.realtime.publisher import existing_publisher
from runs.service.budgets import base_budget
from runs.service.llm import llm_settings
from runs.store.cost import model_of, price_json, price_of
from runs.store.messages import conversation
from runs.store.queries import (
    RUNNABLE,
    ModelCut,
    NotebookView,
    StepView,
    event_payload,
    events_after,
    last_seq,
    model_cuts,
    notebook_view,
    owner_of,
    running_streams,
    summary,
)

__all__ = [
    "RUNNABLE",
    "ConversationMessage",
    "ModelCut",
    "NotebookView",
    "conversation_messages",
    "event_payload",
    "StepView",
    "events_after",
    "hello_summary",
    "last_seq",
    "notebook_view",
    "owner_of",
    "stream_snapshots",
    "text_as_read",
]


@dataclass(frozen=True)
class ConversationMessage:
    """One message of a notebook's conversation as the model reads it now (undone ones gone;
    a tool call as it ran, after a person's edit)."""

    id: str  # stable: the stored row's
    role: str  # user | assistant | tool
    content: str
    tool_calls: list[dict[str, Any]]  # {tool_id, tool_name, tool_kwargs}
    tool_call_id: str | None
    # the images the model was given with a user message ({url, detail}: a data: URL, or the
    # http(s) URL the model server fetched)
    images: list[dict[str, Any]] = field(default_factory=list)
    # a tool result the model was given cut: `content` is what it read
    cut: ModelCut | None = None


def text_as_read(content: str, model_chars: int | None) -> str:
    """A stored tool output as the model read it: cut to `model_chars` (a `ModelCut`'s), with
    the engine's note saying so."""
    return model_text(content, model_chars)


def conversation_messages(task_pk: int) -> list[ConversationMessage]:
    """The notebook's conversation now, oldest first, without system prompts; a turn whose
    first step has not run yet (waiting for approval, or undone) ends it with its message as
    that step will send it (after a person's edit)."""
    messages = _stored_messages(task_pk)
    waiting = _waiting_message(task_pk)
    return messages if waiting is None else [*messages, waiting]


def _waiting_message(task_pk: int) -> ConversationMessage | None:
    turn = (
        Turn.objects.filter(
            task_id=task_pk, status=TurnStatus.ACTIVE, deleted_clock__isnull=True
        )
        .order_by("-index")
        .first()
    )
    if turn is None or conversation(task_pk).filter(turn=turn).exists():
        return None
    first = turn.steps.order_by("pk").values_list("input", flat=True).first()
    return ConversationMessage(f"turn-{turn.pk}", "user", first or turn.input, [], None)


def _stored_messages(task_pk: int) -> list[ConversationMessage]:
    rows = (
        conversation(task_pk)
        .filter(role__in=("user", "assistant", "tool"))
        .select_related("step")
    )
    cuts = model_cuts(task_pk)
    return [
        ConversationMessage(
            id=f"message-{row.pk}",
            role=row.role,
            content=row.content or "",
            tool_calls=list(row.tool_calls),
            tool_call_id=row.tool_call_id,
            images=list(row.images or []),
            cut=cuts.get((row.step.step_id, row.tool_call_id or ""))
            if row.role == "tool" and row.step is not None
            else None,
        )
        for row in rows
    ]


async def stream_snapshots(task_pk: int) -> list[tuple[str, str, str]]:
    """(step_id, phase, text) of each running step's streamed text so far."""
    stored = {s[0]: s for s in await database_sync_to_async(running_streams)(task_pk)}
    publisher = existing_publisher(task_pk)
    if publisher is not None:  # fresher than the last flush when the step runs here
        stored.update({s[0]: s for s in publisher.snapshots()})
    return list(stored.values())


def hello_summary(task_pk: int) -> tuple[dict[str, Any], int]:
    """The notebook as `hello` describes it (with `branches`: its agent runs a turn's ready
    steps side by side, each approved on its own), and its last stored seq."""
    data, seq = summary(task_pk)
    preset = get_preset(data["agent"])
    data["branches"] = bool(preset and preset.runner.runs_branches)
    # what a token costs (None: unknown), so the page costs each step as it completes
    task = Task.objects.get(pk=task_pk)
    data["price"] = price_json(
        price_of(model_of(task, llm_settings(start_demo=False).model))
    )
    # the run budgets in force (before a raise, which the page reads from the turn's actions)
    data["budget"] = base_budget(task)
    return data, seq
