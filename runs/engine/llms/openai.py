"""The OpenAI LLM: any OpenAI-compatible server, through the official ``openai`` SDK's async client.

The SDK sends (transport, auth, retries, timeouts, error types) but does not build or parse:
``client.post(..., cast_to=httpx2.Response)`` takes a body we assembled from each message's JSON,
serialised once when the message first went out, and hands back the raw response, whose SSE
bytes are decoded with orjson straight into our own types. Walking and validating a 400-message
history on every call, and a pydantic model per streamed chunk, was most of a step's CPU.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar, get_args

import orjson

from ..errors import LLMError
from ..messages import ChatMessage, MessageRole, TokenUsage, ToolSelection
from ..model_json import deeper_than, too_deep_error
from ..tools import BaseTool
from .base import LLM, ChatResponse, LLMMetadata, ToolChoice
from .per_loop import PerLoop
from .silence import Silence
from .sse import ServerEvent, SSEDecoder
from .wire_cache import WireCache

if TYPE_CHECKING:
    # The SDK and its HTTP stacks take ~0.5 s to import: they load at the first model call
    # (or error), so a process that never calls a model (`manage.py migrate`, a seeder,
    # the admin) starts without them.
    import httpx2
    import openai

T = TypeVar("T")

DEFAULT_MODEL = "gpt-4o-mini"

Transport = Literal["aiohttp", "httpx"]
"""How the SDK's client talks HTTP: aiohttp under its httpx2 API (``DefaultAioHttpClient``,
less client CPU per streamed chunk, lower token latency) or httpx2's own transport."""
TRANSPORTS: tuple[Transport, ...] = get_args(Transport)
DEFAULT_TRANSPORT: Transport = "aiohttp"
_WIRE_CACHE_SIZE = 20_000


def message_to_openai(message: ChatMessage) -> dict[str, Any]:
    """One of our messages as the chat completions API expects it."""
    out: dict[str, Any] = {"role": message.role.value}
    if message.images:
        parts: list[dict[str, Any]] = []
        if message.content:
            parts.append({"type": "text", "text": message.content})
        for image in message.images:
            url: dict[str, Any] = {"url": image.url}
            if image.detail:
                url["detail"] = image.detail
            parts.append({"type": "image_url", "image_url": url})
        out["content"] = parts
    else:
        out["content"] = (
            message.content
            if message.content is not None
            else ("" if message.role is not MessageRole.ASSISTANT else None)
        )
    if message.tool_calls:
        out["tool_calls"] = [
            {
                "id": call.tool_id,
                "type": "function",
                "function": {
                    "name": call.tool_name,
                    "arguments": call.raw_arguments
                    if call.raw_arguments is not None
                    else json.dumps(call.tool_kwargs),
                },
            }
            for call in message.tool_calls
        ]
    if message.role is MessageRole.TOOL:
        out["tool_call_id"] = message.tool_call_id
    if message.name and message.role is not MessageRole.TOOL:
        out["name"] = message.name
    return out


_TOOL_CHOICE_WORDS = frozenset({"auto", "none", "required"})


def openai_tool_choice(choice: ToolChoice) -> str | dict[str, Any]:
    """``tool_choice`` as the API takes it: a tool's bare name means "call this tool"."""
    if isinstance(choice, str) and choice not in _TOOL_CHOICE_WORDS:
        return {"type": "function", "function": {"name": choice}}
    return choice


def parse_arguments(raw: str) -> tuple[dict[str, Any], str | None]:
    """Decode tool-call arguments; malformed JSON becomes an error text rather than an exception."""
    if not raw.strip():
        return {}, None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        return (
            {},
            f"the arguments are not valid JSON ({exc.msg} at char {exc.pos}): {raw[:200]}",
        )
    except RecursionError:  # see runs.engine.model_json
        return {}, f"the arguments are {too_deep_error(raw)}"
    if deeper_than(value):
        return {}, f"the arguments are {too_deep_error(raw)}"
    if not isinstance(value, dict):
        return (
            {},
            f"the arguments must be a JSON object, got {type(value).__name__}: {raw[:200]}",
        )
    return value, None


@dataclass
class _ToolCallDraft:
    tool_id: str = ""
    name: str = ""
    arguments: str = ""

    def finish(self) -> ToolSelection:
        kwargs, error = parse_arguments(self.arguments)
        # some providers (Gemini) send empty ids; the conversation still needs one per call
        return ToolSelection(
            tool_id=self.tool_id or f"call_{uuid.uuid4().hex[:24]}",
            tool_name=self.name,
            tool_kwargs=kwargs,
            raw_arguments=self.arguments,
            arguments_error=error,
        )


@dataclass
class _StreamState:
    text: str = ""
    drafts: dict[int, _ToolCallDraft] = field(default_factory=dict)
    usage: TokenUsage | None = None
    finish_reason: str | None = None
    started: bool = False  # a first event came
    done: bool = False  # [DONE] came

    def take(self, events: list[ServerEvent]) -> Iterator[str]:
        """Fold each event into the reply; the text each adds, if any, in order."""
        for event in events:
            self.started = True
            if event.data.startswith(b"[DONE]"):
                self.done = True
                return
            chunk = _json_object(event.data, "a stream chunk")
            error = chunk.get("error")
            if error or event.event == "error":
                raise LLMError(
                    "the model server reported an error inside the stream: "
                    f"{_error_text(error or chunk)}"
                )
            usage = chunk.get("usage")
            if usage is not None:
                self.usage = _usage(usage)
            choices = chunk.get("choices")
            if not choices:
                continue
            choice = choices[0]
            delta = choice.get("delta") or {}
            for position, tool_delta in enumerate(delta.get("tool_calls") or ()):
                self.add_tool_delta(tool_delta, position)
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
            text = delta.get("content")
            if text:
                self.text += text
                yield text

    def add_tool_delta(self, delta: dict[str, Any], position: int) -> None:
        index = delta.get("index")
        draft = self.drafts.setdefault(
            index if index is not None else position, _ToolCallDraft()
        )
        if delta.get("id"):
            draft.tool_id = delta["id"]
        function = delta.get("function")
        if function:
            name = function.get("name")
            if name:
                draft.name += name if draft.name != name else ""
            arguments = function.get("arguments")
            if arguments:
                draft.arguments += arguments

    def tool_calls(self) -> tuple[ToolSelection, ...]:
        return tuple(self.drafts[i].finish() for i in sorted(self.drafts))

    def message(self) -> ChatMessage:
        return ChatMessage.assistant(self.text or None, tool_calls=self.tool_calls())


def _usage(raw: Any) -> TokenUsage | None:
    if not isinstance(raw, dict):
        return None
    return TokenUsage(
        prompt_tokens=raw.get("prompt_tokens") or 0,
        completion_tokens=raw.get("completion_tokens") or 0,
        total_tokens=raw.get("total_tokens") or 0,
    )


def _json_object(data: bytes, what: str) -> dict[str, Any]:
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise LLMError(
            f"the model server sent {what} that is not JSON ({exc}): {data[:200]!r}"
        ) from None
    if not isinstance(value, dict):
        raise LLMError(f"the model server sent {what} that is not a JSON object")
    return value


def _error_text(error: Any) -> str:
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    return str(error)


def _encode_message(message: ChatMessage) -> bytes:
    return orjson.dumps(message_to_openai(message))


def _lost_connection(exc: BaseException) -> BaseException | None:
    """The connection error under a "connect timeout" from the SDK's aiohttp transport, if any.

    That transport reports every aiohttp connection error (refused, unknown host, the server
    hanging up before it answers) as httpx2's ``ConnectTimeout``, which the SDK then raises as
    ``APITimeoutError``; httpx2's own transport reports them as connection errors. None for a
    real timeout, and for anything that did not come through aiohttp.
    """
    aiohttp = sys.modules.get("aiohttp")
    if aiohttp is None:  # not imported: nothing can have come through it
        return None
    connection_error: type[Exception] = aiohttp.ClientConnectionError
    cause = exc.__cause__
    while cause is not None:
        if isinstance(cause, connection_error) and not isinstance(cause, TimeoutError):
            return cause
        cause = cause.__cause__
    return None


def llm_error(exc: BaseException, started: bool = False) -> LLMError:
    """A failed model call as an LLMError, by kind, the same whichever transport raised it.

    ``started``: part of a streamed reply had come, so a broken connection cut it off.
    """
    import httpx2
    import openai

    lost = _lost_connection(exc)
    if lost is None and isinstance(
        exc, (openai.APITimeoutError, httpx2.TimeoutException)
    ):
        if started:
            return LLMError("the model's stream went quiet mid-way (timeout)")
        return LLMError("the model did not answer in time (timeout)")
    if isinstance(exc, openai.APIStatusError):
        return LLMError(
            f"the model server answered HTTP {exc.status_code} "
            f"({type(exc).__name__}): {exc.message}",
            status_code=exc.status_code,
        )
    if isinstance(exc, (openai.APIConnectionError, httpx2.HTTPError)):
        detail = lost or exc.__cause__ or exc
        if started:
            return LLMError(f"the model's stream was cut off mid-way: {detail}")
        if isinstance(exc, openai.APIConnectionError):
            return LLMError(f"cannot reach the model server: {detail}")
        return LLMError(f"the model's stream broke off: {type(exc).__name__}: {exc}")
    if isinstance(exc, openai.APIError):
        return LLMError(f"the model server reported an error: {exc.message}")
    return LLMError(f"{type(exc).__name__}: {exc}")


async def _close_client(client: openai.AsyncOpenAI) -> None:
    await client.close()


def _silence_error(seconds: float | None, where: str) -> LLMError:
    return LLMError(f"the model sent nothing for {seconds:g} s {where} (timeout)")


async def _within(call: Awaitable[T], seconds: float | None, where: str) -> T:
    """Await `call`, giving up with an LLMError after `seconds` (None: no limit)."""
    if seconds is None:
        return await call
    try:
        async with asyncio.timeout(seconds):  # no task per call, unlike wait_for
            return await call
    except TimeoutError:
        raise _silence_error(seconds, where) from None


def _progress(text: str, delta: str) -> ChatResponse:
    """A streamed chunk: the reply so far and the text this chunk added."""
    return ChatResponse(message=ChatMessage.assistant(text), delta=delta)


class OpenAI(LLM):
    """Chat with any OpenAI-compatible server (OpenAI, vLLM, Ollama, llama.cpp server, ...)."""

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        api_base: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        temperature: float | None = None,
        is_function_calling_model: bool = True,
        context_window: int = 128_000,
        additional_kwargs: dict[str, Any] | None = None,
        streaming: bool = True,
        first_byte_timeout: float | None = None,
        chunk_timeout: float | None = None,
        transport: Transport = DEFAULT_TRANSPORT,
    ) -> None:
        if transport not in TRANSPORTS:
            raise ValueError(
                f"transport must be one of {', '.join(TRANSPORTS)}, not {transport!r}"
            )
        self.transport: Transport = transport
        self.model = model
        # A model server that accepts a call and then says nothing: give up after this long
        # before the first chunk (retries included) and between chunks. None: `timeout` only.
        self.first_byte_timeout = first_byte_timeout
        self.chunk_timeout = chunk_timeout
        # some OpenAI-compatible servers cannot stream (or not with tools): then ask for whole replies
        self.streaming = streaming
        self.api_base = api_base
        # local servers ignore the key, but the SDK refuses to start without one
        self.api_key = api_key or "sk-no-key-needed"
        self.timeout = timeout
        self.max_retries = max_retries
        self.temperature = temperature
        self.additional_kwargs = dict(additional_kwargs or {})
        self._metadata = LLMMetadata(
            model_name=model,
            is_function_calling_model=is_function_calling_model,
            context_window=context_window,
        )
        # each message's JSON, serialised the first time it is sent
        self._wire: WireCache[bytes] = WireCache(_WIRE_CACHE_SIZE)
        # one client per event loop: its connection pool belongs to the loop that opened it,
        # and is closed on that loop when the loop shuts down or this LLM is dropped
        self._clients: PerLoop[openai.AsyncOpenAI] = PerLoop(_close_client)

    @property
    def metadata(self) -> LLMMetadata:
        return self._metadata

    def _new_client(self) -> openai.AsyncOpenAI:
        import openai

        http_client = (
            openai.DefaultAioHttpClient(timeout=self.timeout)
            if self.transport == "aiohttp"
            else None  # the SDK's own httpx2 client
        )
        return openai.AsyncOpenAI(
            api_key=self.api_key,
            base_url=self.api_base,
            timeout=self.timeout,
            max_retries=self.max_retries,
            http_client=http_client,
        )

    async def aclose(self) -> None:
        """Close the running loop's HTTP client and its connections (a new one on next use).

        Not needed for correctness: a loop's client is closed when the loop shuts down
        (``asyncio.run``) or when this LLM is garbage-collected while the loop runs.
        """
        await self._clients.aclose()

    def _request(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[BaseTool] | None,
        stop: Sequence[str] | None,
        tool_choice: ToolChoice | None = None,
        parallel_tool_calls: bool | None = None,
    ) -> bytes:
        """The request body: the cached JSON of each message joined, the rest encoded anew."""
        fields: dict[str, Any] = {"model": self.model, **self.additional_kwargs}
        fields.pop("messages", None)
        if self.streaming:
            fields["stream"] = True
            fields["stream_options"] = {"include_usage": True}
        if tools:
            fields["tools"] = [tool.metadata.openai_tool for tool in tools]
            if tool_choice is not None:
                fields["tool_choice"] = openai_tool_choice(tool_choice)
            if parallel_tool_calls is not None:
                fields["parallel_tool_calls"] = parallel_tool_calls
        if stop:
            fields["stop"] = list(stop)
        if self.temperature is not None:
            fields["temperature"] = self.temperature
        head = orjson.dumps(fields, option=orjson.OPT_NON_STR_KEYS)
        pieces = self._wire.get_all(messages, _encode_message)
        return b"".join((head[:-1], b',"messages":[', b",".join(pieces), b"]}"))

    async def _post(self, body: bytes) -> httpx2.Response:
        """Send through the SDK (its retries, timeouts and error types); the raw response back."""
        import httpx2

        client = await self._clients.get(self._new_client)
        return await client.post(
            "/chat/completions",
            cast_to=httpx2.Response,
            content=body,
            stream=self.streaming,
        )

    async def astream_chat(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[BaseTool] | None = None,
        stop: Sequence[str] | None = None,
        *,
        tool_choice: ToolChoice | None = None,
        parallel_tool_calls: bool | None = None,
    ) -> AsyncIterator[ChatResponse]:
        import httpx2
        import openai

        request = self._request(messages, tools, stop, tool_choice, parallel_tool_calls)
        if not self.streaming:
            yield await self._complete(request)
            return
        state = _StreamState()
        try:
            response = await _within(
                self._post(request), self.first_byte_timeout, "before its first byte"
            )
            silence = Silence()
            try:
                decoder = SSEDecoder()
                pieces = aiter(response.aiter_bytes())
                while not state.done:
                    silence.arm(
                        self.chunk_timeout if state.started else self.first_byte_timeout
                    )
                    try:
                        piece: bytes | None = await anext(pieces)
                    except StopAsyncIteration:
                        piece = None
                    except asyncio.CancelledError:
                        if silence.timed_out():
                            raise self._silent(state.started) from None
                        raise
                    finally:
                        silence.disarm()  # not while the reader of our chunks is busy
                    if piece is None:
                        for text in state.take(decoder.close()):
                            yield _progress(state.text, text)
                        break
                    state.started = True
                    for text in state.take(decoder.feed(piece)):
                        yield _progress(state.text, text)
            finally:
                silence.close()
                await response.aclose()
        except LLMError:
            raise
        except (openai.OpenAIError, httpx2.HTTPError) as exc:
            raise llm_error(exc, state.started) from exc
        if state.finish_reason is None:
            raise LLMError(
                "the model's stream ended before the reply was finished (cut off mid-way)"
            )
        yield ChatResponse(
            message=state.message(),
            usage=state.usage,
            finish_reason=state.finish_reason,
        )

    def _silent(self, started: bool) -> LLMError:
        if started:
            return _silence_error(self.chunk_timeout, "between two chunks")
        return _silence_error(self.first_byte_timeout, "before its first byte")

    async def _complete(self, body: bytes) -> ChatResponse:
        import httpx2
        import openai

        try:
            response = await _within(
                self._post(body), self.first_byte_timeout, "before its reply"
            )
        except (openai.OpenAIError, httpx2.HTTPError) as exc:
            raise llm_error(exc) from exc
        completion = _json_object(response.content, "a reply")
        error = completion.get("error")
        choices = completion.get("choices")
        if error or not choices:
            raise LLMError(
                f"the model server sent no reply: {_error_text(error) if error else 'empty choices'}"
            )
        choice = choices[0]
        reply = choice.get("message") or {}
        state = _StreamState(
            text=reply.get("content") or "", finish_reason=choice.get("finish_reason")
        )
        for index, call in enumerate(reply.get("tool_calls") or ()):
            function = call.get("function") or {}
            state.drafts[index] = _ToolCallDraft(
                tool_id=call.get("id") or "",
                name=function.get("name") or "",
                arguments=function.get("arguments") or "",  # some providers send null
            )
        message = state.message()
        return ChatResponse(
            message=message,
            delta=message.text,
            usage=_usage(completion.get("usage")),
            finish_reason=choice.get("finish_reason"),
        )
