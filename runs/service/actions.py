"""The notebook service: what a person can do to a notebook, checked, claimed and carried out.

Every action first checks the notebook's rows without writing anything (a refusal is a
`ProtocolError` and changes nothing), then takes the notebook's lease (one conditional UPDATE:
of two tabs or two server processes acting at once, one wins and the other gets
`already_running`), checks again under the lease (the winner may have changed things in
between: an approved step has run, an undone step is gone), and only then calls the engine.
Steps run in background tasks (`runs.service.driver.drive`) that keep the lease until they stop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn, TypeVar

from channels.db import database_sync_to_async
from django.contrib.auth.models import User
from django.db import transaction

from runs.engine import (
    AgentError,
    BaseAgentWorker,
    ToolArgumentsError,
    UnknownTaskError,
)
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
    HumanAction,
    HumanActionKind,
    MessageImages,
    ModeChanged,
    ProtocolError,
    validate_action,
)
from runs.protocol.checks import storable_problem
from runs.realtime.publisher import publisher_for
from runs.service import budgets, policies, quotas, stops, workers
from runs.service.attachments import bind_to_turn, claim_for_message, data_url, describe
from runs.service.audit import edit_actions, inputs_of, record
from runs.service.compose import notebook_config
from runs.service.driver import (
    Branches,
    Origin,
    abandon_turn,
    announce_waiting,
    branches_of,
    drive,
    finish,
    over_budget,
    runnable_steps,
    take_abandon_request,
)
from runs.service.lease import Lease, lease_is_dead
from runs.service.policies.rules import stops_before_tools
from runs.service.recovery import interrupt_orphans
from runs.service.runtime import NotebookRuntime, runtime_for, spawn
from runs.store import queries
from runs.store.messages import tick
from runs.store.queries import RUNNABLE, NotebookView, StepView

T = TypeVar("T")
TITLE_CHARS = 80
# with turn workers, how often `wait_settled` reads whether the worker's run still goes on
SETTLED_CHECK_S = 0.2


def _error(code: ErrorCode, reason: str) -> ProtocolError:
    return ProtocolError(code, reason)


# --- checks (synchronous, read-only) -----------------------------------------------------------


def waiting_step(
    task_pk: int, view: NotebookView, step_id: str, *, ran: ErrorCode
) -> StepView:
    """The queued step `step_id` of the active turn, or the reason it cannot be acted on."""
    step = view.step(step_id)
    if step is not None:
        return step
    found = queries.find_step(task_pk, step_id)
    if found is None:
        raise _error(ErrorCode.NOT_FOUND, f"this notebook has no step {step_id!r}")
    if found.completed:
        raise _error(ran, f"step {step_id} has already run (undo it to run it again)")
    raise _error(
        ErrorCode.NOT_ALLOWED,
        f"step {step_id} is not waiting in the active turn (undone or finished)",
    )


def check_send(task_pk: int) -> NotebookView:
    view = queries.notebook_view(task_pk)
    if view.active is not None:
        raise _error(
            ErrorCode.NOT_ALLOWED,
            "a turn is still going on: finish or abandon it before sending a message",
        )
    return view


def check_approve(task_pk: int, step_id: str) -> tuple[str, str]:
    view = queries.notebook_view(task_pk)
    step = waiting_step(task_pk, view, step_id, ran=ErrorCode.ALREADY_RUNNING)
    if step.status not in RUNNABLE:
        raise _error(ErrorCode.ALREADY_RUNNING, f"step {step_id} is already running")
    assert view.active is not None
    return view.active.engine_id, step.step_id


def _editable(task_pk: int, step_id: str) -> tuple[str, StepView]:
    view = queries.notebook_view(task_pk)
    step = waiting_step(task_pk, view, step_id, ran=ErrorCode.NOT_ALLOWED)
    if step.status not in RUNNABLE:
        raise _error(
            ErrorCode.NOT_ALLOWED,
            f"step {step_id} is running; it can no longer be changed",
        )
    assert view.active is not None
    return view.active.engine_id, step


def check_edit(task_pk: int, step_id: str) -> str:
    return _editable(task_pk, step_id)[0]


def check_reject(task_pk: int, step_id: str, tool_id: str) -> str:
    turn_id, step = _editable(task_pk, step_id)
    if step.kind != "tool_calls":
        raise _error(
            ErrorCode.NOT_ALLOWED,
            f"step {step_id} runs no tool calls that could be rejected",
        )
    if tool_id not in step.tool_ids:
        raise _error(
            ErrorCode.NOT_FOUND, f"step {step_id} has no tool call {tool_id!r}"
        )
    return turn_id


def check_undo(
    task_pk: int, step_id: str | None, any_branch: bool = False, alongside: bool = False
) -> tuple[str, str]:
    """The turn and step to undo. With `any_branch` (a parallel runner) any completed step
    of the latest turn may be named; the engine refuses one whose queued steps have run.
    With `alongside`, other branches may be running meanwhile."""
    found = queries.find_step(task_pk, step_id) if step_id is not None else None
    if step_id is not None and found is None:
        raise _error(ErrorCode.NOT_FOUND, f"this notebook has no step {step_id!r}")
    view = queries.notebook_view(task_pk)
    if view.running and not alongside:
        raise _error(
            ErrorCode.NOT_ALLOWED, "a step is running; undo once it has finished"
        )
    turn = view.latest
    if turn is None or turn.last_completed is None:
        raise _error(ErrorCode.NOT_ALLOWED, "there is no completed step to undo")
    last = turn.last_completed.step_id
    if any_branch and step_id is not None and found is not None and found.completed:
        return turn.engine_id, step_id
    if step_id is not None and step_id != last:
        raise _error(
            ErrorCode.NOT_ALLOWED,
            f"step {step_id} is not the last completed step (already undone?)",
        )
    return turn.engine_id, last


def check_abandon(task_pk: int) -> None:
    if queries.notebook_view(task_pk).active is None:
        raise _error(ErrorCode.NOT_ALLOWED, "there is no turn going on to abandon")


def stop_action(
    task_pk: int, by: str, automatic: str | None = None
) -> list[HumanAction]:
    """The `stopped` actions for the active turn: one at each step running (parallel branches
    run side by side), else one at the step that waits."""
    view = queries.notebook_view(task_pk)
    if view.active is None:
        return []  # it finished meanwhile
    turn_id = view.active.engine_id
    if view.running:
        return [
            HumanAction(
                task_id=turn_id,
                step_id=step_id,
                action=HumanActionKind.STOPPED,
                by=by,
                while_running=True,
                automatic=automatic,
            )
            for step_id in view.running
        ]
    waiting = view.active.queue[0].step_id if view.active.queue else None
    stop = HumanAction(
        task_id=turn_id,
        step_id=waiting,
        action=HumanActionKind.STOPPED,
        by=by,
        automatic=automatic,
    )
    return [stop]


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


# --- claiming -------------------------------------------------------------------------------


async def _check(fn: Callable[..., T], *args: object) -> T:
    return await database_sync_to_async(fn)(*args)


async def claim(
    task_pk: int, check: Callable[..., T], *args: object
) -> tuple[Lease, T]:
    """Check, take the lease, check again; the lease and the second check's result."""
    await _check(check, task_pk, *args)
    lease = await Lease.acquire(task_pk)
    if lease is None:
        raise _error(
            ErrorCode.ALREADY_RUNNING,
            "another action on this notebook is in progress; try again when it ends",
        )
    try:
        with lease.fenced():
            await interrupt_orphans(task_pk)  # the lease was stale: its run is gone
        return lease, await _check(check, task_pk, *args)
    except BaseException:
        await lease.release()
        raise


async def _engine_call(
    runtime: NotebookRuntime, lease: Lease, call: Callable[[], Awaitable[object]]
) -> None:
    """Run a short engine call under the lease, mapping engine refusals to protocol errors."""
    try:
        with lease.fenced():
            await call()
    except BaseException as exc:
        raise_refusal(exc)
    finally:
        await finish(runtime, lease)


# --- actions --------------------------------------------------------------------------------


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
        raise _error(ErrorCode.INVALID_INPUT, f"text: {problem}")
    runtime = await runtime_for(task_pk)
    if images:
        accepts_images, attachments = await _check(_message_images, task_pk, images)
    else:  # nothing to claim: no need to read the notebook row again
        accepts_images, attachments = _accepts_images(runtime.agent), []
    lease, view = await claim(task_pk, check_send)
    try:
        with lease.fenced():
            await _check(quotas.take_run, task_pk)
            await _check(set_title, task_pk, text)
            extra_state = await _carried(runtime, view)
            # calls a Stop cut off in the turn before, that may have taken effect: the new turn's
            # model is told of them (runs.engine.stopped_note)
            stopped = await database_sync_to_async(queries.stopped_turn_state)(task_pk)
            extra_state.update(left_untold(stopped))
            if accepts_images:
                # the seed's image_docs, as data URLs: the model server cannot fetch this server's URLs
                extra_state["image_docs"] = [data_url(a) for a in attachments]
            task = await runtime.runner.acreate_task(
                text,
                approve_tool_calls=await _check(stops_before_tools, task_pk, view.mode),
                extra_state=extra_state,
            )
            if attachments:
                await _check(bind_to_turn, attachments, task_pk, task.task_id)
                shown = [describe(a) for a in attachments]
                await publisher_for(task_pk).publish(
                    MessageImages(task_id=task.task_id, images=shown)
                )
            first = await _check(queries.queue_head, task_pk, task.task_id)
            assert first is not None
            # today's budget may be spent already: the first step waits, saying so
            spent_out = await over_budget(runtime, task.task_id)
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


def by_of(origin: Origin | None) -> str:
    return origin.by if origin is not None else ""


def _automatic(origin: Origin | None) -> str | None:
    return origin.automatic if origin is not None else None


async def approve(task_pk: int, step_id: str, origin: Origin | None = None) -> None:
    """Run a waiting step exactly once (then go on as the mode says)."""
    await decide(task_pk, step_id, origin=origin)


async def _edit(
    runtime: NotebookRuntime, turn_id: str, step_id: str, text: str, by: str
) -> None:
    """Apply an edit and record it, before → after (the caller holds the lease)."""
    before = await inputs_of(step_id)
    await runtime.runner.aupdate_step_input(turn_id, step_id, text)
    after = await inputs_of(step_id)
    await record(runtime, edit_actions(turn_id, step_id, before, after, by))


async def _reject(
    runtime: NotebookRuntime,
    turn_id: str,
    step_id: str,
    tool_id: str,
    reason: str,
    by: str,
    automatic: str | None = None,
) -> None:
    """Reject a call and record it with its reason (the caller holds the lease)."""
    await runtime.runner.areject_tool_call(turn_id, step_id, tool_id, reason)
    rejection = HumanAction(
        task_id=turn_id,
        step_id=step_id,
        action=HumanActionKind.REJECTED_CALL,
        by=by,
        tool_id=tool_id,
        reason=reason,
        automatic=automatic,
    )
    await record(runtime, [rejection])


async def edit_input(
    task_pk: int, step_id: str, text: str, origin: Origin | None = None
) -> None:
    """Change a waiting step's input (for a tool-call step: the calls' arguments, as JSON)."""
    runtime = await runtime_for(task_pk)
    found = await _branches_running(runtime, step_id, check_edit)
    if found is not None:  # other branches run: the engine's lock is enough for an edit
        await _alongside(_edit(runtime, found[1], step_id, text, by_of(origin)))
        return
    lease, turn_id = await claim(task_pk, check_edit, step_id)
    await _engine_call(
        runtime, lease, lambda: _edit(runtime, turn_id, step_id, text, by_of(origin))
    )


async def reject_tool_call(
    task_pk: int, step_id: str, tool_id: str, reason: str, origin: Origin | None = None
) -> None:
    """Reject one call of a waiting tool-call step; the model is told the reason instead."""
    runtime = await runtime_for(task_pk)
    found = await _branches_running(runtime, step_id, check_reject, tool_id)
    if found is not None:
        turn = found[1]
        await _alongside(
            _reject(runtime, turn, step_id, tool_id, reason, by_of(origin))
        )
        return
    lease, turn_id = await claim(task_pk, check_reject, step_id, tool_id)
    await _engine_call(
        runtime,
        lease,
        lambda: _reject(runtime, turn_id, step_id, tool_id, reason, by_of(origin)),
    )


async def decide(
    task_pk: int,
    step_id: str,
    inputs: list[str] | None = None,
    rejections: list[tuple[str, str]] | None = None,
    origin: Origin | None = None,
) -> None:
    """A person's whole decision on one waiting step, under one claim of the notebook: its new
    input(s) in order (text, an answer, or the calls' arguments as JSON), the calls rejected
    with their reasons, then its approval; the step then runs as `approve` runs it.

    Of two decisions on the same step at once (two AG-UI resumes of one interrupt), one is
    carried out whole and the other refused with `already_running` before it changes anything:
    never the edits of one and the approval of the other.
    """
    runtime = await runtime_for(task_pk)
    if await join_branches(runtime, step_id, inputs, rejections, origin):
        return
    lease, (turn_id, step) = await claim(task_pk, check_approve, step_id)
    try:
        with lease.fenced():
            await decision(runtime, turn_id, step, inputs, rejections, origin)
    except BaseException as exc:
        await finish(runtime, lease)
        raise_refusal(exc)
    start_run(runtime, lease, turn_id, step, origin)


async def decision(
    runtime: NotebookRuntime,
    turn_id: str,
    step: str,
    inputs: list[str] | None,
    rejections: list[tuple[str, str]] | None,
    origin: Origin | None,
) -> None:
    """Take a run from the person's quota, apply the edits and rejections, record the approval
    (an automatic one, as the deadline's, says so and why)."""
    by, automatic = by_of(origin), _automatic(origin)
    ready = {s.step_id for s in await runnable_steps(runtime, turn_id)}
    if step not in ready:
        # e.g. a parallel turn's synthesis while branches wait: its approval would be recorded
        # and then not run (the engine refuses it), so the audit would hold a decision that
        # never took effect
        raise _error(
            ErrorCode.NOT_ALLOWED,
            f"step {step} cannot run yet: it waits for the steps before it",
        )
    spent_out = await _check(budgets.budget_wait, step)
    if spent_out is not None and automatic is not None:
        raise _error(
            ErrorCode.NOT_ALLOWED, "only a person may let a run spend past its budget"
        )
    if automatic is None:  # the server's own decision is not the person's run to count
        await _check(quotas.take_run, runtime.task_pk)  # refused: nothing changed yet
    for text in inputs or []:
        await _edit(runtime, turn_id, step, text, by)
    for tool_id, reason in rejections or []:
        await _reject(runtime, turn_id, step, tool_id, reason, by, automatic)
    if spent_out is not None:  # it waited on a budget: approving raises it, on record
        await record(runtime, [budgets.raise_action(turn_id, step, spent_out, by)])
    approval = HumanAction(
        task_id=turn_id,
        step_id=step,
        action=HumanActionKind.APPROVED,
        by=by,
        automatic=automatic,
    )
    await record(runtime, [approval])
    if automatic is None:  # a person's approval: a rule that asks once remembers it
        await _check(policies.remember_asked_once, runtime.task_pk, step, by)


async def _branches_running(
    runtime: NotebookRuntime, step_id: str, check: Callable[..., T], *args: object
) -> tuple[Branches, T] | None:
    """The run a waiting branch of a parallel runner can join, and `check`'s result; None
    when there is none in this process (the action then claims the notebook as usual)."""
    if branches_of(runtime.task_pk) is None:  # no branch runs here: no query needed
        return None
    view = await _check(queries.notebook_view, runtime.task_pk)
    if (
        view.active is None
        or branches_of(runtime.task_pk, view.active.engine_id) is None
    ):
        return None
    checked = await _check(check, runtime.task_pk, step_id, *args)
    run = branches_of(runtime.task_pk, view.active.engine_id)
    if run is None:
        return None
    if step_id in run.claimed:
        raise _error(ErrorCode.ALREADY_RUNNING, f"step {step_id} is already running")
    return run, checked


async def join_branches(
    runtime: NotebookRuntime,
    step_id: str,
    inputs: list[str] | None,
    rejections: list[tuple[str, str]] | None,
    origin: Origin | None,
) -> bool:
    """Approve a waiting branch while other branches of its turn run here: it joins their run
    (which holds the lease) and runs beside them. False when there is no such run."""
    found = await _branches_running(runtime, step_id, check_approve)
    if found is None:
        return False
    run, (turn_id, step) = found
    if not run.reserve(step):  # another approval won the race, or the run just ended
        raise _error(ErrorCode.ALREADY_RUNNING, f"step {step} is already running")
    try:
        await decision(runtime, turn_id, step, inputs, rejections, origin)
    except BaseException as exc:
        run.unreserve(step)
        raise_refusal(exc)
    run.start(step)
    return True


async def _alongside(call: Awaitable[object]) -> None:
    """An engine call made while other branches run (no lease: the runner's lock orders it)."""
    try:
        await call
    except BaseException as exc:
        raise_refusal(exc)


def raise_refusal(exc: BaseException) -> NoReturn:
    """Raise an engine refusal as the protocol error a person sees; anything else as it is."""
    if isinstance(exc, ToolArgumentsError):
        raise _error(ErrorCode.INVALID_TOOL_ARGUMENTS, str(exc)) from None
    if isinstance(exc, AgentError):
        raise _error(ErrorCode.NOT_ALLOWED, str(exc)) from None
    raise exc


async def undo(
    task_pk: int, step_id: str | None = None, origin: Origin | None = None
) -> None:
    """Undo the last completed step (exactly that one, when `step_id` names it); it waits again.

    The undo is recorded as the person's action (who, when, which step), like an edit."""
    runtime = await runtime_for(task_pk)
    branches = runtime.runner.runs_branches
    if step_id is not None:
        found = await _branches_running(runtime, step_id, check_undo, True, True)
        if found is not None:  # a finished branch, while others run
            await _alongside(_undo(runtime, *found[1], by_of(origin)))
            return
    lease, (turn_id, target) = await claim(task_pk, check_undo, step_id, branches)
    try:
        with lease.fenced():
            await _undo(runtime, turn_id, target, by_of(origin))
    except AgentError as exc:
        raise _error(ErrorCode.NOT_ALLOWED, str(exc)) from None
    finally:
        await finish(runtime, lease)


async def _undo(runtime: NotebookRuntime, turn_id: str, target: str, by: str) -> None:
    """Undo `target` (any completed branch of a parallel runner; else the last step), record who did, and announce it."""
    # exactly the step the checks found: the engine refuses it unless it may be undone
    undone = await runtime.runner.aundo_step(turn_id, target)
    taken_back = HumanAction(
        task_id=turn_id,
        step_id=undone.step_id,
        action=HumanActionKind.UNDONE,
        by=by,
    )
    await record(runtime, [taken_back])
    await announce_waiting(runtime, turn_id, undone.step_id)


async def abandon(task_pk: int, origin: Origin | None = None) -> None:
    """Abandon the active turn now, or after the step that is running."""
    await _check(check_abandon, task_pk)
    await _check(request_abandon, task_pk)
    runtime = await runtime_for(task_pk)
    stops_at = await _check(stop_action, task_pk, by_of(origin), _automatic(origin))
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
            if await _check(take_abandon_request, task_pk):
                view = await _check(queries.notebook_view, task_pk)
                if view.active is not None:
                    await abandon_turn(runtime, view.active.engine_id)
    finally:
        await finish(runtime, lease)


async def set_mode(task_pk: int, mode: str) -> None:
    """Change the approval mode; it applies from the next step."""
    changed, turn_id = await _check(apply_mode, task_pk, mode)
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
