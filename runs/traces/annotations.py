"""Reviewers' annotations: a comment and a thumbs up/down on a step, a tool call or an answer.

An annotation names what it is about (`target` `step` | `call` | `answer`, `step_id` for steps
and calls, `tool_id` for calls, `turn_id` for answers), which must exist in that notebook.
They are shown in the trace, searched by the traces list and exported.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from pydantic import BaseModel, ConfigDict, Field

from runs.conf import conf
from runs.models import Annotation, AnnotationTarget, Event, Step, Task, Turn
from runs.protocol import ErrorCode, ProtocolError
from runs.protocol.checks import storable_problem
from runs.telemetry import recorder as telemetry

MAX_COMMENT_CHARS = 5000


class NewAnnotation(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    target: Literal["step", "call", "answer"]
    step_id: Annotated[str, Field(max_length=64)] = ""
    tool_id: Annotated[str, Field(max_length=128)] = ""
    turn_id: Annotated[str, Field(max_length=64)] = ""
    rating: Literal[-1, 0, 1] = 0
    comment: Annotated[str, Field(max_length=MAX_COMMENT_CHARS)] = ""


def annotation_json(note: Annotation) -> dict[str, Any]:
    return {
        "id": note.pk,
        "target": note.target,
        "turn_id": note.turn_id or None,
        "step_id": note.step_id or None,
        "tool_id": note.tool_id or None,
        "rating": note.rating,
        "comment": note.comment,
        "by": note.author.get_username(),
        "created_at": note.created_at.isoformat(),
    }


def annotations_of(task: Task) -> list[dict[str, Any]]:
    return [annotation_json(n) for n in task.annotations.select_related("author")]


def _missing(task: Task, new: NewAnnotation) -> str | None:
    """Why the annotation's target is not in this notebook, or None."""
    if new.target == AnnotationTarget.ANSWER:
        if not Turn.objects.filter(
            task=task, engine_id=new.turn_id, response__isnull=False
        ).exists():
            return f"turn {new.turn_id!r} has no answer in this notebook"
        return None
    if not Step.objects.filter(task=task, step_id=new.step_id).exists():
        return f"no step {new.step_id!r} in this notebook"
    if (
        new.target == AnnotationTarget.CALL
        and not Event.objects.filter(
            task=task,
            step_id=new.step_id,
            type="tool_call",
            payload__tool_id=new.tool_id,
        ).exists()
    ):
        return f"no tool call {new.tool_id!r} in step {new.step_id!r}"
    return None


def add_annotation(
    task: Task, author: AbstractBaseUser, new: NewAnnotation
) -> Annotation:
    """Store `new` on `task`; ValueError says why it does not fit, ProtocolError
    (`quota_exceeded`) that its step has too many already (nothing stored then)."""
    problem = _missing(task, new) or storable_problem(new.comment)
    if problem is None and not new.comment.strip() and new.rating == 0:
        problem = "give a comment, a thumbs up or a thumbs down"
    if problem is not None:
        raise ValueError(problem)
    with transaction.atomic():
        _hold_annotation(task, new)
        note = Annotation.objects.create(
            task=task,
            author=author,
            target=new.target,
            turn_id=new.turn_id,
            step_id=new.step_id,
            tool_id=new.tool_id,
            rating=new.rating,
            comment=new.comment.strip(),
        )
        transaction.on_commit(lambda: _export(task, note))
    return note


def _export(task: Task, note: Annotation) -> None:
    """The annotation to the trace store, on its turn's span (runs.telemetry.annotations)."""
    turn_id = note.turn_id or (
        Step.objects.filter(task=task, step_id=note.step_id)
        .values_list("turn__engine_id", flat=True)
        .first()
    )
    if not turn_id:
        return
    about = {"target": note.target, "by": note.author.get_username()}
    about.update(
        {k: v for k, v in (("step_id", note.step_id), ("tool_id", note.tool_id)) if v}
    )
    telemetry.review(note.pk, turn_id, note.rating, note.comment, about)


def _hold_annotation(task: Task, new: NewAnnotation) -> None:
    """ProtocolError (`quota_exceeded`) when the step (or answer) `new` is about has as many
    annotations as one may have (`AGENTUI_MAX_ANNOTATIONS_PER_STEP`; 0: no limit). Holds the
    notebook's row until the transaction ends, so notes added at once cannot pass it together."""
    limit = conf().max_annotations_per_step
    if limit <= 0:
        return
    Task.objects.select_for_update().filter(pk=task.pk).exists()
    notes = Annotation.objects.filter(task=task)
    if new.target == AnnotationTarget.ANSWER:
        notes, what = notes.filter(target=new.target, turn_id=new.turn_id), "answer"
    else:
        notes, what = notes.exclude(target=AnnotationTarget.ANSWER), "step"
        notes = notes.filter(step_id=new.step_id)
    if notes.count() >= limit:
        raise ProtocolError(
            ErrorCode.QUOTA_EXCEEDED,
            f"This {what} has {limit} annotation{'' if limit == 1 else 's'}, the most one {what} may have.",
        )
