"""The step DAG on Cytoscape (issue 28): a 100-node plan stays readable, with pan, zoom, fit and an
overview; model-written labels are canvas text under the page's CSP.

The presets' DAGs (LLMCompiler `$N` edges, Chain-of-Abstraction `yK`, parallel research,
Team handoffs) are checked where those presets are tested: test_browser_notebook, _coa,
_research and _team (screenshots test-artifacts/dag-<preset>-<size>.png).
Screenshots here: test-artifacts/dag-100-nodes-*.png, dag-hostile-*.png.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import (  # noqa: F401  (fixtures)
    USERNAME,
    LiveApp,
    _browser_module,
    call_rule,
    live_app,
    new_context,
    page,
    scripted_model,
    start_notebook,
)
from dag_helpers import click_dag_node, dag_nodes, dag_shots, dag_snapshot
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError
from test_browser_hostile import HOSTILE_TOOL_NAME, watched

from runs.engine.testing import Reply, Rule, Script, ScriptedServer

pytestmark = pytest.mark.browser

STEPS = 34  # a message, 34 steps and 66 parallel calls: 101 nodes


def inside(view: dict[str, Any], box: dict[str, float]) -> bool:
    return bool(
        box["x1"] >= view["x1"] - 1
        and box["x2"] <= view["x2"] + 1
        and box["y1"] >= view["y1"] - 1
        and box["y2"] <= view["y2"] + 1
    )


def extents(page: Any) -> dict[str, dict[str, float]]:
    """The main view's extent and the whole graph's box, in graph coordinates."""
    found: dict[str, dict[str, float]] = page.evaluate(
        """() => { const cy = window.agentui.dag.cy;
            return {view: cy.extent(), graph: cy.elements().boundingBox({includeLabels: false})}; }"""
    )
    return found


def test_a_100_node_plan_stays_readable_with_zoom_fit_and_an_overview(
    live_app: LiveApp, page: Any, artifacts_dir: Path
) -> None:
    task_id = int(live_app.seed("seed_long_trace", USERNAME, STEPS))
    page.goto(f"{live_app.url}/tasks/{task_id}/")
    page.wait_for_function("() => window.agentui.dag.count === 101", timeout=30_000)
    view = dag_snapshot(page)
    assert len(view["nodes"]) == 101
    # Readable: not shrunk to fit 101 nodes; the overview shows the whole graph.
    assert view["zoom"] >= 0.75, view["zoom"]
    assert view["overview"]
    box = extents(page)
    assert not inside(box["view"], box["graph"])
    dag_shots(page, artifacts_dir, "dag-100-nodes")

    zoom = page.evaluate("() => window.agentui.dag.cy.zoom()")
    page.get_by_role("button", name="Zoom in").click()
    zoomed_in = page.evaluate("() => window.agentui.dag.cy.zoom()")
    assert zoomed_in == pytest.approx(zoom * 1.25)
    page.get_by_role("button", name="Zoom out").click()
    page.get_by_role("button", name="Zoom out").click()
    assert page.evaluate("() => window.agentui.dag.cy.zoom()") == pytest.approx(
        zoom / 1.25
    )

    # A click in the overview moves the main view there (its top, where the first steps are).
    before = page.evaluate("() => window.agentui.dag.cy.extent()")
    overview = page.locator("#dag .dag-overview").bounding_box()
    page.mouse.click(overview["x"] + overview["width"] / 2, overview["y"] + 6)
    after = page.evaluate("() => window.agentui.dag.cy.extent()")
    assert after["y1"] < before["y1"], (before, after)

    # Fit: the whole graph in view, and the overview steps aside.
    page.get_by_role("button", name="Fit").click()
    box = extents(page)
    assert inside(box["view"], box["graph"]), box
    page.wait_for_selector("#dag .dag-overview", state="hidden")

    # The mouse wheel zooms, around the pointer.
    canvas = page.locator("#dag .dag-canvas").bounding_box()
    page.mouse.move(
        canvas["x"] + canvas["width"] / 2, canvas["y"] + canvas["height"] / 2
    )
    fitted = page.evaluate("() => window.agentui.dag.cy.zoom()")
    # Cytoscape takes a wheel for page scrolling within ~250 ms of the page scrolling (as the
    # overview click and Fit may have made it do on a loaded machine): wheel again then
    for _ in range(3):
        page.mouse.wheel(0, -400)
        try:
            page.wait_for_function(
                f"() => window.agentui.dag.cy.zoom() > {fitted}", timeout=3_000
            )
            break
        except PlaywrightTimeoutError:
            continue
    assert page.evaluate("() => window.agentui.dag.cy.zoom()") > fitted

    # A click on the last step's node opens its cell, and the node shows it is selected.
    last = next(n for n in dag_snapshot(page)["nodes"] if n["label"] == f"Step {STEPS}")
    click_dag_node(page, last["id"])
    page.wait_for_function(
        "() => document.activeElement && document.activeElement.classList.contains('cell-step')"
    )
    assert "is-selected" in dag_nodes(page)[last["id"]]["cls"]
    assert not page.console_errors, page.console_errors


def test_a_hostile_tool_name_is_drawn_as_text_and_runs_nothing(
    live_app: LiveApp,
    scripted_model: ScriptedServer,
    new_context: Callable[..., Any],
    artifacts_dir: Path,
) -> None:
    """A tool name and a handoff-like label made of HTML reach the graph only as canvas text."""
    page, watch = watched(new_context, live_app)
    scripted_model.load(
        Script(
            rules=[
                call_rule(0, HOSTILE_TOOL_NAME, "evil1", {"x": "<script>1</script>"}),
                Rule(name="answer", reply=Reply(text="Done.")),
            ]
        ),
        reset_log=True,
    )
    start_notebook(
        page, live_app, "Draw a hostile graph", agent="function_calling", mode="auto"
    )
    page.locator(".cell-answer").wait_for(timeout=20_000)
    calls = [n for k, n in dag_nodes(page).items() if k.startswith("c:")]
    assert [c["label"] for c in calls] == [HOSTILE_TOOL_NAME]
    # Cytoscape keeps it as data and paints it on the canvas: no element of ours holds it.
    assert page.locator("#dag img, #dag script, #dag iframe").count() == 0
    assert page.evaluate(
        "(name) => !document.getElementById('dag').innerHTML.includes(name)",
        HOSTILE_TOOL_NAME,
    )
    # A click on it still opens its card.
    click_dag_node(page, calls[0]["id"])
    page.wait_for_function(
        "() => document.activeElement && document.activeElement.classList.contains('tool-card')"
    )
    dag_shots(page, artifacts_dir, "dag-hostile")
    watch.check(
        page
    )  # nothing ran, nothing left the origin, no CSP violation (Cytoscape's own <style> included)
    assert not page.console, page.console
