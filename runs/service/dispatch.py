"""One validated client action carried out: the websocket's and REST's way into the service.

With turn workers (runs.service.workers) a web process hands the actions that start or change
a run to a worker, which carries them out here (`perform_here`); set_mode and the policy
actions only write rows and are carried out where they arrive, and so is the answer to an MCP
server's question (runs.service.elicitations says what that does not cover). Two actions of the
server's own go to a worker the same way (runs.service.worker_actions): a whole decision on a waiting step
as the inbox, AG-UI and a passed deadline make it (`Decide`, checked where it arrived), and the
takeover of a turn whose process died (`TakeOver`).
"""

from __future__ import annotations

import logging
from typing import Any

from channels.db import database_sync_to_async
from django.contrib.auth.models import User

from runs.models import Task
from runs.protocol import (
    Abandon,
    AnswerElicitation,
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
    validate_action,
)
from runs.service import batch, policies, workers
from runs.service.driver import Origin
from runs.service.elicitations import answer_elicitation
from runs.service.runtime import spawn
from runs.service.step_actions import (
    approve,
    decide,
    edit_input,
    reject_tool_call,
    undo,
)
from runs.service.takeover import take_over_here
from runs.service.turn_actions import abandon, send_message, set_mode
from runs.service.worker_actions import Decide, TakeOver

logger = logging.getLogger(__name__)

Action = ClientMessage | Decide | TakeOver

# what starts or changes a run: with turn workers, carried out by a worker
RUN_ACTIONS = (
    Decide,
    TakeOver,
    SendMessage,
    Approve,
    EditInput,
    RejectToolCall,
    RejectAll,
    ApproveBranches,
    Undo,
    Abandon,
)


def _owner(task_pk: int) -> User:
    """The notebook's owner: the one person who acts on it (the entrances checked that)."""
    return Task.objects.select_related("owner").get(pk=task_pk).owner


async def perform(
    task_pk: int, message: Action, origin: Origin | None = None
) -> str | None:
    """Carry out one validated client action (not `resume`, which the socket answers itself);
    a `send_message` returns its new turn's id, a `take_over` how many steps were orphaned."""
    if workers.enabled() and isinstance(message, RUN_ACTIONS):
        return await workers.forward(task_pk, message, origin)
    return await perform_here(task_pk, message, origin)


def take_forwarded(payload: dict[str, Any]) -> None:
    """In a turn worker: carry out an action a web process forwarded, and answer it."""
    spawn(_carry_out(payload), f"action-{str(payload.get('id'))[:8]}")


async def _carry_out(payload: dict[str, Any]) -> None:
    if not await workers.take(payload):
        return
    task_pk = int(payload["task"])
    try:
        message = _forwarded(payload["message"])
        turn = await perform_here(task_pk, message, workers.origin_of(payload))
    except ProtocolError as exc:
        await workers.answer(payload, error=exc)
    except Exception:
        logger.exception("a forwarded action on notebook %s failed", task_pk)
        failure = ProtocolError(
            ErrorCode.INTERNAL, "the server failed to carry out the action"
        )
        await workers.answer(payload, error=failure)
    else:
        await workers.answer(payload, turn=turn)


# The actions only a server makes (never a socket): each forwarded under its own name.
_SERVER_ACTIONS: dict[str, type[Decide] | type[TakeOver]] = {
    "decide": Decide,
    "take_over": TakeOver,
}


def _forwarded(data: dict[str, Any]) -> Action:
    model = _SERVER_ACTIONS.get(str(data.get("action")))
    return model.model_validate(data) if model else validate_action(data)


async def perform_here(
    task_pk: int, message: Action, origin: Origin | None = None
) -> str | None:
    """Carry out the action in this process."""
    match message:
        case Decide(step_id=step_id, inputs=inputs, rejections=rejections):
            await decide(task_pk, step_id, inputs, rejections, origin)
        case TakeOver():
            return str(await take_over_here(task_pk))
        case SendMessage(text=text, images=images):
            return await send_message(task_pk, text, origin, images)
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
        case AnswerElicitation(
            elicitation_id=elicitation_id, answer=answer, content=content
        ):
            await answer_elicitation(task_pk, elicitation_id, answer, content, origin)
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
    return None
