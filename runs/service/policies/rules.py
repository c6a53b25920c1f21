"""Approval policies: which rules apply to a notebook, what they decide for a call, and
setting and revoking them (synchronous; callers wrap them in database_sync_to_async).

Of the active rules that apply to a notebook and match a call (its tool, and its condition):
a refusing rule always wins; otherwise the most specific one decides: this notebook's, then the
owner's own (all their notebooks), then the admin's default for the notebook's agent preset,
then for one of the owner's groups, then for everyone. At one level a rule with a condition
beats one without, and a newer rule an older one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User
from django.db.models import Q, Subquery
from django.utils import timezone

from runs.models import ApprovalMode, PolicyDecision, Task, ToolPolicy
from runs.protocol import AppliedRule, ErrorCode, ProtocolError
from runs.service.policies.match import ConditionError, matches, parse_condition

MAX_RULES_PER_PERSON = 200
_SCOPES = ("notebook", "mine")


@dataclass(frozen=True)
class Verdict:
    """What the rules decide for one call: a PolicyDecision, or None (no rule: the mode decides)."""

    decision: str | None
    rule: ToolPolicy | None = None


def level(rule: ToolPolicy) -> int:
    """0 for the most specific scope (a notebook's) to 4 (everyone's default)."""
    if rule.notebook_id is not None:
        return 0
    if rule.owner_id is not None:
        return 1
    if rule.preset:
        return 2
    return 3 if rule.group_id is not None else 4


def scope_text(rule: ToolPolicy) -> str:
    if rule.notebook_id is not None:
        return f"in notebook {rule.notebook_id}"
    if rule.owner_id is not None:
        return "in all my notebooks"
    if rule.preset:
        return f"default for the {rule.preset} agent"
    if rule.group is not None:
        return f"default for group {rule.group.name}"
    return "default for everyone"


def summary(rule: ToolPolicy) -> str:
    """How the card and the trace name the rule: 'always allow multiply when a=2'."""
    verb = {
        PolicyDecision.ASK: "always ask before",
        PolicyDecision.ASK_ONCE: "ask once per notebook before",
        PolicyDecision.ALLOW: "always allow",
        PolicyDecision.REFUSE: "never allow",
    }[PolicyDecision(rule.decision)]
    when = f" when {rule.condition}" if rule.condition else ""
    return f"{verb} {rule.tool}{when}"


def applied(rule: ToolPolicy) -> AppliedRule:
    return AppliedRule(
        id=rule.pk,
        summary=summary(rule),
        set_by=rule.set_by,
        set_at=rule.created_at.timestamp(),
    )


def applicable(task_pk: int) -> list[ToolPolicy]:
    """The active rules that apply to the notebook, most specific first."""
    # one statement, the notebook's owner, agent and the owner's groups read in it (every turn
    # makes this lookup: reading the notebook's and its owner's whole rows first was most of
    # its cost); a deleted notebook has no owner or agent: only its own and everyone's rules
    notebook = Task.objects.filter(pk=task_pk)
    owner_id = Subquery(notebook.values("owner_id")[:1])
    agent = Subquery(notebook.values("agent")[:1])
    groups = User.groups.through.objects.filter(user_id=owner_id).values("group_id")
    everyone = Q(notebook=None, owner=None, preset="", group=None)
    rules = list(
        ToolPolicy.objects.filter(revoked_at__isnull=True)
        .filter(
            Q(notebook_id=task_pk)
            | Q(owner_id=owner_id, notebook=None)
            | Q(preset=agent, notebook=None, owner=None)
            | Q(group__in=groups, notebook=None, owner=None, preset="")
            | everyone
        )
        .select_related("group")
    )
    rules.sort(
        key=lambda r: (level(r), not r.condition, -r.created_at.timestamp(), -r.pk)
    )
    return rules


def verdict(rules: list[ToolPolicy], tool: str, arguments: dict[str, Any]) -> Verdict:
    """What `rules` (most specific first) decide for a call of `tool` with `arguments`."""
    matching = [
        r
        for r in rules
        if r.tool == tool and matches(parse_condition(r.condition), arguments)
    ]
    for rule in matching:
        if rule.decision == PolicyDecision.REFUSE:
            return Verdict(PolicyDecision.REFUSE, rule)
    return Verdict(matching[0].decision, matching[0]) if matching else Verdict(None)


def verdicts(task_pk: int, calls: list[tuple[str, dict[str, Any]]]) -> list[Verdict]:
    rules = applicable(task_pk)
    return [verdict(rules, tool, arguments) for tool, arguments in calls]


def gates_calls(task_pk: int) -> bool:
    """Whether a rule must see the notebook's tool calls before they run (one that asks or
    refuses applies): its turns then stop before tool calls in every mode, as in `tools`."""
    return any(r.decision != PolicyDecision.ALLOW for r in applicable(task_pk))


def stops_before_tools(task_pk: int, mode: str) -> bool:
    """A turn's `approve_tool_calls`: its tool calls are steps of their own, to approve or screen."""
    return mode == ApprovalMode.TOOLS or gates_calls(task_pk)


# --- setting and revoking -----------------------------------------------------------------------


def _invalid(reason: str) -> ProtocolError:
    return ProtocolError(ErrorCode.INVALID_INPUT, reason)


@dataclass(frozen=True)
class RuleSpec:
    """A rule as a person asks for it (checked by `create_rule`)."""

    tool: str
    decision: str
    scope: str  # "notebook": the notebook it is set from; "mine": all the person's notebooks
    condition: str = ""
    reason: str = ""


def create_rule(
    person: User, spec: RuleSpec, notebook_pk: int | None = None
) -> ToolPolicy:
    """A person's rule for one notebook (`scope` "notebook") or all theirs ("mine")."""
    tool, decision, scope = spec.tool.strip(), spec.decision, spec.scope
    condition, reason = spec.condition, spec.reason
    if not tool or len(tool) > 128:
        raise _invalid("tool: name a tool (at most 128 characters)")
    if decision not in PolicyDecision.values:
        raise _invalid(f"decision: one of {', '.join(PolicyDecision.values)}")
    if scope not in _SCOPES:
        raise _invalid(f"scope: one of {', '.join(_SCOPES)}")
    if scope == "notebook" and notebook_pk is None:
        raise _invalid("scope: a notebook rule needs its notebook")
    if (
        notebook_pk is not None
        and not Task.objects.filter(pk=notebook_pk, owner=person).exists()
    ):
        raise ProtocolError(ErrorCode.NOT_FOUND, f"you have no notebook {notebook_pk}")
    if len(reason) > 500:
        raise _invalid("reason: at most 500 characters")
    try:
        parse_condition(condition)
    except ConditionError as exc:
        raise _invalid(f"condition: {exc}") from None
    if (
        ToolPolicy.objects.filter(owner=person, revoked_at__isnull=True).count()
        >= MAX_RULES_PER_PERSON
    ):
        raise ProtocolError(
            ErrorCode.QUOTA_EXCEEDED,
            f"you have {MAX_RULES_PER_PERSON} rules; revoke some first",
        )
    return ToolPolicy.objects.create(
        tool=tool,
        decision=decision,
        condition=condition.strip(),
        reason=reason.strip(),
        owner=person,
        notebook_id=notebook_pk if scope == "notebook" else None,
        set_by=person.get_username(),
    )


def revoke_rule(person: User, rule_pk: int) -> ToolPolicy:
    """Revoke one of the person's own rules (admins revoke defaults in the admin)."""
    rule = ToolPolicy.objects.filter(pk=rule_pk, owner=person).first()
    if rule is None:
        raise ProtocolError(ErrorCode.NOT_FOUND, f"you have no rule {rule_pk}")
    if rule.revoked_at is None:
        rule.revoked_at = timezone.now()
        rule.revoked_by = person.get_username()
        rule.save(update_fields=["revoked_at", "revoked_by"])
    return rule


def rules_for(person: User) -> list[ToolPolicy]:
    """The person's own rules (newest first, revoked ones too) and the defaults that apply to them."""
    groups = person.groups.values_list("pk", flat=True)
    return list(
        ToolPolicy.objects.filter(
            Q(owner=person)
            | Q(owner=None, notebook=None, group__in=groups)
            | Q(owner=None, notebook=None, group=None)
        ).select_related("group", "notebook")
    )


def describe(rule: ToolPolicy) -> dict[str, Any]:
    """A rule as the page, the websocket and REST show it."""
    return {
        "id": rule.pk,
        "tool": rule.tool,
        "decision": rule.decision,
        "condition": rule.condition,
        "reason": rule.reason,
        "summary": summary(rule),
        "scope": scope_text(rule),
        "notebook_id": rule.notebook_id,
        "mine": rule.owner_id is not None,
        "set_by": rule.set_by,
        "created_at": rule.created_at.isoformat(),
        "revoked_at": rule.revoked_at.isoformat() if rule.revoked_at else None,
        "revoked_by": rule.revoked_by or None,
    }
