"""The Chain of Abstraction preset in Chromium: chips in the reasoning cell, the chain's DAG, and
steering in each approval mode. The scripted model runs the demo model's CoA script (the rules
the offline demo answers the start page's example with). Screenshots: test-artifacts/coa-*.png.
"""

from __future__ import annotations

import json
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
    start_from_example,
    step_cells,
    wait_until,
)
from dag_helpers import dag_edges, dag_nodes, dag_shots

from runs.demo.analyst import COA_PROMPT, coa_rules
from runs.engine.testing import Script, ScriptedServer

pytestmark = pytest.mark.browser

CHAIN_OUTPUTS = [f"y{n}" for n in range(1, 8)]


def editor(output: str) -> str:
    """The approval card of the placeholder computing ``output``."""
    return f".tool-card.editable[data-tool-id$='-{output}']"


def chips(page: Any) -> dict[str, dict[str, str]]:
    """The reasoning cell's chips by result name: their state and what they show."""
    found: dict[str, dict[str, str]] = page.evaluate(
        """() => Object.fromEntries([...document.querySelectorAll('.chain-chip')].map(c =>
            [c.dataset.output, {state: c.dataset.state, value: c.querySelector('.chip-value').textContent}]))"""
    )
    return found


def dag_calls(page: Any) -> dict[str, dict[str, Any]]:
    """Call nodes of the DAG by their result name (y1...), with position, id and classes."""
    return {n["sub"]: n for key, n in dag_nodes(page).items() if key.startswith("c:")}


def step_nodes(page: Any) -> list[dict[str, Any]]:
    steps = [n for key, n in dag_nodes(page).items() if key.startswith("s:")]
    return sorted(steps, key=lambda n: n["order"])


def edges(page: Any) -> set[str]:
    return set(dag_edges(page))


def test_auto_mode_chips_fill_in_and_the_dag_draws_the_chain(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(Script(rules=coa_rules()), reset_log=True)
    start_from_example(page, live_app, COA_PROMPT, agent="coa", mode="auto")
    page.locator(".cell-answer").wait_for(timeout=20_000)
    # text_content: the answer may be below the fold, where a skipped cell has no inner text
    wait_until(
        lambda: (
            "The average sale fell by 3.15"
            in page.locator(".cell-answer").text_content()
        ),
        message="the answer",
    )

    reasoning = step_cells(page).first
    assert reasoning.locator(".stream[data-phase='reasoning'] .chain-chip").count() == 7
    shown = chips(page)
    assert sorted(shown) == CHAIN_OUTPUTS
    assert all(c["state"] == "done" for c in shown.values()), shown
    assert shown["y2"]["value"] == "970" and shown["y5"]["value"] == "950"
    assert shown["y7"]["value"].startswith("-3.15")
    assert "[FUNC" not in reasoning.locator(".stream-text").inner_text()

    # DAG: the four queries side by side, the averages below them, the change below both, then
    # refine; each wave of calls is a step, and each call's edges come from the results it uses.
    calls = dag_calls(page)
    assert sorted(calls) == CHAIN_OUTPUTS, calls.keys()
    assert len({calls[n]["y"] for n in ("y1", "y2", "y4", "y5")}) == 1
    assert calls["y3"]["y"] == calls["y6"]["y"] > calls["y1"]["y"]
    assert calls["y7"]["y"] > calls["y3"]["y"]
    drawn = dag_edges(page)
    for before, after in (
        ("y1", "y3"),
        ("y2", "y3"),
        ("y4", "y6"),
        ("y5", "y6"),
        ("y3", "y7"),
        ("y6", "y7"),
    ):
        edge = drawn[f"{calls[before]['id']}>{calls[after]['id']}"]
        assert edge["label"] == before, (
            before,
            after,
            edge,
        )  # the edge says which result
    steps = step_nodes(page)
    assert [s["sub"] for s in steps] == [
        "llm",
        "tool calls",  # y1, y2, y4, y5
        "tool calls",  # y3, y6, with their values
        "tool calls",  # y7
        "llm",
    ]
    assert steps[-1]["y"] > calls["y7"]["y"], (
        "the refine step comes after the last call"
    )
    assert f"{calls['y7']['id']}>{steps[-1]['id']}" in drawn
    assert (
        "after y3, y6" in page.locator(".tool-card", has_text="subtract").text_content()
    )
    dag_shots(page, artifacts_dir, "dag-coa")
    shot(page, artifacts_dir, "coa-02-auto-chips")
    # a reload rebuilds the chips and the chain's DAG from the stored events
    page.reload()
    page.wait_for_selector("#connection[data-state='open']")
    wait_until(lambda: len(chips(page)) == 7, message="chips after a reload")
    assert chips(page) == shown
    assert sorted(dag_calls(page)) == CHAIN_OUTPUTS
    # and so does the trace view
    page.get_by_role("link", name="Trace", exact=True).click()
    page.wait_for_url("**/traces/*/")
    wait_until(lambda: len(chips(page)) == 7, message="chips in the trace")
    assert all(c["state"] == "done" for c in chips(page).values())
    shot(page, artifacts_dir, "coa-09-trace")
    assert not page.console_errors, page.console_errors


def waiting_cell(page: Any, index: int) -> Any:
    """The notebook's step cell `index` (from 0), once it waits for the person."""
    page.wait_for_function(
        f"() => document.querySelectorAll('article.cell-step')[{index}]?.classList.contains('is-waiting')"
    )
    return step_cells(page).nth(index)


def shown_arguments(cell: Any, output: str, tool: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(
        cell.locator(editor(output))
        .get_by_label(f"Arguments for {tool} (JSON)")
        .input_value()
    )
    return found


def test_step_mode_correct_a_placeholder_before_its_calls_run(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    """The chain's calls wait in waves, each call shown with the values of the results it uses
    (never `y1`): the person corrects y7 with those values in front of them."""
    scripted_model.load(Script(rules=coa_rules()), reset_log=True)
    start_from_example(page, live_app, COA_PROMPT, agent="coa", mode="step")
    first = step_cells(page).first
    first.get_by_role("button", name="Approve and run").click()

    queries = waiting_cell(page, 1)
    assert len(scripted_model.requests) == 1, "the calls wait for approval in step mode"
    assert queries.locator(".tool-card.editable").count() == 4  # y1, y2, y4, y5
    shown = chips(page)
    assert all(c["state"] == "pending" for c in shown.values()), shown
    assert shown["y3"]["value"] == "divide(…)"
    step_cells(page).first.scroll_into_view_if_needed()
    shot(page, artifacts_dir, "coa-03-step-mode-waiting-chips")
    queries.get_by_role("button", name="Approve and run").click()

    averages = waiting_cell(page, 2)
    y3 = shown_arguments(averages, "y3", "divide")
    assert y3 == {"a": 110777.1, "b": 970}, y3  # y1 and y2, as they ran
    assert "y1" in averages.locator(editor("y3")).locator(".tool-planned").inner_text()
    # the waiting calls are drawn after the calls whose results they use
    calls = dag_calls(page)
    assert calls["y3"]["y"] > calls["y1"]["y"]
    assert f"{calls['y1']['id']}>{calls['y3']['id']}" in edges(page)
    averages.get_by_role("button", name="Approve and run").click()

    change = waiting_cell(page, 3)
    y7 = change.locator(editor("y7"))
    args = y7.get_by_label("Arguments for subtract (JSON)")
    shown_y7 = json.loads(args.input_value())
    assert set(shown_y7) == {"a", "b"} and all(
        isinstance(v, float) for v in shown_y7.values()
    ), shown_y7  # y3 and y6's values, not their names
    assert y7.locator(".tool-planned").inner_text() == 'Planned as {"a":"y3","b":"y6"}'
    # correct y7: the change per sale against 100, to see the edit reach the answer
    args.fill(json.dumps({"a": shown_y7["a"], "b": 100}))
    y7.scroll_into_view_if_needed()
    shot(page, artifacts_dir, "coa-04-step-mode-editing")
    change.get_by_role("button", name="Approve and run").click()

    wait_until(
        lambda: chips(page).get("y7", {}).get("state") == "done", message="y7 filled in"
    )
    assert chips(page)["y7"]["value"].startswith("14.2")
    waiting_cell(page, 4).get_by_role("button", name="Approve and run").click()
    page.locator(".cell-answer").wait_for(timeout=20_000)
    wait_until(
        lambda: "rose by 14.20" in page.locator(".cell-answer").text_content(),
        message="the answer",
    )
    shot(page, artifacts_dir, "coa-05-step-mode-done")
    assert not page.console_errors, page.console_errors


def test_tools_mode_reject_a_placeholder_and_the_refine_step_sees_why(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(Script(rules=coa_rules()), reset_log=True)
    start_from_example(page, live_app, COA_PROMPT, agent="coa", mode="tools")
    queries = waiting_cell(page, 1)
    assert queries.locator(".tool-card.editable").count() == 4  # y1, y2, y4, y5
    queries.get_by_role("button", name="Approve and run").click()
    calls_step = waiting_cell(page, 2)
    assert calls_step.locator(".tool-card.editable").count() == 2  # y3, y6
    y6 = calls_step.locator(editor("y6"))
    y6.get_by_label("Reason to reject").fill("skip the 2023 average")
    y6.get_by_role("button", name="Reject call").click()
    calls_step.locator(editor("y6")).locator(".decision-rejected").wait_for()
    # a schema error in an edit is refused by the server, and so is a reference: what a
    # person approves are values
    y3_args = calls_step.locator(editor("y3")).get_by_label(
        "Arguments for divide (JSON)"
    )
    y3 = json.loads(y3_args.input_value())
    edit_error = calls_step.locator("[data-error-slot^='edit:']")
    for wrong in ({**y3, "b": "two"}, {"a": "y1", "b": "y2"}):
        y3_args.fill(json.dumps(wrong))
        calls_step.get_by_role("button", name="Save edits").click()
        wait_until(
            lambda: "invalid_tool_arguments" in edit_error.inner_text(),
            message=f"{wrong} refused",
        )
        y3_args.fill(json.dumps(y3))
        calls_step.get_by_role("button", name="Save edits").click()
        wait_until(lambda: not edit_error.inner_text(), message="the error cleared")
    shot(page, artifacts_dir, "coa-06-tools-mode-decided")
    calls_step.get_by_role("button", name="Approve and run").click()
    # y7 uses the rejected y6: it waits saying it will not run unless given arguments
    change = waiting_cell(page, 3)
    assert (
        "Will not run: y6 (divide) failed" in change.locator(editor("y7")).inner_text()
    )
    change.locator(editor("y7")).scroll_into_view_if_needed()
    shot(page, artifacts_dir, "coa-06b-tools-mode-unmet-input")
    change.get_by_role("button", name="Approve and run").click()

    page.locator(".cell-answer").wait_for(timeout=20_000)
    answer = page.locator(".cell-answer").text_content()
    assert "y6: rejected by user: skip the 2023 average" in answer, answer
    assert "y7: not run because y6" in answer, answer
    shown = chips(page)
    assert shown["y6"]["state"] == "rejected" and shown["y7"]["state"] == "failed"
    assert shown["y3"]["state"] == "done"
    refine_prompt = scripted_model.requests[-1].last_user_text
    assert (
        "[y6 = divide(...) failed: rejected by user: skip the 2023 average]"
        in refine_prompt
    )
    calls = dag_calls(page)
    assert (
        "status-rejected"
        in calls["y6"]["cls"]  # a person's rejection, not a failure (issue 14)
        and "status-completed" in calls["y3"]["cls"]
    )
    shot(page, artifacts_dir, "coa-07-tools-mode-done")
    step_cells(page).first.scroll_into_view_if_needed()
    shot(page, artifacts_dir, "coa-08-tools-mode-chips")
    assert not page.console_errors, page.console_errors
