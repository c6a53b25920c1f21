"""The notebook page in Chromium, against the live app and the scripted model.

Each test drives the page as an analyst would and saves screenshots to AGENTUI_ARTIFACTS
(test-artifacts/ by default), named notebook-*.png.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import (  # noqa: F401  (fixtures)
    LiveApp,
    _browser_module,
    live_app,
    new_context,
    page,
    record_stream_texts,
    scripted_model,
    shot,
    start_notebook,
    step_cells,
    wait_until,
    watch_errors,
)
from dag_helpers import click_dag_node, dag_edges, dag_nodes, dag_shots, overlaps
from live_support import COMPILER_QUESTION, compiler_rules

from runs.engine.testing import (
    Match,
    Reply,
    Rule,
    Script,
    ScriptedServer,
    Timing,
    ToolCallSpec,
)

pytestmark = pytest.mark.browser

FUNCTION_AGENT = "function_calling"
COMPILER_AGENT = "llm_compiler"

STREAMED = (
    "Let me work this out step by step. First I add two and three, then I multiply four by five, "
    "and both results come back from the tools at the same time."
)
ANSWER = "Two plus three is 5, and four times five is 20. Both came from the arithmetic tools."


def compute_rules(*, delay: float = 0.0, answer: str = ANSWER) -> list[Rule]:
    """add and multiply in one model turn (parallel), then the answer."""
    timing = Timing(token_delay_s=delay) if delay else None
    return [
        Rule(
            name="calls",
            match=Match(tool_results_since_user=0, has_tools=True),
            reply=Reply(
                text=STREAMED,
                tool_calls=[
                    ToolCallSpec(name="add", arguments={"a": 2, "b": 3}, id="call_add"),
                    ToolCallSpec(
                        name="multiply", arguments={"a": 4, "b": 5}, id="call_mul"
                    ),
                ],
            ),
            timing=timing,
        ),
        Rule(
            name="answer",
            match=Match(tool_results_since_user=2),
            reply=Reply(text=answer),
            timing=timing,
        ),
        Rule(name="chat", reply=Reply(text="Hello from the scripted model.")),
    ]


def status_of(cell: Any) -> str:
    return str(cell.get_attribute("data-status"))


# --- streaming and the DAG -------------------------------------------------------------------------


def test_tokens_stream_into_the_cell_and_the_dag_grows(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(Script(rules=compute_rules(delay=0.15)), reset_log=True)
    start_notebook(
        page,
        live_app,
        "Compute (2 + 3) and (4 * 5), please",
        agent=FUNCTION_AGENT,
        mode="auto",
    )

    first = step_cells(page).first
    first.wait_for()
    samples: list[tuple[str, int, int]] = []  # (step status, streamed chars, DAG nodes)
    shot_taken = False
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        sample = page.evaluate(
            """() => {
                const cell = document.querySelector('article.cell-step');
                const text = cell ? [...cell.querySelectorAll('.stream-text')].map(e => e.textContent).join('') : '';
                return [cell ? cell.dataset.status : '', text.length, window.agentui.dag.cy.nodes().length];
            }"""
        )
        samples.append(tuple(sample))
        if (
            not shot_taken
            and sample[0] == "running"
            and 40 < sample[1] < len(STREAMED) - 20
        ):
            shot(page, artifacts_dir, "notebook-01-streaming")
            shot_taken = True
        if page.locator(".cell-answer").count():
            break
        time.sleep(0.03)

    running_lengths = sorted(
        {n for status, n, _ in samples if status == "running" and 0 < n < len(STREAMED)}
    )
    assert len(running_lengths) >= 3, (
        f"tokens did not arrive one by one while the step ran: {samples[:40]}"
    )
    assert shot_taken
    node_counts = [nodes for _, _, nodes in samples]
    assert node_counts == sorted(node_counts), "the DAG lost nodes while running"
    # message + step 1 while it streams, then its two calls and step 2 (the instant tools may
    # put those three in one frame, so the counts seen are at least 2 -> 5)
    assert (
        len(set(node_counts)) >= 2 and node_counts[0] <= 2 and node_counts[-1] == 5
    ), f"the DAG did not grow as steps started: {sorted(set(node_counts))}"

    page.locator(".cell-answer").wait_for()
    assert ANSWER in page.locator(".cell-answer").inner_text()
    assert page.locator(".stream-text", has_text="Let me work this out").count() == 1
    cards = first.locator(".tool-card")
    assert cards.count() == 2
    assert "5" in cards.filter(has_text="add").locator(".tool-result").inner_text()
    assert (
        "20" in cards.filter(has_text="multiply").locator(".tool-result").inner_text()
    )

    nodes = dag_nodes(page)
    calls = [n for key, n in nodes.items() if key.startswith("c:")]
    assert len(calls) == 2 and calls[0]["y"] == calls[1]["y"], (
        "parallel calls should sit side by side"
    )
    assert all(
        "status-completed" in n["cls"]
        for key, n in nodes.items()
        if key.startswith(("s:", "c:"))
    )
    # Colours agree: a completed cell and a completed node use the same status colour.
    colours = page.evaluate(
        """() => [getComputedStyle(document.querySelector('article.cell-step')).borderLeftColor,
                  window.agentui.dag.cy.nodes('.kind-step')[0].style('border-color')]"""
    )
    assert colours[0].replace(" ", "") == colours[1].replace(" ", ""), colours

    # Clicking a node scrolls to its cell and focuses it.
    click_dag_node(page, calls[0]["id"])
    page.wait_for_function(
        "document.activeElement && document.activeElement.classList.contains('tool-card')"
    )
    shot(page, artifacts_dir, "notebook-02-completed")
    assert not page.console_errors, page.console_errors


def test_llm_compiler_plan_draws_parallel_calls_with_dependency_edges(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(Script(rules=compiler_rules()), reset_log=True)
    start_notebook(page, live_app, COMPILER_QUESTION, agent=COMPILER_AGENT, mode="auto")
    page.locator(".cell-answer").wait_for(timeout=20_000)
    assert "42" in page.locator(".cell-answer").inner_text()

    nodes = dag_nodes(page)
    by_sub = {n["sub"]: (key, n) for key, n in nodes.items() if key.startswith("c:")}
    assert {"$1", "$2", "$3"} <= set(by_sub), by_sub.keys()
    (k1, n1), (k2, n2), (k3, n3) = by_sub["$1"], by_sub["$2"], by_sub["$3"]
    assert n1["y"] == n2["y"], "independent planned calls share a layer (side by side)"
    assert abs(n1["x"] - n2["x"]) >= n1["w"], "side by side, not on top of each other"
    assert n3["y"] > n1["y"], "a dependent call sits below what it depends on"
    # Each dependency edge carries the name $3's arguments use for that result.
    edges = dag_edges(page)
    assert edges[f"{k1}>{k3}"]["label"] == "$1", edges
    assert edges[f"{k2}>{k3}"]["label"] == "$2", edges
    assert edges[f"{k1}>{k3}"]["kind"] == "dep"
    # The cards say the same: $3 runs after $1 and $2.
    assert "after $1, $2" in page.locator(".tool-card", has_text="$3").inner_text()
    dag_shots(page, artifacts_dir, "dag-compiler")
    shot(page, artifacts_dir, "notebook-03-compiler")
    assert not page.console_errors, page.console_errors


def test_llm_compiler_waiting_call_is_drawn_with_its_dependency_edges(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    """A plan's call waiting for approval with the results it uses sits in the DAG where it
    will run: `$3` under `$1` and `$2`, with their edges, before it runs."""
    scripted_model.load(Script(rules=compiler_rules()), reset_log=True)
    start_notebook(
        page, live_app, COMPILER_QUESTION, agent=COMPILER_AGENT, mode="tools"
    )
    waiting = page.locator(
        "article.cell-step[data-status='pending']",
        has=page.locator(".tool-card.editable"),
    )
    waiting.get_by_label("Arguments for multiply (JSON)").wait_for()
    waiting.get_by_role("button", name="Approve and run").click()
    third = page.locator(".tool-card.editable", has_text="Planned as")
    third.wait_for(timeout=20_000)
    assert (
        third.locator(".tool-planned").inner_text() == 'Planned as {"a":"$1","b":"$2"}'
    )
    # its result's name, as a chain's placeholder card shows `yN`
    assert third.locator(".badge.plan-index").inner_text() == "$3"
    assert json.loads(third.get_by_label("Arguments for add (JSON)").input_value()) == {
        "a": 12,
        "b": 30,
    }

    nodes = dag_nodes(page)
    by_sub = {n["sub"]: key for key, n in nodes.items() if key.startswith("c:")}
    assert {"$1", "$2", "$3"} <= set(by_sub), by_sub
    k1, k2, k3 = by_sub["$1"], by_sub["$2"], by_sub["$3"]
    assert "status-pending" in nodes[k3]["cls"], nodes[k3]
    edges = dag_edges(page)
    assert edges[f"{k1}>{k3}"]["label"] == "$1", edges
    assert edges[f"{k2}>{k3}"]["label"] == "$2", edges
    assert edges[f"{k1}>{k3}"]["kind"] == "dep"
    assert nodes[k3]["y"] > nodes[k1]["y"], "it sits below what it uses, as it will run"
    # each result's name is drawn where no node hides it (the wave's step node sits between)
    for edge in (edges[f"{k1}>{k3}"], edges[f"{k2}>{k3}"]):
        hidden_by = [
            key for key, n in nodes.items() if overlaps(edge["labelBox"], n["box"])
        ]
        assert not hidden_by, (edge["label"], hidden_by)
    dag_shots(page, artifacts_dir, "dag-compiler-waiting")

    waiting.get_by_role("button", name="Approve and run").click()
    page.locator(".cell-answer").wait_for(timeout=20_000)
    assert "42" in page.locator(".cell-answer").inner_text()
    assert not page.console_errors, page.console_errors


# --- steering: step mode ------------------------------------------------------------------------------


def test_step_mode_edit_approve_then_undo(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(
        Script(
            rules=[
                Rule(
                    name="edited",
                    match=Match(last_user_contains="EDITED", tool_results_since_user=0),
                    reply=Reply(
                        text="Adding them.",
                        tool_calls=[
                            ToolCallSpec(
                                name="add", arguments={"a": 2, "b": 3}, id="call_1"
                            )
                        ],
                    ),
                ),
                Rule(
                    name="answer",
                    match=Match(tool_results_since_user=1),
                    reply=Reply(text="The sum is 5."),
                ),
                Rule(
                    name="other",
                    reply=Reply(text="I was not sent the edited question."),
                ),
            ]
        ),
        reset_log=True,
    )
    start_notebook(
        page, live_app, "Original question", agent=FUNCTION_AGENT, mode="step"
    )
    cell = step_cells(page).first
    field = cell.get_by_label("Input for this step")
    field.wait_for()
    approve = cell.get_by_role("button", name="Approve and run")
    page.wait_for_function(
        "() => !document.querySelector('article.cell-step [data-action=approve]').disabled"
    )
    assert field.input_value() == "Original question"
    assert not scripted_model.requests, (
        "step mode must not run the step before approval"
    )

    field.fill("EDITED question: what is 2 + 3?")
    shot(page, artifacts_dir, "notebook-04-step-mode-editing")
    field.press("Control+Enter")  # approves, saving the edit first

    wait_until(lambda: len(scripted_model.requests) >= 1, message="the model call")
    assert (
        "EDITED question: what is 2 + 3?" in scripted_model.requests[0].last_user_text
    )
    wait_until(lambda: status_of(cell) == "completed", message="step 1 completed")
    second = step_cells(page).nth(1)
    second.wait_for()
    page.wait_for_function(
        "() => document.querySelectorAll('article.cell-step')[1]?.classList.contains('is-waiting')"
    )
    assert "5" in cell.locator(".tool-card .tool-result").inner_text()

    # Undo step 1: its outputs are marked undone, it is pending again and step 2 is gone.
    undo = cell.get_by_role("button", name="Undo this step")
    assert undo.is_enabled()
    undo.click()
    wait_until(lambda: status_of(cell) == "pending", message="step 1 pending again")
    wait_until(lambda: step_cells(page).count() == 1, message="step 2 removed")
    assert cell.locator(".cell-body > .tool-cards").count() == 0, (
        "undone outputs left the cell body"
    )
    undone = cell.locator("details.earlier-runs")
    assert "Undone output" in undone.locator("summary").inner_text()
    undone.locator("summary").click()
    assert undone.locator(".attempt-undone .tool-card.status-undone").count() == 1
    nodes = dag_nodes(page)
    step_nodes = [n for k, n in nodes.items() if k.startswith("s:")]
    assert len(step_nodes) == 1 and "status-pending" in step_nodes[0]["cls"]
    assert all(
        "status-undone" in n["cls"] for k, n in nodes.items() if k.startswith("c:")
    )
    page.wait_for_function(
        "() => !document.querySelector('article.cell-step [data-action=approve]').disabled"
    )
    assert approve.is_enabled()
    shot(page, artifacts_dir, "notebook-05-step-mode-undone")

    # Run it again: the model is called again with the (still edited) input.
    approve.click()
    wait_until(
        lambda: len(scripted_model.requests) >= 2, message="the second model call"
    )
    assert "EDITED question" in scripted_model.requests[1].last_user_text
    wait_until(lambda: status_of(cell) == "completed", message="step 1 completed again")
    assert not page.console_errors, page.console_errors


# --- steering: tools mode ------------------------------------------------------------------------------


def test_tools_mode_edit_one_call_reject_another(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(Script(rules=compute_rules()), reset_log=True)
    start_notebook(
        page,
        live_app,
        "Compute (2 + 3) and (4 * 5), please",
        agent=FUNCTION_AGENT,
        mode="tools",
    )
    calls_step = page.locator(
        "article.cell-step[data-status='pending']",
        has=page.locator(".tool-card.editable"),
    )
    calls_step.wait_for()
    add_args = calls_step.get_by_label("Arguments for add (JSON)")
    mul_card = calls_step.locator(".tool-card", has_text="multiply")

    # Not JSON: refused in the page, next to the field, and nothing is sent.
    sent_before = len(scripted_model.requests)
    add_args.fill('{"a": 2, "b": ')
    calls_step.get_by_role("button", name="Save edits").click()
    add_error = calls_step.locator("[data-error-slot='args:call_add']")
    add_error.wait_for()
    assert "Not valid JSON" in add_error.inner_text()
    assert add_args.get_attribute("aria-invalid") == "true"

    # JSON that does not fit the tool's schema: the server refuses it, shown by the step's controls.
    add_args.fill('{"a": "two", "b": 3}')
    calls_step.get_by_role("button", name="Save edits").click()
    edit_error = calls_step.locator("[data-error-slot^='edit:']")
    edit_error.wait_for()
    assert "invalid_tool_arguments" in edit_error.inner_text(), edit_error.inner_text()
    shot(page, artifacts_dir, "notebook-06-tools-mode-server-error")

    # Reject multiply with a reason, edit add, approve the step.
    add_args.fill('{"a": 2, "b": 30}')
    mul_card.get_by_label("Reason to reject").fill("not needed for this question")
    mul_card.get_by_role("button", name="Reject call").click()
    calls_step.locator(".tool-card", has_text="multiply").locator(
        ".decision-rejected"
    ).wait_for()
    assert add_args.input_value() == '{"a": 2, "b": 30}', (
        "typing survives the controls being redrawn"
    )
    shot(page, artifacts_dir, "notebook-07-tools-mode-decided")
    calls_step.get_by_role("button", name="Approve and run").click()

    page.locator(".cell-answer").wait_for()
    assert len(scripted_model.requests) == sent_before + 1
    tool_messages = {
        m.get("tool_call_id"): m.get("content")
        for m in scripted_model.requests[-1].messages
        if m.get("role") == "tool"
    }
    assert tool_messages["call_add"] == "32", tool_messages
    assert "rejected by user: not needed for this question" in str(
        tool_messages["call_mul"]
    ), tool_messages
    ran = page.locator(
        "article.cell-step",
        has=page.locator(".tool-card.status-completed", has_text="add"),
    )
    assert (
        '"b": 30'
        in ran.locator(".tool-card", has_text="add").locator(".tool-args").inner_text()
    )
    shot(page, artifacts_dir, "notebook-08-tools-mode-done")
    assert not page.console_errors, page.console_errors


def test_switch_mode_mid_turn_then_stop_a_turn(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(Script(rules=compute_rules()), reset_log=True)
    start_notebook(
        page,
        live_app,
        "Compute (2 + 3) and (4 * 5), please",
        agent=FUNCTION_AGENT,
        mode="step",
    )
    approve = step_cells(page).first.get_by_role("button", name="Approve and run")
    page.wait_for_function(
        "() => !document.querySelector('article.cell-step [data-action=approve]').disabled"
    )

    # From step to auto: the waiting step still waits, the steps after it run by themselves.
    page.get_by_label("Approval").select_option("auto")
    page.wait_for_function("() => window.agentui.model.mode === 'auto'")
    approve.click()
    page.locator(".cell-answer").wait_for()
    assert step_cells(page).count() == 2 and len(scripted_model.requests) == 2

    # Back to step mode, a follow-up waits at its first step; Stop abandons the turn.
    page.get_by_label("Approval").select_option("step")
    page.wait_for_function("() => window.agentui.model.mode === 'step'")
    composer = page.get_by_role("textbox", name="Message")
    composer.fill("And once more, please")
    composer.press("Control+Enter")
    page.locator("section.turn").nth(1).locator(
        "article.cell-step.is-waiting"
    ).wait_for()
    stop = page.get_by_role("button", name="Stop")
    assert stop.is_enabled()
    stop.click()
    page.get_by_role("dialog").get_by_role("button", name="Stop the turn").click()
    page.locator("section.turn").nth(1).locator(".turn-note").wait_for()
    assert (
        page.locator("section.turn")
        .nth(1)
        .locator(".turn-note")
        .inner_text()
        .startswith("Stopped by analyst at step 1, before it ran")
    )
    page.wait_for_function("() => !document.getElementById('composer-send').disabled")
    assert stop.is_disabled()
    assert len(scripted_model.requests) == 2, "a stopped turn's waiting step never ran"
    nodes = dag_nodes(page)
    assert any(
        "status-undone" in n["cls"] for k, n in nodes.items() if k.startswith("m:")
    ), "the stopped turn is greyed"
    shot(page, artifacts_dir, "notebook-12-stopped")
    assert not page.console_errors, page.console_errors


# --- reconnecting -------------------------------------------------------------------------------------------


def long_reply(words: int) -> str:
    return " ".join(f"word{i}" for i in range(words)) + "."


# longer than pytest.ini's default: a 900-word reply streamed twice across reloads
@pytest.mark.timeout(600)
def test_reload_mid_run_loses_nothing_and_a_dropped_socket_resumes(
    live_app: LiveApp,
    scripted_model: ScriptedServer,
    new_context: Any,
    artifacts_dir: Path,
) -> None:
    text = long_reply(600)
    scripted_model.load(
        Script(rules=[Rule(reply=Reply(text=text), timing=Timing(token_delay_s=0.02))]),
        reset_log=True,
    )
    context = new_context()
    seen_texts = record_stream_texts(context)
    page = context.new_page()
    watch_errors(page)
    start_notebook(
        page, live_app, "Tell me a long story", agent=FUNCTION_AGENT, mode="auto"
    )
    stream = page.locator("article.cell-step .stream-text").first

    def shown_length() -> int:
        return len(stream.text_content() or "")

    wait_until(lambda: shown_length() > 60, message="some streamed text")
    before = shown_length()
    seq_before = int(page.locator("#notebook").get_attribute("data-last-seq") or 0)

    # Reload and drop the socket several times while tokens keep coming: the snapshot a socket
    # gets and the deltas already on their way to it overlap, and no token may be drawn twice.
    shown: list[str] = []
    for n in range(3):
        page.reload()
        page.wait_for_selector("#connection[data-state='open']")
        stream.wait_for()
        wait_until(
            lambda b=before: shown_length() >= b,
            message="the text streamed before the reload",
        )
        if n == 0:
            assert (
                int(page.locator("#notebook").get_attribute("data-last-seq") or 0)
                >= seq_before
            )
            assert (
                page.locator("article.cell-step").first.get_attribute("data-status")
                == "running"
            )
            shot(page, artifacts_dir, "notebook-09-reloaded-mid-run")
        shown += seen_texts(page)
        before = shown_length()
        page.evaluate("window.agentui.socket.drop()")
        page.wait_for_selector("#connection[data-state='open']", timeout=15_000)
        wait_until(
            lambda b=before: shown_length() > b + 20,
            timeout=30,
            message="more text after the reconnect",
        )
        before = shown_length()
    mid = shown_length()
    page.evaluate("window.agentui.socket.drop()")
    page.wait_for_selector("#connection[data-state='closed']")
    page.wait_for_selector("#connection[data-state='open']", timeout=15_000)
    page.locator(".cell-answer").wait_for(timeout=20_000)
    shown += seen_texts(page)
    wrong = [t for t in shown if not text.startswith(t)]
    assert not wrong, (
        f"a streamed cell showed text that is not a prefix of the reply: {wrong[0][-200:]!r}"
    )
    answer = page.locator(".cell-answer .answer-text")
    # cells far off screen skip rendering (content-visibility), and then have no innerText:
    # read the answer where the person would, scrolled to (drawn from the next frame on)
    answer.scroll_into_view_if_needed()
    wait_until(
        lambda: answer.inner_text().strip() != "", message="the answer drawn on screen"
    )
    assert answer.inner_text().strip() == text
    assert (stream.text_content() or "") == text and len(text) > mid
    assert step_cells(page).count() == 1, "replayed events must not duplicate cells"
    assert page.evaluate("window.agentui.model.lastSeq") == page.evaluate(
        "window.agentui.model.serverLastSeq"
    )
    shot(page, artifacts_dir, "notebook-10-finished-after-reconnect")

    # A turn started from this socket (the composer) survives the socket going away too.
    page.get_by_role("textbox", name="Message").fill("Another long one, please")
    page.get_by_role("button", name="Send").click()
    second = page.locator("section.turn").nth(1).locator(".stream-text").first
    second.wait_for()
    wait_until(
        lambda: len(second.text_content() or "") > 40, message="the follow-up streaming"
    )
    page.reload()
    page.locator("section.turn").nth(1).locator(".cell-answer").wait_for(timeout=20_000)
    assert (
        page.locator("section.turn").nth(1).locator(".answer-text").text_content() or ""
    ).strip() == text
    assert not page.console_errors, page.console_errors


# --- keyboard ---------------------------------------------------------------------------------------------------


def test_keyboard_only_send_and_follow_up(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(
        Script(rules=[Rule(reply=Reply(text="Sure, happy to help."))]), reset_log=True
    )
    page.goto(f"{live_app.url}/new/")
    page.get_by_role("textbox", name="Message").focus()
    page.keyboard.type("Hello there")
    shot(page, artifacts_dir, "notebook-00-new")
    page.keyboard.press("Control+Enter")
    page.wait_for_url("**/tasks/*/")
    page.locator(".cell-answer").wait_for()
    composer = page.get_by_role("textbox", name="Message")
    page.wait_for_function("() => !document.getElementById('composer-send').disabled")
    composer.focus()
    page.keyboard.type("And a follow-up")
    page.keyboard.press("Control+Enter")
    page.locator(".cell-answer").nth(1).wait_for()
    assert page.locator("section.turn").count() == 2
    assert [r.last_user_text for r in scripted_model.requests][-1] == "And a follow-up"
    # Every control on the page has an accessible name.
    unnamed = page.evaluate(
        """() => [...document.querySelectorAll('button, select, textarea, input:not([type=hidden]), [role=button]')]
            .filter(el => !el.closest('[hidden]'))
            .filter(el => !(el.getAttribute('aria-label') || el.labels?.length || el.textContent.trim()))
            .map(el => el.outerHTML.slice(0, 120))"""
    )
    assert not unnamed, unnamed
    # Tab reaches the DAG, arrow keys move along it, Enter jumps to the cell.
    page.locator("#dag .dag-canvas").focus()
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    page.wait_for_function(
        "document.activeElement && document.activeElement.classList.contains('cell-step')"
    )


# --- performance ---------------------------------------------------------------------------------------------------

PERF_TOKENS = 1200
PERF_RATE = 200  # tokens per second


def test_stream_of_200_tokens_per_second_keeps_the_page_responsive(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    text = long_reply(PERF_TOKENS - 1)
    scripted_model.load(
        Script(
            rules=[
                Rule(
                    reply=Reply(text=text),
                    timing=Timing(ttft_s=0.5, token_delay_s=1 / PERF_RATE),
                )
            ]
        ),
        reset_log=True,
    )
    start_notebook(
        page, live_app, "Stream a lot, quickly", agent=FUNCTION_AGENT, mode="auto"
    )
    # Probes: event-loop lag (a 20 ms timer's lateness) and frame intervals while the text streams.
    page.evaluate(
        """() => {
            const p = window.__probe = {lags: [], frames: [], t0: performance.now()};
            let last = performance.now();
            p.timer = setInterval(() => { const now = performance.now(); p.lags.push(now - last - 20); last = now; }, 20);
            const tick = (t) => { p.frames.push(t); if (!p.stop) requestAnimationFrame(tick); };
            requestAnimationFrame(tick);
        }"""
    )
    page.locator(".cell-answer").wait_for(timeout=60_000)
    figures = page.evaluate(
        """() => {
            const p = window.__probe; p.stop = true; clearInterval(p.timer);
            const m = window.agentui.metrics;
            const sorted = (a) => [...a].sort((x, y) => x - y);
            const pct = (a, q) => a.length ? sorted(a)[Math.min(a.length - 1, Math.floor(q * a.length))] : 0;
            const gaps = p.frames.slice(1).map((t, i) => t - p.frames[i]);
            return {deltas: m.deltas, frames: m.frames, renderMsMean: m.renderMs / Math.max(m.frames, 1),
                    renderMsMax: m.maxRenderMs, longTasks: m.longTasks, longTaskMs: m.longTaskMs,
                    lagP95: pct(p.lags, 0.95), lagMax: Math.max(0, ...p.lags),
                    frameGapP95: pct(gaps, 0.95), frameGapMax: Math.max(0, ...gaps),
                    seconds: (performance.now() - p.t0) / 1000};
        }"""
    )
    req = scripted_model.requests[-1]
    stream_s = (req.t_done or time.time()) - (req.t_first_chunk or req.t_received)
    figures["model_tokens_per_s"] = PERF_TOKENS / stream_s if stream_s > 0 else 0.0
    # Responsiveness after the stream: a click on a DAG node answers at once.
    t0 = time.perf_counter()
    click_dag_node(page, next(k for k in dag_nodes(page) if k.startswith("s:")))
    page.wait_for_function(
        "document.activeElement && document.activeElement.classList.contains('cell-step')"
    )
    figures["click_to_focus_ms"] = (time.perf_counter() - t0) * 1000
    print("\nnotebook stream figures:", json.dumps(figures, indent=1))
    (artifacts_dir / "notebook-stream-figures.json").write_text(
        json.dumps(figures, indent=1)
    )
    shot(page, artifacts_dir, "notebook-11-fast-stream")
    assert page.locator(".stream-text").first.text_content() == text
    assert figures["deltas"] > 0


# --- the reducer, unit-level, in the browser ---------------------------------------------------------------------


def test_reducer_skips_duplicates_reports_gaps_and_ignores_stale_snapshots(
    live_app: LiveApp, page: Any
) -> None:
    page.goto(f"{live_app.url}/new/")
    result = page.evaluate(
        """async () => {
            const s = {...await import('/static/js/store.js'), ...await import('/static/js/selectors.js')};
            const m = s.createModel();
            let seq = 0;
            const ev = (e) => s.applyMessage(m, {type: 'event', seq: ++seq, event: {task_id: 'T', at: seq, ...e}});
            const out = {};
            ev({type: 'task_created', input: 'q'});
            ev({type: 'step_created', step_id: 'a', kind: 'plan'});
            ev({type: 'step_started', step_id: 'a'});
            ev({type: 'agent_input', step_id: 'a', input: [], phase: 'plan'});
            s.applyMessage(m, {type: 'delta', event: {type: 'agent_stream', step_id: 'a', delta: '1.', response: '1.', phase: 'plan'}});
            ev({type: 'agent_output', step_id: 'a', response: {role: 'assistant', content: '1. x()'}, phase: 'plan'});
            // A snapshot flushed before the plan ended must not reopen it (it did once).
            s.applyMessage(m, {type: 'stream_snapshot', step_id: 'a', phase: 'plan', text: '1.'});
            ev({type: 'agent_input', step_id: 'a', input: [], phase: 'join'});
            s.applyMessage(m, {type: 'delta', event: {type: 'agent_stream', step_id: 'a', delta: 'The', response: 'The', phase: 'join'}});
            s.applyMessage(m, {type: 'stream_snapshot', step_id: 'a', phase: 'join', text: 'Th'});  // older: ignored
            // A snapshot that overtook deltas: their characters are not added twice, new ones are.
            s.applyMessage(m, {type: 'stream_snapshot', step_id: 'a', phase: 'join', text: 'The sum'});
            s.applyMessage(m, {type: 'delta', offset: 3, event: {type: 'agent_stream', step_id: 'a', delta: ' sum', phase: 'join'}});
            s.applyMessage(m, {type: 'delta', offset: 7, event: {type: 'agent_stream', step_id: 'a', delta: ' is', phase: 'join'}});
            s.applyMessage(m, {type: 'delta', offset: 4, event: {type: 'agent_stream', step_id: 'a', delta: 'sum is 5', phase: 'join'}});
            s.applyMessage(m, {type: 'delta', offset: 30, event: {type: 'agent_stream', step_id: 'a', delta: 'later', phase: 'join'}});  // a hole: wait
            out.streams = m.steps.get('a').attempts[0].streams.map(x => [x.phase, x.text, x.done]);
            // A snapshot that opened a replan's stream before its agent_input: one stream, not two.
            s.applyMessage(m, {type: 'stream_snapshot', step_id: 'a', phase: 'plan2', text: '1. y('});
            ev({type: 'agent_input', step_id: 'a', input: [], phase: 'plan2'});
            s.applyMessage(m, {type: 'delta', offset: 5, event: {type: 'agent_stream', step_id: 'a', delta: ')', phase: 'plan2'}});
            out.adopted = m.steps.get('a').attempts[0].streams.filter(x => x.phase === 'plan2').map(x => x.text);
            out.duplicate = s.applyMessage(m, {type: 'event', seq: 2, event: {type: 'step_created', task_id: 'T', step_id: 'zz'}});
            out.gap = s.applyMessage(m, {type: 'event', seq: seq + 2, event: {type: 'task_completed', task_id: 'T'}});
            out.lastSeq = m.lastSeq === seq;
            ev({type: 'step_completed', step_id: 'a', next_steps: ['b'], usage: {total_tokens: 7}});
            ev({type: 'step_created', step_id: 'b', prev_steps: ['a']});
            out.beforeUndo = s.permissions(m, true);
            ev({type: 'step_undone', step_id: 'a', dropped_steps: ['b']});
            ev({type: 'step_waiting', step_id: 'a'});
            out.afterUndo = s.permissions(m, true);
            out.statuses = [m.steps.get('a').status, m.steps.get('b').status, m.steps.get('b').dropped];
            out.offline = s.permissions(m, false);
            out.totals = s.totals(m);
            return out;
        }"""
    )
    assert result["streams"] == [
        ["plan", "1. x()", True],
        ["join", "The sum is 5", False],
    ]
    assert result["adopted"] == ["1. y()"]
    assert (
        result["duplicate"] == "duplicate"
        and result["gap"] == "gap"
        and result["lastSeq"]
    )
    # b is where the controls go, but in auto mode it is not offered for approval until it waits
    assert (
        result["beforeUndo"]["undoStepId"]
        and result["beforeUndo"]["nextStepId"]
        and not result["beforeUndo"]["canApprove"]
    )
    assert (
        result["afterUndo"]["nextStepId"]
        and result["afterUndo"]["canApprove"]
        and result["afterUndo"]["undoStepId"] is None
    )
    assert result["statuses"] == ["pending", "undone", True]
    assert not result["offline"]["canApprove"] and result["offline"]["nextStepId"], (
        "offline: shown but disabled"
    )
    assert result["totals"]["steps"] == 1
