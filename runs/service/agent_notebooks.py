"""Notebooks another agent starts and follows over agentui's MCP server (runs.mcpserver):
`start_notebook` runs one of the person's presets (or a built-in agent) with a message, as
the person would from the start page, and `notebook_status` reads how it stands and its answer.

The notebook is the person's own: it shows in their notebooks, its waiting steps in their
inbox, and webhooks and emails fire for it as for any.
"""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from django.contrib.auth.models import User

from runs.models import NotebookStatus, Step, Task, TurnStatus, UserPreset
from runs.presets import get_preset
from runs.protocol import MAX_TEXT_CHARS, ErrorCode, ProtocolError
from runs.service.lease import is_held
from runs.service.turn_actions import create_notebook


def _which(owner: User, preset: Any) -> dict[str, Any]:
    """`preset` as create_notebook takes it: one of the owner's presets (by id or name), or a
    built-in agent's name."""
    if isinstance(preset, bool) or not isinstance(preset, str | int):
        raise ProtocolError(
            ErrorCode.INVALID_INPUT, "preset: give a preset's name or id"
        )
    key = str(preset).strip()
    if not key:
        raise ProtocolError(
            ErrorCode.INVALID_INPUT, "preset: give a preset's name or id"
        )
    own = UserPreset.objects.filter(owner=owner)
    saved = (
        own.filter(pk=int(key)).first()
        if key.isdigit()
        else own.filter(name=key).first()
    )
    if saved is not None:
        return {"agent": "", "preset": saved.pk}
    if get_preset(key) is not None:
        return {"agent": key}
    names = sorted(own.values_list("name", flat=True))[:20]
    yours = f" Yours: {', '.join(repr(n) for n in names)}." if names else ""
    raise ProtocolError(
        ErrorCode.NOT_FOUND,
        f"you have no preset {key[:64]!r}, and no built-in agent has that name.{yours}",
    )


async def start_for_agent(owner: User, preset: Any, message: Any) -> int:
    """Start a notebook of `owner` on `preset` with `message`; its id. ProtocolError says why not."""
    if not isinstance(message, str) or not message.strip():
        raise ProtocolError(ErrorCode.INVALID_INPUT, "message: say what to ask")
    if len(message) > MAX_TEXT_CHARS:
        raise ProtocolError(
            ErrorCode.INVALID_INPUT,
            f"message: at most {MAX_TEXT_CHARS:,} characters",
        )
    which = await database_sync_to_async(_which)(owner, preset)
    agent = which.pop("agent")
    task = await create_notebook(owner, message, agent, "auto", **which)
    return task.pk


def status_for_agent(owner: User, pk: Any) -> dict[str, Any]:
    """How the owner's notebook `pk` stands: its status, whether it settled, what waits for the
    person, and the last answer. ProtocolError (not_found) for a notebook not theirs."""
    if isinstance(pk, bool) or not isinstance(pk, int):
        raise ProtocolError(
            ErrorCode.INVALID_INPUT, "notebook_id: give the id start_notebook answered"
        )
    task = Task.objects.filter(pk=pk, owner=owner).first()
    if task is None:
        raise ProtocolError(ErrorCode.NOT_FOUND, f"you have no notebook {pk}")
    last = task.turns.order_by("-index").first()
    answer = (
        task.turns.filter(status=TurnStatus.COMPLETED)
        .order_by("-index")
        .values_list("response", flat=True)
        .first()
    )
    waiting = (
        list(
            Step.objects.filter(turn=last, queue_position__isnull=False)
            .order_by("queue_position")
            .values("step_id", "kind")[:1]
        )
        if last is not None and task.status == NotebookStatus.WAITING
        else []
    )
    return {
        "notebook_id": task.pk,
        "title": task.title,
        "status": task.status,
        "settled": task.status != NotebookStatus.RUNNING and not is_held(task.pk),
        "last_turn": last.status if last is not None else None,
        "waiting_step": waiting[0] if waiting else None,
        "answer": answer,
    }
