"""A notebook's corrections: what people changed, refused, took back, answered and judged.

Derived on every read from what is already stored — the `human_action` events of the log (an
edit's value before and after, a rejection's reason, an undo), the questions the log asked
(an edit of the input of the `human_input` step that takes an answer is the person's answer),
the annotations and the corrected answers — so it can never drift from the audit. `corrections_from` is the pure
reduction; `corrections_of` reads a notebook's rows for it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from enum import StrEnum
from typing import Any

from django.db.models import Count, Exists, OuterRef, Q, QuerySet
from pydantic import BaseModel, ConfigDict

from runs.models import Annotation, CorrectedAnswer, Event, Task, Turn
from runs.protocol import HumanActionKind
from runs.traces.word_diff import DiffPart, word_diff


class CorrectionKind(StrEnum):
    """What a correction is (the `kind` of a `Correction`)."""

    EDITED_INPUT = "edited_input"
    EDITED_ARGUMENTS = "edited_arguments"
    REJECTED_CALL = "rejected_call"
    UNDONE = "undone"
    ANSWERED_QUESTION = "answered_question"
    ANNOTATION = "annotation"
    CORRECTED_ANSWER = "corrected_answer"


# the audit's actions that are a person's correction, by the kind they are
_ACTIONS = {
    HumanActionKind.EDITED_INPUT: CorrectionKind.EDITED_INPUT,
    HumanActionKind.EDITED_ARGUMENTS: CorrectionKind.EDITED_ARGUMENTS,
    HumanActionKind.REJECTED_CALL: CorrectionKind.REJECTED_CALL,
    HumanActionKind.UNDONE: CorrectionKind.UNDONE,
}


class Correction(BaseModel):
    """One correction, with who and when; `seq` is its event's place in the log (None for an
    annotation or a corrected answer, which are rows of their own)."""

    model_config = ConfigDict(extra="forbid")

    kind: CorrectionKind
    by: str
    at: str  # ISO 8601, UTC
    turn_id: str | None = None
    step_id: str | None = None
    tool_id: str | None = None
    tool_name: str | None = None
    before: Any = None
    after: Any = None
    reason: str | None = None  # a rejection's
    automatic: str | None = None  # taken by the server on the person's behalf, and why
    question: str | None = None  # the question an answer answers
    rating: int | None = None  # an annotation's: 1 good, -1 bad, 0 none
    note: str | None = None  # an annotation's comment
    target: str | None = None  # what an annotation is about: step, call or answer
    seq: int | None = None
    versions: int | None = None  # a corrected answer's: how many it has had
    diff: list[DiffPart] | None = None  # a corrected answer against the agent's


def _iso(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).isoformat()


def corrections_from(
    events: Iterable[tuple[int, dict[str, Any]]],
) -> list[Correction]:
    """The corrections the log holds, in its order, from `(seq, payload)` of its events (those
    of any type; only those of the types in `_READ` are read). An edit of the input of a
    `human_input` step (a Team's question) is the person's answer to it."""
    asked: dict[str, str] = {}  # a question's text, by the call that asked it
    questions: dict[str, str] = {}  # by the step that takes its answer
    names: dict[str, str] = {}
    found = []
    for seq, event in events:
        kind = event.get("type")
        if kind == "input_required" and event.get("tool_id"):
            asked[event["tool_id"]] = event.get("prefix") or ""
        elif kind == "step_created" and event.get("kind") == "human_input":
            calls = event.get("tool_calls") or [{}]
            questions[event["step_id"]] = calls[0].get("tool_id") or ""
        elif kind in ("tool_call", "tool_call_result") and event.get("tool_id"):
            names[event["tool_id"]] = event.get("tool_name") or ""
        elif kind == "human_action" and event.get("action") in _ACTIONS:
            found.append((seq, event))
    result = []
    for seq, event in found:
        what = _ACTIONS[HumanActionKind(event["action"])]
        step_id = event.get("step_id")
        asker = questions.get(step_id or "")
        question = None if asker is None else asked.get(asker, "")
        if what is CorrectionKind.EDITED_INPUT and question is not None:
            what = CorrectionKind.ANSWERED_QUESTION
        tool_id = event.get("tool_id")
        result.append(
            Correction(
                kind=what,
                by=event.get("by") or "",
                at=_iso(float(event.get("at") or 0)),
                turn_id=event.get("task_id"),
                step_id=step_id,
                tool_id=tool_id,
                tool_name=names.get(tool_id) if tool_id else None,
                before=event.get("before"),
                after=event.get("after"),
                reason=event.get("reason"),
                automatic=event.get("automatic"),
                question=question,
                seq=seq,
            )
        )
    return result


def annotation_correction(note: Annotation) -> Correction:
    return Correction(
        kind=CorrectionKind.ANNOTATION,
        by=note.author.get_username(),
        at=note.created_at.astimezone(dt.UTC).isoformat(),
        turn_id=note.turn_id or None,
        step_id=note.step_id or None,
        tool_id=note.tool_id or None,
        rating=note.rating,
        note=note.comment,
        target=note.target,
    )


def answer_correction(latest: CorrectedAnswer, versions: int) -> Correction:
    """A turn's corrected answer as the list shows it: the newest version, diffed against the
    agent's answer (`before`)."""
    agent = latest.turn.response or ""
    return Correction(
        kind=CorrectionKind.CORRECTED_ANSWER,
        by=latest.author.get_username(),
        at=latest.created_at.astimezone(dt.UTC).isoformat(),
        turn_id=latest.turn.engine_id,
        before=agent,
        after=latest.text,
        versions=versions,
        diff=word_diff(agent, latest.text),
    )


# the event types corrections_from reads
_READ = (
    "human_action",
    "input_required",
    "step_created",
    "tool_call",
    "tool_call_result",
)


def latest_answers(task: Task) -> list[tuple[CorrectedAnswer, int]]:
    """Each turn's newest corrected answer and how many versions it has, in turn order."""
    rows = (
        CorrectedAnswer.objects.filter(task=task)
        .select_related("author", "turn")
        .order_by("turn__index", "created_at", "pk")
    )
    by_turn: dict[int, list[CorrectedAnswer]] = {}
    for row in rows:
        by_turn.setdefault(row.turn_id, []).append(row)
    return [(versions[-1], len(versions)) for versions in by_turn.values()]


def corrections_of(task: Task) -> list[Correction]:
    """Every correction of `task`: the log's in its order, then the annotations, then each
    turn's corrected answer (newest version)."""
    events = (
        Event.objects.filter(task=task, type__in=_READ)
        .order_by("seq")
        .values_list("seq", "payload")
    )
    notes = task.annotations.select_related("author")
    return [
        *corrections_from(events.iterator()),
        *(annotation_correction(n) for n in notes),
        *(answer_correction(row, n) for row, n in latest_answers(task)),
    ]


def _version_json(row: CorrectedAnswer) -> dict[str, Any]:
    return {
        "text": row.text,
        "by": row.author.get_username(),
        "created_at": row.created_at.astimezone(dt.UTC).isoformat(),
    }


def corrected_answer_json(
    turn: Turn, versions: list[CorrectedAnswer]
) -> dict[str, Any]:
    """A turn's answer beside its corrected one: the agent's, the newest correction (None:
    none yet) with who and when, the word diff between them and every version, oldest first."""
    agent = turn.response or ""
    latest = versions[-1] if versions else None
    return {
        "turn_id": turn.engine_id,
        "turn_index": turn.index,
        "agent_answer": agent,
        **(
            _version_json(latest)
            if latest
            else {"text": None, "by": None, "created_at": None}
        ),
        "diff": [p.model_dump() for p in word_diff(agent, latest.text)]
        if latest
        else [],
        "versions": [_version_json(v) for v in versions],
    }


def answered_turns(task: Task) -> list[dict[str, Any]]:
    """Every answered turn of `task` with its corrected answer, in turn order (two queries)."""
    turns = list(
        Turn.objects.filter(
            task=task, deleted_at__isnull=True, response__isnull=False
        ).order_by("index")
    )
    versions: dict[int, list[CorrectedAnswer]] = {t.pk: [] for t in turns}
    rows = CorrectedAnswer.objects.filter(turn__in=turns).select_related("author")
    for row in rows.order_by("created_at", "pk"):
        versions[row.turn_id].append(row)
    return [corrected_answer_json(t, versions[t.pk]) for t in turns]


def answer_of(task: Task, turn_id: str) -> dict[str, Any] | None:
    """One answered turn of `task` with its corrected answer; None if it has no such turn."""
    return next((a for a in answered_turns(task) if a["turn_id"] == turn_id), None)


# --- which notebooks have corrections (the traces list's filter and counts) -------------------

# the traces list's `corrected` filter: a person's edit, a rejection, a corrected answer, any
CORRECTED_FILTERS = ("any", "edit", "rejection", "answer")
_EDITS = (HumanActionKind.EDITED_INPUT.value, HumanActionKind.EDITED_ARGUMENTS.value)


def _edit_events() -> QuerySet[Event]:
    """Edits of an input or of a call's arguments; an answer to a question (an edit of the
    input of the `human_input` step that takes it) is not an edit."""
    asked = Event.objects.filter(
        task_id=OuterRef("task_id"),
        type="step_created",
        step_id=OuterRef("step_id"),
        payload__kind="human_input",
    )
    return Event.objects.filter(
        type="human_action", payload__action__in=_EDITS
    ).exclude(Exists(asked))


def _rejection_events() -> QuerySet[Event]:
    return Event.objects.filter(
        type="human_action", payload__action=HumanActionKind.REJECTED_CALL.value
    )


def with_correction(tasks: QuerySet[Task], which: str) -> QuerySet[Task]:
    """The notebooks of `tasks` with a correction of that kind (CORRECTED_FILTERS); ValueError
    names an unknown one."""
    if which not in CORRECTED_FILTERS:
        raise ValueError(f"corrected: expected one of {', '.join(CORRECTED_FILTERS)}")
    edit = Exists(_edit_events().filter(task=OuterRef("pk")))
    rejection = Exists(_rejection_events().filter(task=OuterRef("pk")))
    answer = Exists(CorrectedAnswer.objects.filter(task=OuterRef("pk")))
    wanted = {
        "edit": Q(edit),
        "rejection": Q(rejection),
        "answer": Q(answer),
        "any": Q(edit) | Q(rejection) | Q(answer),
    }[which]
    return tasks.filter(wanted)


def correction_counts(pks: list[int]) -> dict[int, dict[str, int]]:
    """Per notebook pk (of those with any): its `edits`, `rejections` and `corrected_answers`
    (turns with one), in three aggregate queries."""
    counts: dict[int, dict[str, int]] = {}

    def count(rows: QuerySet[Any], key: str, field: str = "pk") -> None:
        for pk, n in (
            rows.filter(task_id__in=pks)
            .values("task_id")
            .annotate(n=Count(field, distinct=True))
            .values_list("task_id", "n")
        ):
            counts.setdefault(
                pk, {"edits": 0, "rejections": 0, "corrected_answers": 0}
            )[key] = n

    count(_edit_events(), "edits")
    count(_rejection_events(), "rejections")
    count(CorrectedAnswer.objects.all(), "corrected_answers", "turn_id")
    return counts
