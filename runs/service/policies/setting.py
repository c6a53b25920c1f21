"""A person sets and revokes their rules (from a call's card, the Policies page or REST).

A rule set from a notebook is recorded in its audit (`human_action` `set_rule`). A new or
revoked rule also updates the active turns it applies to, so a rule that refuses or asks sees
their next tool calls (`approve_tool_calls`), whatever their mode.
"""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from django.contrib.auth.models import User
from django.db import transaction

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
    notebooks = Task.objects.filter(turns__status=TurnStatus.ACTIVE)
    if rule.notebook_id is not None:
        notebooks = notebooks.filter(pk=rule.notebook_id)
    else:
        notebooks = notebooks.filter(owner_id=rule.owner_id)
    return list(notebooks.values_list("pk", flat=True).distinct())


def _created(person: User, spec: RuleSpec, notebook_pk: int | None) -> ToolPolicy:
    rule = create_rule(person, spec, notebook_pk)
    for task_pk in _affected(rule):
        refresh_gate(task_pk)
    return rule


def _revoked(person: User, rule_pk: int) -> ToolPolicy:
    rule = revoke_rule(person, rule_pk)
    for task_pk in _affected(rule):
        refresh_gate(task_pk)
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
