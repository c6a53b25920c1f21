"""Driving a notebook through `runs.service` the way a person would, and reading back what ran.

Shared by the fork-edit tests and the audit invariant test: which steps wait, approving them in
order (answering a Team question on the way), and what the scripted server and the tools saw.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from channels.db import database_sync_to_async

from runs import service
from runs.engine.testing import RecordedRequest
from runs.engine.tools import call_tool_by_name
from runs.models import Event, Step, Task
from runs.presets import get_preset
from tests.live_support import make_notebook, make_user


@dataclass(frozen=True)
class Waiting:
    """A step of the active turn that waits for the person."""

    step_id: str
    kind: str
    status: str
    input: str | None
    tool_calls: list[dict[str, Any]] | None


def _waiting(task_pk: int) -> list[Waiting]:
    rows = (
        Step.objects.filter(
            task_id=task_pk,
            queue_position__isnull=False,
            turn__status="active",
            turn__deleted_at__isnull=True,
        )
        .exclude(status="running")
        .order_by("queue_position")
    )
    return [Waiting(r.step_id, r.kind, r.status, r.input, r.tool_calls) for r in rows]


async def started(agent: str, prompt: str, mode: str = "tools", by: str = "ana") -> int:
    """A new notebook of `agent` for a new user `by`, sent `prompt`, its first steps run."""
    user = await database_sync_to_async(make_user)(by)
    task = await database_sync_to_async(make_notebook)(user, agent=agent, mode=mode)
    await service.send_message(task.pk, prompt)
    await service.wait_idle()
    return int(task.pk)


async def waiting_steps(task_pk: int) -> list[Waiting]:
    return await database_sync_to_async(_waiting)(task_pk)


async def approve_all(task_pk: int, answer: str = "All regions please") -> None:
    """Approve every waiting step in turn (answering a question with `answer`) until none waits
    or one has failed (approving it again would only ask the same again)."""
    for _ in range(60):
        waiting = await waiting_steps(task_pk)
        if not waiting or waiting[0].status == "failed":
            return
        step = waiting[0]
        if step.kind == "human_input":
            await service.edit_input(task_pk, step.step_id, answer)
        await service.approve(task_pk, step.step_id)
        await service.wait_idle()
    steps = await database_sync_to_async(_dump)(task_pk)
    raise AssertionError(f"the turn did not finish after 60 approvals: {steps}")


def _events(task_pk: int, kind: str) -> list[dict[str, Any]]:
    return [
        e.payload
        for e in Event.objects.filter(task_id=task_pk, type=kind).order_by("seq")
    ]


async def events_of(task_pk: int, kind: str) -> list[dict[str, Any]]:
    return await database_sync_to_async(_events)(task_pk, kind)


async def run_tool(agent: str, name: str, kwargs: dict[str, Any]) -> str:
    """What the preset's tool `name` answers to `kwargs`, run here as the engine runs it."""
    preset = get_preset(agent)
    assert preset is not None
    tools = {tool.metadata.name: tool for tool in preset.make_tools()}
    output = await call_tool_by_name(tools, name, kwargs)
    assert not output.is_error, output.content
    return output.content


def request_text(request: RecordedRequest) -> str:
    return "\n".join(request.texts())


def notebook(task: Task | int) -> int:
    return task if isinstance(task, int) else task.pk


def _dump(task_pk: int) -> list[tuple[str, str, str, Any]]:
    return [
        (r.kind, r.status, (r.input or "")[:60], r.error[:300])
        for r in Step.objects.filter(task_id=task_pk).order_by("created_at", "pk")
    ]
