"""agentui as an MCP server (`/mcp/`, runs/mcpserver/) against a live daphne, called with the
`mcp` SDK's streamable-HTTP client as another agent would: a request waits until the person
decides it in another process, the answer reaches the agent, and nobody without a token
gets in. One app for the module; the decisions are made through the service in the app's
seeder process, as another daphne process would make them."""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from browser_helpers import LiveApp, served_app, wait_until

from tests.conftest import _SERVICE_ENV
from tests.live_support import ANSWER, QUESTION, analyst_script
from tests.mcp_server_support import (
    Background,
    call_tool,
    decide_in_another_process,
    request_row,
    waiting_request,
)

pytestmark = pytest.mark.live

TOOLS = ["request_approval", "ask_person", "start_notebook", "notebook_status"]


def innermost(exc: BaseException) -> BaseException:
    """The error inside the SDK's exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


@pytest.fixture(scope="module")
def app() -> Iterator[LiveApp]:
    env = {k: v for k, v in os.environ.items() if k not in _SERVICE_ENV}
    env["DJANGO_SETTINGS_MODULE"] = "agentui.settings"
    env["AGENTUI_MCP_REQUEST_KEEPALIVE_S"] = "0.2"  # progress notes while it waits
    with served_app(env, analyst_script(), "agentui-mcp-server-") as live:
        yield live


@pytest.fixture(scope="module")
def token(app: LiveApp) -> str:
    return app.api_token("deploy-bot")


def test_an_approval_waits_for_the_person_deciding_in_another_process(
    app: LiveApp, token: str
) -> None:
    call = Background(
        app,
        token,
        "request_approval",
        {"description": "Deploy v2 to production", "arguments": {"service": "web"}},
    )
    asked = waiting_request(app)
    assert (
        asked["kind"] == "approval"
        and asked["description"] == "Deploy v2 to production"
    )
    assert asked["arguments"] == {"service": "web"}
    assert asked["token_name"] == "deploy-bot" and asked["client_name"]
    assert call.thread.is_alive(), "the call waits for the person"
    wait_until(lambda: call.notes, message="a progress note while it waits")
    decide_in_another_process(app, asked["id"], "approve", "looks fine")
    answer = call.result()
    assert answer["tools"] == TOOLS
    assert not answer["is_error"]
    assert answer["data"]["status"] == "approved"
    assert answer["data"]["reason"] == "looks fine"
    assert answer["data"]["decided_by"] == "analyst"
    assert answer["text"].startswith("Approved by analyst: looks fine.")
    assert answer["progress"][0] == "waiting for analyst"
    row = request_row(app, asked["id"])
    assert row["status"] == "approved" and row["decided_by_name"] == "analyst"
    assert row["owner__username"] == "analyst"


def test_a_rejection_reaches_the_agent_with_its_reason(
    app: LiveApp, token: str
) -> None:
    call = Background(app, token, "request_approval", {"description": "Drop the table"})
    asked = waiting_request(app)
    decide_in_another_process(app, asked["id"], "reject", "not on a Friday")
    answer = call.result()
    assert answer["data"]["status"] == "rejected"
    assert answer["data"]["reason"] == "not on a Friday"


def test_a_question_with_a_form_answers_its_checked_values(
    app: LiveApp, token: str
) -> None:
    schema = {
        "type": "object",
        "properties": {
            "city": {"type": "string", "title": "City"},
            "nights": {"type": "integer", "minimum": 1},
        },
        "required": ["city"],
    }
    call = Background(
        app, token, "ask_person", {"question": "Where to book?", "schema": schema}
    )
    asked = waiting_request(app)
    assert [f["name"] for f in asked["fields"]] == ["city", "nights"]
    with pytest.raises(RuntimeError, match="nights: must be at least 1"):
        decide_in_another_process(
            app, asked["id"], "answer", answer={"city": "Oslo", "nights": 0}
        )
    decide_in_another_process(
        app, asked["id"], "answer", answer={"city": "Oslo", "nights": 2}
    )
    answer = call.result()
    assert answer["data"]["status"] == "answered"
    assert answer["data"]["answer"] == {"city": "Oslo", "nights": 2}


def test_bad_input_is_a_tool_error_that_says_why(app: LiveApp, token: str) -> None:
    empty = call_tool(app, token, "request_approval", {"description": "  "})
    assert empty["is_error"] and "description is empty" in empty["text"]
    extra = call_tool(app, token, "ask_person", {"question": "q", "colour": "red"})
    assert extra["is_error"] and "takes no argument 'colour'" in extra["text"]
    nested = call_tool(
        app,
        token,
        "ask_person",
        {
            "question": "q",
            "schema": {"type": "object", "properties": {"a": {"type": "object"}}},
        },
    )
    assert nested["is_error"] and nested["text"].startswith("Schema:")
    unknown = call_tool(
        app, token, "start_notebook", {"preset": "nope", "message": "hi"}
    )
    assert unknown["is_error"] and "no preset 'nope'" in unknown["text"]
    theirs = call_tool(app, token, "notebook_status", {"notebook_id": 999999})
    assert theirs["is_error"] and "no notebook 999999" in theirs["text"]
    with pytest.raises(BaseException) as unknown_tool:
        call_tool(app, token, "rm_rf", {})
    assert "no tool 'rm_rf': agentui offers ask_person" in str(
        innermost(unknown_tool.value)
    )


def test_start_notebook_runs_a_preset_and_notebook_status_reads_its_answer(
    app: LiveApp, token: str
) -> None:
    started = call_tool(
        app,
        token,
        "start_notebook",
        {"preset": "function_calling", "message": QUESTION},
    )
    assert not started["is_error"], started["text"]
    pk = started["data"]["notebook_id"]

    def settled() -> dict[str, Any] | None:
        status = call_tool(app, token, "notebook_status", {"notebook_id": pk})["data"]
        return status if status["settled"] and status["answer"] else None

    status = wait_until(settled, timeout=60, interval=0.3, message="the answer")
    assert status["answer"] == ANSWER and status["status"] == "idle"
    assert [t["id"] for t in app.task_rows()][0] == pk


def test_no_token_or_a_wrong_one_is_401_and_a_large_body_413(app: LiveApp) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {"Accept": "application/json, text/event-stream"}
    bare = httpx.post(f"{app.url}/mcp/", json=body, headers=headers)
    assert bare.status_code == 401
    assert bare.headers["www-authenticate"].startswith("Bearer")
    assert "Authorization: Bearer" in bare.json()["error"]["message"]
    wrong = httpx.post(
        f"{app.url}/mcp/",
        json=body,
        headers={**headers, "Authorization": "Bearer agentui_nope"},
    )
    assert (
        wrong.status_code == 401
        and wrong.json()["error"]["message"] == "Unknown API token."
    )
    with pytest.raises(BaseException) as refused:
        call_tool(app, None, "request_approval", {"description": "x"})
    assert "Not logged in" in str(innermost(refused.value))  # the SDK shows our reason
    huge = httpx.post(
        f"{app.url}/mcp/",
        content=b"x" * (3 * 1024 * 1024),
        headers={**headers, "Content-Type": "application/json"},
    )
    assert huge.status_code == 413


def test_an_agent_that_hangs_up_withdraws_its_request(app: LiveApp, token: str) -> None:
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": "request_approval", "arguments": {"description": "Bye"}},
        }
    ).encode()
    head = (
        f"POST /mcp/ HTTP/1.1\r\nHost: 127.0.0.1:{app.port}\r\n"
        "Accept: application/json, text/event-stream\r\n"
        f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    # a raw socket: the answer's headers come only with its first event, so hang up first
    with socket.create_connection(("127.0.0.1", app.port), timeout=10) as connection:
        connection.sendall(head + body)
        asked = waiting_request(app)
    started = time.monotonic()
    wait_until(
        lambda: request_row(app, asked["id"])["status"] == "timed_out",
        message="the request withdrawn",
    )
    # at once, not at its deadline or when daphne gives up on the app (10 s)
    assert time.monotonic() - started < 5
    assert (
        request_row(app, asked["id"])["reason"]
        == "the agent that asked stopped waiting"
    )
