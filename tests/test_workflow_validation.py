"""Every configuration error of AgentWorkflow and its agents is a clear ValueError (an AgentError)."""

from __future__ import annotations

import pytest
from engine_helpers import llm_for, serving

from runs.engine import (
    AgentError,
    AgentWorkflow,
    Context,
    FunctionAgent,
    FunctionTool,
    OpenAI,
    WorkflowConfigError,
)
from runs.engine.messages import ChatMessage
from runs.engine.testing import Reply, Rule


class _NoFunctionCalling(OpenAI):
    @property
    def metadata(self):  # type: ignore[no-untyped-def]
        meta = super().metadata
        return meta.model_copy(update={"is_function_calling_model": False})


def _llm() -> OpenAI:
    return OpenAI(
        model="m", api_base="http://127.0.0.1:9/v1", api_key="k", max_retries=0
    )


def _agent(name: str, **kwargs: object) -> FunctionAgent:
    return FunctionAgent(name=name, llm=_llm(), **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: AgentWorkflow([]), "At least one agent must be provided"),
        (
            lambda: AgentWorkflow([_agent("a"), _agent("b")]),
            "Exactly one root agent must be provided",
        ),
        (
            lambda: AgentWorkflow([_agent("a"), _agent("b")], root_agent="c"),
            "Root agent c not found",
        ),
        (
            lambda: AgentWorkflow([_agent("a")], handoff_prompt="hand off please"),
            "Handoff prompt must contain {agent_info}",
        ),
        (
            lambda: AgentWorkflow([_agent("a")], state_prompt="{state} only"),
            "State prompt must contain {state} and {msg}",
        ),
        (
            lambda: AgentWorkflow([_agent("a")], state_prompt="{msg} only"),
            "State prompt must contain {state} and {msg}",
        ),
        (
            lambda: AgentWorkflow([_agent("a"), _agent("a")], root_agent="a"),
            "two agents are named 'a'",
        ),
        (
            lambda: AgentWorkflow(
                [_agent("a", can_handoff_to=["zed"]), _agent("b")], root_agent="a"
            ),
            "unknown agent(s): zed",
        ),
        (
            lambda: AgentWorkflow([_agent("a")], initial_state={"when": object()}),
            "initial_state must be JSON data",
        ),
        (
            lambda: AgentWorkflow([_agent("a")], timeout=0),
            "timeout must be a positive number",
        ),
        (
            lambda: FunctionAgent(
                name="a", llm=_NoFunctionCalling(model="text-only", api_key="k")
            ),
            "needs a function-calling model",
        ),
        (
            lambda: _agent(
                "a", tools=[FunctionTool.from_defaults(lambda x: x, name="handoff")]
            ),
            "reserved for handoffs",
        ),
        (lambda: _agent(" "), "an agent needs a name"),
    ],
)
def test_configuration_errors(build, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError) as caught:
        build()
    assert isinstance(caught.value, AgentError)
    assert message in str(caught.value)


def test_single_agent_is_the_root_and_keeps_prompts() -> None:
    workflow = AgentWorkflow(
        [_agent("solo")],
        handoff_prompt="to: {agent_info}",
        state_prompt="S={state} M={msg}",
    )
    assert workflow.root_agent == "solo"
    assert workflow.state_prompt == "S={state} M={msg}"


def test_plain_functions_become_tools() -> None:
    def lookup(city: str) -> str:
        """Find a city."""
        return city

    agent = _agent("a", tools=[lookup])
    assert [t.metadata.name for t in agent.tools] == ["lookup"]


async def test_run_refuses_user_msg_and_chat_history_together() -> None:
    workflow = AgentWorkflow([_agent("a")])
    handler = workflow.run(user_msg="hi", chat_history=[ChatMessage.user("hello")])
    with pytest.raises(
        WorkflowConfigError, match="Cannot provide both user_msg and chat_history"
    ):
        await handler


async def test_run_without_a_message_needs_an_unfinished_run() -> None:
    workflow = AgentWorkflow([_agent("a")])
    with pytest.raises(WorkflowConfigError, match="nothing to run"):
        await workflow.run()


async def test_restoring_a_context_checks_its_data() -> None:
    workflow = AgentWorkflow([_agent("a")])
    with pytest.raises(WorkflowConfigError, match="not a saved workflow context"):
        Context.from_dict(workflow, {"memory": []})
    other = AgentWorkflow([_agent("b")])
    with pytest.raises(WorkflowConfigError, match="names agent\\(s\\) 'b'"):
        Context.from_dict(workflow, Context(other).to_dict())


async def test_context_values_must_be_json() -> None:
    with serving(Rule(reply=Reply(text="ok"))) as server:
        workflow = AgentWorkflow([FunctionAgent(name="a", llm=llm_for(server))])
        ctx = Context(workflow)
        with pytest.raises(WorkflowConfigError, match="must be JSON data"):
            await ctx.set("thing", {1, 2})
        with pytest.raises(WorkflowConfigError, match="only through a handoff"):
            await ctx.set("current_agent_name", "b")
        await ctx.set("state", {"n": 1})
        await workflow.run(user_msg="hi", ctx=ctx)
        assert "Current state" in server.requests[0].messages[-1]["content"]
        assert await ctx.get("state") == {"n": 1}
