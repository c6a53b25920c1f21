"""Messages of the conversation: rows <-> ChatMessage, the agent's memory, a turn's own messages.

Every write ticks the notebook's logical clock (`Task.clock`), and messages record when they
joined (`born`) and left (`died`) the conversation, so a turn's history can be read as the
conversation stood when the turn began.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import F, Q, QuerySet

from runs.engine import ChatMessage, ToolSelection
from runs.models import Message, MessageStatus, Step, Task, Turn
from runs.store import cache
from runs.store.fence import advance


def conversation(task_pk: int, at: int | None = None) -> QuerySet[Message]:
    """The notebook's conversation in order: now, or as it stood at clock `at`."""
    return (
        Message.objects.filter(task_id=task_pk)
        .filter(in_conversation(at))
        .order_by("position", "pk")
    )


def in_conversation(at: int | None = None) -> Q:
    """Whether a message is in its notebook's conversation: now, or as it stood at clock `at`."""
    if at is None:
        return Q(died__isnull=True) & (
            Q(turn__isnull=True) | Q(turn__deleted_clock__isnull=True)
        )
    return (
        Q(born__lte=at)
        & (Q(died__isnull=True) | Q(died__gt=at))
        & (
            Q(turn__isnull=True)
            | Q(turn__deleted_clock__isnull=True)
            | Q(turn__deleted_clock__gt=at)
        )
    )


def tick(task_pk: int) -> int:
    """Lock the notebook row and advance its clock; raises Task.DoesNotExist if it is gone.

    The lock orders concurrent writers (and makes turn numbering safe); the new time is written
    when the transaction ends. A fenced write whose lease was taken over raises LeaseLost.
    """
    return advance(task_pk, "clock", touch=True)


def message_from_row(row: Message) -> ChatMessage:
    return ChatMessage.model_validate(
        {
            "role": row.role,
            "content": row.content,
            "tool_calls": [ToolSelection.model_validate(c) for c in row.tool_calls],
            "tool_call_id": row.tool_call_id,
            "name": row.name,
            "images": row.images,
        }
    )


def _message_row(message: ChatMessage, **fields: Any) -> Message:
    dumped = message.model_dump(mode="json")
    return Message(
        role=message.role.value,
        content=message.content,
        tool_calls=dumped["tool_calls"],
        tool_call_id=message.tool_call_id,
        name=message.name,
        images=dumped["images"],
        **fields,
    )


def _common_prefix(rows: list[Message], messages: list[ChatMessage]) -> int:
    count = 0
    for row, message in zip(rows, messages):
        if message_from_row(row) != message:
            break
        count += 1
    return count


def load_agent_memory(task_pk: int) -> list[ChatMessage]:
    """The agent's memory: the first `memory_length` messages of the conversation (read with
    the conversation, in one query)."""
    rows = list(conversation(task_pk).annotate(memory_length=F("task__memory_length")))
    if not rows:  # an empty conversation, or no notebook
        Task.objects.only("pk").get(pk=task_pk)  # Task.DoesNotExist if it is gone
        return []
    return [message_from_row(row) for row in rows[: rows[0].memory_length]]


def save_agent_memory(task_pk: int, messages: list[ChatMessage]) -> None:
    """Make `messages` the agent's memory.

    The runner only ever saves a prefix of the conversation (after finishing or undoing a turn),
    which costs one update. Anything else (a seeded chat history, a reset) supersedes the
    conversation after the common prefix and stores the new messages in its place.
    """
    with transaction.atomic():
        clock = tick(task_pk)
        rows = list(conversation(task_pk))
        keep = _common_prefix(rows, messages)
        if keep == len(messages):
            # no message changes: the turns' rows known before this write still hold
            transaction.on_commit(lambda: cache.carry(task_pk, clock - 1, clock))
        else:
            Message.objects.filter(pk__in=[row.pk for row in rows[keep:]]).update(
                status=MessageStatus.SUPERSEDED, died=clock
            )
            Message.objects.bulk_create(
                [
                    _message_row(m, task_id=task_pk, position=keep + i, born=clock)
                    for i, m in enumerate(messages[keep:])
                ]
            )
        Task.objects.filter(pk=task_pk).update(memory_length=len(messages))


def own_messages(turn: Turn) -> QuerySet[Message]:
    """The turn's own messages (after its history) that no undo removed."""
    return turn.messages.filter(is_own(turn)).order_by("position", "pk")


def is_own(turn: Turn) -> Q:
    """Whether a message is one of `turn`'s own messages that no undo removed."""
    return Q(turn=turn) & ~Q(status=MessageStatus.UNDONE)


def save_turn_messages(
    turn: Turn,
    memory: list[ChatMessage],
    producer: Step | None,
    clock: int,
    producers: dict[int, Step | None] | None = None,
    rows: list[Message] | None = None,
) -> list[Message] | None:
    """Store the turn's own messages (after its history); truncated ones become `undone`.

    New messages are the `producer` step's, or, by position, those `producers` names. `rows`:
    the turn's own message rows now, if known; returns them as they are afterwards (None if
    not known).
    """
    own = memory[turn.history_length :]
    if rows is None:
        rows = list(own_messages(turn))
    keep = _common_prefix(rows, own)
    # a message changed in place (an assistant message whose calls ran with a person's edited
    # arguments) is still its own step's, not the step that changed it
    replaced = {row.position: row for row in rows[keep:]}
    if keep < len(rows):
        gone = [row.pk for row in rows[keep:]]
        Message.objects.filter(pk__in=gone, died__isnull=True).update(died=clock)
        Message.objects.filter(pk__in=gone).update(status=MessageStatus.UNDONE)

    def maker(position: int, message: ChatMessage) -> Step | None:
        old = replaced.get(position)
        if old is not None and old.role == message.role.value:
            return old.step
        return producer if producers is None else producers.get(position)

    added = [
        _message_row(
            m,
            task_id=turn.task_id,
            turn=turn,
            step=maker(turn.history_length + keep + i, m),
            position=turn.history_length + keep + i,
            born=clock,
        )
        for i, m in enumerate(own[keep:])
    ]
    if added:
        Message.objects.bulk_create(added)
        if any(row.pk is None for row in added):
            return (
                None  # a backend without RETURNING on bulk inserts: read them next time
            )
    return rows[:keep] + added
