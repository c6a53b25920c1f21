"""The inbox socket's client frames: `decide`, a person's decision on a step that waits, and
`decide_request`, on a request another agent made over agentui's MCP server.

`verdict` is `approve` (with `edited`: the step's new input, or its calls' arguments as JSON,
as `edit_input` takes them), `reject` (every call of the step, with `text` as the reason; the
model is told) or `answer` (`text` answers a Team question). Checked like the notebook
socket's actions: strict types, bounded text, no unknown keys.

`decide_request` names the `request` and its `verdict`: `approve` or `reject` (with `text`,
the reason the agent is told) an approval; `answer` (with `text`, or `content`: the form's
values) or `reject` a question.
"""

from __future__ import annotations

import json
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from runs.protocol import (
    _ID,
    _REQUEST_ID,
    MAX_MESSAGE_BYTES,
    MAX_TEXT_CHARS,
    ErrorCode,
    ProtocolError,
    _Text,
)


class InboxDecision(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    action: Literal["decide"]
    request_id: _REQUEST_ID | None = None
    notebook: Annotated[int, Field(ge=1)]
    step_id: _ID
    verdict: Literal["approve", "reject", "answer"]
    text: Annotated[_Text, Field(max_length=MAX_TEXT_CHARS)] = ""
    edited: Annotated[_Text, Field(max_length=MAX_TEXT_CHARS)] | None = None


class RequestDecision(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    action: Literal["decide_request"]
    request_id: _REQUEST_ID | None = None
    request: Annotated[int, Field(ge=1)]
    verdict: Literal["approve", "reject", "answer"]
    text: Annotated[_Text, Field(max_length=MAX_TEXT_CHARS)] = ""
    content: dict[str, str | int | float | bool | None] | None = None


_FRAMES: dict[object, type[InboxDecision] | type[RequestDecision]] = {
    "decide": InboxDecision,
    "decide_request": RequestDecision,
}


def parse_inbox_frame(raw: str | bytes | None) -> InboxDecision | RequestDecision:
    """Validate one inbox frame; ProtocolError (bad_json, too_large, invalid_input) if it does not fit."""
    if not isinstance(raw, str):
        raise ProtocolError(
            ErrorCode.BAD_JSON, "send JSON text frames, not binary ones"
        )
    if len(raw.encode("utf-8", "surrogatepass")) > MAX_MESSAGE_BYTES:
        raise ProtocolError(
            ErrorCode.TOO_LARGE, f"a message may be at most {MAX_MESSAGE_BYTES} bytes"
        )
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        raise ProtocolError(ErrorCode.BAD_JSON, "not valid JSON") from None
    frame = _FRAMES.get(data.get("action")) if isinstance(data, dict) else None
    try:
        return (frame or InboxDecision).model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'message'}: {e['msg']}"
            for e in exc.errors()[:5]
        )
        raise ProtocolError(ErrorCode.INVALID_INPUT, problems[:500]) from None


def inbox_message(
    count: int,
    items: list[dict[str, object]] | None,
    started: dict[str, object] | None = None,
    requests: list[dict[str, object]] | None = None,
) -> dict[str, object]:
    """What the inbox socket sends: how many things wait (steps and other agents' requests),
    the lists themselves (None on a socket that asked only for the count), and what just began
    waiting (`{notebook, title}`, or `{request, title}`)."""
    return {
        "type": "inbox",
        "count": count,
        "items": items,
        "requests": requests,
        "started": started,
    }
