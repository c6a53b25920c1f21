"""AgentWorkflow as the seed takes it: LlamaIndex's Workflow options and prompt template objects."""

from __future__ import annotations

import asyncio

import pytest
from engine_helpers import serving
from workflow_helpers import collect, team, team_rules

from runs.engine import AgentOutput, WorkflowConfigError


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
