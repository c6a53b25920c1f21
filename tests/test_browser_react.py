"""The ReAct and Vision ReAct presets in Chromium, in every approval mode.

The scripted model runs the presets' demo scripts (runs/demo/react.py), so what the page shows is
computed from real tool results. Screenshots: test-artifacts/react-*.png.
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
    scripted_model,
    shot,
    start_notebook,
    step_cells,
    wait_until,
)

from runs.demo.react import REACT_PROMPT, VISION_PROMPT, react_rules, vision_rules
from runs.engine.testing import Match, Reply, Rule, Script, ScriptedServer, Timing

pytestmark = pytest.mark.browser

MODES = ["auto", "step", "tools"]


def load_demo(model: ScriptedServer, *extra: Rule, delay: float = 0.0) -> None:
    defaults = Timing(token_delay_s=delay) if delay else Timing()
    model.load(
        Script(rules=[*extra, *react_rules(), *vision_rules()], defaults=defaults),
        reset_log=True,
    )


def approve_until_answered(page: Any, timeout: float = 40.0) -> int:
    """Approve every step that waits (step and tools modes) until the answer shows; steps approved."""
    approved: set[str] = set()
    deadline = time.monotonic() + timeout
    while not page.locator(".cell-answer").count():
        if time.monotonic() > deadline:
            raise AssertionError("the turn did not finish")
        # read the id in one go: the cell may stop waiting between two Playwright calls
        step_id = page.evaluate(
            "() => [...document.querySelectorAll('article.cell-step.is-waiting')]"
            ".find(c => c.querySelector('[data-action=approve]:not([disabled])'))?.dataset.stepId || null"
        )
        if step_id and step_id not in approved:
            approved.add(step_id)
            page.locator(
                f"article.cell-step[data-step-id='{step_id}'] [data-action=approve]"
            ).click()
        page.wait_for_timeout(60)
    return len(approved)


def part_texts(cell: Any, kind: str) -> list[str]:
    return [
        t.strip()
        for t in cell.locator(
            f".react-part[data-part='{kind}'] .react-text"
        ).all_inner_texts()
    ]


@pytest.mark.parametrize("mode", MODES)
def test_react_shows_thought_action_observation_in_each_mode(
    live_app: LiveApp,
    scripted_model: ScriptedServer,
    page: Any,
    artifacts_dir: Path,
    mode: str,
) -> None:
    load_demo(scripted_model, delay=0.03 if mode == "auto" else 0.0)
    start_notebook(page, live_app, REACT_PROMPT, agent="react", mode=mode)
    first = step_cells(page).first
    first.wait_for()
    if mode == "auto":
        # while the reply streams, its parts already show apart, growing
        page.wait_for_function(
            "() => { const c = document.querySelector('article.cell-step[data-status=running]');"
            " return c && c.querySelector('.react-part[data-part=thought]') && !c.querySelector('.react-part[data-part=action-input]'); }"
        )
        shot(page, artifacts_dir, "react-01-streaming-thought")
        page.wait_for_function(
            "() => document.querySelector('article.cell-step .react-part[data-part=action-input]')"
        )
    approvals = approve_until_answered(page)
    answer = page.locator(".cell-answer").inner_text()
    assert (
        "sold the most units in 2024" in answer and "% of all units sold" in answer
    ), answer
    if mode == "auto":
        assert approvals == 0
    elif mode == "step":
        assert approvals == 3  # one per model call: query, share, answer
    else:
        assert approvals == 2  # one per tool call

    # the first model call's parts, each in its own block
    thoughts = part_texts(first, "thought")
    assert thoughts and "units sold per category" in thoughts[0]
    assert part_texts(first, "action") == ["sql_query"]
    assert json.loads(part_texts(first, "action-input")[0])["sql"].startswith(
        "SELECT p.category"
    )
    # the observation: the tool's result, labelled as such
    observed = page.locator(".tool-card", has_text="sql_query").locator(".tool-result")
    assert observed.locator(".field-label").text_content().startswith("Observation")
    assert "kitchen" in observed.inner_text()  # the result, drawn as a table
    assert page.locator(".react-part[data-part=answer]").count() == 1
    shot(page, artifacts_dir, f"react-02-done-{mode}", full_page=True)
    assert not page.console_errors, page.console_errors


def test_react_step_mode_undo_then_tools_mode_reject(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    load_demo(scripted_model)
    start_notebook(page, live_app, REACT_PROMPT, agent="react", mode="step")
    first = step_cells(page).first
    first.locator("[data-action=approve]:not([disabled])").click()
    wait_until(
        lambda: (
            step_cells(page).count() == 2
            and first.get_attribute("data-status") == "completed"
        )
    )
    first.get_by_role("button", name="Undo this step").click()
    wait_until(
        lambda: (
            first.get_attribute("data-status") == "pending"
            and step_cells(page).count() == 1
        )
    )
    assert first.locator("details.earlier-runs").count() == 1
    shot(page, artifacts_dir, "react-03-step-undone")
    # switch to tools mode: the model's next Action waits for a decision
    page.get_by_label("Approval").select_option("tools")
    page.wait_for_function("() => window.agentui.model.mode === 'tools'")
    first.locator("[data-action=approve]:not([disabled])").click()
    calls = page.locator(
        "article.cell-step[data-status='pending']",
        has=page.locator(".tool-card.editable"),
    )
    calls.wait_for()
    calls.get_by_role("button", name="Approve and run").click()  # the query runs
    share = page.locator(
        "article.cell-step[data-status='pending']",
        has=page.locator(".tool-card.editable", has_text="evaluate"),
    )
    share.wait_for()
    card = share.locator(".tool-card", has_text="evaluate")
    card.get_by_label("Reason to reject").fill("report the raw counts instead")
    card.get_by_role("button", name="Reject call").click()
    card.locator(".decision-rejected").wait_for()
    shot(page, artifacts_dir, "react-04-tools-reject")
    share.get_by_role("button", name="Approve and run").click()
    page.locator(".cell-answer").wait_for()
    assert (
        "rejected by user: report the raw counts instead"
        in page.locator(".cell-answer").inner_text()
    )
    last_request = scripted_model.requests[-1]
    assert (
        last_request.messages[-1]["content"]
        == "Observation: rejected by user: report the raw counts instead"
    )
    assert not page.console_errors, page.console_errors


def test_react_unreadable_reply_and_invented_tool_show_as_observations(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(
        Script(
            rules=[
                Rule(
                    match=Match(last_message_contains="there is no tool"),
                    reply=Reply(text="Thought: ok\nAnswer: I give up."),
                ),
                Rule(
                    match=Match(last_message_contains="could not read your reply"),
                    reply=Reply(
                        text='Thought: try a tool\nAction: weather\nAction Input: {"city": "Oslo"}'
                    ),
                ),
                Rule(reply=Reply(text="Thought: I will use a tool\nAction: sql_query")),
            ]
        ),
        reset_log=True,
    )
    start_notebook(page, live_app, "Anything", agent="react", mode="auto")
    page.locator(".cell-answer").wait_for()
    errors = page.locator(
        ".react-part.react-observation.is-error .react-text"
    ).all_inner_texts()
    assert len(errors) == 2, errors
    assert "has no Action Input line" in errors[0]
    assert "there is no tool named 'weather'" in errors[1]
    shot(page, artifacts_dir, "react-05-errors-fed-back", full_page=True)
    assert not page.console_errors, page.console_errors


# --- Vision ReAct -------------------------------------------------------------------------------------


def start_vision_from_example(
    page: Any, app: LiveApp, mode: str, artifacts_dir: Path
) -> None:
    page.goto(f"{app.url}/new/")
    page.locator("summary", has_text="Example prompts").click()
    page.locator("[data-example][data-preset=vision_react]").click()
    thumb = page.locator("#new-notebook [data-image-list] img")
    thumb.wait_for()
    assert page.get_by_label("Agent").input_value() == "vision_react"
    assert page.get_by_label("Message").input_value() == VISION_PROMPT
    page.get_by_label("Approval").select_option(mode)
    shot(page, artifacts_dir, f"react-06-vision-composer-{mode}")
    page.get_by_role("button", name="Start").click()
    page.wait_for_url("**/tasks/*/")
    page.wait_for_selector("#connection[data-state='open']")


@pytest.mark.parametrize("mode", MODES)
def test_vision_react_sends_the_attached_chart_in_each_mode(
    live_app: LiveApp,
    scripted_model: ScriptedServer,
    page: Any,
    artifacts_dir: Path,
    mode: str,
) -> None:
    load_demo(scripted_model)
    start_vision_from_example(page, live_app, mode, artifacts_dir)
    message_thumb = page.locator("section.turn .cell-message .message-images img")
    message_thumb.wait_for()
    approve_until_answered(page)
    answer = page.locator(".cell-answer").inner_text()
    assert "tallest bar is Sapporo" in answer, answer
    first_call = scripted_model.requests[0]
    assert first_call.rule_name == "demo-vision"
    assert len(first_call.image_urls) == 1 and first_call.image_urls[0].startswith(
        "data:image/png;base64,iVBOR"
    )
    # the thumbnail loads from the database, and the trace shows it too
    assert (
        page.evaluate(
            "() => document.querySelector('.message-images img').naturalWidth"
        )
        == 480
    )
    shot(page, artifacts_dir, f"react-07-vision-done-{mode}", full_page=True)
    task_id = page.url.rstrip("/").rsplit("/", 1)[1]
    page.goto(f"{live_app.url}/traces/{task_id}/")
    page.locator(".cell-message .message-images img").wait_for()
    assert (
        page.evaluate(
            "() => document.querySelector('.message-images img').naturalWidth"
        )
        == 480
    )
    shot(page, artifacts_dir, f"react-08-vision-trace-{mode}", full_page=True)
    assert not page.console_errors, page.console_errors


def test_vision_composer_refuses_non_images_and_oversized_files(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    hello = Rule(name="hello", reply=Reply(text="Thought: a greeting\nAnswer: Hello."))
    scripted_model.load(Script(rules=[*vision_rules(), hello]), reset_log=True)
    start_notebook(page, live_app, "Hello", agent="vision_react", mode="auto")
    page.locator(".cell-answer").wait_for()
    picker = page.locator("#composer [data-image-picker]")
    error = picker.locator("[data-image-error]")
    file_input = picker.locator("input[type=file]")

    file_input.set_input_files(
        {"name": "notes.txt", "mimeType": "text/plain", "buffer": b"hello"}
    )
    error.wait_for()
    assert (
        "notes.txt is not an image this agent takes (PNG, JPEG, WebP or GIF)"
        in error.inner_text()
    )
    assert picker.locator("[data-image-list] img").count() == 0

    big = b"\x89PNG\r\n\x1a\n" + b"\x00" * (5 * 1024 * 1024 + 10)
    file_input.set_input_files(
        {"name": "huge.png", "mimeType": "image/png", "buffer": big}
    )
    wait_until(
        lambda: "huge.png is 5.0 MB; images may be at most 5.0 MB" in error.inner_text()
    )

    # a file that claims to be a PNG but is not: the server reads the bytes and refuses it
    file_input.set_input_files(
        {"name": "fake.png", "mimeType": "image/png", "buffer": b"not really a png"}
    )
    wait_until(
        lambda: "fake.png is not an image this agent takes" in error.inner_text()
    )
    page.console_errors.clear()  # the refused upload's HTTP 400 is the point here
    assert picker.locator("[data-image-list] img").count() == 0
    shot(page, artifacts_dir, "react-09-vision-refused")

    # paste works, and the refusal clears
    chart = page.evaluate(
        "async () => { const r = await fetch('/demo/sample-chart.png'); const b = await r.blob();"
        " const dt = new DataTransfer(); dt.items.add(new File([b], 'pasted.png', {type: 'image/png'}));"
        " document.getElementById('composer-text').dispatchEvent(new ClipboardEvent('paste', {clipboardData: dt, bubbles: true}));"
        " return b.size; }"
    )
    assert chart > 1000
    picker.locator("[data-image-list] img").wait_for()
    assert error.is_hidden()
    composer = page.get_by_role("textbox", name="Message")
    composer.fill(VISION_PROMPT)
    composer.press("Control+Enter")
    page.locator("section.turn").nth(1).locator(".message-images img").wait_for()
    page.locator("section.turn").nth(1).locator(".cell-answer").wait_for()
    assert (
        "tallest bar is Sapporo"
        in page.locator("section.turn").nth(1).locator(".cell-answer").inner_text()
    )
    assert (
        picker.locator("[data-image-list] img").count() == 0
    )  # sent: the composer is empty again
    shot(page, artifacts_dir, "react-10-vision-pasted", full_page=True)
    assert not page.console_errors, page.console_errors
