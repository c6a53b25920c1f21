"""Hidden characters in a model's call, where a person decides on it (Chromium).

A right-to-left override makes a browser draw the text after it backwards, zero-width
characters and tag characters (invisible ASCII) are not drawn at all: a hostile document can
make a model's tool name or arguments read, on the approval card, as something other than what
would run. Where a person reads a call (the notebook's card, the inbox, the card of the call
that ran, the DAG) each such character is shown (as a JSON escape in JSON, as [U+XXXX] in a
name) and named in a note, and an edit keeps them exactly: the escapes parse back to the same
characters, so what the person approved is what runs.

Screenshots: test-artifacts/hidden-chars-*.png.
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
    shots_at_both_sizes,
    start_notebook,
)

from runs.engine.testing import Match, Reply, Rule, Script, ScriptedServer, ToolCallSpec

pytestmark = pytest.mark.browser

RLO, PDF, ZWSP = "\u202e", "\u202c", "\u200b"
TAGS = "".join(chr(0xE0000 + ord(c)) for c in "ok")  # "ok" in invisible tag characters
# drawn by a browser as: SELECT 'pay ACME' AS payee -- 00.001 rof
SQL = f"SELECT 'pay ACME{ZWSP}' AS payee -- {RLO}for 100.00{PDF}{TAGS}"
HIDDEN_NAME = f"sql_query{RLO}"
EMOJI = "\u2764\ufe0f ok"  # a heart with its variation selector: nothing hidden


def script() -> Script:
    calls = [
        ToolCallSpec(id="q1", name="sql_query", arguments={"sql": SQL}),
        ToolCallSpec(id="q2", name=HIDDEN_NAME, arguments={"sql": "SELECT 1"}),
        ToolCallSpec(id="q3", name="sql_query", arguments={"sql": f"SELECT '{EMOJI}'"}),
    ]
    return Script(
        rules=[
            Rule(
                name="calls",
                match=Match(tool_results_since_user=0),
                reply=Reply(tool_calls=calls),
            ),
            Rule(name="answer", reply=Reply(text="Done.")),
        ]
    )


def visible(text: str) -> bool:
    """No hidden character of the script is drawn as itself in `text`."""
    return not any(c in text for c in (RLO, PDF, ZWSP, *TAGS))


def test_hidden_characters_in_a_call_are_shown_and_kept_where_the_person_decides(
    live_app: LiveApp,
    scripted_model: ScriptedServer,
    page: Any,
    new_context: Any,
    artifacts_dir: Path,
) -> None:
    scripted_model.load(script(), reset_log=True)
    start_notebook(
        page, live_app, "Who do we pay?", agent="function_calling", mode="tools"
    )
    step = page.locator("article.cell-step", has=page.locator(".tool-card.editable"))
    cards = step.locator(".tool-card.editable")
    cards.nth(2).wait_for()
    first, second, third = (cards.nth(i) for i in range(3))

    # The arguments: each hidden character an escape, the JSON the same value, a note naming them.
    args = first.get_by_label("Arguments for sql_query (JSON)")
    shown = args.input_value()
    assert RLO not in shown and ZWSP not in shown and TAGS[0] not in shown
    assert json.loads(shown) == {"sql": SQL}, (
        "the escapes are the characters themselves"
    )
    assert "\\u202e" in shown and "\\u200b" in shown and "\\udb40\\udc6f" in shown
    note = first.locator(".hidden-chars").inner_text()
    for name in (
        "right-to-left override (U+202E)",
        "zero-width space (U+200B)",
        "pop directional formatting (U+202C)",
        "2 × tag character (U+E006F…)",
    ):
        assert name in note, note
    # A tool name: [U+XXXX], in the card's head and in the note.
    assert second.locator(".tool-name").inner_text() == "sql_query[U+202E]"
    assert "right-to-left override" in second.locator(".hidden-chars").inner_text()
    assert note.startswith("Hidden characters: "), note
    # "Approve and always allow …" names the tool as the card does: no reversed button text.
    allow = step.locator("[data-action=allow-notebook]").inner_text()
    assert allow == (
        "Approve and always allow sql_query and sql_query[U+202E] in this notebook"
    ), allow
    # An emoji's own variation selector is not hidden text: no note, drawn as it is.
    assert third.locator(".hidden-chars").count() == 0
    assert EMOJI in third.get_by_label("Arguments for sql_query (JSON)").input_value()

    # The inbox shows the same, in another tab.
    inbox = new_context().new_page()
    inbox.goto(f"{live_app.url}/inbox/")
    item = inbox.locator(".inbox-item")
    item.locator(".inbox-call").nth(2).wait_for()
    assert json.loads(item.locator(".args-input").first.input_value()) == {"sql": SQL}
    assert visible(item.locator(".args-input").first.input_value())
    assert item.locator(".hidden-chars").count() == 2
    assert item.locator(".inbox-call-label code").nth(1).inner_text() == (
        "sql_query[U+202E]"
    )
    shots_at_both_sizes(inbox, artifacts_dir, "hidden-chars-inbox")
    inbox.close()

    shots_at_both_sizes(page, artifacts_dir, "hidden-chars-card")
    # The person edits the text they can read; the hidden characters stay as they were.
    args.fill(shown.replace("pay ACME", "pay ACME Ltd"))
    second.get_by_label("Reason to reject").fill("its name hides a character")
    second.get_by_role("button", name="Reject call").click()
    second.locator(".decision-rejected").wait_for()
    sent_before = len(scripted_model.requests)
    step.get_by_role("button", name="Approve and run").click()
    page.locator(".cell-answer").wait_for()

    # What ran: the edited query with every hidden character, the rejected call not at all.
    assert len(scripted_model.requests) == sent_before + 1
    request = scripted_model.requests[-1]
    calls = {
        c["id"]: json.loads(c["function"]["arguments"])
        for m in request.messages
        for c in m.get("tool_calls") or []
    }
    assert calls["q1"] == {"sql": SQL.replace("pay ACME", "pay ACME Ltd")}, calls
    results = {
        m["tool_call_id"]: m["content"]
        for m in request.messages
        if m.get("role") == "tool"
    }
    assert json.loads(results["q1"])["rows"] == [[f"pay ACME Ltd{ZWSP}"]]
    assert "rejected by user: its name hides a character" in results["q2"]

    # The card of the call that ran shows it the same way.
    ran = page.locator(".tool-card.status-completed", has_text="ACME Ltd")
    ran.wait_for()
    ran_args = ran.locator(".tool-args").inner_text()
    assert json.loads(ran_args) == {"sql": SQL.replace("pay ACME", "pay ACME Ltd")}
    assert visible(ran_args)
    assert "right-to-left override" in ran.locator(".hidden-chars").inner_text()
    # The DAG labels the rejected call with its name made visible.
    labels = page.evaluate(
        "() => window.agentui.dag.cy.nodes().map((n) => n.data('label'))"
    )
    assert "sql_query[U+202E]" in labels, labels
    assert not any(RLO in str(label) for label in labels)
    shots_at_both_sizes(page, artifacts_dir, "hidden-chars-ran")
    assert page.console_errors == []
