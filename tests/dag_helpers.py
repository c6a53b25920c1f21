"""Reading and using the step DAG in browser tests.

The DAG is drawn by Cytoscape on a canvas, so tests read its model (`window.agentui.dag`:
nodes with their data, classes and laid-out positions; edges with their labels) and click a
node where Cytoscape drew it, as a person would.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from browser_helpers import VIEWPORT, WINDOW_SIZES, settle


def dag_snapshot(page: Any) -> dict[str, Any]:
    """Nodes (data + `cls`, centre `x`/`y`), edges (`id` "from>to", `kind`, `label`), zoom, pan."""
    snapshot: dict[str, Any] = page.evaluate("() => window.agentui.dag.snapshot()")
    return snapshot


def dag_nodes(page: Any) -> dict[str, dict[str, Any]]:
    """DAG nodes by id."""
    return {n["id"]: n for n in dag_snapshot(page)["nodes"]}


def dag_edges(page: Any) -> dict[str, dict[str, Any]]:
    """DAG edges by id ("from>to")."""
    return {e["id"]: e for e in dag_snapshot(page)["edges"]}


def overlaps(a: dict[str, float], b: dict[str, float]) -> bool:
    """Whether two boxes of the snapshot (`x1`, `y1`, `x2`, `y2`) overlap."""
    return (
        a["x1"] < b["x2"]
        and b["x1"] < a["x2"]
        and a["y1"] < b["y2"]
        and b["y1"] < a["y2"]
    )


def click_dag_node(page: Any, node_id: str) -> None:
    """Bring a node into view (as the keys or the overview would) and click it on the canvas."""
    page.locator("#dag").scroll_into_view_if_needed()
    # centred, then drawn there (two frames) before the click: a big graph's redraw lags
    point = page.evaluate(
        """(id) => new Promise((done) => {
            window.agentui.dag.reveal(id);
            requestAnimationFrame(() => requestAnimationFrame(
                () => done(window.agentui.dag.screenPoint(id))));
        })""",
        node_id,
    )
    assert point, f"DAG node {node_id} is not drawn"
    page.mouse.click(point["x"], point["y"])


def dag_shots(page: Any, artifacts_dir: Path, name: str) -> None:
    """The DAG panel at both window sizes: <name>-1280x800.png and <name>-1920x1080.png."""
    for width, height in WINDOW_SIZES:
        page.set_viewport_size({"width": width, "height": height})
        settle(page)
        page.locator("#dag-panel").screenshot(
            path=str(artifacts_dir / f"{name}-{width}x{height}.png")
        )
    page.set_viewport_size(VIEWPORT)
    settle(page)
