"""A notebook as the lists, the trace page, its JSON export and the REST API show it.

`filtered_notebooks` is the traces list's search; `trace_head` and `trace_stream` are the
export, whose events are read in batches and never all held at once.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections.abc import AsyncIterator
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth.models import AbstractBaseUser
from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import Exists, OuterRef, Q, QuerySet, TextField
from django.db.models.functions import Cast
from django.urls import reverse
from django.utils.dateparse import parse_date, parse_datetime

from runs.models import Annotation, Event, Message, ModelPrice, Step, Task, Turn
from runs.protocol.wire import WIRE_EVENT_BYTES, bounded
from runs.store.cost import USAGE_KEYS, call_usage, price_json, with_cost
from runs.store.cost import model_of as model_of  # the entrances cost steps with it
from runs.store.cost import price_of as price_of  # the entrances cost steps with it
from runs.traces.annotations import annotations_of
from runs.traces.corrections import with_correction
from runs.traces.data_used import data_tables_used
from runs.traces.results import result_items

EXPORT_BATCH = 500  # events read and sent at a time by the trace export


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
    if params.get("corrected"):
        tasks = with_correction(tasks, params["corrected"])
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


def composed_setup(task: Task) -> dict[str, Any]:
    """What the notebook runs with, as picked when it was composed: `model` (None: the server's
    configured one), the preset's built-in `tools` it kept (None: all), the `mcp_tools` picked,
    the person's data `tables` its data tools may read (None: every one) and its own run
    budget (None: the server's default; 0: none)."""
    return {
        "model": task.model or None,
        "tools": task.tools,
        "mcp_tools": list(task.mcp_tools or []),
        "tables": task.data_tables,
        "budget_run_usd": (
            None if task.budget_run_usd is None else str(task.budget_run_usd)
        ),
        "budget_run_tokens": task.budget_run_tokens,
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


def _usage(steps: list[Step]) -> dict[str, int]:
    totals = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    for step in steps:
        for key in totals:
            totals[key] += getattr(step, key) or 0
    return totals


def turn_usages(turn_pks: list[int], price: ModelPrice | None) -> dict[int, Any]:
    """Per turn pk: the tokens its model calls used (stopped and undone steps' calls too) and
    their cost at `price`."""
    found = call_usage(Event.objects.filter(turn_id__in=turn_pks), "turn_id")
    empty = dict.fromkeys(USAGE_KEYS, 0)
    return {pk: with_cost(found.get(pk, empty), price) for pk in turn_pks}


def step_json(step: Step, price: ModelPrice | None = None) -> dict[str, Any]:
    """A step as the trace export and the REST API show it (edges prefetched), its usage
    costed at `price` (`cost_usd` None: the price is unknown)."""
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
        "usage": with_cost(
            {
                k: getattr(step, k)
                for k in ("prompt_tokens", "completion_tokens", "total_tokens")
            },
            price,
        ),
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


def trace_head(task: Task, model: str | None = None) -> dict[str, Any]:
    """The export without its events and results: the notebook, its turns and steps, messages;
    usage costed at its model's price (its own, else `model`) (the task's `price`, None when it has none)."""
    price = price_of(model_of(task, model))
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
                "usage": with_cost(
                    _usage([s for s in turn_steps if s.status == "completed"]), price
                ),
                "steps": [step_json(s, price) for s in turn_steps],
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
        "task": {
            **notebook_summary(task),
            "last_seq": task.last_seq,
            # which of the person's data tables its data tools read (runs.traces.data_used)
            "data_tables": data_tables_used(task),
            # what a token costs, for the page to cost each step as it reads them
            "price": price_json(price),
            # what it was composed with (the badges of the page's header)
            "setup": composed_setup(task),
        },
        "turns": turns,
        "messages": messages,
        "annotations": annotations_of(task),
        "usage": with_cost(
            _usage([s for s in steps if s.status == "completed"]), price
        ),
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
    compact ASCII form (what runs.protocol.wire measures) is at most this long, or 12 times this
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

    With `cut`, each event is as a socket carries it (runs.protocol.wire): what the trace page
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
