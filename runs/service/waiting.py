"""What waits for a person: the steps their notebooks hold for a decision, with each one's deadline.

Derived from the rows, never kept twice: a notebook waits when its summary status says so
(runs.store.queries.compute_status), the step that waits is the head of its active turn's queue,
and it began waiting at its latest `step_waiting` event. That event carries the deadline it
waits under, fixed when it started waiting from the notebook's `wait_deadline_s` (or
`AGENTUI_WAIT_DEADLINE_S`): the card's countdown and the sweep read the same one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from runs.conf import conf
from runs.models import DeadlineAction, Event, NotebookStatus, Step, Task
from runs.presets import get_preset
from runs.store.queries import RUNNABLE, notebook_view


@dataclass(frozen=True)
class Deadline:
    """A notebook's rule for waiting steps: how long (0: forever) and what happens then."""

    seconds: int
    action: str

    @property
    def words(self) -> str:
        """'10 min', '45 s', '2 h': how the deadline reads in the audit and on the card."""
        return duration_words(self.seconds)


def duration_words(seconds: int) -> str:
    if seconds % 3600 == 0 and seconds >= 3600:
        return f"{seconds // 3600} h"
    if seconds % 60 == 0 and seconds >= 60:
        return f"{seconds // 60} min"
    return f"{seconds} s"


def deadline_for(task_pk: int) -> Deadline:
    return deadline_of(Task.objects.get(pk=task_pk))


def deadline_of(task: Task) -> Deadline:
    """The notebook's own deadline, else the settings' default."""
    settings = conf()
    seconds = (
        task.wait_deadline_s
        if task.wait_deadline_s is not None
        else int(settings.wait_deadline_s)
    )
    action = task.wait_deadline_action or settings.wait_deadline_action
    return Deadline(seconds=seconds, action=DeadlineAction(action).value)


@dataclass(frozen=True)
class WaitingCall:
    tool_id: str
    tool_name: str
    arguments: Any
    # a plan's call: its arguments as planned, with references ("$1", "y1") where `arguments`
    # holds the earlier results they name (the engine's `planned_kwargs`)
    planned_arguments: Any = None


@dataclass(frozen=True)
class WaitingStep:
    """One step waiting for its owner, as the inbox shows it (model-written text is data here:
    the page renders it as text, never as markup)."""

    notebook: int
    title: str
    agent: str
    mode: str
    owner: int
    turn_id: str
    step_id: str
    kind: str
    input: str
    calls: tuple[WaitingCall, ...]
    question: str | None  # a Team member's question (kind human_input)
    asker: str | None
    since: float  # epoch seconds
    deadline: Deadline  # seconds 0: none
    budget: dict[str, Any] | None = None  # it waits because a budget was reached
    owner_name: str = ""

    @property
    def deadline_at(self) -> float | None:
        return self.since + self.deadline.seconds if self.deadline.seconds else None

    def as_json(self) -> dict[str, Any]:
        return {
            "notebook": self.notebook,
            "title": self.title or f"Notebook {self.notebook}",
            "agent": self.agent,
            "agent_label": preset.label
            if (preset := get_preset(self.agent))
            else self.agent,
            "mode": self.mode,
            "owner": self.owner,
            "owner_name": self.owner_name,
            "turn_id": self.turn_id,
            "step_id": self.step_id,
            "kind": self.kind,
            "input": self.input,
            "calls": [
                {
                    "tool_id": c.tool_id,
                    "tool_name": c.tool_name,
                    "arguments": c.arguments,
                    "planned_arguments": c.planned_arguments,
                }
                for c in self.calls
            ],
            "question": self.question,
            "asker": self.asker,
            "since": self.since,
            "deadline_at": self.deadline_at,
            "deadline_s": self.deadline.seconds,
            "deadline_action": self.deadline.action,
            "budget": self.budget,
        }


def _calls(row: Step) -> tuple[WaitingCall, ...]:
    return tuple(
        WaitingCall(
            tool_id=str(call.get("tool_id", "")),
            tool_name=str(call.get("tool_name", "")),
            arguments=call.get("tool_kwargs"),
            planned_arguments=call.get("planned_kwargs"),
        )
        for call in row.tool_calls or []
        if isinstance(call, dict)
    )


def _question(task_pk: int, tool_ids: set[str]) -> tuple[str | None, str | None]:
    """The latest question asked through one of these calls, and who asked it."""
    asked = Event.objects.filter(task_id=task_pk, type="input_required").order_by(
        "-seq"
    )
    for payload in asked.values_list("payload", flat=True)[:20]:
        if payload.get("tool_id") in tool_ids:
            return str(payload.get("prefix", "")), str(
                payload.get("current_agent_name", "")
            )
    return None, None


NO_DEADLINE = Deadline(seconds=0, action=DeadlineAction.REJECT.value)


def _since(task_pk: int, row: Step) -> tuple[float, Deadline, dict[str, Any] | None]:
    """When the step began waiting, the deadline its `step_waiting` event set, and the
    budget it waits on (None: an ordinary wait)."""
    payload = (
        Event.objects.filter(task_id=task_pk, type="step_waiting", step_id=row.step_id)
        .order_by("-seq")
        .values_list("payload", flat=True)
        .first()
    )
    if payload is None:  # e.g. a fork's first step: it waits, with no deadline
        return row.created_at.timestamp(), NO_DEADLINE, None
    seconds = payload.get("deadline_s") or 0
    action = payload.get("deadline_action") or DeadlineAction.REJECT.value
    return (
        float(payload.get("at") or 0.0),
        Deadline(seconds=int(seconds), action=action),
        payload.get("budget") or None,
    )


def waiting_step(task: Task) -> WaitingStep | None:
    """The step notebook `task` waits on (its active turn's queue head), if it waits."""
    view = notebook_view(task.pk)
    if view.active is None or view.running or not view.active.queue:
        return None
    head = view.active.queue[0]
    if head.status not in RUNNABLE:
        return None
    row = Step.objects.select_related("turn").get(step_id=head.step_id)
    since, deadline, budget = _since(task.pk, row)
    calls = _calls(row)
    question, asker = (
        _question(task.pk, {c.tool_id for c in calls})
        if row.kind == "human_input"
        else (None, None)
    )
    return WaitingStep(
        notebook=task.pk,
        title=task.title,
        agent=task.agent,
        mode=task.mode,
        owner=task.owner_id,
        owner_name=task.owner.get_username(),
        turn_id=row.turn.engine_id,
        step_id=row.step_id,
        kind=row.kind,
        input=row.input or "",
        calls=calls,
        question=question,
        asker=asker,
        since=since,
        deadline=deadline,
        budget=budget,
    )


def waiting_notebooks() -> Any:
    return Task.objects.filter(status=NotebookStatus.WAITING)


def waiting_for(owner_pks: list[int], limit: int = 200) -> list[WaitingStep]:
    """Every step waiting in these people's notebooks, the longest-waiting first."""
    tasks = (
        waiting_notebooks()
        .filter(owner_id__in=owner_pks)
        .select_related("owner")
        .order_by("updated_at")[:limit]
    )
    found = [w for w in (waiting_step(t) for t in tasks) if w is not None]
    return sorted(found, key=lambda w: w.since)


def waiting_count(owner_pks: list[int]) -> int:
    count: int = waiting_notebooks().filter(owner_id__in=owner_pks).count()
    return count
