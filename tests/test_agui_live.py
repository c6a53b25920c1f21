"""AG-UI against a served agentui (daphne): the official client in node, and the page.

`@ag-ui/client` (pinned in tests/agui_client/, installed there by `make test` with `npm ci`) runs
as a node script that drives a live run; the browser test starts a run over AG-UI and approves
it in the notebook page. Screenshots go to test-artifacts/agui-*.png.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import (  # noqa: F401  (fixtures)
    ROOT,
    USERNAME,
    LiveApp,
    _browser_module,
    live_app,
    new_context,
    page,
    scripted_model,
    shot,
    step_cells,
    wait_until,
)

from runs.engine.testing import ScriptedServer
from tests.agui_support import outcome, post_live, run_input, sse_events
from tests.live_support import ANSWER, QUESTION, analyst_script
from tests.test_big_tool_output import log_script

CLIENT_DIR = ROOT / "tests" / "agui_client"
NODE_TIMEOUT_S = 120
MODEL_CHARS = 2000  # AGENTUI_TOOL_OUTPUT_MODEL_CHARS of this module's app


@pytest.fixture
def app_env() -> dict[str, str]:
    return {"AGENTUI_TOOL_OUTPUT_MODEL_CHARS": str(MODEL_CHARS)}


def api_token(app: LiveApp) -> str:
    """A new API token of the live app's user."""
    return app.shell(
        "from django.contrib.auth import get_user_model; "
        "from runs.service.tokens import create_token; "
        f"print(create_token(get_user_model().objects.get(username={USERNAME!r}), 'agui')[1])"
    ).split()[-1]


def node_client(require_service: Any) -> str:
    node = shutil.which("node")
    if node is None:
        require_service(
            "node", "no node on PATH (make test installs nodejs where absent)"
        )
    if not (CLIENT_DIR / "node_modules" / "@ag-ui" / "client").is_dir():
        require_service("npm", f"run `npm ci` in {CLIENT_DIR} (make test does)")
    return str(node)


def run_node(node: str, *args: str) -> dict[str, Any]:
    done = subprocess.run(
        [node, "run.mjs", *args],
        cwd=CLIENT_DIR,
        capture_output=True,
        text=True,
        timeout=NODE_TIMEOUT_S,
        env={**os.environ, "NODE_NO_WARNINGS": "1"},
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


@pytest.mark.browser
def test_the_official_client_receives_a_whole_run_text_and_tool_calls(
    live_app: LiveApp, scripted_model: ScriptedServer, require_service: Any
) -> None:
    node = node_client(require_service)
    scripted_model.load(analyst_script(), reset_log=True)
    token = api_token(live_app)
    seen = run_node(node, f"{live_app.url}/agui/", token, "node-auto", QUESTION)
    assert seen["errors"] == [] and seen["outcomes"] == ["success"]
    assert seen["result"] == ANSWER
    assert "Let me compute both." in seen["text"] and ANSWER in seen["text"]
    assert seen["toolCalls"] == {
        "call_add": {"name": "add", "args": {"a": 2, "b": 3}},
        "call_mul": {"name": "multiply", "args": {"a": 4, "b": 5}},
    }
    assert seen["results"] == {"call_add": "5", "call_mul": "20"}
    # the client built the conversation from the events: the calls sit on an assistant message
    calls = [m for m in seen["messages"] if m["role"] == "assistant" and m["toolCalls"]]
    assert [c["id"] for c in calls[0]["toolCalls"]] == ["call_add", "call_mul"]
    folded_as_stated(seen)


@pytest.mark.browser
def test_the_official_client_resumes_tool_call_interrupts(
    live_app: LiveApp, scripted_model: ScriptedServer, require_service: Any
) -> None:
    node = node_client(require_service)
    scripted_model.load(analyst_script(), reset_log=True)
    token = api_token(live_app)
    seen = run_node(
        node, f"{live_app.url}/agui/", token, "node-tools", QUESTION, "tools"
    )
    assert seen["errors"] == []
    assert seen["outcomes"] == ["interrupt", "success"], "approved by resume, then done"
    assert seen["results"] == {"call_add": "5", "call_mul": "20"}
    assert seen["result"] == ANSWER
    folded_as_stated(seen)  # the resumed calls' arguments are not sent twice


@pytest.mark.browser
def test_the_official_client_keeps_its_message_while_the_first_step_waits(
    live_app: LiveApp, scripted_model: ScriptedServer, require_service: Any
) -> None:
    """Step mode: each run ends waiting for an approval; the client's message (the model has
    read nothing yet after the first run) stays in every snapshot."""
    node = node_client(require_service)
    scripted_model.load(analyst_script(), reset_log=True)
    token = api_token(live_app)
    seen = run_node(node, f"{live_app.url}/agui/", token, "node-step", QUESTION, "step")
    assert seen["errors"] == [] and seen["outcomes"][-1] == "success"
    assert seen["outcomes"][0] == "interrupt"
    first_end = [s for s in seen["snapshots"] if s["run"] == 1][-1]["snapshot"]
    assert [(m["role"], m["content"]) for m in first_end] == [("user", QUESTION)]
    folded_as_stated(seen)


@pytest.mark.browser
def test_the_official_client_is_given_a_cut_result_as_the_model_read_it(
    live_app: LiveApp, scripted_model: ScriptedServer, require_service: Any
) -> None:
    """A tool output longer than AGENTUI_TOOL_OUTPUT_MODEL_CHARS: the client's tool message is
    what the model read, `metadata.agentui` says so and where the whole output is."""
    node = node_client(require_service)
    scripted_model.load(log_script(5000), reset_log=True)
    token = api_token(live_app)
    seen = run_node(
        node, f"{live_app.url}/agui/", token, "node-log", "Read the server log"
    )
    assert seen["errors"] == [] and seen["outcomes"] == ["success"]
    read = [m for m in scripted_model.requests[-1].messages if m["role"] == "tool"]
    assert seen["results"] == {"c_log": read[0]["content"]}
    assert "tool output cut: these are the first 2,000 of" in read[0]["content"]
    stated = seen["metadata"]["c_log"]["agentui"]
    assert stated["modelChars"] == MODEL_CHARS and stated["outputChars"] > 300_000
    (tool,) = [m for m in seen["conversation"] if m["role"] == "tool"]
    assert tool["content"] == read[0]["content"] and tool["metadata"] == {
        "agentui": stated
    }
    folded_as_stated(seen)
    # the whole output, with the client's own token
    request = urllib.request.Request(
        live_app.url + stated["outputUrl"], headers={"Authorization": f"Bearer {token}"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        whole = response.read().decode()
    assert len(whole) == stated["outputChars"] and whole.startswith(
        read[0]["content"][:2000]
    )


def folded_as_stated(seen: dict[str, Any]) -> None:
    """At each run's first and last MESSAGES_SNAPSHOT the client's messages, folded from the
    events by @ag-ui/client itself, are those the snapshot states (ids aside)."""
    for run in {s["run"] for s in seen["snapshots"]}:
        of_run = [s for s in seen["snapshots"] if s["run"] == run]
        for snap in (of_run[0], of_run[-1]):
            assert snap["folded"] == snap["snapshot"], f"run {run}"
    assert seen["conversation"] == seen["snapshots"][-1]["snapshot"]


def post_agui(app: LiveApp, token: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    status, raw = post_live(app.url, token, body)
    assert status == 200, raw
    return sse_events(raw)


@pytest.mark.browser
def test_a_run_started_over_agui_is_a_notebook_approved_in_the_page(
    live_app: LiveApp,
    scripted_model: ScriptedServer,
    page: Any,
    artifacts_dir: Path,
) -> None:
    scripted_model.load(analyst_script(), reset_log=True)
    token = api_token(live_app)
    events = post_agui(live_app, token, run_input("page-step", QUESTION, mode="step"))
    (waiting,) = outcome(events)["interrupts"]
    assert waiting["reason"] == "step_approval"
    task_id = int(
        live_app.shell(
            "from runs.models import Task; "
            "print(Task.objects.get(agui_thread='page-step').pk)"
        ).split()[-1]
    )

    page.goto(f"{live_app.url}/tasks/{task_id}/")
    page.wait_for_selector("#connection[data-state='open']")
    approve = page.get_by_role("button", name="Approve and run")
    approve.first.wait_for()
    shot(page, artifacts_dir, "agui-01-started-over-agui-waits-in-the-page")
    approve.first.click()
    second = step_cells(page).nth(1)
    second.get_by_text("waiting for you", exact=True).wait_for()
    second.get_by_role("button", name="Approve and run").click()
    page.get_by_text(ANSWER).last.wait_for()
    wait_until(lambda: step_cells(page).count() == 2, message="both steps shown")
    shot(page, artifacts_dir, "agui-02-approved-in-the-page")
    assert page.console_errors == []

    # the AG-UI side sees the page's decisions: nothing is pending on the thread any more
    after = post_agui(live_app, token, run_input("page-step"))
    assert outcome(after) == {"type": "success"}
    approvals = live_app.shell(
        "from runs.models import Event; "
        f"print(sorted(e.payload['by'] for e in Event.objects.filter(task_id={task_id}, "
        "type='human_action')))"
    )
    assert approvals.strip().splitlines()[-1] == str([USERNAME, USERNAME]), (
        "the page's two"
    )

    # undone in the page, the step is an interrupt again; approved over AG-UI, the page shows it
    page.get_by_role("button", name="Undo this step").click()
    second.get_by_text("waiting for you", exact=True).wait_for()
    shot(page, artifacts_dir, "agui-03-undone-in-the-page")
    again = post_agui(live_app, token, run_input("page-step"))
    (undone,) = outcome(again)["interrupts"]
    assert undone["reason"] == "step_approval"
    resume = [{"interruptId": undone["id"], "status": "resolved"}]
    done = post_agui(live_app, token, run_input("page-step", resume=resume))
    assert outcome(done) == {"type": "success"} and done[-1]["result"] == ANSWER
    second.get_by_text("completed", exact=True).wait_for()
    page.get_by_text(ANSWER).last.wait_for()
    shot(page, artifacts_dir, "agui-04-approved-again-over-agui")
    assert page.console_errors == []


@pytest.mark.browser
def test_the_validator_passes_the_live_endpoint_transport_included(
    live_app: LiveApp, scripted_model: ScriptedServer, artifacts_dir: Path
) -> None:
    scripted_model.load(analyst_script(), reset_log=True)
    token = api_token(live_app)
    cli = Path(sys.executable).with_name("ag-ui-validate")
    report_path = artifacts_dir / "agui-live-endpoint.json"
    done = subprocess.run(
        [
            str(cli),
            f"{live_app.url}/agui/",
            "--header",
            f"Authorization: Bearer {token}",
            "--json-file",
            str(report_path),
            "--max-warnings",
            "0",
            "--timeout",
            "60",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = json.loads(report_path.read_text())
    assert done.returncode == 0, (done.stdout, report["diagnostics"])
    assert report["summary"]["errors"] == 0 and report["summary"]["warnings"] == 0
