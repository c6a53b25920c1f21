"""Keeping a conversation valid for OpenAI: every tool call answered before anything else is said."""

from __future__ import annotations

from collections.abc import Sequence

from ..messages import ChatMessage, MessageRole

UNANSWERED = "Error: this call got no result (the run was stopped before it finished); do not rely on it."


def close_open_tool_calls(
    messages: Sequence[ChatMessage], note: str = UNANSWERED
) -> list[ChatMessage]:
    """``messages`` with a tool message added for every call id of an assistant message left unanswered.

    OpenAI refuses (400) a conversation where an assistant message with ``tool_calls`` is not
    followed by a tool message for each call id; a run stopped mid-turn leaves exactly that.
    """
    fixed: list[ChatMessage] = []
    open_calls: dict[
        str, str
    ] = {}  # call id -> tool name, for the latest assistant message

    def close() -> None:
        fixed.extend(
            ChatMessage.tool(note, tool_call_id=cid, name=name)
            for cid, name in open_calls.items()
        )
        open_calls.clear()

    for message in messages:
        if message.role is MessageRole.TOOL and message.tool_call_id in open_calls:
            open_calls.pop(message.tool_call_id)
            fixed.append(message)
            continue
        close()
        fixed.append(message)
        if message.role is MessageRole.ASSISTANT:
            open_calls = {call.tool_id: call.tool_name for call in message.tool_calls}
    close()
    return fixed
