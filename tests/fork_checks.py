"""Checks that a fork's stored state equals its source's up to the fork point (runs.store.fork).

Pure Django, so the socket tests call them directly and the browser tests inside the live app
(`LiveApp.shell`). Ids are made positional first: a fork's turn and step ids are new.
"""

from __future__ import annotations

import json
import re
from typing import Any

from runs.models import Event, Message, Step, Task, Turn
from runs.store import load_state


def step_ids(task: Task | int) -> list[str]:
    return list(
        Step.objects.filter(task_id=_pk(task))
        .order_by("created_at", "pk")
        .values_list("step_id", flat=True)
    )


def turn_ids(task: Task | int) -> list[str]:
    return list(
        Turn.objects.filter(task_id=_pk(task))
        .order_by("index")
        .values_list("engine_id", flat=True)
    )


def normal(value: Any, ids: list[str]) -> Any:
    """`value` with the given ids replaced by their position: a fork's ids are new, nothing else."""
    text = json.dumps(value, sort_keys=True, default=str)
    for n, old in enumerate(ids):
        text = text.replace(old, f"<id{n}>")
    return json.loads(text)


STEP_FIELDS = (
    "kind",
    "status",
    "original_input",
    "input",
    "tool_calls",
    "output",
    "sources",
    "is_last",
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "checkpoint",
    "error",
    "runs",
    "started_at",
    "ended_at",
    "queue_position",
    "completion_index",
    "step_state",
)
MESSAGE_FIELDS = (
    "position",
    "role",
    "content",
    "tool_calls",
    "tool_call_id",
    "name",
    "status",
)


def stored(task: Task | int, steps: list[str]) -> dict[str, Any]:
    """What the database holds for `task` (its steps among `steps`), ids made positional;
    a message names the step that made it by number (1 for the first)."""
    numbered = step_ids(task)
    ids = turn_ids(task) + numbered
    rows = {
        r["step_id"]: r
        for r in Step.objects.filter(task_id=_pk(task)).values("step_id", *STEP_FIELDS)
    }
    messages = Message.objects.filter(task_id=_pk(task)).order_by("position", "pk")
    return normal(
        {
            "steps": [rows[s] for s in steps],
            "messages": [
                {k: v for k, v in m.items() if k != "step__step_id"}
                | {
                    "step": numbered.index(m["step__step_id"]) + 1
                    if m["step__step_id"]
                    else None
                }
                for m in messages.values(*MESSAGE_FIELDS, "step__step_id")
            ],
        },
        ids,
    )


def events_of(task: Task | int, upto_seq: int | None = None) -> list[Any]:
    ids = turn_ids(task) + step_ids(task)
    rows = Event.objects.filter(task_id=_pk(task)).order_by("seq")
    if upto_seq is not None:
        rows = rows.filter(seq__lt=upto_seq)
    return normal([(e.seq, e.type, e.payload, e.at) for e in rows], ids)


def state_of(task: Task | int) -> Any:
    turn = turn_ids(task)[0]
    return normal(
        load_state(_pk(task), turn).model_dump(mode="json"),
        turn_ids(task) + step_ids(task),
    )


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def by_appearance(value: Any) -> Any:
    """`value` with each uuid replaced by the order it first appears in: for two values whose
    ids were handed out in different orders (a fork stores its rows in its own order)."""
    text = json.dumps(value, sort_keys=True, default=str)
    seen: dict[str, str] = {}
    return json.loads(
        _UUID.sub(lambda m: seen.setdefault(m.group(0), f"<id{len(seen)}>"), text)
    )


def _pk(task: Task | int) -> int:
    return task if isinstance(task, int) else int(task.pk)


def _started(task: int, step_id: str | None) -> int | None:
    """Where step `step_id` first started in the log (None: it never did, or no such step)."""
    rows = Event.objects.filter(task_id=task, step_id=step_id, type="step_started")
    return rows.order_by("seq").values_list("seq", flat=True).first()


def differences_up_to(source: int, fork: int, steps: int) -> list[str]:
    """What differs between `fork` and `source` up to step `steps` (nothing: []).

    Steps 1..`steps`, the messages nobody or those steps made, and the source's event log up to
    where step `steps` + 1 first started, which the fork's log must begin with.
    """
    ids, fork_ids = step_ids(source), step_ids(fork)
    src, dst = stored(source, ids[:steps]), stored(fork, fork_ids[:steps])
    problems = []
    if dst["steps"] != src["steps"]:
        problems.append("steps")
    made = [
        [m for m in side["messages"] if m["step"] is None or m["step"] <= steps]
        for side in (src, dst)
    ]
    if made[0] != made[1]:
        problems.append("messages")
    upto = (
        _started(source, ids[steps]) if len(ids) > steps else None
    )  # the fork's log starts with the source's up to there; what the person did next follows
    before = events_of(source, upto)
    if events_of(fork)[: len(before)] != before:
        problems.append("events")
    return problems
