"""The websocket protocol of `ws/tasks/<id>/` as pydantic models (documented in docs/protocol.md).

Client messages are parsed strictly (`parse_client_message`); anything that does not fit becomes a
`ProtocolError` with one of the error codes below. Server messages are built with the `*_message`
helpers so every reply has the same shape. Server-side lifecycle events that the engine does not
know about (`step_waiting`, `mode_changed`, ...) are typed here like the engine's events.
"""

from __future__ import annotations

import json
import time
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
)

from runs.engine.events import StepInterrupted as StepInterrupted  # stored like ours
from runs.protocol.checks import json_nesting_problem, storable_problem

MAX_MESSAGE_BYTES = 64 * 1024
MAX_TEXT_CHARS = 20_000


def _storable(text: str) -> str:
    problem = storable_problem(text)
    if problem is not None:
        raise ValueError(problem)
    return text


def _editable(text: str) -> str:
    problem = json_nesting_problem(text)
    if problem is not None:
        raise ValueError(problem)
    return text


# Every string a client sends is checked to be storable before anything is written.
_Text = Annotated[str, AfterValidator(_storable)]
_ID = Annotated[_Text, Field(min_length=1, max_length=64)]
_REQUEST_ID = Annotated[_Text, Field(max_length=128)]


class ErrorCode(StrEnum):
    """Why an action was refused (the `code` of an `error` message)."""

    BAD_JSON = "bad_json"
    TOO_LARGE = "too_large"
    INVALID_INPUT = "invalid_input"
    UNKNOWN_ACTION = "unknown_action"
    NOT_FOUND = "not_found"
    NOT_ALLOWED = "not_allowed"
    ALREADY_RUNNING = "already_running"
    INVALID_TOOL_ARGUMENTS = "invalid_tool_arguments"
    LLM_ERROR = "llm_error"
    STEP_FAILED = "step_failed"
    INTERNAL = "internal"
    # a per-person limit (runs.service.quotas): too many model runs started this minute
    # (`retry_after` says when to try again), or too many stored things of one kind
    RATE_LIMITED = "rate_limited"
    QUOTA_EXCEEDED = "quota_exceeded"


class ProtocolError(Exception):
    """An action refused with a code and a reason a person can read; nothing was changed."""

    def __init__(
        self,
        code: ErrorCode,
        reason: str,
        *,
        request_id: str | None = None,
        action: str | None = None,
        retry_after: int | None = None,
    ):
        super().__init__(f"{code.value}: {reason}")
        self.code = code
        self.reason = reason
        self.request_id = request_id
        self.action = action
        # whole seconds until the same action may be taken again (rate_limited)
        self.retry_after = retry_after


# --- client -> server ---------------------------------------------------------------------------


class _Action(BaseModel):
    # strict: "1" is not an int and true is not a step id; unknown keys are a mistake worth reporting
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    request_id: _REQUEST_ID | None = None


class SendMessage(_Action):
    action: Literal["send_message"]
    text: Annotated[_Text, Field(min_length=1, max_length=MAX_TEXT_CHARS)]
    # uploaded images (POST /api/images/) to send with the message, by id
    images: Annotated[list[Annotated[int, Field(ge=1)]], Field(max_length=4)] = []


class Approve(_Action):
    action: Literal["approve"]
    step_id: _ID


class EditInput(_Action):
    action: Literal["edit_input"]
    step_id: _ID
    input: Annotated[_Text, Field(max_length=MAX_TEXT_CHARS), AfterValidator(_editable)]


class RejectToolCall(_Action):
    action: Literal["reject_tool_call"]
    step_id: _ID
    tool_id: Annotated[_Text, Field(min_length=1, max_length=128)]
    reason: Annotated[_Text, Field(max_length=2000)] = ""


class Undo(_Action):
    action: Literal["undo"]
    # The completed step the client means to undo: two tabs undoing it at once undo it once.
    step_id: _ID | None = None


class Abandon(_Action):
    action: Literal["abandon"]


class SetMode(_Action):
    action: Literal["set_mode"]
    mode: Literal["auto", "step", "tools"]


class RejectAll(_Action):
    """Reject every pending call of a waiting step with one reason; the step then runs."""

    action: Literal["reject_all"]
    step_id: _ID
    reason: Annotated[_Text, Field(max_length=2000)] = ""


class ApproveBranches(_Action):
    """Approve every waiting branch of a parallel agent's turn at once."""

    action: Literal["approve_branches"]


_RULE_TEXT = Annotated[_Text, Field(max_length=500)]


class SetPolicy(_Action):
    """Make an approval rule for a tool: for this notebook, or for all the person's notebooks."""

    action: Literal["set_policy"]
    tool: Annotated[_Text, Field(min_length=1, max_length=128)]
    decision: Literal["ask", "ask_once", "allow", "refuse"]
    scope: Literal["notebook", "mine"]
    condition: _RULE_TEXT = ""
    reason: _RULE_TEXT = ""
    step_id: _ID | None = None  # the card it was set from, for the audit


class RevokePolicy(_Action):
    action: Literal["revoke_policy"]
    policy_id: Annotated[int, Field(ge=1, le=2**31)]


_FORM_VALUE = Annotated[_Text, Field(max_length=10_000)] | int | float | bool


class AnswerElicitation(_Action):
    """Answer an MCP server's question (an `elicitation_asked` event): accept with the form's
    values, decline or cancel. The values are checked against the form on the server."""

    action: Literal["answer_elicitation"]
    elicitation_id: Annotated[_Text, Field(min_length=1, max_length=64)]
    answer: Literal["accept", "decline", "cancel"]
    content: Annotated[dict[str, _FORM_VALUE], Field(max_length=50)] | None = None


class Resume(_Action):
    action: Literal["resume"]
    last_seq: Annotated[int, Field(ge=0, le=2**31)]


ClientMessage = Annotated[
    SendMessage
    | Approve
    | EditInput
    | RejectToolCall
    | Undo
    | Abandon
    | SetMode
    | RejectAll
    | ApproveBranches
    | SetPolicy
    | RevokePolicy
    | AnswerElicitation
    | Resume,
    Field(discriminator="action"),
]
ACTIONS: frozenset[str] = frozenset(
    {
        "send_message",
        "approve",
        "edit_input",
        "reject_tool_call",
        "undo",
        "abandon",
        "set_mode",
        "reject_all",
        "approve_branches",
        "set_policy",
        "revoke_policy",
        "answer_elicitation",
        "resume",
    }
)
_CLIENT_ADAPTER: TypeAdapter[ClientMessage] = TypeAdapter(ClientMessage)


def _describe(exc: ValidationError) -> str:
    problems = []
    for err in exc.errors()[:5]:
        where = ".".join(str(part) for part in err["loc"][1:]) or "message"
        message = err["msg"].removeprefix("Value error, ")
        problems.append(f"{where}: {message}")
    return "; ".join(problems)


def parse_client_message(raw: str | bytes | None) -> ClientMessage:
    """Validate one websocket frame; raise ProtocolError (bad_json, too_large, ...) if it does not fit."""
    if raw is None or isinstance(raw, bytes):
        raise ProtocolError(
            ErrorCode.BAD_JSON, "send JSON text frames, not binary ones"
        )
    if (
        len(raw) > MAX_MESSAGE_BYTES
        or len(raw.encode("utf-8", "surrogatepass")) > MAX_MESSAGE_BYTES
    ):
        raise ProtocolError(
            ErrorCode.TOO_LARGE, f"a message may be at most {MAX_MESSAGE_BYTES} bytes"
        )
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise ProtocolError(
            ErrorCode.BAD_JSON, f"not valid JSON: {exc}"[:300]
        ) from None
    if not isinstance(data, dict):
        raise ProtocolError(ErrorCode.BAD_JSON, "a message must be a JSON object")
    request_id = data.get("request_id")
    request_id = (
        request_id
        if isinstance(request_id, str)
        and len(request_id) <= 128
        and storable_problem(request_id) is None
        else None
    )
    action = data.get("action")
    if not isinstance(action, str) or action not in ACTIONS:
        shown = action[:40] if isinstance(action, str) else json.dumps(action)[:40]
        raise ProtocolError(
            ErrorCode.UNKNOWN_ACTION,
            f"unknown action {shown}; expected one of {', '.join(sorted(ACTIONS))}",
            request_id=request_id,
        )
    return validate_action(data, request_id=request_id)


def validate_action(
    data: dict[str, Any], *, request_id: str | None = None
) -> ClientMessage:
    """An action as a dict (with its `action` key) checked as the websocket checks it; the
    REST API builds its actions with this. ProtocolError(invalid_input) names the fields."""
    try:
        return _CLIENT_ADAPTER.validate_python(data)
    except ValidationError as exc:
        raise ProtocolError(
            ErrorCode.INVALID_INPUT,
            _describe(exc),
            request_id=request_id,
            action=str(data.get("action")),
        ) from None


# --- server-side lifecycle events (stored and sent like engine events) ---------------------------


class _ServerEvent(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task_id: str | None = None  # the turn's engine id, when the event belongs to a turn
    step_id: str | None = None
    at: float = Field(default_factory=time.time)


class ModeChanged(_ServerEvent):
    type: Literal["mode_changed"] = "mode_changed"
    mode: Literal["auto", "step", "tools"]


class MessageImages(_ServerEvent):
    """The images sent with the turn's message (`task_id`), for thumbnails; bytes load from `url`."""

    type: Literal["message_images"] = "message_images"
    images: list[dict[str, Any]]


class TaskAbandoned(_ServerEvent):
    type: Literal["task_abandoned"] = "task_abandoned"


class StepWaiting(_ServerEvent):
    """The step is pending and waits for the person (step and tools modes, and after undo)."""

    type: Literal["step_waiting"] = "step_waiting"
    # When its deadline passes (epoch seconds) and what is done then (runs.service.deadlines);
    # None: it may wait forever. Fixed when it starts waiting, so the card shows what is enforced.
    deadline_at: float | None = None
    deadline_s: int | None = None
    deadline_action: Literal["reject", "stop"] | None = None
    # It waits because a budget was reached (runs.service.budgets): which, what was spent,
    # the sentence saying so, and what approving raises it to. None: an ordinary wait.
    budget: dict[str, Any] | None = None


class HumanActionKind(StrEnum):
    """What a person did to a turn (the `action` of a `human_action` event)."""

    EDITED_INPUT = "edited_input"
    EDITED_ARGUMENTS = "edited_arguments"
    REJECTED_CALL = "rejected_call"
    APPROVED = "approved"
    STOPPED = "stopped"
    UNDONE = "undone"
    # decided by an approval policy, not by a click (the event's `rule` says which)
    AUTO_APPROVED = "auto_approved"
    AUTO_REFUSED = "auto_refused"
    SET_RULE = "set_rule"  # the person made an approval rule from this notebook
    # the person let a run go on past its budget: `before`/`after` are the limit, `reason` the wait's
    BUDGET_RAISED = "budget_raised"
    # the person answered an MCP server's question: `after` is what the server was sent
    ANSWERED_ELICITATION = "answered_elicitation"


class AppliedRule(BaseModel):
    """The approval policy that decided a call by itself, as it stood then (runs.service.policies)."""

    model_config = ConfigDict(extra="forbid")

    id: int
    summary: str  # "always allow multiply", "never allow sql_query when database=live"
    set_by: str
    set_at: float


class HumanAction(_ServerEvent):
    """A person's decision, with who and when: the audit trail next to the engine's events.

    Edits carry the value before and after (a step's input text, or one call's arguments);
    a rejection its reason; a stop the step that was running (the turn stops after it) or
    the step that was waiting; an undo the step taken back (it waits again).
    """

    type: Literal["human_action"] = "human_action"
    action: HumanActionKind
    by: str
    tool_id: str | None = None
    before: Any = None
    after: Any = None
    reason: str | None = None
    while_running: bool = False  # Stop was pressed while the step ran
    # Taken by the server on the person's behalf, and why (e.g. "the deadline of 10 min
    # passed"); None for a person's own decision.
    automatic: str | None = None
    rule: AppliedRule | None = (
        None  # auto_approved / auto_refused: the rule that decided
    )


ServerEvent = (
    StepInterrupted
    | ModeChanged
    | TaskAbandoned
    | StepWaiting
    | MessageImages
    | HumanAction
)


# --- server -> client ---------------------------------------------------------------------------


def hello_message(task: dict[str, Any], last_seq: int) -> dict[str, Any]:
    return {"type": "hello", "task": task, "last_seq": last_seq}


def event_message(seq: int, event: dict[str, Any]) -> dict[str, Any]:
    return {"type": "event", "seq": seq, "event": event}


def snapshot_message(step_id: str, phase: str | None, text: str) -> dict[str, Any]:
    return {"type": "stream_snapshot", "step_id": step_id, "phase": phase, "text": text}


def live_message(live: bool) -> dict[str, Any]:
    """Whether live updates flow (False: the channel layer is unreachable; events come from the database)."""
    return {"type": "live", "live": live}


def deleted_message(deleted: dict[str, Any]) -> dict[str, Any]:
    """The notebook was deleted (`deleted`: notebook, title, deleted_by, deleted_at); the
    socket closes next, with CLOSE_DELETED."""
    return {"type": "deleted", **deleted}


def replay_done_message(last_seq: int) -> dict[str, Any]:
    return {"type": "replay_done", "last_seq": last_seq}


def ack_message(action: str, request_id: str | None) -> dict[str, Any]:
    return {"type": "ack", "action": action, "request_id": request_id}


def error_message(error: ProtocolError) -> dict[str, Any]:
    message: dict[str, Any] = {
        "type": "error",
        "code": error.code.value,
        "reason": error.reason,
    }
    if error.request_id is not None:
        message["request_id"] = error.request_id
    if error.action is not None:
        message["action"] = error.action
    if error.retry_after is not None:
        message["retry_after"] = error.retry_after
    return message


def delta_text(event_json: str, after_seq: int, offset: int) -> str:
    """A `delta` message as text, built around the already-encoded event (the hot path)."""
    return f'{{"type":"delta","after_seq":{after_seq},"offset":{offset},"event":{event_json}}}'
