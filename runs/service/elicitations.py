"""Answering an MCP server's question to the person (runs.presets.mcp.eliciting).

The question is in the notebook's log (`elicitation_asked`); this checks that it belongs to the
notebook, is still open, and — for an accepted form — that the values fit the form as stored,
then hands the answer to the call waiting for it in this process and records who answered
what (a `human_action` of kind `answered_elicitation`). A refused answer changes nothing: the
question stays open and the person's values stay in the form.

The waiting call lives in the process that runs the notebook's step: an answer that reaches
another process (turn workers, several web processes) is refused saying the question no longer
waits here. A server restart ends the call with its session; the page then shows the question
as ended with its step (its call got no result, the step was interrupted).
"""

from __future__ import annotations

from typing import Any

from runs.engine import ElicitationField
from runs.models import Event
from runs.presets.mcp.eliciting import (
    Answer,
    AnswerRefused,
    check_answer,
    resolve,
    waiting,
)
from runs.protocol import ErrorCode, HumanAction, HumanActionKind, ProtocolError
from runs.service import audit
from runs.service.claims import by_of, in_thread
from runs.service.driver import Origin
from runs.service.runtime import runtime_for


def _asked_and_closed(
    task_pk: int, elicitation_id: str
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    rows = Event.objects.filter(
        task_id=task_pk,
        type__in=("elicitation_asked", "elicitation_closed"),
        payload__elicitation_id=elicitation_id,
    ).values_list("type", "payload")
    found = dict(rows)
    return found.get("elicitation_asked"), found.get("elicitation_closed")


_CLOSED_TEXT = {"accept": "answered", "decline": "declined", "cancel": "cancelled"}


async def answer_elicitation(
    task_pk: int,
    elicitation_id: str,
    action: str,
    content: dict[str, Any] | None,
    origin: Origin | None = None,
) -> None:
    """Send the person's answer to the server that asked; ProtocolError says why not."""
    asked, closed = await in_thread(_asked_and_closed, task_pk, elicitation_id)
    if asked is None:
        raise ProtocolError(ErrorCode.NOT_FOUND, "This notebook has no such question.")
    if closed is not None or asked.get("refused"):
        how = _CLOSED_TEXT.get(str(closed.get("action")) if closed else "decline")
        raise ProtocolError(
            ErrorCode.NOT_ALLOWED, f"This question was {how} already; nothing was sent."
        )
    if not waiting(elicitation_id):
        raise ProtocolError(
            ErrorCode.NOT_ALLOWED,
            "The MCP server's call no longer waits for this answer (it ended, or the server "
            "restarted); nothing was sent.",
        )
    checked = None
    if action == "accept":
        fields = [ElicitationField.model_validate(f) for f in asked.get("fields", [])]
        try:
            checked = check_answer(fields, content or {})
        except AnswerRefused as exc:
            raise ProtocolError(
                ErrorCode.INVALID_INPUT,
                f"{exc}; nothing was sent, the form is as you left it.",
            ) from None
    by = by_of(origin)
    if not resolve(elicitation_id, Answer(action, checked, by=by)):  # type: ignore[arg-type]
        raise ProtocolError(
            ErrorCode.NOT_ALLOWED,
            "This question was answered already; nothing was sent.",
        )
    record = HumanAction(
        task_id=asked.get("task_id"),
        step_id=asked.get("step_id"),
        by=by,
        action=HumanActionKind.ANSWERED_ELICITATION,
        tool_id=asked.get("tool_id"),
        before={"server": asked.get("server"), "message": asked.get("message")},
        after={"action": action, "content": checked},
    )
    await audit.record(await runtime_for(task_pk), [record])
