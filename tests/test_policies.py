"""Approval policies per tool (issue 30): rules that allow, refuse or ask, combined with the
notebook's mode, each automatic decision in the audit as such; and batch decisions.

Runs the function-calling agent against the scripted model (add(2, 3) and multiply(4, 5) in one
step, then an answer) through `runs.service`, as every surface does.
"""

from __future__ import annotations

from typing import Any

import pytest
from channels.db import database_sync_to_async

from runs import service
from runs.demo.research import RESEARCH_PROMPT, research_rules
from runs.engine.testing import Script, ScriptedServer
from runs.models import Task, ToolPolicy, Turn, TurnStatus
from runs.protocol import ErrorCode, ProtocolError
from runs.service import Origin
from tests.audit_support import stored_events
from tests.live_support import (
    QUESTION,
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    llm_at,
    make_notebook,
    make_user,
    server,  # noqa: F401  (fixture: the analyst script's model, as the LLM)
)

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]
ANA = Origin(by="ana")


def of(events: list[dict[str, Any]], kind: str, **fields: Any) -> list[dict[str, Any]]:
    return [
        e
        for e in events
        if e["type"] == kind and all(e.get(k) == v for k, v in fields.items())
    ]


async def events(pk: int) -> list[dict[str, Any]]:
    return await database_sync_to_async(stored_events)(pk)


async def notebook(mode: str, agent: str = "function_calling") -> tuple[Any, int]:
    user = await database_sync_to_async(make_user)("ana")
    task = await database_sync_to_async(make_notebook)(user, agent=agent, mode=mode)
    return user, task.pk


async def rule(user: Any, pk: int, tool: str, decision: str, **kw: Any) -> int:
    spec = service.RuleSpec(tool, decision, kw.pop("scope", "mine"), **kw)
    made = await service.set_policy(user, spec, pk)
    return int(made["id"])


async def turn(pk: int) -> list[dict[str, Any]]:
    await service.send_message(pk, QUESTION, ANA)
    await service.wait_run(pk)
    return await events(pk)


def tool_results(server: ScriptedServer) -> list[str]:
    """What the model was told each call gave, in the last request."""
    return [
        str(m.get("content"))
        for m in server.requests[-1].body["messages"]
        if m.get("role") == "tool"
    ]


async def test_an_allow_rule_approves_without_a_person_and_the_audit_names_the_rule(
    server: ScriptedServer,
) -> None:
    user, pk = await notebook("tools")
    add = await rule(user, pk, "add", "allow")
    mul = await rule(user, pk, "multiply", "allow", scope="notebook")
    seen = await turn(pk)
    assert of(seen, "task_completed")
    tool_step = of(seen, "tool_call_result")[0]["step_id"]
    assert not of(seen, "step_waiting", step_id=tool_step)  # nobody was asked
    auto = of(seen, "human_action", action="auto_approved")
    assert [(a["tool_id"], a["rule"]["id"], a["by"]) for a in auto] == [
        ("call_add", add, "ana"),
        ("call_mul", mul, "ana"),
    ]
    assert auto[0]["rule"]["summary"] == "always allow add"
    assert not of(seen, "human_action", action="approved")  # no person approved it
    # the rules set from the notebook are in its audit too
    assert [a["rule"]["id"] for a in of(seen, "human_action", action="set_rule")] == [
        add,
        mul,
    ]


async def test_a_refuse_rule_never_reaches_the_tool_in_any_mode(
    server: ScriptedServer,
) -> None:
    user, pk = await notebook("auto")
    refuse = await rule(
        user, pk, "multiply", "refuse", reason="no multiplying on Fridays"
    )
    seen = await turn(pk)
    assert of(seen, "task_completed")
    results = {e["tool_id"]: e["tool_output"] for e in of(seen, "tool_call_result")}
    assert results["call_add"]["content"] == "5" and not results["call_add"]["is_error"]
    # the call never ran: its result is the refusal, not 20
    assert results["call_mul"]["is_error"]
    assert results["call_mul"]["content"].startswith(
        f"rejected by user: refused by approval rule #{refuse}"
    )
    refused = of(seen, "human_action", action="auto_refused")
    assert [(r["tool_id"], r["rule"]["id"]) for r in refused] == [("call_mul", refuse)]
    told = tool_results(server)
    assert any("no multiplying on Fridays" in t and f"#{refuse}" in t for t in told)


async def test_a_rule_with_a_condition_does_not_approve_a_call_that_does_not_match(
    server: ScriptedServer,
) -> None:
    user, pk = await notebook("tools")
    await rule(user, pk, "add", "allow", condition="a=2 and b=3")
    await rule(user, pk, "multiply", "allow", condition="a=99")  # called with a=4
    seen = await turn(pk)
    waiting = of(seen, "step_waiting")
    assert waiting, "the step must wait for the person"
    assert not of(seen, "human_action", action="auto_approved")
    assert not of(seen, "tool_call_result")


async def test_revoking_a_rule_makes_the_next_call_ask_again(
    server: ScriptedServer,
) -> None:
    user, pk = await notebook("tools")
    add = await rule(user, pk, "add", "allow")
    mul = await rule(user, pk, "multiply", "allow")
    first = await turn(pk)
    assert len(of(first, "human_action", action="auto_approved")) == 2
    await service.revoke_policy(user, mul)
    before = len(first)
    second = (await turn(pk))[before:]
    assert of(second, "step_waiting")
    assert not of(second, "human_action", action="auto_approved")
    revoked = await ToolPolicy.objects.aget(pk=mul)
    assert revoked.revoked_at is not None and revoked.revoked_by == "ana"
    assert (await ToolPolicy.objects.aget(pk=add)).revoked_at is None


async def test_ask_once_asks_in_auto_mode_then_remembers_the_approval(
    server: ScriptedServer,
) -> None:
    user, pk = await notebook("auto")
    once = await rule(user, pk, "add", "ask_once")
    seen = await turn(pk)
    step = of(seen, "step_waiting")[-1]["step_id"]
    await service.approve(pk, step, ANA)
    await service.wait_run(pk)
    remembered = await ToolPolicy.objects.aget(
        notebook_id=pk, tool="add", decision="allow"
    )
    assert remembered.set_by == "ana" and f"#{once}" in remembered.reason
    before = len(await events(pk))
    again = (await turn(pk))[before:]
    assert of(again, "task_completed") and not of(again, "step_waiting")


async def test_an_admin_refusal_beats_a_persons_allow(server: ScriptedServer) -> None:
    user, pk = await notebook("tools")
    await rule(user, pk, "multiply", "allow", scope="notebook")
    admin = await ToolPolicy.objects.acreate(
        tool="multiply", decision="refuse", preset="function_calling", set_by="root"
    )
    await rule(user, pk, "add", "allow")
    seen = await turn(pk)
    refused = of(seen, "human_action", action="auto_refused")
    assert [(r["rule"]["id"], r["by"]) for r in refused] == [(admin.pk, "root")]
    results = {e["tool_id"]: e["tool_output"] for e in of(seen, "tool_call_result")}
    assert results["call_mul"]["is_error"] and results["call_add"]["content"] == "5"


async def test_reject_all_rejects_every_pending_call_with_one_reason(
    server: ScriptedServer,
) -> None:
    user, pk = await notebook("tools")
    seen = await turn(pk)
    step = of(seen, "step_waiting")[-1]["step_id"]
    await service.reject_all(pk, step, "not today", ANA)
    await service.wait_run(pk)
    seen = await events(pk)
    rejected = of(seen, "human_action", action="rejected_call")
    assert sorted((r["tool_id"], r["reason"]) for r in rejected) == [
        ("call_add", "not today"),
        ("call_mul", "not today"),
    ]
    results = [e["tool_output"] for e in of(seen, "tool_call_result")]
    assert [r["content"] for r in results] == ["rejected by user: not today"] * 2
    assert of(seen, "task_completed")
    with pytest.raises(ProtocolError) as refused:
        await service.reject_all(pk, step, "again", ANA)
    assert refused.value.code is ErrorCode.NOT_ALLOWED


async def test_approve_branches_runs_every_waiting_branch_once(
    scripted_server: Any,
) -> None:
    model = scripted_server(Script(rules=research_rules()))
    with llm_at(model):
        user, pk = await notebook("step", agent="parallel_research")
        await service.send_message(pk, RESEARCH_PROMPT, ANA)
        await service.approve(
            pk, of(await events(pk), "step_waiting")[-1]["step_id"], ANA
        )
        await service.wait_run(pk)
        waiting = {e["step_id"] for e in of(await events(pk), "step_waiting")[-3:]}
        approved = await service.approve_branches(pk, ANA)
        assert set(approved) == waiting and len(waiting) == 3
        await service.wait_run(pk)
        seen = await events(pk)
        done = {e["step_id"] for e in of(seen, "step_completed")}
        assert waiting <= done
        actions = [(a["action"], a["step_id"]) for a in of(seen, "human_action")]
        assert sorted(
            s for a, s in actions if a == "approved" and s in waiting
        ) == sorted(waiting)
        assert len(model.requests) == 1 + 3  # the split and each branch, once
        # then the synthesis is the one step waiting: approved alone, the turn ends
        (synthesis,) = await service.approve_branches(pk, ANA)
        await service.wait_run(pk)
        assert of(await events(pk), "task_completed")
        with pytest.raises(ProtocolError) as nothing_waits:
            await service.approve_branches(pk, ANA)
        assert nothing_waits.value.code is ErrorCode.NOT_ALLOWED


def test_an_admin_sets_a_default_per_preset_in_the_admin_and_a_bad_condition_is_refused() -> (
    None
):
    from django.contrib.auth import get_user_model
    from django.test import Client as HttpClient

    root = get_user_model().objects.create_superuser("root", "r@example.org", "pw")
    http = HttpClient()
    http.force_login(root)
    url = "/admin/runs/toolpolicy/add/"
    form = {"tool": "sql_query", "decision": "allow", "preset": "function_calling"}
    bad = http.post(url, {**form, "condition": "database"})
    assert bad.status_code == 200 and b"not a clause" in bad.content
    assert not ToolPolicy.objects.exists()
    good = http.post(url, {**form, "condition": "database=sample"})
    assert good.status_code == 302
    made = ToolPolicy.objects.get()
    assert (made.set_by, made.preset, made.condition, made.owner) == (
        "root",
        "function_calling",
        "database=sample",
        None,
    )


async def test_the_demo_example_runs_its_multiply_call_by_the_example_rule(
    scripted_server: Any,
) -> None:
    from io import StringIO

    from django.core.management import call_command

    from runs.demo.analyst import FUNCTION_CALLING_PROMPT, function_calling_rules

    model = scripted_server(Script(rules=function_calling_rules()))
    with llm_at(model):
        user, pk = await notebook("tools")
        out = StringIO()
        await database_sync_to_async(call_command)(
            "example_policies", "ana", stdout=out
        )
        assert "always allow multiply (in all my notebooks)" in out.getvalue()
        await service.send_message(pk, FUNCTION_CALLING_PROMPT, ANA)
        await service.wait_run(pk)
        for _ in range(6):  # approve what asks (the SQL query) until the turn ends
            seen = await events(pk)
            if of(seen, "task_completed"):
                break
            await service.approve(pk, of(seen, "step_waiting")[-1]["step_id"], ANA)
            await service.wait_run(pk)
        seen = await events(pk)
    auto = of(seen, "human_action", action="auto_approved")
    assert [a["rule"]["summary"] for a in auto] == ["always allow multiply"]
    ran = {e["tool_name"] for e in of(seen, "tool_call_result")}
    assert ran == {"sql_query", "multiply"}
    people = of(seen, "human_action", action="approved")
    assert len(people) == 1  # the SQL query; multiply was not asked about


def admin_client() -> Any:
    """The Django test client, signed in as a superuser `root`."""
    from django.contrib.auth import get_user_model
    from django.test import Client as HttpClient

    root = get_user_model().objects.create_superuser("root", "r@example.org", "pw")
    http = HttpClient()
    http.force_login(root)
    return http


async def gated(pk: int) -> bool:
    """Whether the notebook's active turn stops before its tool calls."""
    active = await Turn.objects.aget(task_id=pk, status=TurnStatus.ACTIVE)
    return bool(active.approve_tool_calls)


async def test_a_default_set_or_revoked_in_the_admin_regates_a_running_turn(
    server: ScriptedServer,
) -> None:
    """The admin sets and revokes defaults through the service, as a person's rules go: a
    refusal added while a turn waits at its first step makes it stop before its tool calls (to
    screen them), and revoking it lets them go as the mode says again."""
    user, pk = await notebook("step")
    await service.send_message(pk, QUESTION, ANA)
    await service.wait_run(pk)
    assert not await gated(pk)
    http = await database_sync_to_async(admin_client)()
    added = await database_sync_to_async(http.post)(
        "/admin/runs/toolpolicy/add/",
        {"tool": "multiply", "decision": "refuse", "preset": "function_calling"},
    )
    assert added.status_code == 302, added.content
    made = await ToolPolicy.objects.aget()
    assert made.set_by == "root" and made.owner_id is None
    assert await gated(pk)
    revoked = await database_sync_to_async(http.post)(
        "/admin/runs/toolpolicy/",
        {"action": "revoke", "_selected_action": [str(made.pk)]},
    )
    assert revoked.status_code == 302, revoked.content
    made = await ToolPolicy.objects.aget()
    assert made.revoked_at is not None and made.revoked_by == "root"
    assert not await gated(pk)


def _change_form(http: Any, url: str, **changes: str) -> dict[str, Any]:
    """The admin change form at `url` as the page fills it (with its inlines' management
    forms), with `changes`."""
    page = http.get(url)
    assert page.status_code == 200
    form = page.context["adminform"].form
    data: dict[str, Any] = {}
    for name in form.fields:
        value = form.initial.get(name)
        data[name] = "" if value is None else getattr(value, "pk", value)
    for inline in page.context["inline_admin_formsets"]:
        management = inline.formset.management_form
        for name in management.fields:
            data[f"{management.prefix}-{name}"] = management.initial.get(name, 0)
    return {**data, **changes}


async def test_the_admin_cannot_change_a_notebooks_mode_or_status_under_its_turn(
    server: ScriptedServer,
) -> None:
    """`mode` and `status` are read-only in the admin (they change through the service, which
    re-gates the turn and keeps its lease): a change form that sends them changes neither."""
    user, pk = await notebook("step")
    await service.send_message(pk, QUESTION, ANA)
    await service.wait_run(pk)
    before = await Task.objects.aget(pk=pk)
    http = await database_sync_to_async(admin_client)()
    url = f"/admin/runs/task/{pk}/change/"
    data = await database_sync_to_async(_change_form)(
        http, url, title="renamed", mode="tools", status="idle"
    )
    saved = await database_sync_to_async(http.post)(url, data)
    assert saved.status_code == 302, saved.content.decode()[-2000:]
    after = await Task.objects.aget(pk=pk)
    assert after.title == "renamed"  # the form was saved
    assert (after.mode, after.status) == ("step", before.status)
    assert not await gated(pk)
    page = (await database_sync_to_async(http.get)(url)).content.decode()
    assert 'name="mode"' not in page and 'name="status"' not in page
