"""Two notebooks side by side: their steps aligned, what differs marked, totals for each.

One function (`compare_notebooks`) serves the compare page (runs/web/fork.py, drawn by
static/js/compare.js) and the REST API (`GET /api/v1/compare`), so a script reads exactly the
comparison a person sees. It reads each notebook's stored events, as the page's trace view
reduces them (static/js/store.js): a step's last run is what is shown (a step run again after an
undo shows its new run), a step an undo dropped before it ever ran is left out, one that ran
stays. Turns pair by index and their steps by their number in the turn, so a fork lines up with
its original up to where it went its own way.

Values are compared whole; each shown text is clipped to COMPARE_TEXT_CHARS (the trace and the
step's REST read have it whole), so two 5 MB tool results cost the page a few kilobytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from runs.models import Event, Task
from runs.traces.summary import summaries

COMPARE_TEXT_CHARS = 4000

# The events that change what the comparison shows; the others are not read.
_READ = (
    "task_created",
    "task_completed",
    "step_created",
    "step_started",
    "step_input_edited",
    "agent_output",
    "tool_call",
    "tool_call_result",
    "step_completed",
    "step_failed",
    "step_interrupted",
    "step_undone",
)


def stable(value: Any) -> str:
    """A value as JSON with its keys sorted: {"b":1,"a":2} reads as {"a":2,"b":1} does."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@dataclass
class _Call:
    name: str
    args: str
    result: str = ""
    output_name: str | None = None  # a chain's name for its result (`y2`), else None


@dataclass
class _Attempt:
    calls: dict[str, _Call] = field(default_factory=dict)
    streams: list[str] = field(default_factory=list)
    output: str = ""
    tokens: int = 0
    undone: bool = False


@dataclass
class _Step:
    kind: str
    input: str
    pending: list[_Call]
    status: str = "pending"
    attempts: list[_Attempt] = field(default_factory=list)
    dropped: bool = False

    def current(self) -> _Attempt:
        if not self.attempts or self.attempts[-1].undone:
            self.attempts.append(_Attempt())
        return self.attempts[-1]


@dataclass
class _Turn:
    input: str = ""
    response: str | None = None
    completed: bool = False
    steps: list[str] = field(default_factory=list)


def _pending(calls: Any) -> list[_Call]:
    return [
        _Call(
            str(c.get("tool_name") or ""),
            stable(c.get("tool_kwargs") or {}),
            output_name=c.get("output_name") or None,
        )
        for c in calls or []
        if isinstance(c, dict)
    ]


class _Log:
    """A notebook's turns and steps as its stored events leave them (store.js, in short)."""

    def __init__(self) -> None:
        self.turns: dict[str, _Turn] = {}
        self.steps: dict[str, _Step] = {}

    def turn(self, turn_id: str) -> _Turn:
        return self.turns.setdefault(turn_id, _Turn())

    def apply(self, kind: str, e: dict[str, Any]) -> None:
        if kind in ("task_created", "task_completed", "step_created"):
            turn = self.turn(str(e.get("task_id") or ""))
            if kind == "task_created":
                turn.input = e.get("input") or ""
            elif kind == "task_completed":
                turn.response, turn.completed = e.get("response"), True
            else:
                self._created(turn, e)
            return
        step = self.steps.get(str(e.get("step_id") or ""))
        if step is None:
            return
        if kind == "step_started":
            step.attempts.append(_Attempt())
            step.status = "running"
            if e.get("input") is not None:
                step.input = e["input"]
        elif kind == "step_input_edited":
            step.input = e.get("input") or ""
            if e.get("tool_calls"):
                step.pending = _pending(e["tool_calls"])
        elif kind == "agent_output":
            attempt = step.current()
            attempt.streams.append((e.get("response") or {}).get("content") or "")
            attempt.tokens += int((e.get("usage") or {}).get("total_tokens") or 0)
        elif kind in ("tool_call", "tool_call_result"):
            self._call(step.current(), kind, e)
        elif kind == "step_completed":
            attempt = step.current()
            attempt.output = e.get("output") or ""
            if e.get("usage"):
                attempt.tokens = int(e["usage"].get("total_tokens") or 0)
            step.status = "completed"
        elif kind in ("step_failed", "step_interrupted"):
            step.status = kind.removeprefix("step_")
        elif kind == "step_undone":
            self._undone(step, e)

    def _created(self, turn: _Turn, e: dict[str, Any]) -> None:
        step_id = str(e.get("step_id") or "")
        step = self.steps.get(step_id)
        if step is None:
            step = _Step(
                kind=e.get("kind") or "llm",
                input=e.get("input") or "",
                pending=_pending(e.get("tool_calls")),
            )
            self.steps[step_id] = step
            turn.steps.append(step_id)
            return
        step.input = e.get("input") or step.input
        step.kind = e.get("kind") or step.kind
        if e.get("tool_calls"):
            step.pending = _pending(e["tool_calls"])
        step.dropped = False

    @staticmethod
    def _call(attempt: _Attempt, kind: str, e: dict[str, Any]) -> None:
        tool_id = str(e.get("tool_id") or "")
        if kind == "tool_call":
            attempt.calls.pop(tool_id, None)  # a call that runs again starts afresh
        call = attempt.calls.setdefault(
            tool_id,
            _Call(
                str(e.get("tool_name") or ""),
                stable(e.get("tool_kwargs") or {}),
                output_name=e.get("output_name") or None,
            ),
        )
        if kind == "tool_call_result":
            call.result = str((e.get("tool_output") or {}).get("content") or "")

    def _undone(self, step: _Step, e: dict[str, Any]) -> None:
        if step.attempts:
            step.attempts[-1].undone = True
        step.status = "pending"
        for dropped_id in e.get("dropped_steps") or []:
            dropped = self.steps.get(dropped_id)
            if dropped is not None:
                if dropped.attempts:
                    dropped.attempts[-1].undone = True
                dropped.status = "undone"
                dropped.dropped = not dropped.attempts
        for turn in self.turns.values():
            if step_id_in(turn, e) and turn.completed:
                turn.response, turn.completed = None, False

    def live_steps(self, turn: _Turn) -> list[_Step]:
        steps = (self.steps[s] for s in turn.steps)
        return [s for s in steps if not s.dropped]


def step_id_in(turn: _Turn, e: dict[str, Any]) -> bool:
    return str(e.get("step_id") or "") in turn.steps


def _log_of(task: Task) -> _Log:
    log = _Log()
    rows = (
        Event.objects.filter(task=task, type__in=_READ)
        .order_by("seq")
        .values_list("type", "payload")
    )
    for kind, payload in rows.iterator(chunk_size=500):
        if isinstance(payload, dict):
            log.apply(kind, payload)
    return log


def _input(step: _Step) -> str:
    """What the step was given, as the comparison shows it: a tool-calls step's input is its
    calls as the engine writes them for editing (JSON with their ids, which differ between any
    two runs), shown and compared as its calls instead, so it has none of its own."""
    if step.kind != "tool_calls":
        return step.input
    try:
        calls = json.loads(step.input or "[]")
    except ValueError:
        return step.input
    if isinstance(calls, list) and all(
        isinstance(c, dict) and "tool_name" in c for c in calls
    ):
        return ""
    return step.input


def _facts(step: _Step) -> dict[str, Any]:
    """What the comparison shows of a step (its last run), as values that compare with ==."""
    attempt = step.attempts[-1] if step.attempts else None
    if attempt is not None and attempt.calls:
        calls = list(attempt.calls.values())
    else:
        calls = step.pending
    output = ""
    if attempt is not None:
        output = attempt.output or "\n".join(attempt.streams)
    return {
        "kind": step.kind,
        "status": step.status,
        "input": _input(step),
        "calls": [
            {
                "name": c.name,
                "args": c.args,
                "result": c.result,
                "output_name": c.output_name,
            }
            for c in calls
        ],
        "output": output,
        "tokens": attempt.tokens if attempt is not None else 0,
    }


def _clip(text: str) -> str:
    if len(text) <= COMPARE_TEXT_CHARS:
        return text
    more = len(text) - COMPARE_TEXT_CHARS
    return f"{text[:COMPARE_TEXT_CHARS]}… ({more:,} more characters)"


def _step_row(
    turn: int, number: int, pair: list[dict[str, Any] | None]
) -> dict[str, Any]:
    a, b = pair
    if a is None or b is None:
        differing = ["step"]
    else:
        differing = [k for k in ("status", "input", "calls", "output") if a[k] != b[k]]
    shown: list[dict[str, Any] | None] = []
    for side, facts in enumerate(pair):
        if facts is None:
            shown.append(None)
            continue
        other = pair[1 - side]
        twins = other["calls"] if other else []
        calls = []
        for i, call in enumerate(facts["calls"]):
            twin = twins[i] if i < len(twins) else None
            calls.append(
                {
                    "name": call["name"],
                    "args": _clip(call["args"]),
                    "result": _clip(call["result"]),
                    "output_name": call["output_name"],
                    "args_differ": twin is None
                    or (twin["name"], twin["args"]) != (call["name"], call["args"]),
                    "result_differs": twin is None or twin["result"] != call["result"],
                }
            )
        shown.append(
            {
                **facts,
                "input": _clip(facts["input"]),
                "output": _clip(facts["output"]),
                "calls": calls,
            }
        )
    return {
        "kind": "step",
        "turn": turn,
        "step": number,
        "differs": bool(differing),
        "different": differing,
        "pair": shown,
    }


def _text_row(kind: str, turn: int, texts: list[str | None]) -> dict[str, Any]:
    return {
        "kind": kind,
        "turn": turn,
        "step": None,
        "differs": texts[0] != texts[1],
        "different": [kind] if texts[0] != texts[1] else [],
        "pair": [None if t is None else {"text": _clip(t)} for t in texts],
    }


def _side(task: Task, sizes: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": task.pk,
        "title": str(task),
        "agent": task.agent,
        "status": task.status,
        "forked_from": task.forked_from_id,
        "fork_turn": task.fork_turn_index,
        "fork_step": task.fork_step_number,
        "totals": {
            key: sizes[key]
            for key in ("steps", "tool_calls", "tokens", "cost_usd", "wall_time_s")
        },
    }


def compare_notebooks(a: Task, b: Task, model: str | None = None) -> dict[str, Any]:
    """Notebooks `a` and `b` compared: `sides` (each one's totals, as the traces list counts
    them, cost at `model`'s price), `rows` (per turn: the message, its steps paired by number,
    the answer; each with `differs` and the `different` fields) and `summary`."""
    logs = [_log_of(a), _log_of(b)]
    turns = [list(log.turns.values()) for log in logs]
    rows: list[dict[str, Any]] = []
    for i in range(max(len(t) for t in turns)):
        pair = [t[i] if i < len(t) else None for t in turns]
        rows.append(_text_row("turn", i + 1, [t.input if t else None for t in pair]))
        steps = [log.live_steps(turn) if turn else [] for log, turn in zip(logs, pair)]
        for j in range(max(len(s) for s in steps)):
            facts = [_facts(s[j]) if j < len(s) else None for s in steps]
            rows.append(_step_row(i + 1, j + 1, facts))
        answers = [t.response if t else None for t in pair]
        rows.append(_text_row("answer", i + 1, answers))
    step_rows = [r for r in rows if r["kind"] == "step"]
    differing = [r for r in step_rows if r["differs"]]
    first = differing[0] if differing else None
    sizes = summaries([a, b], model)
    return {
        "sides": [_side(a, sizes[a.pk]), _side(b, sizes[b.pk])],
        "rows": rows,
        "summary": {
            "steps": len(step_rows),
            "differing": len(differing),
            "first": {"turn": first["turn"], "step": first["step"]} if first else None,
            "text": _summary_text(len(step_rows), differing),
        },
    }


def _summary_text(steps: int, differing: list[dict[str, Any]]) -> str:
    if not differing:
        return f"All {steps} aligned steps are the same."
    first = differing[0]
    return (
        f"{len(differing)} of {steps} aligned steps differ; "
        f"the first is turn {first['turn']}, step {first['step']}."
    )
