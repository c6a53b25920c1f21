"""AgentWorkflow as the seed takes it: LlamaIndex's Workflow options and prompt template objects."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from engine_helpers import llm_for, serving
from workflow_helpers import call, collect, team, team_rules

from runs.engine import (
    AgentOutput,
    AgentRunner,
    AgentWorkflow,
    Context,
    FunctionAgent,
    StateChanged,
    StepFailedError,
    WorkflowConfigError,
)
from runs.engine.testing import Match, Reply, Rule


class Template:
    """A prompt template object in the shape of LlamaIndex's PromptTemplate (``format(**values)``)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def format(self, **kwargs: str) -> str:
        return self.text.format(**kwargs)


async def test_prompt_templates_are_taken_where_the_seed_takes_them() -> None:
    with serving(*team_rules()) as server:
        workflow = team(
            server,
            handoff_prompt=Template(
                "Hand the talk over. Who can take it: {agent_info}"
            ),
            state_prompt=Template("STATE {state} / MESSAGE {msg}"),
        )
        await collect(workflow.run(user_msg="Write a report on Lagos"))
    first = server.requests[0]
    assert first.messages[-1]["content"].startswith("STATE {")
    assert first.messages[-1]["content"].endswith("/ MESSAGE Write a report on Lagos")
    [handoff] = [t for t in first.tools if t["function"]["name"] == "handoff"]
    assert handoff["function"]["description"].startswith("Hand the talk over. Who can")
    with pytest.raises(WorkflowConfigError, match="must contain {agent_info}"):
        team(server, handoff_prompt="no placeholder in this text")


async def test_workflow_kwargs_verbose_prints_each_step(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with serving(*team_rules()) as server:
        await collect(
            team(server, verbose=True).run(user_msg="Write a report on Lagos")
        )
        quiet = team(server, disable_validation=True)
        await collect(quiet.run(user_msg="Write a report on Lagos"))
    out = capsys.readouterr().out
    assert (
        out.count("> Running step") == 5
    )  # the verbose run's five turns, the quiet run's none
    assert quiet.disable_validation


async def test_num_concurrent_runs_makes_later_runs_wait_their_turn() -> None:
    with serving(*team_rules()) as server:
        workflow = team(server, num_concurrent_runs=1)
        handlers = [
            workflow.run(user_msg=f"Write a report on {city}")
            for city in ("Lagos", "Cairo")
        ]
        results = await asyncio.gather(*handlers)
    assert all(isinstance(r, AgentOutput) for r in results)
    cities = [
        "Lagos" if "Lagos" in r.messages[1]["content"] else "Cairo"
        for r in server.requests
    ]
    assert cities == ["Lagos"] * 5 + ["Cairo"] * 5  # one run after the other


def test_workflow_kwargs_it_cannot_honour_are_refused_by_name() -> None:
    with serving() as server:
        with pytest.raises(TypeError, match="unexpected keyword arguments: colour"):
            team(server, colour="blue")
        with pytest.raises(
            WorkflowConfigError, match="call the other workflow from a tool"
        ):
            team(server, service_manager=object())
        with pytest.raises(WorkflowConfigError, match="num_concurrent_runs"):
            team(server, num_concurrent_runs=0)


# --- ctx.get gives the kept value itself, as LlamaIndex's context does -----------------------------


async def note_in_place(ctx: Context, text: str) -> str:
    """Note a text in the shared state and in a list of the tool's own, editing both in place."""
    state = await ctx.get("state")
    state["notes"].append(text)  # no ctx.set: the edit is kept
    seen = await ctx.get("seen", default=None)
    if seen is None:
        seen = []
        await ctx.set("seen", seen)
    seen.append(len(text))  # after ctx.set, the same list is what is kept
    return "noted"


async def note_a_set(ctx: Context, text: str) -> str:
    """Put something into the shared state that JSON cannot hold."""
    state = await ctx.get("state")
    state["letters"] = set(text)
    return "noted"


def noting(tool: str, text: str) -> list[Rule]:
    return [
        Rule(match=Match(tool_results_since_user=0), reply=call(tool, text=text)),
        Rule(match=Match(tool_results_since_user=1), reply=Reply(text="done")),
    ]


def notebook(server: Any, tool: Any) -> AgentWorkflow:
    agent = FunctionAgent(name="noter", tools=[tool], llm=llm_for(server))
    return AgentWorkflow([agent], initial_state={"notes": []})


async def test_edits_in_place_to_what_ctx_get_returns_are_kept() -> None:
    with serving(*noting("note_in_place", "Lagos")) as server:
        workflow = notebook(server, note_in_place)
        handler = workflow.run(user_msg="note Lagos")
        events, _ = await collect(handler)
        ctx = handler.ctx
        assert await ctx.get("state") == {"notes": ["Lagos"]}
        assert await ctx.get("seen") == [5]
        [changed] = [e for e in events if isinstance(e, StateChanged)]
        assert changed.changes["notes"].after == ["Lagos"]
        # between runs the caller's edits in place are kept too, and the next run starts from them
        (await ctx.get("state"))["notes"].append("by hand")
        await collect(workflow.run(user_msg="note Lagos", ctx=ctx))
        assert await ctx.get("state") == {"notes": ["Lagos", "by hand", "Lagos"]}
        assert await ctx.get("seen") == [5, 5]
        assert "by hand" in server.requests[2].messages[-1]["content"]


async def test_an_edit_in_place_is_undone_with_its_step() -> None:
    with serving(*noting("note_in_place", "Lagos")) as server:
        workflow = notebook(server, note_in_place)
        agent = AgentRunner(workflow.worker)
        task = await agent.acreate_task("note Lagos")
        await agent.arun_step(task.task_id)
        kept = (await agent.aget_task_state(task.task_id)).task.extra_state
        assert kept["workflow"]["state"] == {"notes": ["Lagos"]}
        await agent.aundo_step(task.task_id)
        kept = (await agent.aget_task_state(task.task_id)).task.extra_state
        assert kept["workflow"]["state"] == {"notes": []}


async def test_an_edit_in_place_that_is_not_json_fails_its_step_by_name() -> None:
    with serving(*noting("note_a_set", "abc")) as server:
        agent = AgentRunner(notebook(server, note_a_set).worker)
        task = await agent.acreate_task("note abc")
        with pytest.raises(
            StepFailedError, match="state under 'letters' is no longer JSON"
        ):
            await agent.arun_step(task.task_id)
        kept = (await agent.aget_task_state(task.task_id)).task.extra_state
        assert kept["workflow"]["state"] == {"notes": []}
