"""The LLM interface workers program against."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any, TypedDict, Unpack

from pydantic import BaseModel

from .._sync import iterate_sync, run_sync
from ..errors import LLMError
from ..messages import ChatMessage, TokenUsage
from ..tools import BaseTool

ToolChoice = str | dict[str, Any]
"""``"auto"``, ``"none"``, ``"required"``, a tool's name, or the OpenAI ``tool_choice`` object."""


class ChatOptions(TypedDict, total=False):
    """What a chat call takes beside its messages, given once to every derived call."""

    tools: Sequence[BaseTool] | None
    stop: Sequence[str] | None
    tool_choice: ToolChoice | None
    """only matters when ``tools`` are given"""
    parallel_tool_calls: bool | None
    """only matters when ``tools`` are given"""


class LLMMetadata(BaseModel):
    model_name: str
    is_function_calling_model: bool = True
    context_window: int = 128_000


class ChatResponse(BaseModel):
    """A model reply; while streaming, ``message`` holds everything so far and ``delta`` the new text."""

    message: ChatMessage
    delta: str = ""
    usage: TokenUsage | None = None
    finish_reason: str | None = None
    raw: dict[str, Any] | None = None


class LLM(ABC):
    """A chat model. Implement ``astream_chat``; the other calls are derived from it."""

    @property
    @abstractmethod
    def metadata(self) -> LLMMetadata: ...

    @abstractmethod
    def astream_chat(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[BaseTool] | None = None,
        stop: Sequence[str] | None = None,
        *,
        tool_choice: ToolChoice | None = None,
        parallel_tool_calls: bool | None = None,
    ) -> AsyncIterator[ChatResponse]:
        """Stream the reply; the last item carries the whole message, usage and finish reason.

        ``tool_choice`` and ``parallel_tool_calls`` only matter when ``tools`` are given.
        """

    async def achat(
        self, messages: Sequence[ChatMessage], **options: Unpack[ChatOptions]
    ) -> ChatResponse:
        last: ChatResponse | None = None
        async for chunk in self.astream_chat(messages, **options):
            last = chunk
        if last is None:
            raise LLMError("the model sent an empty stream")
        return last

    def chat(
        self, messages: Sequence[ChatMessage], **options: Unpack[ChatOptions]
    ) -> ChatResponse:
        return run_sync(self.achat(messages, **options))

    def stream_chat(
        self, messages: Sequence[ChatMessage], **options: Unpack[ChatOptions]
    ) -> Iterator[ChatResponse]:
        return iterate_sync(self.astream_chat(messages, **options))
