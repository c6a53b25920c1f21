"""A model that repeats a tool call id: each call still has its own id everywhere.

The id is all that ties a call to its answer, to a person's edit or rejection and to its card on
every surface. Some servers number calls per reply (`call_0` in every reply), and a model (or a
document it read) can name two calls of one reply alike. Before the engine gave such calls fresh
ids, a rejection meant for one call rejected the other, which ran, and the model was told it had
called `add` with `multiply`'s arguments; an AG-UI run showed the second `call_0` as the first.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.test import AsyncClient, override_settings

from runs import service
from runs.engine.testing import Match, Reply, Rule, Script, ToolCallSpec
from runs.service import Origin
from tests import audit_support as audit
from tests.agui_support import outcome, run_events, run_input
from tests.audit_support import stored_events
from tests.live_support import (
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    llm_at,
    make_user,
)
from tests.recorded_tools import LOG_VARIABLE, executions

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]

RECORDED = {"function_calling": {"tools": ["recorded_tools.RECORDED_TOOLS"]}}
REASON = "Not the product"


def calls(after: int, *specs: tuple[str, str, dict[str, Any]]) -> Rule:
    return Rule(
        name=f"after {after} results",
        match=Match(tool_results_since_user=after),
        reply=Reply(
            text="Calling.",
            tool_calls=[ToolCallSpec(name=n, id=i, arguments=a) for n, i, a in specs],
        ),
    )


def answer(after: int) -> Rule:
    return Rule(
        name="answer",
        match=Match(tool_results_since_user=after),
        reply=Reply(text="Done."),
    )


async def test_a_rejection_of_one_of_two_calls_named_alike_rejects_that_call(
    scripted_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "tools.jsonl"
    monkeypatch.setenv(LOG_VARIABLE, str(log))
    rules = [
        calls(
            0, ("add", "dup", {"a": 2, "b": 3}), ("multiply", "dup", {"a": 4, "b": 5})
        ),
        answer(2),
    ]
    server = scripted_server(Script(rules=rules))
    with llm_at(server), override_settings(AGENTUI_PRESETS=RECORDED):
        pk = await audit.started("function_calling", "Sum it", mode="tools")
        (waiting,) = await audit.waiting_steps(pk)
        product = next(
            c for c in waiting.tool_calls or [] if c["tool_name"] == "multiply"
        )
        # the person rejects the product, by the id its card shows
        await service.reject_tool_call(
            pk, waiting.step_id, product["tool_id"], REASON, Origin(by="ana")
        )
        await service.approve(pk, waiting.step_id, Origin(by="ana"))
        await service.wait_idle()
    assert executions(log) == [("add", {"a": 2, "b": 3})], "the product was rejected"
    events = await database_sync_to_async(stored_events)(pk)
    results = {
        e["tool_name"]: e["tool_output"]["content"]
        for e in events
        if e["type"] == "tool_call_result"
    }
    assert results == {"add": "5", "multiply": f"rejected by user: {REASON}"}
    # the model was told what ran, each answer with its own call (and so was the audit)
    problems = audit.wire_problems(server.requests, events, executions(log))
    assert not problems, "\n".join(problems)
    ids = [c["id"] for c in server.requests[-1].messages[-3]["tool_calls"]]
    assert len(set(ids)) == 2


async def test_an_agui_run_shows_each_call_of_a_server_that_numbers_calls_per_reply(
    scripted_server: Any,
) -> None:
    rules = [
        calls(0, ("add", "call_0", {"a": 2, "b": 3})),
        calls(1, ("multiply", "call_0", {"a": 5, "b": 2})),
        answer(2),
    ]
    server = scripted_server(Script(rules=rules))
    user = await database_sync_to_async(make_user)("ana")
    client = AsyncClient()
    await client.aforce_login(user)
    with llm_at(server):
        _, events = await run_events(client, run_input("thread-ids", "Sum it"))
    assert outcome(events) == {"type": "success"}
    started = {
        e["toolCallId"]: e["toolCallName"]
        for e in events
        if e["type"] == "TOOL_CALL_START"
    }
    args = {
        e["toolCallId"]: json.loads(e["delta"])
        for e in events
        if e["type"] == "TOOL_CALL_ARGS"
    }
    shown = [
        (started.get(e["toolCallId"]), args.get(e["toolCallId"]), e["content"])
        for e in events
        if e["type"] == "TOOL_CALL_RESULT"
    ]
    assert shown == [
        ("add", {"a": 2, "b": 3}, "5"),
        ("multiply", {"a": 5, "b": 2}, "10"),
    ]
    # and a client rebuilding the conversation pairs each answer with its own call
    (snapshot, *_) = [e for e in reversed(events) if e["type"] == "MESSAGES_SNAPSHOT"]
    answered = [m["toolCallId"] for m in snapshot["messages"] if m["role"] == "tool"]
    assert len(set(answered)) == 2
