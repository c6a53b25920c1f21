"""FunctionTool schemas and error handling; ChatMemoryBuffer limits."""

from __future__ import annotations

import pytest

from runs.engine import ChatMemoryBuffer, ChatMessage, FunctionTool, ToolArgumentsError
from runs.engine.messages import MessageRole, ToolSelection


def search(query: str, limit: int = 5, exact: bool = False) -> list[str]:
    """Search the catalogue."""
    return [query] * limit


async def fetch(url: str) -> str:
    return url


def test_schema_from_signature_and_hints() -> None:
    tool = FunctionTool.from_defaults(search)
    spec = tool.metadata.to_openai_tool()["function"]
    assert spec["name"] == "search"
    assert spec["description"] == "Search the catalogue."
    params = spec["parameters"]
    assert params["required"] == ["query"]
    assert params["properties"]["limit"] == {
        "default": 5,
        "title": "Limit",
        "type": "integer",
    }
    assert (
        tool.metadata.signature()
        == "search(query: string, limit: integer = 5, exact: boolean = false)"
    )


def test_async_function_given_as_fn_is_awaited() -> None:
    tool = FunctionTool.from_defaults(fn=fetch, name="get", description="Fetch a page")
    output = tool.call(url="http://x")
    assert output.content == "http://x" and not output.is_error
    assert tool.metadata.name == "get"


def test_validate_reports_every_problem() -> None:
    tool = FunctionTool.from_defaults(search)
    with pytest.raises(ToolArgumentsError) as info:
        tool.validate({"limit": "many"})
    assert "query: Field required" in str(info.value)
    assert "limit: Input should be a valid integer" in str(info.value)
    assert tool.validate({"query": "q", "limit": "3"}) == {
        "query": "q",
        "limit": 3,
        "exact": False,
    }


def test_tool_output_is_text_and_keeps_raw() -> None:
    output = FunctionTool.from_defaults(search).call(query="a", limit=2)
    assert output.content == '["a", "a"]'
    assert output.raw_output == ["a", "a"]
    assert output.raw_input == {"query": "a", "limit": 2}


def test_return_direct_and_missing_function() -> None:
    assert FunctionTool.from_defaults(search, return_direct=True).metadata.return_direct
    with pytest.raises(ValueError):
        FunctionTool.from_defaults()


def _msg(role: MessageRole, chars: int) -> ChatMessage:
    return ChatMessage(role=role, content="x" * chars)


def test_memory_get_keeps_the_newest_within_the_limit() -> None:
    memory = ChatMemoryBuffer(token_limit=60)
    for _ in range(10):
        memory.put(_msg(MessageRole.USER, 80))  # 24 tokens each
        memory.put(_msg(MessageRole.ASSISTANT, 80))
    got = memory.get()
    assert got == memory.get_all()[-2:]
    assert len(memory.get_all()) == 20


def test_memory_never_starts_with_a_dangling_tool_result() -> None:
    memory = ChatMemoryBuffer(token_limit=40)
    call = ToolSelection(tool_id="c", tool_name="t")
    memory.put(_msg(MessageRole.USER, 40))
    memory.put(ChatMessage.assistant(None, tool_calls=(call,)))
    memory.put(ChatMessage.tool("r" * 60, tool_call_id="c", name="t"))
    memory.put(_msg(MessageRole.USER, 20))
    assert [m.role for m in memory.get()] == [MessageRole.USER]


def test_memory_truncate_set_reset() -> None:
    memory = ChatMemoryBuffer.from_defaults(
        [ChatMessage.user("a"), ChatMessage.user("b")], token_limit=1000
    )
    memory.put(ChatMessage.user("c"))
    memory.truncate(1)
    assert [m.content for m in memory.get()] == ["a"]
    memory.put(ChatMessage.user("d"))
    assert [m.content for m in memory.get()] == ["a", "d"]
    memory.reset()
    assert memory.get() == [] and len(memory) == 0
    restored = ChatMemoryBuffer.model_validate_json(
        ChatMemoryBuffer.from_defaults([ChatMessage.user("z")]).model_dump_json()
    )
    assert [m.content for m in restored.get()] == ["z"]
