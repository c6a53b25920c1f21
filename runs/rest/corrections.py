"""A notebook's corrections for scripts, and its corrected answers.

`GET /notebooks/{id}/corrections`: what people corrected (runs.traces.corrections), derived
from the audit on every read. `GET`/`PUT /notebooks/{id}/turns/{turn_id}/corrected-answer`:
the answer a reviewer says the turn should have given, beside the agent's (each `PUT` keeps
the earlier versions). The notebook's owner and their group reviewers may do both; anyone
else gets a 404, as for a notebook that does not exist.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from asgiref.sync import sync_to_async
from django.http import HttpRequest
from ninja import Field, Path, Schema

from runs import service
from runs.models import Task
from runs.protocol import ErrorCode, ProtocolError
from runs.rest.reading import NOT_FOUND
from runs.rest.router import router
from runs.rest.schemas import ErrorOut, Input
from runs.traces.corrections import answer_of, corrections_of

TurnId = Annotated[str, Path(min_length=1, max_length=64)]


def reviewable(request: HttpRequest, pk: int) -> Task:
    """Notebook `pk` if the caller may review it (its owner or a group reviewer), else 404."""
    return service.reviewable_notebook(request.auth.pk, pk)  # type: ignore[attr-defined]


class DiffPartOut(Schema):
    """A run of words both answers have (`same`), only the corrected one (`added`) or only the
    agent's (`removed`); plain text, whitespace kept."""

    op: Literal["same", "added", "removed"]
    text: str


class CorrectionOut(Schema):
    """One correction with who and when: an edit (`before` → `after`: a step's input text, or a
    call's arguments), a rejected call (`reason`), an undo, an answer to a question
    (`question`, `after`), an annotation (`rating`, `note`, `target`) or a corrected answer
    (`before` the agent's, `after` the newest version, `diff`, `versions`)."""

    kind: Literal[
        "edited_input",
        "edited_arguments",
        "rejected_call",
        "undone",
        "answered_question",
        "annotation",
        "corrected_answer",
    ]
    by: str
    at: str = Field(description="ISO 8601, UTC")
    turn_id: str | None = None
    step_id: str | None = None
    tool_id: str | None = None
    tool_name: str | None = None
    before: Any = None
    after: Any = None
    reason: str | None = None
    automatic: str | None = Field(
        None, description="taken by the server on the person's behalf, and why"
    )
    question: str | None = None
    rating: int | None = Field(None, description="an annotation's: 1, -1 or 0")
    note: str | None = None
    target: Literal["step", "call", "answer"] | None = None
    seq: int | None = Field(None, description="the audit event's place in the log")
    versions: int | None = None
    diff: list[DiffPartOut] | None = None


class AnswerVersionOut(Schema):
    """One version of a corrected answer: its text, who wrote it and when."""

    text: str
    by: str
    created_at: str


class CorrectedAnswerOut(Schema):
    """A turn's answer beside the one a reviewer says it should have given: the newest version
    (null `text`: none yet), the word diff against the agent's, and every version."""

    turn_id: str
    turn_index: int
    agent_answer: str
    text: str | None
    by: str | None
    created_at: str | None
    diff: list[DiffPartOut]
    versions: list[AnswerVersionOut] = Field(description="oldest first")


class CorrectedAnswerIn(Input):
    """The answer the turn should have given (kept beside the agent's; a new version of any
    earlier one)."""

    text: str = Field(min_length=1, max_length=service.MAX_CORRECTED_ANSWER_CHARS)


@router.get(
    "/notebooks/{int:pk}/corrections",
    tags=["review"],
    response={200: list[CorrectionOut], **NOT_FOUND},
)
def list_corrections(request: HttpRequest, pk: int) -> list[dict[str, Any]]:
    """What people corrected: the audit's edits, rejections, undos and answers in the log's
    order, then the annotations, then each turn's corrected answer (newest version)."""
    return [c.model_dump() for c in corrections_of(reviewable(request, pk))]


def _answer(task: Task, turn_id: str) -> dict[str, Any]:
    answer = answer_of(task, turn_id)
    if answer is None:
        raise ProtocolError(
            ErrorCode.NOT_FOUND, f"Turn {turn_id!r} has no answer in this notebook."
        )
    return answer


@router.get(
    "/notebooks/{int:pk}/turns/{turn_id}/corrected-answer",
    tags=["review"],
    response={200: CorrectedAnswerOut, **NOT_FOUND},
)
def get_corrected_answer(
    request: HttpRequest, pk: int, turn_id: TurnId
) -> dict[str, Any]:
    """The turn's answer and its corrected answer, with every version; 404 for a turn that
    has no answer."""
    return _answer(reviewable(request, pk), turn_id)


def _correct(
    request: HttpRequest, pk: int, turn_id: str, body: CorrectedAnswerIn
) -> dict[str, Any]:
    task = reviewable(request, pk)
    service.correct_answer(task, request.auth, turn_id, body.text)  # type: ignore[attr-defined]
    return _answer(task, turn_id)


@router.put(
    "/notebooks/{int:pk}/turns/{turn_id}/corrected-answer",
    tags=["review"],
    response={200: CorrectedAnswerOut, **NOT_FOUND, 422: ErrorOut},
)
async def correct_turn_answer(
    request: HttpRequest, pk: int, turn_id: TurnId, body: CorrectedAnswerIn
) -> dict[str, Any]:
    """Write the answer the turn should have given: a new version beside the agent's answer,
    which is never changed (the same text as the newest version stores nothing)."""
    return await sync_to_async(_correct)(request, pk, turn_id, body)
