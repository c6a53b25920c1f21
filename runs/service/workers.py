"""Turn workers (`AGENTUI_TURN_WORKERS=1`; docs/operations.md, "Turn workers").

Web processes then serve sockets and pages, and hand every action that starts or changes a
run to a worker process (`manage.py runworker --layer turns agentui.actions`, Channels' own
worker): the action goes onto the channel `agentui.actions` of the `turns` channel layer,
channels-redis's core layer, whose channels are lists in Redis, so exactly one worker takes
each action. The worker carries it out as a web process would (runs.service.dispatch), so the
notebook's lease, and the run that holds it, are the worker's; the run's events reach every
socket through the `default` layer as before. The worker answers on the web process's own
reply channel (one per process), and the web process acknowledges the action, or passes the
refusal on, as if it had carried it out itself: a socket and REST see no difference.

Nothing is dropped silently. A full queue is refused at once. An action no worker takes within
`AGENTUI_TURN_WORKER_WAIT_S` is refused too, and is then never carried out: the web process
and the worker each try to claim the action's key in Redis (SET NX) — the web process when it
gives up waiting, the worker before it acts — and only the one that claims it goes on. A worker
that finds the action claimed by the web process logs it and drops it. Each refusal is logged.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from channels.exceptions import ChannelFull
from channels.layers import BaseChannelLayer, get_channel_layer

from runs.conf import TURN_CHANNEL, TURN_LAYER, conf
from runs.protocol import ClientMessage, ErrorCode, ProtocolError
from runs.service.driver import Origin
from runs.service.lease import PROCESS_ID

if TYPE_CHECKING:
    from runs.service.worker_actions import Decide, TakeOver

logger = logging.getLogger(__name__)

# onto TURN_CHANNEL; the worker's consumer method agentui_action
ACTION_MESSAGE = "agentui.action"
# a worker's answer, onto the web process's reply channel
ANSWER_MESSAGE = "agentui.answer"
# once a worker has taken an action, how long its web process waits for the worker's answer
ANSWER_WAIT_S = 120.0
CLAIM_KEEP_S = 600  # a claim key outlives any wait for it


def enabled() -> bool:
    """Whether this deployment runs turns in workers."""
    return conf().turn_workers == "1"


def queue() -> BaseChannelLayer:
    layer = get_channel_layer(TURN_LAYER)
    if layer is None:  # settings add the layer whenever AGENTUI_TURN_WORKERS is 1
        raise RuntimeError(f"no CHANNEL_LAYERS[{TURN_LAYER!r}]")
    return layer


def _claim_key(action_id: str) -> str:
    return f"agentui.turns.claim.{action_id}"


async def claim(action_id: str, who: str) -> bool:
    """Claim the action for `who` (a worker about to act, or its web process giving up on it);
    True for the first claimant only."""
    redis = queue().connection(0)  # type: ignore[attr-defined]
    return bool(await redis.set(_claim_key(action_id), who, nx=True, ex=CLAIM_KEEP_S))


# --- the web process's side ---------------------------------------------------------------------


class _Inbox:
    """This process's reply channel on the queue layer, and the actions waiting for answers."""

    def __init__(self, channel: str) -> None:
        self.channel = channel
        self.waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.reader: asyncio.Task[None] | None = None

    async def read(self) -> None:
        layer = queue()
        while True:
            try:
                answer = await layer.receive(self.channel)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - Redis away: the waiting actions time out
                logger.warning("turn workers' answers: receive failed (%r)", exc)
                await asyncio.sleep(1.0)
                continue
            future = self.waiting.get(str(answer.get("id")))
            if future is not None and not future.done():
                future.set_result(answer)


_inboxes: dict[asyncio.AbstractEventLoop, _Inbox] = {}


async def _inbox() -> _Inbox:
    loop = asyncio.get_running_loop()
    inbox = _inboxes.get(loop)
    if inbox is None:
        inbox = _inboxes[loop] = _Inbox(await queue().new_channel())
    if inbox.reader is None or inbox.reader.done():
        inbox.reader = loop.create_task(inbox.read(), name="turn-worker-answers")
    return inbox


def _refusal(reason: str) -> ProtocolError:
    return ProtocolError(ErrorCode.INTERNAL, reason)


async def forward(
    task_pk: int, message: ClientMessage | Decide | TakeOver, origin: Origin | None
) -> str | None:
    """Have a worker carry the action out; return what it returned (a new turn's id), or raise
    its refusal, or a refusal saying that no worker took it (then it is never carried out)."""
    inbox = await _inbox()
    action_id = uuid.uuid4().hex
    answered: asyncio.Future[dict[str, Any]] = (
        asyncio.get_running_loop().create_future()
    )
    inbox.waiting[action_id] = answered
    payload = {
        "type": ACTION_MESSAGE,
        "id": action_id,
        "task": task_pk,
        "message": message.model_dump(mode="json"),
        "origin": asdict(origin) if origin is not None else None,
        "reply": inbox.channel,
    }
    wait_s = conf().turn_worker_wait_s
    try:
        if not await _send(payload, message.action, task_pk):
            # a send that failed or timed out may still have queued the action
            if await _give_up(action_id, message.action, task_pk):
                raise _refusal(
                    "the server could not hand the action to a turn worker, so it was not "
                    "carried out; try again"
                )
            reply = await _taken_answer(answered, message.action, task_pk)
        else:
            try:
                reply = await asyncio.wait_for(asyncio.shield(answered), wait_s)
            except TimeoutError:
                if await _give_up(action_id, message.action, task_pk):
                    logger.error(
                        "no turn worker took %s on notebook %s within %g s; refused",
                        message.action,
                        task_pk,
                        wait_s,
                    )
                    raise _refusal(
                        f"no turn worker took the action within {wait_s:g} s, so it was "
                        "not carried out; try again (and tell the operator if it keeps "
                        "happening)"
                    ) from None
                reply = await _taken_answer(answered, message.action, task_pk)
    finally:
        inbox.waiting.pop(action_id, None)
    error = reply.get("error")
    if error is not None:
        raise ProtocolError(
            ErrorCode(error["code"]),
            error["reason"],
            retry_after=error.get("retry_after"),
        )
    turn = reply.get("turn")
    return str(turn) if turn is not None else None


async def _send(payload: dict[str, Any], action: str, task_pk: int) -> bool:
    """Queue the action; False if the send failed (it may have been queued all the same)."""
    try:
        await asyncio.wait_for(
            queue().send(TURN_CHANNEL, payload), conf().broadcast_timeout_s
        )
    except ChannelFull:
        logger.error(
            "the turn workers' queue is full (%s actions); refused %s on notebook %s",
            conf().turn_queue_capacity,
            action,
            task_pk,
        )
        raise _refusal(
            "the server is too busy: too many actions are waiting for a turn worker; "
            "try again in a moment"
        ) from None
    except Exception as exc:  # noqa: BLE001 - Redis away or too slow
        logger.error(
            "could not queue %s on notebook %s for a turn worker (%r)",
            action,
            task_pk,
            exc,
        )
        return False
    return True


async def _give_up(action_id: str, action: str, task_pk: int) -> bool:
    """Claim the action for this web process, so that no worker carries it out later: True,
    or False when a worker has taken it already (its answer is coming)."""
    try:
        return await asyncio.wait_for(
            claim(action_id, f"web:{PROCESS_ID}"), conf().broadcast_timeout_s
        )
    except Exception as exc:  # noqa: BLE001 - Redis away: a worker may take it or not
        logger.error(
            "could not withdraw %s on notebook %s from the turn workers (%r)",
            action,
            task_pk,
            exc,
        )
        raise _refusal(
            "the server lost touch with its turn workers; the action may still be carried "
            "out: reload the notebook in a moment to see"
        ) from None


async def _taken_answer(
    answered: asyncio.Future[dict[str, Any]], action: str, task_pk: int
) -> dict[str, Any]:
    """A worker took the action (it holds the claim): wait for its answer, bounded."""
    try:
        return await asyncio.wait_for(answered, ANSWER_WAIT_S)
    except TimeoutError:
        logger.error(
            "the turn worker that took %s on notebook %s did not answer within %g s",
            action,
            task_pk,
            ANSWER_WAIT_S,
        )
        raise _refusal(
            "a turn worker took the action but did not answer; it may have been carried "
            "out: reload the notebook to see"
        ) from None


# --- the worker's side --------------------------------------------------------------------------


async def take(payload: dict[str, Any]) -> bool:
    """Claim a forwarded action for this worker; False (logged) if its web process gave up."""
    if await claim(str(payload["id"]), f"worker:{PROCESS_ID}"):
        return True
    logger.warning(
        "action %s on notebook %s came after its web process had refused it; dropped",
        payload.get("message", {}).get("action"),
        payload.get("task"),
    )
    return False


def origin_of(payload: dict[str, Any]) -> Origin | None:
    fields = payload.get("origin")
    return Origin(**fields) if fields is not None else None


async def answer(
    payload: dict[str, Any],
    error: ProtocolError | None = None,
    turn: str | None = None,
) -> None:
    """Tell the web process that forwarded the action how it went."""
    message: dict[str, Any] = {"type": ANSWER_MESSAGE, "id": payload["id"]}
    if error is not None:
        message["error"] = {
            "code": error.code.value,
            "reason": error.reason,
            "retry_after": error.retry_after,
        }
    if turn is not None:
        message["turn"] = turn
    try:
        await asyncio.wait_for(
            queue().send(str(payload["reply"]), message), conf().broadcast_timeout_s
        )
    except Exception:  # noqa: BLE001 - its web process refuses the action after ANSWER_WAIT_S
        logger.exception(
            "could not answer action %s on notebook %s",
            payload["id"],
            payload.get("task"),
        )
