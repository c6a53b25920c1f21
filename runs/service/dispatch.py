"""One validated client action carried out: the websocket's and REST's way into the service."""

from __future__ import annotations

from channels.db import database_sync_to_async
from django.contrib.auth.models import User

from runs.models import Task
from runs.protocol import (
    Abandon,
    Approve,
    ApproveBranches,
    ClientMessage,
    EditInput,
    ErrorCode,
    ProtocolError,
    RejectAll,
    RejectToolCall,
    RevokePolicy,
    SendMessage,
    SetMode,
    SetPolicy,
    Undo,
)
from runs.service import batch, policies
from runs.service.actions import (
    abandon,
    approve,
    edit_input,
    reject_tool_call,
    send_message,
    set_mode,
    undo,
)
from runs.service.driver import Origin


def _owner(task_pk: int) -> User:
    """The notebook's owner: the one person who acts on it (the entrances checked that)."""
    return Task.objects.select_related("owner").get(pk=task_pk).owner


async def perform(
    task_pk: int, message: ClientMessage, origin: Origin | None = None
) -> None:
    """Carry out one validated client action (not `resume`, which the socket answers itself)."""
    match message:
        case SendMessage(text=text, images=images):
            await send_message(task_pk, text, origin, images)
        case Approve(step_id=step_id):
            await approve(task_pk, step_id, origin)
        case EditInput(step_id=step_id, input=text):
            await edit_input(task_pk, step_id, text, origin)
        case RejectToolCall(step_id=step_id, tool_id=tool_id, reason=reason):
            await reject_tool_call(task_pk, step_id, tool_id, reason, origin)
        case RejectAll(step_id=step_id, reason=reason):
            await batch.reject_all(task_pk, step_id, reason, origin)
        case ApproveBranches():
            await batch.approve_branches(task_pk, origin)
        case Undo(step_id=step_id):
            await undo(task_pk, step_id, origin)
        case Abandon():
            await abandon(task_pk, origin)
        case SetMode(mode=mode):
            await set_mode(task_pk, mode)
        case SetPolicy() as rule:
            spec = policies.RuleSpec(
                rule.tool, rule.decision, rule.scope, rule.condition, rule.reason
            )
            owner = await database_sync_to_async(_owner)(task_pk)
            await policies.set_policy(owner, spec, task_pk, rule.step_id)
        case RevokePolicy(policy_id=policy_id):
            owner = await database_sync_to_async(_owner)(task_pk)
            await policies.revoke_policy(owner, policy_id)
        case _:
            raise ProtocolError(
                ErrorCode.UNKNOWN_ACTION,
                f"{message.action} is not an action the service performs",
            )
