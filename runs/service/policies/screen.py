"""Approval policies at work: a waiting tool-call step screened before anyone is asked, and
an approval remembered where a rule asks once per notebook.

Each automatic decision is recorded like a person's (`human_action` events `auto_refused` and
`auto_approved`, naming the rule as it stood, or for a read-only tool of a trusted server,
saying so in its reason), so the audit says what ran and who decided.
"""

from __future__ import annotations

from dataclasses import dataclass

from channels.db import database_sync_to_async

from runs.engine import PendingToolCall, StepKind, TaskStep, ToolCallDecision
from runs.models import PolicyDecision, Step, Task, ToolPolicy
from runs.protocol import HumanAction, HumanActionKind
from runs.service.audit import record
from runs.service.policies.rules import Verdict, applied, verdicts
from runs.service.policies.trusted import read_only_tools, unasked_reason
from runs.service.runtime import NotebookRuntime

ASKING = (PolicyDecision.ASK, PolicyDecision.ASK_ONCE)


@dataclass(frozen=True)
class Allowed:
    """A call that may run without asking: allowed by `rule`, or (no rule deciding it) a
    read-only tool of the trusted server `server` (runs.service.policies.trusted)."""

    call: PendingToolCall
    rule: ToolPolicy | None = None
    server: str = ""


@dataclass(frozen=True)
class Screening:
    """What the rules made of a step: `asks` (a rule wants the person), `allowed` (every call
    left is allowed by a rule or is a trusted read-only tool: the step may run without asking),
    or neither (the mode decides)."""

    asks: bool = False
    allowed: tuple[Allowed, ...] = ()
    refused_all: bool = False  # the step runs unasked, to tell the model

    @property
    def decided(self) -> bool:
        """Whether the rules decided every call (the step runs without asking in any mode)."""
        return bool(self.allowed) or self.refused_all


NOTHING = Screening()


def _pending(step: TaskStep) -> list[PendingToolCall]:
    if step.kind is not StepKind.TOOL_CALLS:
        return []
    return [c for c in step.tool_calls or [] if c.decision is ToolCallDecision.PENDING]


def refusal_reason(rule: ToolPolicy) -> str:
    said = f": {rule.reason}" if rule.reason else ""
    return (
        f"refused by approval rule #{rule.pk} ({rule.tool} is never allowed here){said}"
    )


async def screen(runtime: NotebookRuntime, turn_id: str, step: TaskStep) -> Screening:
    """Refuse the step's calls a rule refuses (the model is told the rule's reason), then say
    whether the rest asks, is allowed, or is left to the mode. Called under the run's lease."""
    calls = _pending(step)
    if not calls:
        return NOTHING
    found: list[Verdict] = await database_sync_to_async(verdicts)(
        runtime.task_pk, [(c.tool_name, c.tool_kwargs) for c in calls]
    )
    read_only: dict[str, str] = {}
    if any(v.decision is None for v in found):
        read_only = await database_sync_to_async(read_only_tools)(runtime.task_pk)
    left: list[tuple[PendingToolCall, Verdict]] = []
    for call, verdict in zip(calls, found, strict=True):
        if verdict.decision == PolicyDecision.REFUSE and verdict.rule is not None:
            await _refuse(runtime, turn_id, step.step_id, call, verdict.rule)
        else:
            left.append((call, verdict))
    if not left:
        return Screening(refused_all=True)
    if any(v.decision in ASKING for _, v in left):
        return Screening(asks=True)
    allowed = tuple(_allowed(call, v, read_only) for call, v in left)
    if all(a is not None for a in allowed):
        return Screening(allowed=tuple(a for a in allowed if a is not None))
    return NOTHING


def _allowed(
    call: PendingToolCall, verdict: Verdict, read_only: dict[str, str]
) -> Allowed | None:
    if verdict.decision == PolicyDecision.ALLOW and verdict.rule is not None:
        return Allowed(call, rule=verdict.rule)
    if verdict.decision is None and call.tool_name in read_only:
        return Allowed(call, server=read_only[call.tool_name])
    return None


async def _refuse(
    runtime: NotebookRuntime,
    turn_id: str,
    step_id: str,
    call: PendingToolCall,
    rule: ToolPolicy,
) -> None:
    await runtime.runner.areject_tool_call(
        turn_id, step_id, call.tool_id, refusal_reason(rule)
    )
    refusal = HumanAction(
        task_id=turn_id,
        step_id=step_id,
        action=HumanActionKind.AUTO_REFUSED,
        by=rule.set_by,
        tool_id=call.tool_id,
        reason=refusal_reason(rule),
        rule=applied(rule),
    )
    await record(runtime, [refusal])


async def record_approvals(
    runtime: NotebookRuntime, turn_id: str, step_id: str, screening: Screening
) -> None:
    """One `auto_approved` per call a rule, or a trusted server's read-only hint, let run
    without asking (the latter names no rule: its reason says why)."""
    await record(
        runtime,
        [
            HumanAction(
                task_id=turn_id,
                step_id=step_id,
                action=HumanActionKind.AUTO_APPROVED,
                by=a.rule.set_by if a.rule is not None else "",
                tool_id=a.call.tool_id,
                rule=applied(a.rule) if a.rule is not None else None,
                reason=None if a.rule is not None else unasked_reason(a.server),
            )
            for a in screening.allowed
        ],
    )


def remember_asked_once(task_pk: int, step_id: str, by: str) -> list[ToolPolicy]:
    """After a person approved `step_id`: for each call it runs that a rule asks about once
    per notebook, a rule of this notebook that allows such calls from now on."""
    row = Step.objects.filter(step_id=step_id).values_list("kind", "tool_calls").first()
    if row is None or row[0] != StepKind.TOOL_CALLS or not row[1]:
        return []
    calls = [c for c in row[1] if c.get("decision") != ToolCallDecision.REJECTED]
    found = verdicts(
        task_pk, [(c["tool_name"], c.get("tool_kwargs") or {}) for c in calls]
    )
    remembered: list[ToolPolicy] = []
    owner = Task.objects.values_list("owner_id", flat=True).get(pk=task_pk)
    for verdict in found:
        rule = verdict.rule
        if verdict.decision != PolicyDecision.ASK_ONCE or rule is None:
            continue
        if any(
            r.tool == rule.tool and r.condition == rule.condition for r in remembered
        ):
            continue
        remembered.append(
            ToolPolicy.objects.create(
                tool=rule.tool,
                decision=PolicyDecision.ALLOW,
                condition=rule.condition,
                reason=f"approved once by {by or 'a person'}, as rule #{rule.pk} asks",
                notebook_id=task_pk,
                owner_id=owner,
                set_by=by,
            )
        )
    return remembered
