"""A person sets and revokes their rules (from a call's card, the Policies page or REST), an
admin the defaults (per preset, group or everyone) and anyone's rules (the Django admin).

A rule set from a notebook is recorded in its audit (`human_action` `set_rule`). A new or
revoked rule also updates the active turns it applies to, so a rule that refuses or asks sees
their next tool calls (`approve_tool_calls`), whatever their mode.
"""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from runs.models import Task, ToolPolicy, Turn, TurnStatus
from runs.protocol import HumanAction, HumanActionKind
from runs.realtime.publisher import publisher_for
from runs.service.policies.rules import (
    RuleSpec,
    applied,
    create_rule,
    describe,
    revoke_rule,
    stops_before_tools,
)
from runs.store.messages import tick


def refresh_gate(task_pk: int) -> None:
    """Make the notebook's active turn stop before tool calls exactly when its mode or a rule needs it."""
    with transaction.atomic():
        active = Turn.objects.filter(
            task_id=task_pk, status=TurnStatus.ACTIVE, deleted_at__isnull=True
        )
        mode = Task.objects.values_list("mode", flat=True).get(pk=task_pk)
        wanted = stops_before_tools(task_pk, mode)
        if active.exclude(approve_tool_calls=wanted).exists():
            tick(
                task_pk
            )  # a state write: what runs.store.cache knew of the turn is stale
            active.update(approve_tool_calls=wanted)


def _affected(rule: ToolPolicy) -> list[int]:
    """The notebooks with an active turn that `rule` applies to (as `rules.applicable` reads it)."""
    notebooks = Task.objects.filter(turns__status=TurnStatus.ACTIVE)
    if rule.notebook_id is not None:
        notebooks = notebooks.filter(pk=rule.notebook_id)
    elif rule.owner_id is not None:
        notebooks = notebooks.filter(owner_id=rule.owner_id)
    elif rule.preset:
        notebooks = notebooks.filter(agent=rule.preset)
    elif rule.group_id is not None:
        notebooks = notebooks.filter(owner__groups=rule.group_id)
    return list(notebooks.values_list("pk", flat=True).distinct())


def _regate(rules: list[ToolPolicy]) -> None:
    for task_pk in sorted({pk for rule in rules for pk in _affected(rule)}):
        refresh_gate(task_pk)


def save_default_policy(rule: ToolPolicy, by: str) -> ToolPolicy:
    """An admin's new default rule (the admin's form checked it), set by `by`: the active turns
    it applies to are re-gated at once, as a person's new rule re-gates theirs."""
    with transaction.atomic():
        rule.set_by = by
        rule.save()
        _regate([rule])
    return rule


def revoke_policies(rule_pks: list[int], by: str) -> int:
    """Revoke, as admin `by`, the rules of `rule_pks` not yet revoked (defaults or anyone's),
    re-gating the active turns they applied to. How many it revoked."""
    with transaction.atomic():
        rules = list(
            ToolPolicy.objects.select_for_update().filter(
                pk__in=rule_pks, revoked_at__isnull=True
            )
        )
        for rule in rules:
            rule.revoked_at = timezone.now()
            rule.revoked_by = by
            rule.save(update_fields=["revoked_at", "revoked_by"])
        _regate(rules)
    return len(rules)


def _created(person: User, spec: RuleSpec, notebook_pk: int | None) -> ToolPolicy:
    rule = create_rule(person, spec, notebook_pk)
    _regate([rule])
    return rule


def _revoked(person: User, rule_pk: int) -> ToolPolicy:
    rule = revoke_rule(person, rule_pk)
    _regate([rule])
    return rule


def _active_turn(task_pk: int) -> str | None:
    return (
        Turn.objects.filter(
            task_id=task_pk, status=TurnStatus.ACTIVE, deleted_at__isnull=True
        )
        .values_list("engine_id", flat=True)
        .first()
    )


async def set_policy(
    person: User,
    spec: RuleSpec,
    notebook_pk: int | None = None,
    step_id: str | None = None,
) -> dict[str, Any]:
    """Create a rule of the person's (ProtocolError, changing nothing, if it is malformed);
    set from notebook `notebook_pk` (its card `step_id`), it is recorded in that notebook's audit."""
    rule = await database_sync_to_async(_created)(person, spec, notebook_pk)
    if notebook_pk is not None:
        turn_id = await database_sync_to_async(_active_turn)(notebook_pk)
        await publisher_for(notebook_pk).publish(
            HumanAction(
                task_id=turn_id,
                step_id=step_id,
                action=HumanActionKind.SET_RULE,
                by=person.get_username(),
                rule=applied(rule),
            )
        )
    return describe(rule)


async def revoke_policy(person: User, rule_pk: int) -> dict[str, Any]:
    """Revoke one of the person's rules; the next matching call is decided without it."""
    return describe(await database_sync_to_async(_revoked)(person, rule_pk))
