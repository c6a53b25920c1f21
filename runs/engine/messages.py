"""Chat messages exchanged with an LLM: the one message shape every worker, store and event uses."""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class MessageRole(StrEnum):
    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


class ToolSelection(BaseModel):
    """One tool call chosen by the model.

    ``arguments_error`` is set when the model's arguments were not valid JSON; the call is then
    answered with that error instead of running.
    """

    model_config = ConfigDict(frozen=True)

    tool_id: str
    tool_name: str
    tool_kwargs: dict[str, Any] = Field(default_factory=dict)
    raw_arguments: str | None = None
    arguments_error: str | None = None


class ImagePart(BaseModel):
    """An image attached to a message, by URL (http(s) or a data: URL)."""

    model_config = ConfigDict(frozen=True)

    url: str
    detail: str | None = None


class TokenUsage(BaseModel):
    model_config = ConfigDict(frozen=True)

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
        )


class ChatMessage(BaseModel):
    """A chat message. Immutable, so histories can be shared and snapshotted cheaply."""

    model_config = ConfigDict(frozen=True)

    role: MessageRole
    content: str | None = None
    tool_calls: tuple[ToolSelection, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    images: tuple[ImagePart, ...] = ()

    @classmethod
    def system(cls, content: str) -> ChatMessage:
        return cls(role=MessageRole.SYSTEM, content=content)

    @classmethod
    def user(cls, content: str, images: tuple[ImagePart, ...] = ()) -> ChatMessage:
        return cls(role=MessageRole.USER, content=content, images=images)

    @classmethod
    def assistant(
        cls, content: str | None, tool_calls: tuple[ToolSelection, ...] = ()
    ) -> ChatMessage:
        return cls(role=MessageRole.ASSISTANT, content=content, tool_calls=tool_calls)

    @classmethod
    def tool(cls, content: str, tool_call_id: str, name: str) -> ChatMessage:
        return cls(
            role=MessageRole.TOOL, content=content, tool_call_id=tool_call_id, name=name
        )

    @property
    def text(self) -> str:
        return self.content or ""


def new_in_call(roles: Sequence[str]) -> list[int]:
    """Which of a model call's messages are new: its system messages and all after the last reply.

    Every call resends the whole conversation; what came before its last assistant message was
    already seen by an earlier call. Given the messages' roles, returns the indices to keep.
    """
    last_reply = len(roles) - 1
    while last_reply >= 0 and roles[last_reply] != MessageRole.ASSISTANT:
        last_reply -= 1
    return [
        i
        for i, role in enumerate(roles)
        if i > last_reply or role == MessageRole.SYSTEM
    ]
