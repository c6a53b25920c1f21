"""A person's decisions on a waiting step: approve it, edit its input, reject a call, undo it.

Each is claimed as runs.service.claims says; on a parallel runner a branch's decision joins the
run of the branches already going in this process instead (no second claim of the notebook).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from runs.engine import AgentError
from runs.protocol import ErrorCode, HumanAction, HumanActionKind
from runs.service import budgets, policies, quotas
from runs.service.audit import edit_actions, inputs_of, record
from runs.service.claims import (
    automatic_of,
    by_of,
    check_approve,
    check_edit,
    check_reject,
    check_undo,
    claim,
    engine_call,
    in_thread,
    raise_refusal,
    refused,
)
from runs.service.driver import (
    Branches,
    Origin,
    announce_waiting,
    branches_of,
    finish,
    runnable_steps,
)
from runs.service.runtime import NotebookRuntime, runtime_for
from runs.service.turn_actions import start_run
from runs.store import queries

T = TypeVar("T")


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
    await engine_call(
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
    await engine_call(
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
    by, automatic = by_of(origin), automatic_of(origin)
    ready = {s.step_id for s in await runnable_steps(runtime, turn_id)}
    if step not in ready:
        # e.g. a parallel turn's synthesis while branches wait: its approval would be recorded
        # and then not run (the engine refuses it), so the audit would hold a decision that
        # never took effect
        raise refused(
            ErrorCode.NOT_ALLOWED,
            f"step {step} cannot run yet: it waits for the steps before it",
        )
    spent_out = await in_thread(budgets.budget_wait, step)
    if spent_out is not None and automatic is not None:
        raise refused(
            ErrorCode.NOT_ALLOWED, "only a person may let a run spend past its budget"
        )
    if automatic is None:  # the server's own decision is not the person's run to count
        await in_thread(
            quotas.take_run, runtime.task_pk
        )  # refused: nothing changed yet
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
        await in_thread(policies.remember_asked_once, runtime.task_pk, step, by)


async def _branches_running(
    runtime: NotebookRuntime, step_id: str, check: Callable[..., T], *args: object
) -> tuple[Branches, T] | None:
    """The run a waiting branch of a parallel runner can join, and `check`'s result; None
    when there is none in this process (the action then claims the notebook as usual)."""
    if branches_of(runtime.task_pk) is None:  # no branch runs here: no query needed
        return None
    view = await in_thread(queries.notebook_view, runtime.task_pk)
    if (
        view.active is None
        or branches_of(runtime.task_pk, view.active.engine_id) is None
    ):
        return None
    checked = await in_thread(check, runtime.task_pk, step_id, *args)
    run = branches_of(runtime.task_pk, view.active.engine_id)
    if run is None:
        return None
    if step_id in run.claimed:
        raise refused(ErrorCode.ALREADY_RUNNING, f"step {step_id} is already running")
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
        raise refused(ErrorCode.ALREADY_RUNNING, f"step {step} is already running")
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
        raise refused(ErrorCode.NOT_ALLOWED, str(exc)) from None
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
