"""Read endpoints: notebooks (with the traces page's filters), turns, steps, events, the trace.

Lists are pages: `page` (from 1) and `page_size` (1..100) in, `{items, count, page, pages,
page_size}` out. Only the caller's notebooks exist here: any other id is a 404.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any, Generic, Literal, TypeVar

from asgiref.sync import sync_to_async
from django.db.models import Count, QuerySet
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404
from ninja import Field, Query, Schema
from pydantic import ConfigDict

from runs import service
from runs.models import Event, ModelPrice, NotebookStatus, Step, Task, TurnStatus
from runs.protocol import ErrorCode, ProtocolError
from runs.protocol.wire import api_value_url, bounded
from runs.rest.router import router
from runs.rest.schemas import (
    ErrorOut,
    EventOut,
    NotebookDetail,
    NotebookOut,
    StepOut,
    TurnOut,
)
from runs.service import is_held, llm_settings
from runs.traces.export import (
    filtered_notebooks,
    model_of,
    notebook_summary,
    price_of,
    step_json,
    trace_head,
    trace_stream,
    turn_json,
    turn_usages,
)
from runs.traces.summary import summaries
from runs.traces.values import NoValue, download, event_value, parse_path

T = TypeVar("T")
MAX_PAGE_SIZE = 100
# Far past any list's end, and small enough that the row offset fits every database's integer.
MAX_PAGE = 1_000_000
MAX_SEQ = 2**31
MAX_WAIT_S = 60.0
WAIT_POLL_S = 0.1
NOT_FOUND: dict[int | tuple[int, ...], Any] = {404: ErrorOut}


PAGE_DESCRIPTION = "One page of a list, with how many items and pages there are in all."


class Page(Schema, Generic[T]):
    """One page of a list, with how many items and pages there are in all."""

    # a parametrized page (Page[StepOut]) is a class of its own, without this docstring
    model_config = ConfigDict(json_schema_extra={"description": PAGE_DESCRIPTION})

    items: list[T]
    count: int
    page: int
    pages: int
    page_size: int


class Paging(Schema):
    """Which page of a list to return, and how many items a page holds."""

    page: int = Field(
        1, ge=1, le=MAX_PAGE, description="from 1; past the end: no items"
    )
    page_size: int = Field(20, ge=1, le=MAX_PAGE_SIZE)


def _page(rows: QuerySet[Any], paging: Paging) -> tuple[list[Any], dict[str, int]]:
    count = rows.count()
    start = (paging.page - 1) * paging.page_size
    items = list(rows[start : start + paging.page_size])
    pages = max(1, math.ceil(count / paging.page_size))
    return items, {
        "count": count,
        "page": paging.page,
        "pages": pages,
        "page_size": paging.page_size,
    }


def value_path(pk: int, seq: int, path: list[Any]) -> str:
    """The REST URL of one value of a stored event (`get_event_value`)."""
    return api_value_url(pk, seq, tuple(path))


def wire_event(pk: int, seq: int, payload: dict[str, Any]) -> dict[str, Any]:
    """An event as REST answers carry it: cut when large, as a socket's (runs.protocol.wire),
    each cut naming the REST URL of its value whole (`truncated[].url`)."""
    shown = bounded(payload, pk, seq)
    if "truncated" not in shown:
        return shown
    cuts = [{**c, "url": value_path(pk, seq, c["path"])} for c in shown["truncated"]]
    return {**shown, "truncated": cuts}


def own_notebook(request: HttpRequest, pk: int) -> Task:
    """The caller's notebook `pk`; 404 for one that is someone else's or does not exist."""
    task: Task = get_object_or_404(Task, pk=pk, owner=request.auth)  # type: ignore[attr-defined]
    return task


def _model() -> str:
    """The model whose price costs the usage shown (the configured one)."""
    return llm_settings(start_demo=False).model


def _with_summaries(tasks: list[Task]) -> list[dict[str, Any]]:
    sizes = summaries(tasks, _model())
    return [{**notebook_summary(task), **sizes[task.pk]} for task in tasks]


# --- notebooks -----------------------------------------------------------------------------


# what the filters take, as the schema says it: empty (any), a date or a date and time
_WHEN: dict[str, Any] = {
    "anyOf": [{"const": ""}, {"format": "date"}, {"format": "date-time"}]
}


class NotebookFilters(Schema):
    """Which notebooks to list: by words, agent, status, mode, corrections and creation time;
    empty: any."""

    q: str = Field("", description="words in the title, a message or a note")
    agent: str = ""
    status: Literal["", "idle", "running", "waiting", "failed", "interrupted"] = ""
    mode: Literal["", "auto", "step", "tools"] = ""
    corrected: Literal["", "any", "edit", "rejection", "answer"] = Field(
        "",
        description="only notebooks a person corrected: by an edit of an input or of a call's "
        "arguments, a rejected call, a corrected answer, or any of them",
    )
    created_after: str = Field(
        "", description="YYYY-MM-DD or an ISO datetime", json_schema_extra=_WHEN
    )
    created_before: str = Field(
        "", description="YYYY-MM-DD or an ISO datetime", json_schema_extra=_WHEN
    )


@router.get(
    "/notebooks/", tags=["read"], response={200: Page[NotebookOut], 422: ErrorOut}
)
def list_notebooks(
    request: HttpRequest,
    filters: Query[NotebookFilters],
    paging: Query[Paging],
) -> dict[str, Any]:
    """Your notebooks, newest first, filtered as on the traces page."""
    try:
        rows = filtered_notebooks(request.auth, filters.dict())  # type: ignore[attr-defined]
    except ValueError as exc:
        raise ProtocolError(ErrorCode.INVALID_INPUT, str(exc)) from None
    items, meta = _page(rows.annotate(turn_count=Count("turns")), paging)
    return {"items": _with_summaries(items), **meta}


def notebook_detail(task: Task) -> dict[str, Any]:
    """A notebook with what a script needs to act next: settled, the waiting steps."""
    task.refresh_from_db()
    task.turn_count = task.turns.count()  # type: ignore[attr-defined]
    active = service.notebook_view(task.pk).active
    waiting = (
        Step.objects.filter(turn_id=active.pk, queue_position__isnull=False).order_by(
            "queue_position"
        )
        if active is not None
        else Step.objects.none()
    )
    response = (
        task.turns.filter(status=TurnStatus.COMPLETED)
        .order_by("-index")
        .values_list("response", flat=True)
        .first()
    )
    return {
        **_with_summaries([task])[0],
        "last_seq": task.last_seq,
        "settled": task.status != NotebookStatus.RUNNING and not is_held(task.pk),
        "active_turn": active.engine_id if active else None,
        "mcp_tools": list(task.mcp_tools or []),
        "model": task.model,
        "tools": task.tools,
        "data_tables": task.data_tables,
        "waiting": [
            {
                "step_id": s.step_id,
                "kind": s.kind,
                "status": s.status,
                "input": s.input,
                "tool_calls": s.tool_calls,
                # it waits because a budget was reached: which, and the reason
                "budget": service.budget_wait(s.step_id),
            }
            for s in waiting
        ],
        "budget": service.budget_of(task, active.engine_id if active else None),
        "response": response,
    }


@router.get(
    "/notebooks/{int:pk}", tags=["read"], response={200: NotebookDetail, **NOT_FOUND}
)
def get_notebook(request: HttpRequest, pk: int) -> dict[str, Any]:
    """One notebook: its status, summary, whether it has settled and which steps wait."""
    return notebook_detail(own_notebook(request, pk))


@router.get(
    "/notebooks/{int:pk}/wait",
    tags=["read"],
    response={200: NotebookDetail, **NOT_FOUND},
)
async def wait_for_notebook(
    request: HttpRequest,
    pk: int,
    timeout: float = Query(30.0, ge=0, le=MAX_WAIT_S),  # type: ignore[type-arg]
) -> dict[str, Any]:
    """Answer once the notebook has settled (nothing runs; the next action can be sent), or
    after `timeout` seconds with `settled` false: a script waits here instead of polling."""
    task = await sync_to_async(own_notebook)(request, pk)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        detail = await sync_to_async(notebook_detail)(task)
        if detail["settled"] or loop.time() >= deadline:
            return detail
        await asyncio.sleep(WAIT_POLL_S)


@router.get(
    "/notebooks/{int:pk}/trace",
    tags=["read"],
    response={200: dict[str, Any], **NOT_FOUND},
    openapi_extra={"description": "The same JSON as the trace page's export."},
)
async def get_trace(request: HttpRequest, pk: int) -> StreamingHttpResponse:
    """The notebook's whole trace: turns, steps, messages, notes, every event, results."""
    task = await sync_to_async(own_notebook)(request, pk)
    head = await sync_to_async(trace_head)(task, _model())
    return StreamingHttpResponse(
        trace_stream(task, head), content_type="application/json"
    )


# --- turns, steps, events --------------------------------------------------------------------


@router.get(
    "/notebooks/{int:pk}/turns/",
    tags=["read"],
    response={200: Page[TurnOut], **NOT_FOUND},
)
def list_turns(request: HttpRequest, pk: int, paging: Query[Paging]) -> dict[str, Any]:
    """The notebook's turns (one per message sent), oldest first."""
    task = own_notebook(request, pk)
    items, meta = _page(task.turns.order_by("index"), paging)
    usages = turn_usages([t.pk for t in items], price_of(model_of(task, _model())))
    return {"items": [{**turn_json(t), "usage": usages[t.pk]} for t in items], **meta}


class StepFilters(Schema):
    """Which steps to list: one turn's, by status or kind; empty: any."""

    turn: str = Field("", description="a turn's id: only its steps")
    status: Literal[
        "", "pending", "running", "completed", "failed", "undone", "interrupted"
    ] = ""
    kind: Literal["", "llm", "tool_calls", "plan"] = ""


def _steps(task: Task) -> QuerySet[Step]:
    return (
        Step.objects.filter(task=task)
        .select_related("turn")
        .prefetch_related("out_edges__to_step", "in_edges__from_step")
        .order_by("turn__index", "created_at", "pk")
    )


def _step_out(step: Step, price: ModelPrice | None) -> dict[str, Any]:
    return {
        **step_json(step, price),
        "turn": step.turn.engine_id,
        "queued": step.queue_position is not None,
    }


@router.get(
    "/notebooks/{int:pk}/steps/",
    tags=["read"],
    response={200: Page[StepOut], **NOT_FOUND},
)
def list_steps(
    request: HttpRequest,
    pk: int,
    filters: Query[StepFilters],
    paging: Query[Paging],
) -> dict[str, Any]:
    """The notebook's steps in the order they were made, undone ones included."""
    task = own_notebook(request, pk)
    rows = _steps(task)
    if filters.turn:
        rows = rows.filter(turn__engine_id=filters.turn)
    if filters.status:
        rows = rows.filter(status=filters.status)
    if filters.kind:
        rows = rows.filter(kind=filters.kind)
    items, meta = _page(rows, paging)
    price = price_of(model_of(task, _model()))
    return {"items": [_step_out(s, price) for s in items], **meta}


@router.get(
    "/notebooks/{int:pk}/steps/{step_id}",
    tags=["read"],
    response={200: StepOut, **NOT_FOUND},
)
def get_step(request: HttpRequest, pk: int, step_id: str) -> dict[str, Any]:
    """One step of the notebook."""
    task = own_notebook(request, pk)
    step = get_object_or_404(_steps(task), step_id=step_id)
    return _step_out(step, price_of(model_of(task, _model())))


class EventFilters(Schema):
    """Which events to list: after a seq, of a type, of a step or of a turn; empty: any."""

    after: int = Field(0, ge=0, le=MAX_SEQ, description="only events with a larger seq")
    type: str = Field("", description="e.g. human_action, tool_call_result")
    step_id: str = ""
    turn: str = Field("", description="a turn's id: only its events")


@router.get(
    "/notebooks/{int:pk}/events/",
    tags=["read"],
    response={200: Page[EventOut], **NOT_FOUND},
)
def list_events(
    request: HttpRequest,
    pk: int,
    filters: Query[EventFilters],
    paging: Query[Paging],
) -> dict[str, Any]:
    """The notebook's stored events by seq (docs/protocol.md says what each means)."""
    rows = Event.objects.filter(
        task=own_notebook(request, pk), seq__gt=filters.after
    ).order_by("seq")
    if filters.type:
        rows = rows.filter(type=filters.type)
    if filters.step_id:
        rows = rows.filter(step_id=filters.step_id)
    if filters.turn:
        rows = rows.filter(turn__engine_id=filters.turn)
    items, meta = _page(rows.select_related("turn"), paging)
    events = [
        {
            "seq": e.seq,
            "type": e.type,
            "step_id": e.step_id,
            "turn": e.turn.engine_id if e.turn else None,
            "at": e.at,
            "event": wire_event(pk, e.seq, e.payload),
        }
        for e in items
    ]
    return {"items": events, **meta}


VALUE = {
    "text/plain": {"schema": {"type": "string"}},
    "application/json": {"schema": {}},
}


@router.get(
    "/notebooks/{int:pk}/events/{int:seq}/value",
    tags=["read"],
    response={200: None, **NOT_FOUND, 422: ErrorOut},
    openapi_extra={
        "responses": {200: {"description": "the value, whole", "content": VALUE}}
    },
)
def get_event_value(
    request: HttpRequest,
    pk: int,
    seq: int,
    path: str = Query(  # type: ignore[type-arg]
        "[]",
        # paths are a few keys deep; a URL past ~16 KB is dropped by daphne without an answer
        max_length=512,
        description="a JSON list of keys and indices, as the event's `cut` names it",
    ),
) -> HttpResponse:
    """One value of a stored event, whole: an event larger than a socket or page carries is
    cut to a preview, and its `cut` list names each value's path (and this URL). A text
    comes as `text/plain`, anything else as JSON."""
    task = own_notebook(request, pk)
    try:
        where = parse_path(path)
    except ValueError as exc:
        raise ProtocolError(ErrorCode.INVALID_INPUT, str(exc)) from None
    try:
        value = event_value(task, seq, where)
    except NoValue as exc:
        raise ProtocolError(ErrorCode.NOT_FOUND, str(exc)) from None
    return download(task, seq, where, value)
