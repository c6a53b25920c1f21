"""Approval policies and batch decisions over REST (issue 30), and the Policies page."""

from __future__ import annotations

import pytest
from django.test import Client as HttpClient

from runs.engine.testing import ScriptedServer
from tests.live_support import (
    QUESTION,
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    make_user,
    server,  # noqa: F401  (fixture: the analyst script's model, as the LLM)
)
from tests.rest_support import Api, user_with_token

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]


async def test_rules_and_reject_all_over_rest(server: ScriptedServer) -> None:
    _, token = await user_with_token("ana")
    api = Api(token)
    bad = await api.post(
        "/policies", {"tool": "add", "decision": "allow", "condition": "a"}
    )
    assert bad.status_code == 422 and "not a clause" in bad.json()["detail"]
    made = await api.post("/policies", {"tool": "add", "decision": "allow"})
    assert made.status_code == 201 and made.json()["summary"] == "always allow add"
    other = await api.post(
        "/policies", {"tool": "add", "decision": "allow", "notebook": 999999}
    )
    assert other.status_code == 404
    created = await api.post(
        "/notebooks/", {"text": QUESTION, "agent": "function_calling", "mode": "tools"}
    )
    pk = created.json()["id"]
    detail = await api.wait(pk)
    (step,) = detail["waiting"]  # multiply has no rule: the step asks
    assert step["kind"] == "tool_calls"
    done = await api.post(
        f"/notebooks/{pk}/steps/{step['step_id']}/reject-all", {"reason": "no"}
    )
    assert done.status_code == 202
    detail = await api.wait(pk)
    assert detail["outcome"] == "answered"
    again = await api.post(f"/notebooks/{pk}/steps/{step['step_id']}/reject-all", {})
    assert again.status_code in (404, 409)
    revoked = await api.post(f"/policies/{made.json()['id']}/revoke")
    assert revoked.status_code == 200 and revoked.json()["revoked_by"] == "ana"
    listed = (await api.get("/policies")).json()
    assert [r["revoked_at"] is not None for r in listed] == [True]
    none = await api.post(f"/notebooks/{pk}/approve-branches")
    assert none.status_code == 409


def test_the_policies_page_adds_lists_and_revokes_a_rule() -> None:
    user = make_user("ana")
    http = HttpClient()
    http.force_login(user)
    bad = http.post(
        "/policies/", {"tool": "sql_query", "decision": "allow", "condition": "x"}
    )
    assert bad.status_code == 400 and b"not a clause" in bad.content
    ok = http.post(
        "/policies/",
        {"tool": "sql_query", "decision": "allow", "condition": "database=sample"},
        follow=True,
    )
    assert b"always allow sql_query when database=sample" in ok.content
    from runs.models import ToolPolicy

    rule = ToolPolicy.objects.get()
    gone = http.post(f"/policies/{rule.pk}/revoke", {"confirmed": "yes"}, follow=True)
    assert b"revoked" in gone.content
    rule.refresh_from_db()
    assert rule.revoked_at is not None
    stranger = HttpClient()
    stranger.force_login(make_user("bo"))
    assert b"data-policy-id" not in stranger.get("/policies/").content
