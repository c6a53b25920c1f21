"""Turning a scripted `Reply` into the JSON shapes an OpenAI-compatible server sends.

Pure functions, no I/O: the server decides when each piece leaves, this module decides what
the pieces are. A reply becomes a list of stream deltas (one per chunk); the non-streamed
message and the token counts are derived from the same reply so both modes agree.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from .script import Chunking, JsonDict, RecordedRequest, Reply, Timing

# Whitespace stays attached to the word before it, the way BPE tokens carry their spacing.
_TOKEN_RE = re.compile(r"\S+\s*|\s+")
# Only "\n" ends a line: str.splitlines would also split on \x0b, \u2028 and friends.
_LINE_RE = re.compile(r"[^\n]*\n|[^\n]+")
# An SSE event ends at a blank line; the separator stays with its event so bytes add up.
_SSE_EVENT_RE = re.compile(r".*?(?:\r\n\r\n|\n\n|\r\r)|.+\Z", re.DOTALL)

_ERROR_KINDS: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("permission_error", None),
    404: ("invalid_request_error", "model_not_found"),
    408: ("timeout", None),
    409: ("conflict_error", None),
    429: ("requests", "rate_limit_exceeded"),
    503: ("server_error", "overloaded"),
}


def split_text(text: str, chunking: Chunking) -> list[str]:
    """Split reply text into stream chunks; joining the result gives `text` back."""
    if not text:
        return []
    if chunking == "none":
        return [text]
    if chunking == "char":
        return list(text)
    pattern = _LINE_RE if chunking == "line" else _TOKEN_RE
    return pattern.findall(text)


def split_sse_events(raw: str) -> list[bytes]:
    """Split a recorded event stream into its events, keeping every byte."""
    return [event.encode() for event in _SSE_EVENT_RE.findall(raw) if event]


def sse_event(payload: JsonDict | str) -> bytes:
    """One `data:` event; a str payload (like "[DONE]") is sent as is."""
    data = (
        payload
        if isinstance(payload, str)
        else json.dumps(payload, separators=(",", ":"))
    )
    return f"data: {data}\n\n".encode()


def error_body(
    status: int, message: str | None = None, code: str | None = None
) -> JsonDict:
    """An OpenAI-style error body for `status`."""
    kind, default_code = _ERROR_KINDS.get(status, ("server_error", None))
    if message is None:
        try:
            message = f"Scripted fault: {HTTPStatus(status).phrase}"
        except ValueError:
            message = f"Scripted fault: HTTP {status}"
    return {
        "error": {
            "message": message,
            "type": kind,
            "param": None,
            "code": code or default_code,
        }
    }


@dataclass(frozen=True)
class ReplyPlan:
    """A generated reply: its stream deltas, the equivalent message, finish reason and usage."""

    deltas: list[JsonDict]
    message: JsonDict
    finish_reason: str
    usage: JsonDict


def plan_reply(
    reply: Reply,
    request: RecordedRequest,
    timing: Timing,
    new_call_id: Callable[[], str],
) -> ReplyPlan:
    """Build the deltas and message for `reply`; `new_call_id` names calls without an id."""
    text = reply.text or ""
    deltas: list[JsonDict] = [
        {"content": piece} for piece in split_text(text, timing.chunking)
    ]
    tool_calls: list[JsonDict] = []
    for index, spec in enumerate(reply.tool_calls):
        call_id = spec.id if spec.id is not None else new_call_id()
        arguments = spec.arguments_json()
        tool_calls.append(
            {
                "id": call_id,
                "type": "function",
                "function": {"name": spec.name, "arguments": arguments},
            }
        )
        deltas.extend(
            _tool_call_deltas(
                index, call_id, spec.name, arguments, timing.args_chunk_chars
            )
        )
    if not deltas:  # an empty answer still streams one chunk, as real servers do
        deltas.append({"content": ""})
    # The first chunk announces the role; OpenAI sends content null beside a tool call.
    deltas[0] = {"role": "assistant", "content": None, **deltas[0]}

    message: JsonDict = {
        "role": "assistant",
        "content": text if text or not tool_calls else None,
    }
    if tool_calls:
        message["tool_calls"] = tool_calls
    finish_reason = reply.finish_reason or ("tool_calls" if tool_calls else "stop")
    return ReplyPlan(
        deltas, message, finish_reason, _usage(reply, request, len(deltas))
    )


def _tool_call_deltas(
    index: int, call_id: str, name: str, arguments: str, piece_chars: int
) -> list[JsonDict]:
    # OpenAI's shape: the first delta names the call with empty arguments, later ones carry
    # only the index and the next piece of the arguments string.
    if piece_chars <= 0:
        head_arguments, pieces = arguments, []
    else:
        head_arguments = ""
        pieces = [
            arguments[i : i + piece_chars]
            for i in range(0, len(arguments), piece_chars)
        ]
    head = {
        "index": index,
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": head_arguments},
    }
    tail = [{"index": index, "function": {"arguments": piece}} for piece in pieces]
    return [{"tool_calls": [call]} for call in [head, *tail]]


def _usage(reply: Reply, request: RecordedRequest, chunk_count: int) -> JsonDict:
    if reply.usage is not None:
        prompt, completion = reply.usage.prompt_tokens, reply.usage.completion_tokens
        total = reply.usage.total_tokens
    else:
        # Rough on purpose: about four characters per token, one token per streamed chunk.
        prompt = max(1, sum(len(t) for t in request.texts()) // 4)
        completion, total = chunk_count, None
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": total or prompt + completion,
    }


@dataclass(frozen=True)
class Envelope:
    """The fields every chunk and completion of one response shares."""

    completion_id: str
    model: str
    created: int

    def _base(self, obj: str) -> JsonDict:
        return {
            "id": self.completion_id,
            "object": obj,
            "created": self.created,
            "model": self.model,
            "system_fingerprint": "fp_scripted",
        }

    def chunk(self, delta: JsonDict, finish_reason: str | None = None) -> JsonDict:
        """A `chat.completion.chunk` with one choice."""
        choice = {
            "index": 0,
            "delta": delta,
            "logprobs": None,
            "finish_reason": finish_reason,
        }
        return {**self._base("chat.completion.chunk"), "choices": [choice]}

    def usage_chunk(self, usage: JsonDict) -> JsonDict:
        """The usage-only final chunk sent for `stream_options.include_usage`."""
        return {**self._base("chat.completion.chunk"), "choices": [], "usage": usage}

    def completion(self, plan: ReplyPlan) -> JsonDict:
        """The non-streamed `chat.completion` for `plan`."""
        choice: dict[str, Any] = {
            "index": 0,
            "message": {**plan.message, "refusal": None},
            "logprobs": None,
            "finish_reason": plan.finish_reason,
        }
        return {
            **self._base("chat.completion"),
            "choices": [choice],
            "usage": plan.usage,
        }
