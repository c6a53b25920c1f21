"""The Parallel research preset in Chromium: the fan-out and fan-in in the DAG, branches run side
by side in auto mode, and one at a time (each approved, edited or undone on its own) in step mode.
The scripted model runs the offline demo's script. Screenshots: test-artifacts/research-*.png.
"""

from __future__ import annotations

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

from runs.demo.research import ANSWER, RESEARCH_PROMPT, SUBQUESTIONS, research_rules
from runs.engine.testing import Script, ScriptedServer

pytestmark = pytest.mark.browser


def step_nodes(page: Any) -> list[dict[str, Any]]:
    return [n for key, n in dag_nodes(page).items() if key.startswith("s:")]


def edges(page: Any) -> set[str]:
    return set(dag_edges(page))


def answer_requests(model: ScriptedServer) -> list[Any]:
    return [
        r
        for r in model.requests
        if r.rule_name and "split" not in r.rule_name and "synthesis" not in r.rule_name
    ]


def test_auto_mode_answers_the_branches_side_by_side_and_joins_them(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(Script(rules=research_rules()), reset_log=True)
    start_from_example(
        page, live_app, RESEARCH_PROMPT, agent="parallel_research", mode="auto"
    )
    page.locator(".cell-answer").wait_for(timeout=30_000)
    assert ANSWER[:40] in page.locator(".cell-answer").inner_text()
    assert step_cells(page).count() == 5  # the split, three branches, the synthesis
    branches = answer_requests(scripted_model)
    assert len(branches) == 3
    # the branch calls overlapped: run one after another, they would take their sum
    span = max(r.t_done or 0 for r in branches) - min(r.t_received for r in branches)
    assert span < sum((r.t_done or 0) - r.t_received for r in branches)
    ordered = sorted(branches, key=lambda r: r.t_received)
    assert ordered[1].t_received < (ordered[0].t_done or 0)
    for question in SUBQUESTIONS:
        assert page.locator("article.cell-step", has_text=question).count() >= 1
    nodes = step_nodes(page)
    assert len(nodes) == 5
    split, *middle, synthesis = sorted(nodes, key=lambda n: n["y"])
    assert (
        len({n["y"] for n in middle}) == 1 and len({n["x"] for n in middle}) == 3
    )  # fan-out
    drawn = edges(page)
    for branch in middle:
        assert f"{split['id']}>{branch['id']}" in drawn
        assert f"{branch['id']}>{synthesis['id']}" in drawn  # fan-in
    dag_shots(page, artifacts_dir, "dag-research")
    shot(page, artifacts_dir, "research-02-auto-done", full_page=True)
    assert not page.console_errors, page.console_errors


def test_step_mode_each_branch_is_approved_edited_or_undone_on_its_own(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(Script(rules=research_rules()), reset_log=True)
    start_from_example(
        page, live_app, RESEARCH_PROMPT, agent="parallel_research", mode="step"
    )
    step_cells(page).first.get_by_role("button", name="Approve and run").click()
    page.wait_for_function(
        "() => document.querySelectorAll('article.cell-step').length === 5"
    )
    first_branch, second_branch = step_cells(page).nth(1), step_cells(page).nth(2)
    first_branch.get_by_role("button", name="Approve and run").wait_for()
    assert len(scripted_model.requests) == 1, "the branches wait in step mode"
    shot(page, artifacts_dir, "research-03-step-branches-waiting")
    first_branch.get_by_role("button", name="Approve and run").click()
    wait_until(
        lambda: len(scripted_model.requests) == 2, message="the first branch ran"
    )
    # edit the second branch's sub-question before it runs
    questions = list(SUBQUESTIONS)
    second_branch.get_by_label("Input for this step").fill(questions[2])
    second_branch.get_by_role("button", name="Save input").click()
    wait_until(
        lambda: second_branch.locator("button[aria-busy]").count() == 0,
        message="the server took the edit",
    )
    second_branch.get_by_role("button", name="Approve and run").click()
    wait_until(
        lambda: len(scripted_model.requests) == 3, message="the edited branch ran"
    )
    assert scripted_model.requests[-1].last_user_text == questions[2]
    # both finished branches offer undo; undo the older one alone: the newer keeps its finding
    second_branch.get_by_role("button", name="Undo this step").wait_for()
    first_branch.get_by_role("button", name="Undo this step").click()
    first_branch.get_by_role("button", name="Approve and run").wait_for()
    assert second_branch.locator(".stream-text").inner_text().startswith("Cold brew")
    assert second_branch.get_by_role("button", name="Undo this step").count() == 1
    shot(page, artifacts_dir, "research-04-step-branch-undone")
    first_branch.get_by_role("button", name="Approve and run").click()
    wait_until(
        lambda: len(scripted_model.requests) == 4, message="the branch ran again"
    )
    third_branch = step_cells(page).nth(3)
    third_branch.get_by_label("Input for this step").fill(questions[1])
    third_branch.get_by_role("button", name="Save input").click()
    wait_until(
        lambda: third_branch.locator("button[aria-busy]").count() == 0,
        message="the server took the edit",
    )
    for index in (3, 4):
        cell = step_cells(page).nth(index)
        cell.get_by_role("button", name="Approve and run").click(timeout=20_000)
    page.locator(".cell-answer").wait_for(timeout=30_000)
    synthesis = scripted_model.requests[-1].last_user_text
    assert all(q in synthesis for q in questions), synthesis
    shot(page, artifacts_dir, "research-05-step-done", full_page=True)
    assert not page.console_errors, page.console_errors
