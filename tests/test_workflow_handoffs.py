"""Handoffs that are not allowed, agents that do not exist, failing tools, return_direct."""

from __future__ import annotations

from engine_helpers import llm_for, serving
from workflow_helpers import RESEARCHER, REVIEWER, WRITER, call, collect, team

from runs.engine import (
    AgentHandoff,
    AgentInput,
    AgentWorkflow,
    FunctionAgent,
    FunctionTool,
    ToolCallResult,
)
from runs.engine.testing import Match, Reply, Rule


def _results(events: list) -> list[str]:
    return [e.tool_output.content for e in events if isinstance(e, ToolCallResult)]


async def test_handoff_tool_lists_only_reachable_agents_and_refuses_others() -> None:
    rules = [
        Rule(
            match=Match(system_contains=RESEARCHER, tool_results_since_user=0),
            reply=call("handoff", to_agent="reviewer", reason="skip"),
        ),
        Rule(
            match=Match(system_contains=RESEARCHER, tool_results_since_user=1),
            reply=Reply(text="I will not skip the writer."),
        ),
    ]
    with serving(*rules) as server:
        events, result = await collect(team(server).run(user_msg="Report on Lagos"))
        tools = server.requests[0].body["tools"]
    handoff = next(t["function"] for t in tools if t["function"]["name"] == "handoff")
    assert (
        "writer" in handoff["description"] and "reviewer" not in handoff["description"]
    )
    assert sorted(handoff["parameters"]["properties"]) == [
        "reason",
        "to_agent",
    ]  # no ctx for the model
    (observation,) = _results(events)
    assert (
        observation.startswith("Error:")
        and "may not hand off to 'reviewer'" in observation
    )
    assert "you may hand off to: writer" in observation
    assert not [e for e in events if isinstance(e, AgentHandoff)]
    assert result.current_agent_name == "researcher"


async def test_handoff_to_an_invented_agent_is_an_error_observation() -> None:
    rules = [
        Rule(
            match=Match(system_contains=RESEARCHER, tool_results_since_user=0),
            reply=call("handoff", to_agent="editor", reason="x"),
        ),
        Rule(
            match=Match(system_contains=RESEARCHER, tool_results_since_user=1),
            reply=Reply(text="ok"),
        ),
    ]
    with serving(*rules) as server:
        events, _ = await collect(team(server).run(user_msg="Report"))
    (observation,) = _results(events)
    assert "there is no agent named 'editor'" in observation and "writer" in observation


async def test_agent_without_reachable_agents_gets_no_handoff_tool() -> None:
    with serving(Rule(reply=Reply(text="alone"))) as server:
        llm = llm_for(server)
        solo = AgentWorkflow(
            [
                FunctionAgent(name="a", llm=llm, can_handoff_to=[]),
                FunctionAgent(name="b", llm=llm),
            ],
            root_agent="a",
        )
        await solo.run(user_msg="hi")
        assert "tools" not in server.requests[0].body


async def test_a_tool_that_raises_becomes_an_observation_and_the_run_goes_on() -> None:
    def flaky(city: str) -> str:
        """Look a city up."""
        raise RuntimeError(f"database down for {city}")

    rules = [
        Rule(match=Match(tool_results_since_user=0), reply=call("flaky", city="Lagos")),
        Rule(
            match=Match(tool_results_since_user=1),
            reply=Reply(text="The lookup failed."),
        ),
    ]
    with serving(*rules) as server:
        workflow = AgentWorkflow.from_tools_or_functions([flaky], llm=llm_for(server))
        events, result = await collect(workflow.run(user_msg="Lagos?"))
    assert _results(events) == ["Error: RuntimeError: database down for Lagos"]
    assert result.response.content == "The lookup failed."


async def test_return_direct_ends_the_run_with_the_tool_output_but_a_handoff_does_not() -> (
    None
):
    def publish(text: str) -> str:
        """Publish the report."""
        return f"PUBLISHED: {text}"

    rules = [
        Rule(
            match=Match(system_contains=RESEARCHER, tool_results_since_user=0),
            reply=call("handoff", to_agent="writer", reason="go"),
        ),
        Rule(match=Match(system_contains=WRITER), reply=call("publish", text="Lagos")),
        Rule(match=Match(system_contains=REVIEWER), reply=Reply(text="never reached")),
    ]
    with serving(*rules) as server:
        llm = llm_for(server)
        workflow = AgentWorkflow(
            [
                FunctionAgent(name="researcher", system_prompt=RESEARCHER, llm=llm),
                FunctionAgent(
                    name="writer",
                    system_prompt=WRITER,
                    llm=llm,
                    tools=[FunctionTool.from_defaults(publish, return_direct=True)],
                ),
                FunctionAgent(name="reviewer", system_prompt=REVIEWER, llm=llm),
            ],
            root_agent="researcher",
        )
        events, result = await collect(workflow.run(user_msg="Report"))
        assert len(server.requests) == 2
    assert result.response.content == "PUBLISHED: Lagos"
    assert result.current_agent_name == "writer"
    assert [t.tool_name for t in result.tool_calls] == ["publish"]
    assert [e.current_agent_name for e in events if isinstance(e, AgentInput)] == [
        "researcher",
        "writer",
    ]


async def test_a_tool_retriever_adds_tools_for_the_turn() -> None:
    def lookup(city: str) -> str:
        """Population of a city."""
        return f"{city}: 15M"

    class ByKeyword:
        def __init__(self) -> None:
            self.queries: list[str] = []

        async def aretrieve(self, query: str) -> list[FunctionTool]:
            self.queries.append(query)
            return [FunctionTool.from_defaults(lookup)] if "population" in query else []

    rules = [
        Rule(
            match=Match(tool_results_since_user=0), reply=call("lookup", city="Lagos")
        ),
        Rule(match=Match(tool_results_since_user=1), reply=Reply(text="15M")),
    ]
    retriever = ByKeyword()
    with serving(*rules) as server:
        workflow = AgentWorkflow(
            [FunctionAgent(name="a", llm=llm_for(server), tool_retriever=retriever)]
        )
        events, result = await collect(
            workflow.run(user_msg="What is the population of Lagos?")
        )
        offered = [t["function"]["name"] for t in server.requests[0].body["tools"]]
    assert offered == ["lookup"]
    assert retriever.queries[0] == "What is the population of Lagos?"
    assert _results(events) == ["Lagos: 15M"] and result.response.content == "15M"
