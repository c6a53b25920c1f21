"""What the page offers a reviewer, for scripts: fork a notebook at a step, compare two
notebooks, list and add annotations, download a tool call's table as CSV.

The same functions as the page's endpoints (runs.service.fork_notebook, runs.traces.compare,
runs.traces.annotations, runs.traces.results) with the REST API's rules: someone else's notebook is a 404, input that
does not fit a 422 naming the field, a state that does not allow it a 409.
"""

from __future__ import annotations

from typing import Any, Literal

from asgiref.sync import sync_to_async
from django.http import HttpRequest, StreamingHttpResponse
from ninja import Field, Query, Schema, Status

from runs.models import Step
from runs.protocol import ErrorCode, ProtocolError
from runs.rest.reading import NOT_FOUND, notebook_detail, own_notebook
from runs.rest.router import router
from runs.rest.schemas import ErrorOut, Input, NotebookDetail, StepId, ToolId
from runs.service import fork_notebook, llm_settings
from runs.service.surfaces import ForkError
from runs.traces.annotations import (
    MAX_COMMENT_CHARS,
    NewAnnotation,
    add_annotation,
    annotation_json,
    annotations_of,
)
from runs.traces.compare import compare_notebooks
from runs.traces.results import (
    BadSort,
    NotTabular,
    csv_download_headers,
    csv_stream,
    csv_writer,
    find_result,
)


class ForkIn(Input):
    """Where to fork a notebook: a completed step, the new notebook being the old one right
    after it."""

    step_id: str = Field(
        min_length=1,
        max_length=64,
        description="a completed step: the fork is the notebook as it stood right after it",
    )


@router.post(
    "/notebooks/{int:pk}/fork",
    tags=["review"],
    response={201: NotebookDetail, **NOT_FOUND, 409: ErrorOut, 429: ErrorOut},
)
def fork_notebook_at(request: HttpRequest, pk: int, body: ForkIn) -> Status[Any]:
    """A new notebook of yours: this one as it stood right after the step. Nothing runs in it
    until you act (a turn that went on waits in step mode). 429 `rate_limited` (with
    Retry-After) past the forks one person may make a minute, 409 `quota_exceeded` past the
    forks one person may keep."""
    task = own_notebook(request, pk)
    if not Step.objects.filter(task=task, step_id=body.step_id).exists():
        raise ProtocolError(ErrorCode.NOT_FOUND, "No such notebook or step.")
    try:
        fork = fork_notebook(task.pk, body.step_id)
    except ForkError as exc:
        raise ProtocolError(ErrorCode.NOT_ALLOWED, str(exc)) from None
    return Status(201, notebook_detail(fork))


class AnnotationOut(Schema):
    """A person's rating and comment on a step, a tool call or an answer."""

    id: int
    target: Literal["step", "call", "answer"]
    turn_id: str | None
    step_id: str | None
    tool_id: str | None
    rating: Literal[-1, 0, 1]
    comment: str
    by: str
    created_at: str


class AnnotationIn(Input):
    """Rate or comment on a step, a tool call or a turn's answer."""

    target: Literal["step", "call", "answer"]
    step_id: str = Field("", max_length=64, description="for a step or a call")
    tool_id: str = Field("", max_length=128, description="for a call")
    turn_id: str = Field("", max_length=64, description="for an answer")
    rating: Literal[-1, 0, 1] = Field(0, description="thumbs down, none, thumbs up")
    comment: str = Field("", max_length=MAX_COMMENT_CHARS)


@router.get(
    "/notebooks/{int:pk}/annotations/",
    tags=["review"],
    response={200: list[AnnotationOut], **NOT_FOUND},
)
def list_annotations(request: HttpRequest, pk: int) -> list[dict[str, Any]]:
    """The notebook's annotations (everyone's who may see it: its owner's), oldest first."""
    return annotations_of(own_notebook(request, pk))


@router.post(
    "/notebooks/{int:pk}/annotations/",
    tags=["review"],
    response={201: AnnotationOut, **NOT_FOUND, 409: ErrorOut},
)
def add_notebook_annotation(
    request: HttpRequest, pk: int, body: AnnotationIn
) -> Status[Any]:
    """A comment and/or a thumbs up or down on a step, a tool call or an answer; 409
    `quota_exceeded` when that step has as many as one may (AGENTUI_MAX_ANNOTATIONS_PER_STEP)."""
    task = own_notebook(request, pk)
    new = NewAnnotation.model_validate(body.dict())
    try:
        note = add_annotation(task, request.auth, new)  # type: ignore[attr-defined]
    except ValueError as exc:
        raise ProtocolError(ErrorCode.INVALID_INPUT, str(exc)) from None
    return Status(201, annotation_json(note))


# Any notebook id a database holds (a larger one is a 422, not a database error).
MAX_ID = 2**31 - 1
CSV = {"text/csv": {"schema": {"type": "string"}}}


@router.get(
    "/notebooks/{int:pk}/steps/{step_id}/tool-calls/{tool_id}/result.csv",
    tags=["review"],
    response={200: None, **NOT_FOUND, 409: ErrorOut, 422: ErrorOut},
    openapi_extra={"responses": {200: {"description": "the table", "content": CSV}}},
)
async def tool_call_csv(
    request: HttpRequest,
    pk: int,
    step_id: StepId,
    tool_id: ToolId,
    sort: int | None = Query(  # type: ignore[type-arg]
        None, ge=0, le=999_999, description="sort by this column (its index, from 0)"
    ),
    order: Literal["asc", "desc"] = "asc",
) -> StreamingHttpResponse:
    """A tool call's table as CSV, every row (a SQL query runs again without the model's row
    cap), streamed within the export's caps (`X-Export-Limits`); a download cut short ends
    with a `# cut after N rows: why` line. With `sort` the rows come sorted by that column as
    the page sorts a table (numbers by value before text, text with its numbers by value,
    empty cells last, ties in the table's order). 409 for a call whose result is not a
    table, 422 for a `sort` past its last column."""
    task = await sync_to_async(own_notebook)(request, pk)
    payload = await sync_to_async(find_result)(task, step_id, tool_id)
    if payload is None:
        raise ProtocolError(ErrorCode.NOT_FOUND, "No such tool call in this notebook.")
    try:
        wanted = None if sort is None else (sort, order == "desc")
        writer = await sync_to_async(csv_writer)(payload, wanted)
    except BadSort as exc:
        raise ProtocolError(ErrorCode.INVALID_INPUT, str(exc)) from None
    except NotTabular as exc:
        raise ProtocolError(ErrorCode.NOT_ALLOWED, str(exc)) from None
    return StreamingHttpResponse(
        csv_stream(writer),
        content_type="text/csv; charset=utf-8",
        headers=csv_download_headers(task.pk, payload, tool_id),
    )


class CompareCall(Schema):
    """One tool call on one side of a comparison, with whether the other side's call at its
    place differs."""

    name: str
    args: str = Field(description="the arguments as JSON, keys sorted")
    result: str = Field(description="what the call returned ('' if it has not run)")
    output_name: str | None = Field(
        default=None,
        description="a Chain of Abstraction's name for the result (`y2`), used by the "
        "reasoning's placeholders `[FUNC name(args) = y2]`; null for other calls",
    )
    args_differ: bool = Field(description="the other side's call at this place differs")
    result_differs: bool


class CompareStep(Schema):
    """One step on one side of a comparison: its kind, status, input, calls, output and tokens."""

    kind: str
    status: str
    input: str
    calls: list[CompareCall]
    output: str
    tokens: int


class CompareText(Schema):
    """A turn's message or answer on one side of a comparison."""

    text: str


class CompareRow(Schema):
    """One aligned place of two notebooks (a turn's message, one of its steps, or its answer),
    both sides and what differs."""

    kind: Literal["turn", "step", "answer"] = Field(
        description="a turn's message, one of its steps, or its answer"
    )
    turn: int = Field(description="the turn's number, from 1")
    step: int | None = Field(description="for a step: its number in the turn, from 1")
    differs: bool
    different: list[str] = Field(
        description="what differs: status, input, calls, output; 'step' for a step only "
        "one side has; turn or answer for those rows"
    )
    pair: list[CompareStep | CompareText | None] = Field(
        description="side a, side b; null where that side has no such turn or step"
    )


class CompareTotals(Schema):
    """One side's totals: steps, tool calls, tokens, cost and wall time."""

    steps: int
    tool_calls: int
    tokens: int
    cost_usd: float | None
    wall_time_s: float


class CompareSide(Schema):
    """One of the two notebooks compared, where it was forked from, and its totals."""

    id: int
    title: str
    agent: str
    status: str
    forked_from: int | None
    fork_turn: int | None
    fork_step: int | None
    totals: CompareTotals


class CompareFirst(Schema):
    """Where two notebooks first differ: the turn and step, from 1."""

    turn: int
    step: int


class CompareSummary(Schema):
    """How much of two notebooks lines up and differs, in numbers and in the sentence the page
    shows."""

    steps: int = Field(description="aligned steps")
    differing: int
    first: CompareFirst | None = Field(
        description="the first aligned step that differs"
    )
    text: str = Field(description="the sentence the compare page shows")


class CompareOut(Schema):
    """Two notebooks side by side, step by step (a fork and its original, say)."""

    sides: list[CompareSide]
    rows: list[CompareRow]
    summary: CompareSummary


class CompareQuery(Schema):
    """The two notebooks to compare."""

    a: int = Field(ge=1, le=MAX_ID, description="one of your notebooks")
    b: int = Field(
        ge=1, le=MAX_ID, description="another (or the same) notebook of yours"
    )


@router.get(
    "/compare",
    tags=["review"],
    response={200: CompareOut, **NOT_FOUND},
)
def compare_two_notebooks(
    request: HttpRequest, query: Query[CompareQuery]
) -> dict[str, Any]:
    """Two of your notebooks side by side, as the compare page shows them: turns paired by
    index, their steps by number; what differs marked; totals for each. Texts longer than
    4,000 characters are clipped (compared whole)."""
    a, b = own_notebook(request, query.a), own_notebook(request, query.b)
    return compare_notebooks(a, b, llm_settings(start_demo=False).model)
