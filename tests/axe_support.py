"""axe-core in the browser tests: check the page as it is now, fail on serious or critical findings.

axe-core is vendored by `make vendor` (static/vendor/axe-core/axe.min.js) but no page loads it:
the test evaluates the file's text through the DevTools protocol, which the page's strict CSP does
not govern, so the CSP users get stays as it is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

AXE_JS = (
    Path(__file__).resolve().parent.parent
    / "static"
    / "vendor"
    / "axe-core"
    / "axe.min.js"
)
BLOCKING = ("serious", "critical")
AXE_CSP_NOISE = "Applying inline style violates the following Content Security Policy"


def axe_violations(page: Any) -> list[dict[str, Any]]:
    """Run axe-core (WCAG 2.x A/AA and best practices) on the page; its violations."""
    if not page.evaluate("() => typeof window.axe === 'object'"):
        page.evaluate(AXE_JS.read_text())
    errors: list[str] | None = getattr(page, "console_errors", None)
    before = len(errors) if errors is not None else 0
    found: list[dict[str, Any]] = page.evaluate(
        """async () => (await axe.run(document, {resultTypes: ['violations']})).violations
            .map(v => ({id: v.id, impact: v.impact, help: v.help, helpUrl: v.helpUrl,
                        targets: v.nodes.map(n => n.target.join(' ')).slice(0, 8)}))"""
    )
    if (
        errors is not None
    ):  # axe's own style probes, refused by the CSP: not the page's errors
        errors[before:] = [
            e for e in errors[before:] if not e.startswith(AXE_CSP_NOISE)
        ]
    return found


def describe(violations: list[dict[str, Any]]) -> str:
    """One readable line per rule: id, impact, what it asks, where, and the help page."""
    return "\n".join(
        f"- {v['id']} ({v['impact']}): {v['help']}\n    at {', '.join(v['targets'])}\n"
        f"    {v['helpUrl']}"
        for v in violations
    )


def blocking_violations(page: Any, where: str) -> str:
    """Serious or critical violations on the page, described under `where` ('' if none)."""
    blocking = [v for v in axe_violations(page) if v["impact"] in BLOCKING]
    return f"{where}:\n{describe(blocking)}" if blocking else ""


def assert_accessible(page: Any, where: str) -> None:
    """Fail, listing them, if axe finds serious or critical violations on the page."""
    found = blocking_violations(page, where)
    assert not found, f"axe: serious or critical violations on {found}"
