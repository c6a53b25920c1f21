"""FunctionTool schemas and error handling; ChatMemoryBuffer limits."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from pydantic import BaseModel

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


class CountedArgs(BaseModel):
    """An argument model that counts how often pydantic is asked for its JSON schema."""

    city: str
    days: int = 3

    generated: ClassVar[int] = 0

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        CountedArgs.generated += 1
        return super().model_json_schema(*args, **kwargs)


def test_a_schema_is_generated_once_per_argument_model() -> None:
    # every notebook's runner builds its tools and sends their specs with every model call
    CountedArgs.generated = 0
    tools = [
        FunctionTool.from_defaults(search, name=f"weather{i}", fn_schema=CountedArgs)
        for i in range(5)
    ]
    for _ in range(3):
        for tool in tools:
            assert tool.metadata.openai_tool["function"]["parameters"]["required"] == [
                "city"
            ]
            tool.metadata.signature()
            tool.metadata.parameters_schema()
    assert CountedArgs.generated == 1


def test_tools_from_one_function_share_its_argument_model() -> None:
    first, second = (
        FunctionTool.from_defaults(search),
        FunctionTool.from_defaults(search),
    )
    assert first.metadata.fn_schema is second.metadata.fn_schema
    renamed = FunctionTool.from_defaults(search, name="find")
    assert renamed.metadata.fn_schema is not first.metadata.fn_schema


def test_an_edited_tool_sends_its_new_spec() -> None:
    meta = FunctionTool.from_defaults(search).metadata
    assert meta.openai_tool["function"]["description"] == "Search the catalogue."
    edited = meta.model_copy(update={"description": "Search the archive."})
    assert edited.openai_tool["function"]["description"] == "Search the archive."
    swapped = meta.model_copy(update={"fn_schema": CountedArgs})
    assert swapped.openai_tool["function"]["parameters"]["required"] == ["city"]
    assert meta.openai_tool["function"]["parameters"]["required"] == ["query"]


def test_a_changed_function_gets_a_new_schema() -> None:
    def lookup(term: str) -> str:
        return term

    before = FunctionTool.from_defaults(lookup).metadata.parameters
    assert before["required"] == ["term"]
    lookup.__defaults__ = ("all",)  # the same function object, now with a default
    after = FunctionTool.from_defaults(lookup).metadata.parameters
    assert "required" not in after and after["properties"]["term"]["default"] == "all"

    def lookup(term: str, exact: bool) -> str:  # noqa: F811 (redefined, as an edit would)
        return term

    assert FunctionTool.from_defaults(lookup).metadata.parameters["required"] == [
        "term",
        "exact",
    ]


def test_parameters_schema_is_a_copy_to_modify() -> None:
    meta = FunctionTool.from_defaults(search).metadata
    schema = meta.parameters_schema()
    schema["properties"].clear()
    assert meta.parameters_schema()["properties"]["query"]["type"] == "string"
    assert meta.openai_tool["function"]["parameters"]["properties"]


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
