"""Conversation memory with a token limit."""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable

from pydantic import BaseModel, Field, PrivateAttr

from .messages import ChatMessage, MessageRole

DEFAULT_TOKEN_LIMIT = 30_000


def estimate_tokens(message: ChatMessage) -> int:
    """A cheap, tokenizer-free estimate (about four characters a token, plus per-message overhead)."""
    chars = len(message.content or "")
    for call in message.tool_calls:
        chars += len(call.tool_name) + len(call.raw_arguments or str(call.tool_kwargs))
    return 4 + chars // 4


class ChatMemoryBuffer(BaseModel):
    """An append-mostly list of messages; ``get`` returns the most recent ones within the limit.

    Cumulative token counts are kept as messages arrive, so ``get`` costs the size of its answer,
    not of the whole history.
    """

    token_limit: int = DEFAULT_TOKEN_LIMIT
    messages: list[ChatMessage] = Field(default_factory=list)
    _cumulative: list[int] = PrivateAttr(default_factory=list)

    def model_post_init(self, __context: object) -> None:
        self._recount()

    @classmethod
    def from_defaults(
        cls, chat_history: Iterable[ChatMessage] = (), token_limit: int | None = None
    ) -> ChatMemoryBuffer:
        return cls(
            token_limit=token_limit or DEFAULT_TOKEN_LIMIT, messages=list(chat_history)
        )

    def _recount(self, keep: int = 0) -> None:
        """Recompute running token totals, reusing the first ``keep`` (their messages are unchanged)."""
        kept = self._cumulative[:keep]
        start = kept[-1] if kept else 0
        fresh = itertools.accumulate(
            (estimate_tokens(m) for m in self.messages[keep:]), initial=start
        )
        next(fresh)  # the initial value itself
        kept.extend(fresh)
        self._cumulative = kept

    def put(self, message: ChatMessage) -> None:
        self.messages.append(message)
        previous = self._cumulative[-1] if self._cumulative else 0
        self._cumulative.append(previous + estimate_tokens(message))

    def put_messages(self, messages: Iterable[ChatMessage]) -> None:
        for message in messages:
            self.put(message)

    def get_all(self) -> list[ChatMessage]:
        return list(self.messages)

    def get(self, initial_token_count: int = 0) -> list[ChatMessage]:
        """The newest messages that fit in the token limit, never starting mid tool exchange."""
        if not self.messages:
            return []
        budget = self.token_limit - initial_token_count
        total = self._cumulative[-1]
        # the suffix after index j costs total - cumulative[j]; start after the first j where it fits
        start = (
            0
            if total <= budget
            else bisect.bisect_left(self._cumulative, total - budget) + 1
        )
        while start < len(self.messages) and self.messages[start].role in (
            MessageRole.TOOL,
            MessageRole.ASSISTANT,
        ):
            start += (
                1  # a reply or tool result without what prompted it confuses models
            )
        if start >= len(self.messages):
            # nothing fits whole: keep the newest user message so the model is not sent nothing
            for index in range(len(self.messages) - 1, -1, -1):
                if self.messages[index].role is MessageRole.USER:
                    return self.messages[index:]
            return self.messages[-1:]
        return self.messages[start:]

    def set(self, messages: Iterable[ChatMessage]) -> None:
        new = list(messages)
        old = self.messages
        # histories mostly grow: keep the counts of a prefix made of the very same message objects
        keep = (
            len(old)
            if old and len(new) >= len(old) and new[len(old) - 1] is old[-1]
            else 0
        )
        self.messages = new
        self._recount(keep)

    def truncate(self, length: int) -> None:
        """Drop every message after the first ``length`` (what undo uses)."""
        del self.messages[length:]
        del self._cumulative[length:]

    def reset(self) -> None:
        self.set([])

    def __len__(self) -> int:
        return len(self.messages)

    def copy_buffer(self) -> ChatMemoryBuffer:
        """An independent buffer with the same messages (which are immutable, so shared)."""
        # model_copy, not model_construct: that would recount every message (model_post_init),
        # a cost that grows with the history at every task created
        copy = self.model_copy(update={"messages": list(self.messages)})
        copy._cumulative = list(self._cumulative)
        return copy
