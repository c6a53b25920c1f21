"""An edited tool call is what the model reads afterwards (issue 25): the assistant message of
function calling, ReAct's Action Input in its scratchpad, LLMCompiler's plan line the joiner reads
and the Team's tool call carry the arguments that ran; the model's original arguments stay only in
the audit (the step's original input and the edit's human action, with who made it).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from channels.db import database_sync_to_async

from runs import service
from runs.demo import DEMOS
from runs.engine.testing import RecordedRequest, Script, ScriptedServer
from runs.models import Step
from runs.service import Origin
from tests.audit_support import (
    approve_all,
    edited_sql,
    events_of,
    started,
    waiting_steps,
)
from tests.live_support import (
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    llm_at,
)
from tests.test_fork_edits import TOOL_WORKERS

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]

# CoA's later prompts hold results only (its chain with each placeholder filled in), so the
# arguments, original or edited, never reach the model again
SHOWS_ARGUMENTS = {"function_calling", "react", "llm_compiler", "team"}


def everything(request: RecordedRequest) -> str:
    """All a request's messages as the model reads them, tool-call arguments included."""
    return json.dumps(request.messages, ensure_ascii=False)


@pytest.mark.parametrize("agent", TOOL_WORKERS)
async def test_after_an_edit_the_model_reads_the_edited_arguments_never_the_original(
    agent: str, scripted_server: Any
) -> None:
    rules, prompt = DEMOS[agent]
    server: ScriptedServer = scripted_server(Script(rules=rules()))
    with llm_at(server):
        pk = await started(agent, prompt)
        for _ in range(10):
            waiting = await waiting_steps(pk)
            assert waiting, "the turn ended before a SQL call waited"
            step = waiting[0]
            call = next(
                (c for c in step.tool_calls or [] if "sql" in c["tool_kwargs"]), None
            )
            if call is not None:
                break
            if step.kind == "human_input":  # the Team's question first
                await service.edit_input(pk, step.step_id, "All regions please")
            await service.approve(pk, step.step_id)
            await service.wait_idle()
        assert call is not None
        original = call["tool_kwargs"]["sql"]
        edited = edited_sql(original)
        assert edited != original
        before = len(server.requests)
        await service.edit_input(
            pk,
            step.step_id,
            json.dumps([{"tool_id": call["tool_id"], "tool_kwargs": {"sql": edited}}]),
            Origin(by="ana"),
        )
        await approve_all(pk)

    later = [everything(r) for r in server.requests[before:]]
    assert later, "the model was asked nothing after the edit"
    assert not [text for text in later if original in text], (
        "the model was shown the arguments it wrote, not those that ran"
    )
    if agent in SHOWS_ARGUMENTS:
        assert all(edited in text for text in later)
    # the audit keeps both, and who edited
    edits = [
        (e["by"], e["before"], e["after"])
        for e in await events_of(pk, "human_action")
        if e["action"] == "edited_arguments"
    ]
    assert edits == [("ana", {"sql": original}, {"sql": edited})]
    first_input = await database_sync_to_async(
        lambda: Step.objects.get(step_id=step.step_id).original_input
    )()
    assert original in json.dumps(json.loads(first_input), ensure_ascii=False)
