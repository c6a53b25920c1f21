"""A fork's edits are what runs (issue 25, item 1): for every worker, fork a finished notebook
at the step that made a waiting step, edit that step there, approve, and check on the scripted
server's request log and the stored tool runs that the edited value ran and the original did not.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from channels.db import database_sync_to_async

from runs import service
from runs.demo import DEMOS
from runs.demo.research import RESEARCH_PROMPT, SUBQUESTIONS, research_rules
from runs.engine.testing import Script, ScriptedServer
from runs.models import Step
from runs.store.fork import fork_notebook
from tests.audit_support import (
    approve_all,
    edited_sql,
    events_of,
    request_text,
    run_tool,
    started,
    waiting_steps,
)
from tests.live_support import (
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    llm_at,
)

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]

# the workers that call tools, each with its demo script (rules, example prompt)
TOOL_WORKERS = ("function_calling", "react", "llm_compiler", "coa", "team")


async def finished(agent: str, prompt: str, mode: str = "tools") -> int:
    task = await started(agent, prompt, mode)
    await approve_all(task)
    return task


def _first_sql_step(task_pk: int) -> tuple[str, str]:
    """The first tool-call step with a SQL call, and the completed step that made it."""
    rows = list(Step.objects.filter(task_id=task_pk).order_by("created_at", "pk"))
    for row in rows:
        if row.kind == "tool_calls" and any(
            "sql" in c["tool_kwargs"] for c in row.tool_calls or []
        ):
            maker = row.in_edges.select_related("from_step").first()
            assert maker is not None
            return maker.from_step.step_id, row.step_id
    raise AssertionError("no tool-call step with a SQL call")


@pytest.mark.parametrize("agent", TOOL_WORKERS)
async def test_a_forks_edited_tool_arguments_are_what_runs(
    agent: str, scripted_server: Any
) -> None:
    rules, prompt = DEMOS[agent]
    server: ScriptedServer = scripted_server(Script(rules=rules()))
    with llm_at(server):
        source = await finished(agent, prompt)
        maker, _ = await database_sync_to_async(_first_sql_step)(source)
        fork = (await database_sync_to_async(fork_notebook)(source, maker)).pk
        (waiting,) = await waiting_steps(fork)
        assert waiting.kind == "tool_calls" and waiting.tool_calls
        call = next(c for c in waiting.tool_calls if "sql" in c["tool_kwargs"])
        original = dict(call["tool_kwargs"])
        edited = {**original, "sql": edited_sql(original["sql"])}
        assert edited != original
        asked_before = len(server.requests)
        await service.edit_input(
            fork,
            waiting.step_id,
            json.dumps([{"tool_id": call["tool_id"], "tool_kwargs": edited}]),
        )
        await approve_all(fork)

        # the tool ran on the edited arguments, once, and never on the original ones
        runs = [
            r
            for r in await events_of(fork, "tool_call_result")
            if r["tool_id"] == call["tool_id"]
        ]
        assert [r["tool_kwargs"] for r in runs] == [edited]
        want = await run_tool(agent, call["tool_name"], edited)
        was = await run_tool(agent, call["tool_name"], original)
        assert want != was
        assert runs[0]["tool_output"]["content"] == want
        # and the model was given that result, not the original one
        asked = [request_text(r) for r in server.requests[asked_before:]]
        assert asked, "the fork asked the model nothing after the edit"
        assert any(want in text for text in asked)
        assert not any(was in text for text in asked)
        stored = await database_sync_to_async(
            lambda: Step.objects.get(step_id=waiting.step_id).tool_calls
        )()
        assert (
            next(c for c in stored if c["tool_id"] == call["tool_id"])["tool_kwargs"]
            == edited
        )


async def test_a_forks_edited_branch_question_is_what_the_model_is_asked(
    scripted_server: Any,
) -> None:
    """Parallel research has no tools: its branches' inputs are what a person edits."""
    server: ScriptedServer = scripted_server(Script(rules=research_rules()))
    with llm_at(server):
        source = await finished("parallel_research", RESEARCH_PROMPT, mode="auto")
        split = await database_sync_to_async(
            lambda: (
                Step.objects.filter(task_id=source).order_by("created_at", "pk").first()
            )
        )()
        assert split is not None
        fork = (await database_sync_to_async(fork_notebook)(source, split.step_id)).pk
        branches = [w for w in await waiting_steps(fork) if w.input in SUBQUESTIONS]
        assert len(branches) == len(SUBQUESTIONS)
        original = branches[0].input
        assert original is not None
        edited = f"{original} Answer for a café of ten seats."
        asked_before = len(server.requests)
        await service.edit_input(fork, branches[0].step_id, edited)
        await approve_all(fork)
        asked = [r.last_user_text for r in server.requests[asked_before:]]
        assert asked.count(edited) == 1
        assert original not in asked
