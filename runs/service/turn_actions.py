"""A notebook's turns: start one with a message (and a notebook with its first), run its steps
in the background, wait for them, abandon the turn, change the approval mode.

Each action is checked and claimed as runs.service.claims says.
"""

from __future__ import annotations

import asyncio
from typing import Any

from channels.db import database_sync_to_async
from django.contrib.auth.models import User
from django.db import transaction

from runs.engine import BaseAgentWorker, UnknownTaskError
from runs.engine.stopped_note import left_untold
from runs.models import (
    ApprovalMode,
    Attachment,
    NotebookStatus,
    Task,
    Turn,
    TurnStatus,
)
from runs.presets import get_preset
from runs.protocol import (
    ErrorCode,
    MessageImages,
    ModeChanged,
    validate_action,
)
from runs.protocol.checks import storable_problem
from runs.realtime.publisher import publisher_for
from runs.service import budgets, quotas, stops, workers
from runs.service.attachments import bind_to_turn, claim_for_message, data_url, describe
from runs.service.audit import record
from runs.service.claims import (
    automatic_of,
    by_of,
    check_abandon,
    check_send,
    claim,
    in_thread,
    refused,
    stop_action,
)
from runs.service.compose import notebook_config
from runs.service.driver import (
    Origin,
    abandon_turn,
    announce_waiting,
    drive,
    finish,
    take_abandon_request,
)
from runs.service.lease import Lease, lease_is_dead
from runs.service.policies.rules import stops_before_tools
from runs.service.recovery import interrupt_orphans
from runs.service.runtime import NotebookRuntime, runtime_for, spawn
from runs.store import queries
from runs.store.messages import tick
from runs.store.queries import NotebookView

TITLE_CHARS = 80
# with turn workers, how often `wait_settled` reads whether the worker's run still goes on
SETTLED_CHECK_S = 0.2


def request_abandon(task_pk: int) -> None:
    Task.objects.filter(pk=task_pk).update(abandon_requested=True)


def apply_mode(task_pk: int, mode: str) -> tuple[bool, str | None]:
    """Set the mode (and the active turn's tool approval); whether it changed, and the turn."""
    with transaction.atomic():
        changed = bool(
            Task.objects.filter(pk=task_pk).exclude(mode=mode).update(mode=mode)
        )
        active = Turn.objects.filter(
            task_id=task_pk, status=TurnStatus.ACTIVE, deleted_at__isnull=True
        )
        if changed:
            tick(
                task_pk
            )  # a state write: what runs.store.cache knew of the turn is stale
        active.update(approve_tool_calls=stops_before_tools(task_pk, mode))
        turn_id = active.values_list("engine_id", flat=True).first()
    return changed, turn_id


def set_title(task_pk: int, text: str) -> None:
    title = " ".join(text.split())
    title = title if len(title) <= TITLE_CHARS else title[: TITLE_CHARS - 1] + "…"
    Task.objects.filter(pk=task_pk, title="").update(title=title)


def _begin_turn(task_pk: int, text: str, mode: str) -> tuple[dict[str, Any], bool]:
    """Under the lease, before the turn is made, in one database-thread call: the run counted
    against the owner's quota, the title set from the first message, the state of the turn
    before (calls a Stop cut off there, that may have taken effect: the new turn's model is
    told of them, runs.engine.stopped_note) and whether the turn stops before tool calls (its
    mode, or a policy that screens them: read now, so an admin's change counts from this turn)."""
    quotas.take_run(task_pk)
    set_title(task_pk, text)
    return queries.stopped_turn_state(task_pk), stops_before_tools(task_pk, mode)


def _first_step(
    task_pk: int, turn_id: str
) -> tuple[str | None, budgets.Reached | None]:
    """The new turn's first step and the budget it has reached already, if any (one call)."""
    return queries.queue_head(task_pk, turn_id), budgets.reached(task_pk, turn_id)


def _message_images(
    task_pk: int, image_ids: list[int]
) -> tuple[bool, list[Attachment]]:
    """Whether the notebook's agent takes images, and the uploads to send with the message."""
    notebook = Task.objects.get(pk=task_pk)
    accepts = _accepts_images(notebook.agent)
    return accepts, claim_for_message(notebook.owner_id, task_pk, image_ids, accepts)


def _accepts_images(agent: str) -> bool:
    preset = get_preset(agent)
    return bool(preset and preset.accepts_images)


async def send_message(
    task_pk: int,
    text: str,
    origin: Origin | None = None,
    images: list[int] | None = None,
) -> str:
    """Start a turn for `text` (and uploaded `images`, by id); its first step runs at once unless the mode is `step`."""
    problem = storable_problem(text)
    if problem is not None:
        raise refused(ErrorCode.INVALID_INPUT, f"text: {problem}")
    runtime = await runtime_for(task_pk)
    if images:
        accepts_images, attachments = await in_thread(_message_images, task_pk, images)
    else:  # nothing to claim: no need to read the notebook row again
        accepts_images, attachments = _accepts_images(runtime.agent), []
    lease, view = await claim(task_pk, check_send)
    try:
        with lease.fenced():
            stopped, approve_tool_calls = await in_thread(
                _begin_turn, task_pk, text, view.mode
            )
            extra_state = await _carried(runtime, view)
            extra_state.update(left_untold(stopped))
            if accepts_images:
                # the seed's image_docs, as data URLs: the model server cannot fetch this server's URLs
                extra_state["image_docs"] = [data_url(a) for a in attachments]
            task = await runtime.runner.acreate_task(
                text, approve_tool_calls=approve_tool_calls, extra_state=extra_state
            )
            if attachments:
                await in_thread(bind_to_turn, attachments, task_pk, task.task_id)
                shown = [describe(a) for a in attachments]
                await publisher_for(task_pk).publish(
                    MessageImages(task_id=task.task_id, images=shown)
                )
            # today's budget may be spent already: the first step waits, saying so
            first, spent_out = await in_thread(_first_step, task_pk, task.task_id)
            assert first is not None
            waits = view.mode == ApprovalMode.STEP or spent_out is not None
            if waits:
                await announce_waiting(runtime, task.task_id, first, spent_out)
    except BaseException:
        await finish(runtime, lease)
        raise
    if waits:
        await finish(runtime, lease)
    else:
        start_run(runtime, lease, task.task_id, first, origin)
    return task.task_id


async def _carried(runtime: NotebookRuntime, view: NotebookView) -> dict[str, Any]:
    """What the new turn takes over from the last finished one (a team's state and current agent)."""
    worker = runtime.runner.agent_worker
    if view.latest is None or type(worker).carry_over is BaseAgentWorker.carry_over:
        return {}  # this worker carries nothing over: no need to load the last turn
    try:
        previous = await runtime.runner.aget_task_state(view.latest.engine_id)
    except UnknownTaskError:
        return {}
    return worker.carry_over(previous.task)


def start_run(
    runtime: NotebookRuntime,
    lease: Lease,
    turn_id: str,
    step_id: str | list[str],
    origin: Origin | None,
) -> None:
    steps = [step_id] if isinstance(step_id, str) else step_id
    run = spawn(
        drive(runtime, lease, turn_id, steps, origin),
        name=f"notebook-{runtime.task_pk}-{steps[0][:8]}",
    )
    lease.keep_alive(run)
    stops.track(runtime.task_pk, run)


async def wait_run(task_pk: int) -> None:
    """Return once the run this process has going for the notebook (if any) has ended."""
    run = stops.run_of(task_pk)
    if run is not None:
        await asyncio.wait({run})  # a cancelled run (Stop) has ended too


def _running_anywhere(task_pk: int) -> bool:
    """Whether a run goes on for the notebook in any process: it says it runs, or a live lease
    is held on it."""
    row = (
        Task.objects.filter(pk=task_pk)
        .values_list("status", "lease_owner", "lease_at")
        .first()
    )
    if row is None:
        return False
    status, owner, at = row
    return status == NotebookStatus.RUNNING or not lease_is_dead(owner, at)


async def wait_settled(task_pk: int) -> None:
    """Return once no run goes on for the notebook: this process's, and with turn workers
    (runs.service.workers) the one a worker carries out (read from its row: the run's events
    reach this process, its end is not announced to it)."""
    await wait_run(task_pk)
    if not workers.enabled():
        return
    while await database_sync_to_async(_running_anywhere)(task_pk):
        await asyncio.sleep(SETTLED_CHECK_S)


async def abandon(task_pk: int, origin: Origin | None = None) -> None:
    """Abandon the active turn now, or after the step that is running."""
    await in_thread(check_abandon, task_pk)
    await in_thread(request_abandon, task_pk)
    runtime = await runtime_for(task_pk)
    stops_at = await in_thread(
        stop_action, task_pk, by_of(origin), automatic_of(origin)
    )
    await record(runtime, stops_at)
    lease = await Lease.acquire(task_pk)
    if lease is None:
        # Whoever holds the lease abandons the turn when they release it. If that is a run in
        # this process, stop it now (e.g. a model call that hangs): the engine puts the task
        # back as before the step, and the run's end abandons the turn. A run in another
        # process sees the request within runs.service.stops.STOP_POLL_S and does the same.
        stops.stop(task_pk)
        return
    try:
        with lease.fenced():
            await interrupt_orphans(task_pk)
            if await in_thread(take_abandon_request, task_pk):
                view = await in_thread(queries.notebook_view, task_pk)
                if view.active is not None:
                    await abandon_turn(runtime, view.active.engine_id)
    finally:
        await finish(runtime, lease)


async def set_mode(task_pk: int, mode: str) -> None:
    """Change the approval mode; it applies from the next step."""
    changed, turn_id = await in_thread(apply_mode, task_pk, mode)
    if changed:
        await publisher_for(task_pk).publish(ModeChanged(task_id=turn_id, mode=mode))  # type: ignore[arg-type]


# --- notebooks --------------------------------------------------------------------------------


def create_notebook_row(
    owner: User,
    agent: str,
    mode: str,
    mcp_tools: list[str] | None = None,
    **composed: Any,
) -> Task:
    """A new, empty notebook; ProtocolError for an unknown preset or mode, an MCP tool the
    owner may not use, or a composition that does not fit (`composed`: model, tools,
    data_tables, or `preset`, one of the owner's presets: runs.service.compose)."""
    config = notebook_config(owner, agent, mode, mcp_tools, **composed)
    return Task.objects.create(
        owner=owner,
        agent=config.agent,
        mode=config.mode,
        mcp_tools=config.mcp_tools,
        model=config.model,
        tools=config.tools,
        data_tables=config.data_tables,
    )


async def create_notebook(
    owner: User,
    text: str,
    agent: str,
    mode: str,
    images: list[int] | None = None,
    mcp_tools: list[str] | None = None,
    **composed: Any,
) -> Task:
    """Create a notebook with its picked MCP tools (and `composed` picks, as for
    create_notebook_row) and start its first turn with `text` and uploaded `images` (all or
    nothing)."""
    task = await database_sync_to_async(create_notebook_row)(
        owner, agent, mode, mcp_tools, **composed
    )
    try:
        if workers.enabled():  # its first turn runs in a turn worker, as later ones do
            first = validate_action(
                {"action": "send_message", "text": text, "images": images or []}
            )
            await workers.forward(task.pk, first, None)
        else:
            await send_message(task.pk, text, images=images)
    except BaseException:
        # a notebook whose first message could not be taken is not left behind
        await Task.objects.filter(pk=task.pk).adelete()
        raise
    return task
