"""A ReActAgent (text protocol, no function calling) and a FunctionAgent in one workflow."""

from __future__ import annotations

from engine_helpers import llm_for, serving
from workflow_helpers import assert_valid_openai_sequence, collect

from runs.engine import (
    AgentHandoff,
    AgentInput,
    AgentWorkflow,
    FunctionAgent,
    OpenAI,
    ReActAgent,
    ToolCallResult,
)
from runs.engine.llms.base import LLMMetadata
from runs.engine.testing import Match, Reply, Rule


class TextOnly(OpenAI):
    """The same server, presented as a model without function calling."""

    @property
    def metadata(self) -> LLMMetadata:
        return super().metadata.model_copy(update={"is_function_calling_model": False})


def text_only(server) -> TextOnly:  # type: ignore[no-untyped-def]
    return TextOnly(
        model="scripted",
        api_base=server.base_url,
        api_key="k",
        max_retries=0,
        timeout=10,
    )


def lookup(city: str) -> str:
    """Population of a city."""
    return f"{city}: 15M"


REACT = "Action Input"  # in the ReAct header only
RULES = [
    Rule(
        name="garbled",
        match=Match(
            system_contains=REACT,
            tool_results_since_user=0,
            last_role="user",
            call_index=0,
        ),
        reply=Reply(text="Thought: hmm\nAction: lookup"),
    ),
    Rule(
        name="act",
        match=Match(
            system_contains=REACT, last_message_contains="could not read your reply"
        ),
        reply=Reply(
            text='Thought: I need the population.\nAction: lookup\nAction Input: {"city": "Lagos"}'
        ),
    ),
    Rule(
        name="handoff",
        match=Match(
            system_contains=REACT, last_message_contains="Observation: Lagos: 15M"
        ),
        reply=Reply(
            text='Thought: the writer takes it.\nAction: handoff\nAction Input: {"to_agent": "writer", "reason": "facts found"}'
        ),
    ),
    Rule(
        name="write",
        match=Match(system_contains="You write"),
        reply=Reply(text="Lagos has 15M people."),
    ),
]


async def test_react_and_function_agents_share_the_conversation() -> None:
    with serving(*RULES) as server:
        workflow = AgentWorkflow(
            [
                ReActAgent(
                    name="researcher",
                    description="Finds facts",
                    tools=[lookup],
                    llm=text_only(server),
                ),
                FunctionAgent(
                    name="writer",
                    description="Writes",
                    system_prompt="You write.",
                    llm=llm_for(server),
                ),
            ],
            root_agent="researcher",
        )
        events, result = await collect(
            workflow.run(user_msg="How many people live in Lagos?")
        )
        requests = server.requests
    assert (
        result.response.content == "Lagos has 15M people."
        and result.current_agent_name == "writer"
    )
    assert [r.rule_name for r in requests] == ["garbled", "act", "handoff", "write"]
    assert (
        "tools" not in requests[0].body
    )  # the ReAct agent describes its tools in text
    assert (
        "handoff(to_agent: string, reason: string)"
        in requests[0].messages[0]["content"]
    )
    assert [e.tool_output.content for e in events if isinstance(e, ToolCallResult)][
        0
    ] == "Lagos: 15M"
    assert [
        (e.from_agent, e.to_agent) for e in events if isinstance(e, AgentHandoff)
    ] == [("researcher", "writer")]
    assert [e.current_agent_name for e in events if isinstance(e, AgentInput)] == [
        "researcher"
    ] * 3 + ["writer"]
    writer_saw = requests[3].messages
    assert any(
        "Observation: Lagos: 15M" in (m.get("content") or "") for m in writer_saw
    )
    assert_valid_openai_sequence(writer_saw)


async def test_from_tools_or_functions_picks_the_agent_by_the_model() -> None:
    with serving(Rule(reply=Reply(text="Thought: done.\nAnswer: 42"))) as server:
        react = AgentWorkflow.from_tools_or_functions([lookup], llm=text_only(server))
        function = AgentWorkflow.from_tools_or_functions([lookup], llm=llm_for(server))
        result = await react.run(user_msg="?")
    assert isinstance(react.agents["Agent"], ReActAgent)
    assert isinstance(function.agents["Agent"], FunctionAgent)
    assert result.response.content == "42"
