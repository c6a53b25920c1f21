"""Corrected answers: a reviewer writes the answer a turn should have given, beside the agent's.

Who may: the notebook's owner, and a group reviewer of theirs (runs.service.reviewers). Each
save is a new version (runs.models.CorrectedAnswer); the agent's answer is never touched. The
read model of a notebook's corrections is runs.traces.corrections.
"""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db import transaction

from runs.models import CorrectedAnswer, Task, Turn
from runs.protocol import ErrorCode, ProtocolError
from runs.protocol.checks import storable_problem
from runs.service.reviewers import may_review

MAX_CORRECTED_ANSWER_CHARS = 20_000


def may_correct(user_pk: int, task: Task) -> bool:
    """Whether `user_pk` may read `task`'s corrections and correct its answers."""
    return task.owner_id == user_pk or may_review(user_pk, task.owner_id)


def reviewable_notebook(user_pk: int, pk: int) -> Task:
    """Notebook `pk` if `user_pk` may review it; ProtocolError `not_found` otherwise (as for
    one that does not exist: whose notebooks there are is not told)."""
    task = Task.objects.filter(pk=pk).first()
    if task is None or not may_correct(user_pk, task):
        raise ProtocolError(ErrorCode.NOT_FOUND, "No such notebook.")
    return task


def _answered_turn(task: Task, turn_id: str) -> Turn:
    turn = Turn.objects.filter(
        task=task, engine_id=turn_id, deleted_at__isnull=True, response__isnull=False
    ).first()
    if turn is None:
        raise ProtocolError(
            ErrorCode.NOT_FOUND, f"Turn {turn_id!r} has no answer in this notebook."
        )
    return turn


def correct_answer(
    task: Task, author: User, turn_id: str, text: str
) -> CorrectedAnswer:
    """Store `text` as the newest version of the turn's corrected answer, by `author` (who may
    review `task`: the caller has checked, with `reviewable_notebook`). The same text as the
    newest version stores nothing and returns that version. ProtocolError: `not_found` for a
    turn without an answer, `invalid_input` for an empty, too long or unstorable text."""
    turn = _answered_turn(task, turn_id)
    text = text.strip()
    if not text:
        raise ProtocolError(
            ErrorCode.INVALID_INPUT, "Write the answer the agent should have given."
        )
    if len(text) > MAX_CORRECTED_ANSWER_CHARS:
        raise ProtocolError(
            ErrorCode.INVALID_INPUT,
            f"The corrected answer has {len(text):,} characters; at most "
            f"{MAX_CORRECTED_ANSWER_CHARS:,} are kept.",
        )
    problem = storable_problem(text)
    if problem is not None:
        raise ProtocolError(ErrorCode.INVALID_INPUT, f"The corrected answer {problem}.")
    with transaction.atomic():
        # one version at a time per turn: two saves at once are ordered, not interleaved
        Turn.objects.select_for_update().filter(pk=turn.pk).exists()
        latest = turn.corrected_answers.order_by("-created_at", "-pk").first()
        if latest is not None and latest.text == text:
            return latest
        return CorrectedAnswer.objects.create(
            task=task, turn=turn, author=author, text=text
        )
