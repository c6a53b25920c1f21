"""Script models for the scripted OpenAI-compatible server, and how a request is matched.

A script is an ordered list of rules; the first rule whose `Match` holds answers the request.
Everything here is pydantic, so a script is a few lines of Python or a JSON file. The JSON
format of the peer benchmark's fake server (`response` for `reply`, timing keys directly on the
rule, `defaults.model`) is accepted too, so its scenario files load unchanged.

    {"defaults": {"token_delay_s": 0.02},
     "on_no_match": "error",
     "rules": [
       {"name": "call", "match": {"last_user_contains": "weather", "tool_results_since_user": 0},
        "reply": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}},
       {"name": "flaky", "fault": {"status": 503}, "max_uses": 1},
       {"name": "answer", "match": {"last_role": "tool"}, "reply": {"text": "It is sunny."},
        "timing": {"ttft_s": 0.3, "chunking": "line"}}]}
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    field_serializer,
    field_validator,
    model_validator,
)

Chunking = Literal["token", "line", "char", "none"]
JsonDict = dict[str, Any]


class _Model(BaseModel):
    # Typos in a hand-written script must fail loudly instead of silently never matching.
    model_config = ConfigDict(extra="forbid")


class Timing(_Model):
    """When and how a reply is sent; chunk i leaves at latency_s + ttft_s + i * token_delay_s."""

    latency_s: float = Field(default=0.0, ge=0)
    ttft_s: float = Field(default=0.0, ge=0)
    token_delay_s: float = Field(default=0.0, ge=0)
    chunking: Chunking = "token"
    args_chunk_chars: int = Field(default=0, ge=0)

    def overridden_by(self, other: Timing | None) -> Timing:
        """This timing with the fields explicitly set on `other` replacing ours."""
        if other is None:
            return self
        return self.model_copy(update=other.model_dump(exclude_unset=True))


TIMING_FIELDS = frozenset(Timing.model_fields)


class ToolCallSpec(_Model):
    """One tool call in a reply; `arguments` as a dict is JSON-encoded, a str is sent verbatim."""

    name: str
    arguments: JsonDict | str = Field(default_factory=dict)
    id: str | None = (
        None  # None: the server invents `call_<n>`; "" is sent as "" (Gemini does)
    )

    def arguments_json(self) -> str:
        """The arguments string as it goes on the wire."""
        return (
            self.arguments
            if isinstance(self.arguments, str)
            else json.dumps(self.arguments)
        )


class Usage(_Model):
    """Token counts to report instead of the server's rough estimate."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int | None = None  # None: prompt + completion


class Reply(_Model):
    """What the assistant answers: text and/or tool calls, or a recorded raw response."""

    text: str | None = None
    tool_calls: list[ToolCallSpec] = Field(default_factory=list)
    usage: Usage | None = None
    finish_reason: str | None = None
    raw_status: int = 200
    raw_json: JsonDict | list[Any] | None = None
    raw_sse: str | None = None  # sent byte for byte as text/event-stream

    @model_validator(mode="after")
    def _raw_is_exclusive(self) -> Reply:
        if self.raw_json is not None and self.raw_sse is not None:
            raise ValueError("give raw_json or raw_sse, not both")
        if self.is_raw and (self.text is not None or self.tool_calls):
            raise ValueError("a raw reply cannot also have text or tool_calls")
        return self

    @property
    def is_raw(self) -> bool:
        """True when this reply replays a recorded body instead of being generated."""
        return self.raw_json is not None or self.raw_sse is not None


class Fault(_Model):
    """A failure to inject; combine with `Rule.max_uses` to fail N times and then succeed.

    `status` replies with that HTTP status and an OpenAI-style error body (429 also gets a
    `retry-after` header, 1 s unless `retry_after_s` says otherwise; `retry_after_s` is also sent
    as `retry-after-ms`, and 0 leaves the wait to the SDK's own backoff). `hang_s` sleeps before
    the headers (on top of `latency_s`). `cut_after_chunks` closes the connection abruptly after
    that many stream chunks (a non-streamed request is cut before any byte is sent).
    `error_in_stream` (streamed requests only) sends `data: {"error": ...}` after
    `error_after_chunks` chunks and ends the stream without [DONE].
    """

    status: int | None = Field(default=None, ge=400, le=599)
    message: str | None = None
    retry_after_s: float | None = Field(default=None, ge=0)
    headers: dict[str, str] = Field(default_factory=dict)
    hang_s: float = Field(default=0.0, ge=0)
    cut_after_chunks: int | None = Field(default=None, ge=0)
    error_in_stream: JsonDict | None = None
    error_after_chunks: int = Field(default=1, ge=0)


class Match(_Model):
    """Conditions on a request; every condition given must hold. Substring lists need all."""

    last_user_contains: str | list[str] | None = None
    last_user_regex: str | None = None
    last_message_contains: str | list[str] | None = None
    last_message_regex: str | None = None
    system_contains: str | list[str] | None = None
    system_regex: str | None = None
    any_contains: str | list[str] | None = None  # each substring occurs in some message
    any_regex: str | None = None
    last_role: str | None = None
    tool_results_since_user: int | None = None
    call_index: int | list[int] | None = None  # a list means "any of these"
    has_tools: bool | None = None
    has_images: bool | None = None  # some message carries an image_url content part
    stream: bool | None = None
    model: str | None = None

    @field_validator(
        "last_user_regex", "last_message_regex", "system_regex", "any_regex"
    )
    @classmethod
    def _must_compile(cls, pattern: str | None) -> str | None:
        if pattern is not None:
            re.compile(
                pattern
            )  # a bad pattern fails when the script loads, not per request
        return pattern

    def matches(self, req: RecordedRequest) -> bool:
        """Whether `req` satisfies every condition given."""
        checks = (
            _contains_all(req.last_user_text, self.last_user_contains),
            _regex(req.last_user_text, self.last_user_regex),
            _contains_all(req.last_message_text, self.last_message_contains),
            _regex(req.last_message_text, self.last_message_regex),
            _contains_all(req.system_text, self.system_contains),
            _regex(req.system_text, self.system_regex),
            self._any_contains(req),
            self.any_regex is None
            or any(_regex(t, self.any_regex) for t in req.texts()),
            self.last_role is None or req.last_role == self.last_role,
            self.tool_results_since_user is None
            or req.tool_results_since_user == self.tool_results_since_user,
            self._call_index_ok(req.index),
            self.has_tools is None or bool(req.tools) == self.has_tools,
            self.has_images is None or bool(req.image_urls) == self.has_images,
            self.stream is None or req.stream == self.stream,
            self.model is None or req.model == self.model,
        )
        return all(checks)

    def _any_contains(self, req: RecordedRequest) -> bool:
        if self.any_contains is None:
            return True
        texts = req.texts()
        return all(any(n in t for t in texts) for n in _as_list(self.any_contains))

    def _call_index_ok(self, index: int) -> bool:
        if self.call_index is None:
            return True
        return index in _as_list(self.call_index)


def _as_list(value: str | int | list[str] | list[int]) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _contains_all(text: str, needles: str | list[str] | None) -> bool:
    return needles is None or all(n in text for n in _as_list(needles))


def _regex(text: str, pattern: str | None) -> bool:
    # DOTALL so a pattern can span lines of a long prompt; `re` caches the compiled pattern.
    return pattern is None or re.search(pattern, text, re.DOTALL) is not None


class Rule(_Model):
    """A match and what to answer; `respond` (Python only) computes the reply per request."""

    name: str | None = None
    match: Match = Field(default_factory=Match)
    reply: Reply = Field(
        default_factory=Reply, validation_alias=AliasChoices("reply", "response")
    )
    respond: Callable[[RecordedRequest], Reply] | None = Field(
        default=None, exclude=True
    )
    fault: Fault | None = None
    timing: Timing | None = None
    max_uses: int | None = Field(default=None, ge=0)

    @model_validator(mode="before")
    @classmethod
    def _lift_flat_timing(cls, data: Any) -> Any:
        # Timing keys written on the rule itself (peer script format) become `timing`.
        if not isinstance(data, dict) or not TIMING_FIELDS & data.keys():
            return data
        data = dict(data)
        flat = {k: data.pop(k) for k in list(data) if k in TIMING_FIELDS}
        base = data.get("timing")
        if isinstance(base, Timing):
            base = base.model_dump(exclude_unset=True)
        data["timing"] = {**(base or {}), **flat}
        return data

    @field_serializer("timing")
    def _dump_only_overrides(self, timing: Timing | None) -> JsonDict | None:
        # Dumping unset fields would turn them into overrides of Script.defaults on reload.
        return None if timing is None else timing.model_dump(exclude_unset=True)


class Script(_Model):
    """Ordered rules (first match wins), a fallback, default timing and the advertised models."""

    rules: list[Rule] = Field(default_factory=list)
    on_no_match: Reply | Literal["error"] = "error"
    defaults: Timing = Field(default_factory=Timing)
    model: str = "gpt-4o-mini"  # reported when a request names no model
    models: list[str] = Field(
        default_factory=lambda: ["gpt-4o-mini", "gpt-4o", "gpt-4.1"]
    )

    @model_validator(mode="before")
    @classmethod
    def _lift_default_model(cls, data: Any) -> Any:
        # The peer format keeps the model name among the timing defaults.
        if isinstance(data, dict) and isinstance(data.get("defaults"), dict):
            defaults = dict(data["defaults"])
            if "model" in defaults:
                data = {**data, "defaults": defaults, "model": defaults.pop("model")}
        return data

    @classmethod
    def from_file(cls, path: str | Path) -> Script:
        """Load a script from a JSON file."""
        return cls.model_validate_json(Path(path).read_text(encoding="utf-8"))

    @classmethod
    def coerce(cls, source: Script | JsonDict | str | Path) -> Script:
        """Accept a Script, a dict in the JSON shape, or the path of a JSON file."""
        if isinstance(source, Script):
            return source
        if isinstance(source, dict):
            return cls.model_validate(source)
        return cls.from_file(source)


def message_text(message: JsonDict) -> str:
    """The text of a chat message whose content is a string or a list of content parts."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict)]
        return "".join(p for p in parts if isinstance(p, str))
    return ""


@dataclass
class RecordedRequest:
    """One chat-completions request as the server saw it, with what it did about it.

    `index` is the call index since the server started or last loaded a script (what
    `Match.call_index` tests). Times are `time.time()` floats; `t_first_byte` is when the
    response headers left, `t_first_chunk` when the first body chunk (or the JSON body) did.
    """

    index: int
    body: JsonDict
    t_received: float
    rule_name: str | None = None
    status: int | None = None
    t_first_byte: float | None = None
    t_first_chunk: float | None = None
    t_done: float | None = None
    error: str | None = None  # e.g. "cut after 3 chunks", "client disconnected"
    chunks_sent: int = 0
    _texts: list[str] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    @property
    def messages(self) -> list[JsonDict]:
        """The `messages` the client sent."""
        messages = self.body.get("messages")
        return (
            [m for m in messages if isinstance(m, dict)]
            if isinstance(messages, list)
            else []
        )

    @property
    def tools(self) -> list[JsonDict]:
        """The `tools` the client sent (empty when none)."""
        tools = self.body.get("tools")
        return (
            [t for t in tools if isinstance(t, dict)] if isinstance(tools, list) else []
        )

    @property
    def tool_names(self) -> list[str]:
        """Names of the function tools offered."""
        return [str(t.get("function", {}).get("name")) for t in self.tools]

    @property
    def image_urls(self) -> list[str]:
        """URLs of every ``image_url`` content part the client sent, in order."""
        urls: list[str] = []
        for message in self.messages:
            content = message.get("content")
            for part in content if isinstance(content, list) else []:
                if isinstance(part, dict) and part.get("type") == "image_url":
                    image = part.get("image_url")
                    url = image.get("url") if isinstance(image, dict) else None
                    if isinstance(url, str):
                        urls.append(url)
        return urls

    @property
    def stream(self) -> bool:
        """Whether the client asked for a stream."""
        return bool(self.body.get("stream"))

    @property
    def include_usage(self) -> bool:
        """Whether a streaming client asked for the usage-only final chunk."""
        options = self.body.get("stream_options")
        return isinstance(options, dict) and bool(options.get("include_usage"))

    @property
    def model(self) -> str | None:
        """The model the client named."""
        model = self.body.get("model")
        return model if isinstance(model, str) else None

    def texts(self, role: str | None = None) -> list[str]:
        """Text of every message in order, optionally only those with `role`."""
        if role is not None:
            return [message_text(m) for m in self.messages if m.get("role") == role]
        if self._texts is None:  # matching asks many times; messages never change
            self._texts = [message_text(m) for m in self.messages]
        return self._texts

    @property
    def last_user_text(self) -> str:
        """Text of the last user message ("" when there is none)."""
        users = self.texts("user")
        return users[-1] if users else ""

    @property
    def last_message_text(self) -> str:
        """Text of the last message of any role."""
        texts = self.texts()
        return texts[-1] if texts else ""

    @property
    def last_role(self) -> str | None:
        """Role of the last message."""
        return self.messages[-1].get("role") if self.messages else None

    @property
    def system_text(self) -> str:
        """All system and developer messages, joined by newlines."""
        roles = ("system", "developer")
        return "\n".join(
            message_text(m) for m in self.messages if m.get("role") in roles
        )

    @property
    def tool_results_since_user(self) -> int:
        """Number of role=tool messages after the last user message."""
        count = 0
        for message in reversed(self.messages):
            if message.get("role") == "user":
                break
            count += message.get("role") == "tool"
        return count
