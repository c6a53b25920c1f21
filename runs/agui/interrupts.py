"""What a paused run waits for, as AG-UI interrupts, and how `resume` entries answer them.

A notebook's active turn waits for the person at the steps the driver would run next. Each
becomes one or more `Interrupt`s: a step waiting for approval (`step_approval`), each pending
call of a tool-call step in `tools` mode (`tool_call_approval`, with the call's id), or each open
question of a Team notebook (`input_required`); a step waiting because a budget was reached is
one `budget_reached` interrupt (approving it raises the budget, on record). Ids say what they answer:
`step:<step>`, `call:<step>:<tool call>`, `question:<step>:<waiter>`.

`plan_resume` checks a run's `resume` entries against the interrupts pending now, all of them
before anything changes, and gives the service calls that carry them out (`carry_out`): the
same calls, with the same stored events, as the buttons of the notebook page.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ag_ui.core import Interrupt, ResumeEntry

from runs import service
from runs.protocol import MAX_TEXT_CHARS, ErrorCode, ProtocolError, validate_action
from runs.protocol.checks import storable_problem
from runs.service import PendingStep

STEP_APPROVAL = "step_approval"
TOOL_CALL_APPROVAL = "tool_call_approval"
INPUT_REQUIRED = "input_required"
BUDGET_REACHED = "budget_reached"

_STEP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {"enum": ["approve", "edit"]},
        "input": {"type": "string", "description": "the step's new input (edit)"},
    },
}
_CALL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {"enum": ["approve", "edit", "reject"]},
        "arguments": {
            "type": "object",
            "description": "the call's new arguments (edit)",
        },
        "reason": {"type": "string", "description": "told to the model (reject)"},
    },
}
_BUDGET_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"action": {"enum": ["approve"]}},
}
_ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
}


@dataclass(frozen=True)
class Pending:
    """One interrupt and what it points at."""

    interrupt: Interrupt
    step_id: str
    tool_id: str | None = None
    waiter_id: str | None = None


@dataclass
class StepDecision:
    """What to do to one waiting step: edit it (input text), reject calls, then approve it."""

    step_id: str
    edit: str | None = None
    call_edits: list[dict[str, Any]] = field(default_factory=list)
    rejections: list[tuple[str, str]] = field(default_factory=list)
    answers: dict[str, str] = field(default_factory=dict)


@dataclass
class ResumePlan:
    steps: list[StepDecision] = field(default_factory=list)
    stop: bool = False  # an interrupt was cancelled: stop the turn


def _invalid(reason: str) -> ProtocolError:
    return ProtocolError(ErrorCode.INVALID_INPUT, reason)


# --- what is pending ---------------------------------------------------------------------------


async def pending(task_pk: int) -> list[Pending]:
    """The interrupts of the notebook's active turn, in the order its steps would run."""
    found: list[Pending] = []
    for step in await service.pending_steps(task_pk):
        if step.asks == "budget":
            found.append(_budget(step))
        elif step.asks == "answers":
            found += _questions(step)
        elif step.asks == "calls":
            found += _calls(step)
        else:
            found.append(_step(step))
    return found


def _step(step: PendingStep) -> Pending:
    shown = step.input.strip()
    return Pending(
        Interrupt(
            id=f"step:{step.step_id}",
            reason=STEP_APPROVAL,
            message=f"Run the {step.kind.replace('_', ' ')} step"
            + (f": {shown[:500]}" if shown else ""),
            response_schema=_STEP_SCHEMA,
            metadata={"step_id": step.step_id, "kind": step.kind},
        ),
        step.step_id,
    )


def _budget(step: PendingStep) -> Pending:
    """A step that waits because spending reached a budget: resuming it with `approve` raises
    the budget (recorded) and runs it; cancelling the interrupt stops the turn."""
    budget = step.budget or {}
    return Pending(
        Interrupt(
            id=f"step:{step.step_id}",
            reason=BUDGET_REACHED,
            message=f"The {str(budget.get('reason'))}; approve to raise it to "
            f"{budget.get('raise_words')} and go on",
            response_schema=_BUDGET_SCHEMA,
            metadata={
                "step_id": step.step_id,
                "kind": step.kind,
                "budget": budget,
            },
        ),
        step.step_id,
    )


def _calls(step: PendingStep) -> list[Pending]:
    return [
        Pending(
            Interrupt(
                id=f"call:{step.step_id}:{call.tool_id}",
                reason=TOOL_CALL_APPROVAL,
                message=f"Run {call.tool_name}({json.dumps(call.arguments)})",
                tool_call_id=call.tool_id,
                response_schema=_CALL_SCHEMA,
                metadata={
                    "step_id": step.step_id,
                    "tool_name": call.tool_name,
                    "arguments": call.arguments,
                    # a plan's call: as planned, with its references ("$1", "y1")
                    "planned_arguments": call.planned_arguments,
                },
            ),
            step.step_id,
            tool_id=call.tool_id,
        )
        for call in step.calls
    ]


def _questions(step: PendingStep) -> list[Pending]:
    return [
        Pending(
            Interrupt(
                id=f"question:{step.step_id}:{question.waiter_id}",
                reason=INPUT_REQUIRED,
                message=question.prefix
                if question.prefix is not None
                else "a question from a tool",
                tool_call_id=question.tool_id,
                response_schema=_ANSWER_SCHEMA,
                metadata={"step_id": step.step_id, "agent": question.agent},
            ),
            step.step_id,
            waiter_id=question.waiter_id,
        )
        for question in step.questions
    ]


# --- answering them ----------------------------------------------------------------------------


def _payload(entry: ResumeEntry) -> dict[str, Any]:
    raw = entry.payload
    if raw is None:
        return {}
    if isinstance(raw, str):
        return {"answer": raw}
    if not isinstance(raw, dict):
        raise _invalid(f"resume {entry.interrupt_id}: payload must be an object")
    return raw


def _text(value: Any, what: str, *, limit: int = MAX_TEXT_CHARS) -> str:
    if not isinstance(value, str):
        raise _invalid(f"{what} must be a string")
    if len(value) > limit:
        raise _invalid(f"{what} may be at most {limit} characters")
    problem = storable_problem(value)
    if problem is not None:
        raise _invalid(f"{what}: {problem}")
    return value


def plan_resume(entries: list[ResumeEntry], waiting: list[Pending]) -> ResumePlan:
    """Check `entries` against the pending interrupts; ProtocolError (nothing done) if they don't fit."""
    by_id = {p.interrupt.id: p for p in waiting}
    seen: set[str] = set()
    plan = ResumePlan()
    decisions: dict[str, StepDecision] = {}
    for entry in entries:
        target = by_id.get(entry.interrupt_id)
        if target is None:
            raise ProtocolError(
                ErrorCode.NOT_ALLOWED,
                f"interrupt {entry.interrupt_id!r} is not pending (answered, undone or "
                "stopped meanwhile?); pending: " + (", ".join(by_id) or "none"),
            )
        if entry.interrupt_id in seen:
            raise _invalid(f"interrupt {entry.interrupt_id!r} is answered twice")
        seen.add(entry.interrupt_id)
        if entry.status == "cancelled":
            plan.stop = True
            continue
        decision = decisions.setdefault(target.step_id, StepDecision(target.step_id))
        _decide(decision, target, _payload(entry))
    missing = [i for i in by_id if i not in seen]
    if missing:
        raise _invalid(
            "resume must answer every pending interrupt; missing: " + ", ".join(missing)
        )
    in_order = dict.fromkeys(
        p.step_id for p in waiting
    )  # the steps in the order they run
    plan.steps = [decisions[sid] for sid in in_order if sid in decisions]
    return plan


def _decide(decision: StepDecision, target: Pending, payload: dict[str, Any]) -> None:
    where = f"resume {target.interrupt.id}"
    action = payload.get("action", "approve")
    if target.waiter_id is not None:
        decision.answers[target.waiter_id] = _text(
            payload.get("answer"), f"{where}: answer"
        )
        return
    if target.tool_id is not None:
        if action == "edit":
            arguments = payload.get("arguments")
            if not isinstance(arguments, dict):
                raise _invalid(f"{where}: an edit needs arguments (an object)")
            decision.call_edits.append(
                {"tool_id": target.tool_id, "tool_kwargs": arguments}
            )
        elif action == "reject":
            reason = _text(payload.get("reason", ""), f"{where}: reason", limit=2000)
            decision.rejections.append((target.tool_id, reason))
        elif action != "approve":
            raise _invalid(f"{where}: action must be approve, edit or reject")
        return
    if action == "edit":
        decision.edit = _text(payload.get("input"), f"{where}: input")
    elif action != "approve":
        raise _invalid(
            f"{where}: action must be approve or edit (a step has no reject)"
        )


async def begin(task_pk: int, plan: ResumePlan, origin: service.Origin) -> None:
    """The plan's first service call: Stop, or the first step's whole decision (one claim of
    the notebook). Awaited before the run's response, so of several resumes of the same
    interrupts at once one goes on and the others are refused (409) having changed nothing."""
    if plan.stop:
        await service.perform(task_pk, validate_action({"action": "abandon"}), origin)
    elif plan.steps:
        await _decide_step(task_pk, plan.steps[0], origin)


async def carry_on(task_pk: int, plan: ResumePlan, origin: service.Origin) -> None:
    """The rest of `plan` once `begin` has taken it: each step's run ends before the next."""
    await service.wait_settled(task_pk)
    if plan.stop:
        return
    for decision in plan.steps[1:]:
        await _decide_step(task_pk, decision, origin)
        await service.wait_settled(task_pk)


async def _decide_step(
    task_pk: int, decision: StepDecision, origin: service.Origin
) -> None:
    inputs = []
    if decision.answers:
        answers = decision.answers
        inputs.append(
            next(iter(answers.values())) if len(answers) == 1 else json.dumps(answers)
        )
    if decision.edit is not None:
        inputs.append(decision.edit)
    if decision.call_edits:
        inputs.append(json.dumps(decision.call_edits))
    made = service.Decide(
        step_id=decision.step_id, inputs=inputs, rejections=list(decision.rejections)
    )
    await service.perform(task_pk, made, origin)
