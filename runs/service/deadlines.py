"""Deadlines of waiting steps: when one passes, the notebook's default action is taken for the person.

Every `AGENTUI_DEADLINE_SWEEP_S` each server process looks at the waiting notebooks
(runs.service.waiting) and, for a step whose deadline has passed, takes the action through the
same `decide` a person's click takes (a stop: the same claim of the lease, checked again under
it, then the turn abandoned as Stop abandons it): it happens once, whichever processes sweep at
the same time, and a person's decision that wins the race is simply kept (the sweep then finds
the step no longer waiting and gives up). The audit records the
action as automatic, with why: "rejected automatically: the deadline of 10 min passed".

Actions: `reject` rejects a tool-call step's calls with that reason (the model is told, the run
goes on), answers a Team question with it, and stops any other step's turn (there is nothing
to reject); `stop` stops the turn. "Approve" needs an approval policy that allows the call;
policies are not built yet, so `approve_allowed` is the hook that says no.
"""

from __future__ import annotations

import logging
import time

from channels.db import database_sync_to_async

from runs.conf import conf
from runs.models import DeadlineAction, Task
from runs.protocol import ErrorCode, HumanAction, HumanActionKind, ProtocolError
from runs.service.audit import record
from runs.service.claims import claim
from runs.service.dispatch import perform
from runs.service.driver import Origin, abandon_turn, finish
from runs.service.runtime import runtime_for
from runs.service.waiting import WaitingStep, waiting_notebooks, waiting_step
from runs.service.worker_actions import Decide

logger = logging.getLogger(__name__)


def overdue(now: float | None = None) -> list[WaitingStep]:
    """Every waiting step whose deadline has passed, of any person."""
    moment = time.time() if now is None else now
    found = []
    candidates = waiting_notebooks().filter(wait_deadline_s__gt=0)
    if conf().wait_deadline_s > 0:  # the default applies to notebooks without their own
        candidates |= waiting_notebooks().filter(wait_deadline_s__isnull=True)
    for task in candidates.order_by("updated_at")[:1000]:
        step = waiting_step(task)
        if (
            step is not None
            and step.deadline_at is not None
            and step.deadline_at <= moment
        ):
            found.append(step)
    return found


def approve_allowed(step: WaitingStep) -> bool:
    """Whether an approval policy lets a passed deadline approve this step (none yet does)."""
    return False


def reason_of(step: WaitingStep) -> str:
    return f"the deadline of {step.deadline.words} passed"


async def act_on(step: WaitingStep) -> str:
    """Take the deadline's action on `step`; what was done ('rejected', 'answered', 'stopped')."""
    why = reason_of(step)
    origin = Origin(action="deadline", automatic=why)
    if step.budget:  # only a person lets a run spend past its budget: the turn stops
        await _stop(step, why)
        return "stopped"
    if step.deadline.action == DeadlineAction.REJECT:
        if step.kind == "tool_calls" and step.calls:
            rejections = [
                (c.tool_id, f"Rejected automatically: {why}.") for c in step.calls
            ]
            decision = Decide(step_id=step.step_id, rejections=rejections)
            await perform(step.notebook, decision, origin)
            return "rejected"
        if step.kind == "human_input":
            answer = f"(No answer: {why}.)"
            await perform(
                step.notebook, Decide(step_id=step.step_id, inputs=[answer]), origin
            )
            return "answered"
    await _stop(step, why)
    return "stopped"


def _still_waits(task_pk: int, step_id: str, since: float) -> str:
    """The turn of the step that waits since `since`, or why it no longer does (a person, or
    another process's sweep, got there first)."""
    now = waiting_step(Task.objects.get(pk=task_pk))
    if now is None or now.step_id != step_id or now.since != since:
        raise ProtocolError(
            ErrorCode.NOT_ALLOWED, f"step {step_id} no longer waits (decided meanwhile)"
        )
    return now.turn_id


async def _stop(step: WaitingStep, why: str) -> None:
    """Stop the turn the step waits in, under the notebook's lease (checked again under it, so
    of several sweeps or a person's click at the same moment one acts, once)."""
    lease, turn_id = await claim(step.notebook, _still_waits, step.step_id, step.since)
    runtime = await runtime_for(step.notebook)
    try:
        with lease.fenced():
            stop = HumanAction(
                task_id=turn_id,
                step_id=step.step_id,
                action=HumanActionKind.STOPPED,
                by="",
                automatic=why,
            )
            await record(runtime, [stop])
            await abandon_turn(runtime, turn_id)
    finally:
        await finish(runtime, lease)


async def sweep_once(now: float | None = None) -> int:
    """Act on every step overdue at `now` (default: now); how many this process acted on."""
    acted = 0
    for step in await database_sync_to_async(overdue)(now):
        try:
            done = await act_on(step)
        except ProtocolError as exc:  # a person or another process got there first
            logger.info("deadline of step %s: %s", step.step_id, exc.reason)
            continue
        acted += 1
        logger.info(
            "notebook %s: step %s %s automatically (%s)",
            step.notebook,
            step.step_id,
            done,
            reason_of(step),
        )
    return acted


MAX_DEADLINE_S = 7 * 24 * 3600


def set_deadline(task_pk: int, seconds: int | None, action: str) -> None:
    """Set the notebook's deadline for waiting steps (None: the settings' default; 0: none)
    and its action ("": the default). It applies to steps that start waiting from now on."""
    if seconds is not None and not 0 <= seconds <= MAX_DEADLINE_S:
        raise ProtocolError(
            ErrorCode.INVALID_INPUT,
            f"a deadline is 0 (none) to {MAX_DEADLINE_S} seconds (7 days)",
        )
    if action not in ("", *DeadlineAction.values):
        raise ProtocolError(
            ErrorCode.INVALID_INPUT,
            f"the action must be one of {', '.join(DeadlineAction.values)}",
        )
    Task.objects.filter(pk=task_pk).update(
        wait_deadline_s=seconds, wait_deadline_action=action
    )
