"""HTTP endpoints of the notebook service: start a notebook, list notebooks, export a trace.

Owner only everywhere: someone else's notebook is a 404, like one that does not exist.
`new_task` is an async view, so under ASGI the first turn's steps run in the server's event
loop like those started from a websocket.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections.abc import AsyncIterator
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth.models import AbstractBaseUser
from django.core.paginator import EmptyPage, Paginator
from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import Count, Exists, OuterRef, Q, QuerySet, TextField
from django.db.models.functions import Cast
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.utils.dateparse import parse_date, parse_datetime
from django.views.decorators.http import require_GET, require_POST

from runs import service
from runs.annotations import annotations_of
from runs.live.wire import WIRE_EVENT_BYTES, bounded
from runs.models import (
    Annotation,
    ApprovalMode,
    Event,
    Message,
    NotebookStatus,
    Step,
    Task,
    Turn,
)
from runs.page_views import render_new_notebook
from runs.presets import all_presets, get_preset
from runs.protocol import MAX_TEXT_CHARS, ErrorCode, ProtocolError
from runs.results import NotTabular, csv_text, find_result, full_table, result_items
from runs.text_checks import storable_problem
from runs.trace_summary import summaries

PAGE_SIZE = 20
EXPORT_BATCH = 500  # events read and sent at a time by the trace export
MAX_PAGE_SIZE = 100


@require_POST
async def new_task(request: HttpRequest) -> HttpResponse:
    """`POST /tasks/new` (form: text, agent, mode): create a notebook, start it, go to its page."""
    user = await request.auser()
    text = (request.POST.get("text") or "").strip()
    agent = request.POST.get("agent") or (
        all_presets()[0].name if all_presets() else ""
    )
    mode = str(request.POST.get("mode") or ApprovalMode.AUTO)
    images = _image_ids(request.POST.get("images") or "")
    if images is None:
        return await _refused(
            request,
            text,
            agent,
            mode,
            "The attached images could not be read; attach them again.",
        )
    if not text or len(text) > MAX_TEXT_CHARS:
        return await _refused(
            request,
            text,
            agent,
            mode,
            f"The message must be 1 to {MAX_TEXT_CHARS} characters.",
        )
    for name, value in (("message", text), ("agent", agent), ("mode", mode)):
        problem = storable_problem(value)
        if problem is not None:
            shown = text.replace("\x00", "")
            shown = shown.encode("utf-8", "replace").decode("utf-8")
            return await _refused(request, shown, agent, mode, f"The {name} {problem}.")
    try:
        preset = get_preset(agent)
        if images and not (preset and preset.accepts_images):
            raise ProtocolError(
                ErrorCode.INVALID_INPUT,
                "This agent does not take images; pick Vision ReAct.",
            )
        task = await service.create_notebook(user, text, agent, mode, images)
    except ProtocolError as exc:
        return await _refused(request, text, agent, mode, exc.reason)
    return redirect("runs:notebook", task.pk)


def _image_ids(raw: str) -> list[int] | None:
    """The comma-separated upload ids of the form's `images` field; None when malformed."""
    try:
        return [int(part) for part in raw.split(",") if part.strip()]
    except ValueError:
        return None


async def _refused(
    request: HttpRequest, text: str, agent: str, mode: str, reason: str
) -> HttpResponse:
    """The form again, as it was sent, with the reason: a refused submission loses nothing."""
    return await sync_to_async(render_new_notebook)(
        request, text, agent, mode, error=reason, status=400
    )


# --- listing ----------------------------------------------------------------------------------


def _day_bound(raw: str, end: bool) -> dt.datetime | None:
    moment = parse_datetime(raw)
    if moment is None:
        day = parse_date(raw)
        if day is None:
            return None
        moment = dt.datetime.combine(day, dt.time.max if end else dt.time.min)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment


def filtered_notebooks(
    user: AbstractBaseUser, params: dict[str, str]
) -> QuerySet[Task]:
    """`user`'s notebooks matching the traces page's filters, newest first; ValueError names
    a malformed filter. Shared by /api/tasks/ and the REST API."""
    tasks = Task.objects.filter(owner=user)
    q = params.get("q", "").strip()
    if q:
        in_messages = Message.objects.filter(task=OuterRef("pk"), content__icontains=q)
        in_turns = Turn.objects.filter(task=OuterRef("pk"), input__icontains=q)
        in_notes = Annotation.objects.filter(task=OuterRef("pk"), comment__icontains=q)
        tasks = tasks.filter(
            Q(title__icontains=q)
            | Exists(in_messages)
            | Exists(in_turns)
            | Exists(in_notes)
        )
    if params.get("agent"):
        tasks = tasks.filter(agent=params["agent"])
    if params.get("status"):
        tasks = tasks.filter(status=params["status"])
    if params.get("mode"):
        tasks = tasks.filter(mode=params["mode"])
    for name, lookup, end in (
        ("created_after", "created_at__gte", False),
        ("created_before", "created_at__lte", True),
    ):
        if params.get(name):
            bound = _day_bound(params[name], end)
            if bound is None:
                raise ValueError(
                    f"{name}: expected a date (YYYY-MM-DD) or an ISO datetime"
                )
            tasks = tasks.filter(**{lookup: bound})
    return tasks.order_by("-updated_at", "-pk")


def notebook_summary(task: Task) -> dict[str, Any]:
    """A notebook as the lists show it (the trace export's `task`)."""
    return {
        "id": task.pk,
        "title": str(task),
        "agent": task.agent,
        "mode": task.mode,
        "status": task.status,
        "created_at": task.created_at.isoformat(),
        "updated_at": task.updated_at.isoformat(),
        "turns": getattr(task, "turn_count", None),
        "url": reverse("runs:notebook", args=[task.pk]),
        "trace_url": reverse("runs:api_task_trace", args=[task.pk]),
        "forked_from": _fork_origin(task),
    }


def _fork_origin(task: Task) -> dict[str, Any] | None:
    """Where a fork came from: the source notebook (None if it is gone), turn and step."""
    if task.fork_turn_index is None:
        return None
    source = task.forked_from
    return {
        "id": source.pk if source else None,
        "title": str(source) if source else None,
        "url": reverse("runs:trace", args=[source.pk]) if source else None,
        "turn": task.fork_turn_index,
        "step": task.fork_step_number,
    }


def _int(raw: str | None, default: int, low: int, high: int) -> int:
    try:
        value = int(raw) if raw else default
    except ValueError:
        raise ValueError(f"expected a whole number, got {raw!r}") from None
    return max(low, min(high, value))


@require_GET
def task_list(request: HttpRequest) -> JsonResponse:
    """`GET /api/tasks/`: the user's notebooks; q (title and messages), agent, status, mode,
    created_after / created_before (dates), page, page_size."""
    params = {key: request.GET.get(key, "") for key in request.GET}
    try:
        size = _int(params.get("page_size"), PAGE_SIZE, 1, MAX_PAGE_SIZE)
        number = _int(params.get("page"), 1, 1, 10**6)
        tasks = filtered_notebooks(request.user, params)
    except ValueError as exc:
        return JsonResponse({"error": str(exc)}, status=400)
    paginator = Paginator(
        tasks.annotate(turn_count=Count("turns")).select_related("forked_from"), size
    )
    try:
        page = paginator.page(number)
    except EmptyPage:
        page = paginator.page(paginator.num_pages)
    sizes = summaries(page.object_list)
    return JsonResponse(
        {
            "results": [
                {**notebook_summary(task), **sizes[task.pk]}
                for task in page.object_list
            ],
            "page": page.number,
            "pages": paginator.num_pages,
            "count": paginator.count,
            "page_size": size,
            "statuses": NotebookStatus.values,
            "agents": [p.name for p in all_presets()],
        }
    )


@require_GET
def preset_list(request: HttpRequest) -> JsonResponse:
    """`GET /api/presets/`: the agent presets a notebook can use."""
    from runs.demo import demo_example_prompts

    examples: dict[str, str] = {}
    for example in demo_example_prompts():  # a preset's first example stands for it
        examples.setdefault(example.preset, example.prompt)
    return JsonResponse(
        {
            "presets": [
                {
                    "name": p.name,
                    "label": p.label,
                    "description": p.description,
                    "example": examples.get(p.name),
                }
                for p in all_presets()
            ],
            "modes": ApprovalMode.values,
        }
    )


# --- export -----------------------------------------------------------------------------------


def _usage(steps: list[Step]) -> dict[str, int]:
    totals = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    for step in steps:
        for key in totals:
            totals[key] += getattr(step, key) or 0
    return totals


def step_json(step: Step) -> dict[str, Any]:
    """A step as the trace export and the REST API show it (edges prefetched)."""
    return {
        "step_id": step.step_id,
        "kind": step.kind,
        "status": step.status,
        "original_input": step.original_input,
        "input": step.input,
        "tool_calls": step.tool_calls,
        "output": step.output,
        "sources": step.sources,
        "is_last": step.is_last,
        "error": step.error or None,
        "next_steps": [
            e.to_step.step_id for e in step.out_edges.all() if e.next_order is not None
        ],
        "prev_steps": [
            e.from_step.step_id for e in step.in_edges.all() if e.prev_order is not None
        ],
        "usage": {
            k: getattr(step, k)
            for k in ("prompt_tokens", "completion_tokens", "total_tokens")
        },
        "runs": step.runs,
        "created_at": step.created_at.isoformat(),
        "started_at": step.started_at.isoformat() if step.started_at else None,
        "ended_at": step.ended_at.isoformat() if step.ended_at else None,
    }


def turn_json(turn: Turn) -> dict[str, Any]:
    """A turn as the trace export and the REST API show it (without its steps)."""
    return {
        "id": turn.engine_id,
        "index": turn.index,
        "input": turn.input,
        "status": turn.status,
        "response": turn.response,
        "abandoned": turn.deleted_at is not None,
        "created_at": turn.created_at.isoformat(),
        "finished_at": turn.finished_at.isoformat() if turn.finished_at else None,
    }


def trace_head(task: Task) -> dict[str, Any]:
    """The export without its events and results: the notebook, its turns and steps, messages."""
    steps = list(
        Step.objects.filter(task=task)
        .prefetch_related("out_edges__to_step", "in_edges__from_step")
        .order_by("turn__index", "created_at", "pk")
    )
    by_turn: dict[int, list[Step]] = {}
    for step in steps:
        by_turn.setdefault(step.turn_id, []).append(step)
    turns = []
    for turn in task.turns.order_by("index"):
        turn_steps = by_turn.get(turn.pk, [])
        turns.append(
            {
                **turn_json(turn),
                "usage": _usage([s for s in turn_steps if s.status == "completed"]),
                "steps": [step_json(s) for s in turn_steps],
            }
        )
    messages = [
        {
            "position": m.position,
            "role": m.role,
            "content": m.content,
            "tool_calls": m.tool_calls,
            "tool_call_id": m.tool_call_id,
            "status": m.status,
            "turn": m.turn.engine_id if m.turn else None,
            "step": m.step.step_id if m.step else None,
        }
        for m in Message.objects.filter(task=task)
        .select_related("turn", "step")
        .order_by("position", "pk")
    ]
    return {
        "task": {**notebook_summary(task), "last_seq": task.last_seq},
        "turns": turns,
        "messages": messages,
        "annotations": annotations_of(task),
        "usage": _usage([s for s in steps if s.status == "completed"]),
    }


def _stored_events(
    task: Task, *, as_text: bool = False, **where: Any
) -> QuerySet[Event, tuple[int, Any]]:
    events = Event.objects.filter(task=task, **where).order_by("seq")
    if as_text:
        # The payload's JSON as the database holds it, to send on without decoding it and
        # encoding it again (most of an export's time in the server).
        return events.annotate(text=Cast("payload", TextField())).values_list(
            "seq", "text"
        )
    return events.values_list("seq", "payload")


def trace_json(task: Task) -> dict[str, Any]:
    """The notebook's whole trace: turns with their steps, messages, every stored event, usage."""
    head = trace_head(task)
    events = [{"seq": seq, "event": payload} for seq, payload in _stored_events(task)]
    return {
        "task": head["task"],
        "turns": head["turns"],
        "messages": head["messages"],
        "annotations": head["annotations"],
        "events": events,
        "results": result_items(events),
        "usage": head["usage"],
    }


async def _event_batches(
    task: Task, *, as_text: bool = False, **where: Any
) -> AsyncIterator[list[Any]]:
    """The notebook's stored (seq, payload) pairs, EXPORT_BATCH at a time, by seq (with
    `as_text`, each payload as its JSON text)."""
    after = 0
    while True:
        query = _stored_events(task, as_text=as_text, seq__gt=after, **where)[
            :EXPORT_BATCH
        ]
        batch = await sync_to_async(list)(query)
        if not batch:
            return
        yield batch
        after = batch[-1][0]


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, cls=DjangoJSONEncoder)


def _surely_small(text: str) -> bool:
    """Whether a stored event's JSON `text` is surely within what a socket carries whole: its
    compact ASCII form (what runs.live.wire measures) is at most this long, or 12 times this
    long where characters outside ASCII are escaped; half the limit leaves room for numbers."""
    return len(text) * (1 if text.isascii() else 12) <= WIRE_EVENT_BYTES // 2


def _cut_batch(task_pk: int, batch: list[Any]) -> list[str]:
    """Each (seq, JSON text) of `batch` as an export item, cut as sockets cut it: the stored text
    as it is when the event is surely small (most are), else decoded and cut."""
    return [
        f'{{"seq":{seq},"event":{text}}}'
        if _surely_small(text)
        else _dump({"seq": seq, "event": bounded(json.loads(text), task_pk, seq)})
        for seq, text in batch
    ]


async def trace_stream(
    task: Task, head: dict[str, Any], cut: bool = False, *, results: bool = True
) -> AsyncIterator[str]:
    """`trace_json` as text, produced piece by piece: the events are read in batches and
    never all held at once (a notebook's trace can be far larger than the server's memory).

    With `cut`, each event is as a socket carries it (runs.live.wire): what the trace page
    reads, so a huge tool output is a preview with a download link there too. Events are sent
    as the database's JSON text, not decoded and encoded again, unless they must be cut.
    Without `results`, the results section is empty (the trace page draws from the events)."""
    yield (
        f'{{"task":{_dump(head["task"])},"turns":{_dump(head["turns"])},'
        f'"messages":{_dump(head["messages"])},'
        f'"annotations":{_dump(head["annotations"])},"events":['
    )
    separator = ""
    async for batch in _event_batches(task, as_text=True):
        if cut:
            items = await asyncio.to_thread(_cut_batch, task.pk, batch)
        else:
            items = [f'{{"seq":{s},"event":{p}}}' for s, p in batch]
        yield separator + ",".join(items)
        separator = ","
    yield '],"results":['
    if results:
        separator = ""
        async for batch in _event_batches(task, type="tool_call_result"):
            items = result_items({"seq": s, "event": p} for s, p in batch)
            if items:
                yield separator + ",".join(_dump(item) for item in items)
                separator = ","
    yield f'],"usage":{_dump(head["usage"])}}}'


@require_GET
def task_trace(request: HttpRequest, pk: int) -> StreamingHttpResponse:
    """`GET /api/tasks/<pk>/trace.json`: the export of one of the user's notebooks (streamed);
    `?cut=1` cuts large values to previews with download links, as the trace page reads it;
    `?results=0` leaves the results section empty (the trace page does not read it)."""
    task = get_object_or_404(Task, pk=pk, owner=request.user)
    results = request.GET.get("results") != "0"
    response = StreamingHttpResponse(
        trace_stream(
            task,
            trace_head(task),
            cut=request.GET.get("cut") == "1",
            results=results,
        ),
        content_type="application/json",
    )
    response["Content-Disposition"] = (
        f'inline; filename="notebook-{task.pk}-trace.json"'
    )
    return response


@require_GET
def task_result_csv(request: HttpRequest, pk: int) -> HttpResponse:
    """`GET /api/tasks/<pk>/result.csv?step=<step_id>&call=<tool_id>`: a tool call's table as CSV,
    every row (a SQL query runs again without the model's row cap)."""
    task = get_object_or_404(Task, pk=pk, owner=request.user)
    step_id, tool_id = request.GET.get("step", ""), request.GET.get("call", "")
    payload = find_result(task, step_id, tool_id) if step_id and tool_id else None
    if payload is None:
        return JsonResponse(
            {"error": "no such tool call in this notebook (give step and call)"},
            status=404,
        )
    try:
        table = full_table(payload)
    except NotTabular as exc:
        return JsonResponse({"error": str(exc)}, status=409)
    response = HttpResponse(csv_text(table), content_type="text/csv; charset=utf-8")
    name = f"notebook-{task.pk}-{payload.get('tool_name', 'result')}-{tool_id}"
    response["Content-Disposition"] = (
        f'attachment; filename="{"".join(c if c.isalnum() or c in "-_" else "_" for c in name)}.csv"'
    )
    return response
