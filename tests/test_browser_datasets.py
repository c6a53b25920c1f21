"""Datasets in Chromium (issue 46 item 3): two notebooks picked in the traces list become a new
dataset; its page (under the Review menu) shows them as examples, with the model's hostile
answer as text; the export link downloads JSONL items; a bad import names its rows' lines and
changes nothing; removing an example makes a new version while the old one keeps it. axe finds
nothing serious on either page.

Screenshots go to test-artifacts/datasets-*.png.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from axe_support import assert_accessible
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

from runs.engine.testing import Reply, Rule, Script, ScriptedServer

pytestmark = pytest.mark.browser

# model output that would run script or draw markup if it were ever taken as HTML
HOSTILE_ANSWER = (
    "The total is <b>5</b>. <img src=x onerror=\"document.title='pwned'\">"
    "<script>document.title='pwned'</script> Trust me."
)
HAND_MADE = {
    "id": "by-hand",
    "input": "By hand",
    "expected_output": {
        "answer": "Yes.",
        "trajectory": [
            {
                "tool": "sql_query",
                "arguments": {"query": "<img src=x onerror=alert(1)>"},
            }
        ],
        "must_not_call": [{"tool": "chart", "reason": "<b>a table was asked for</b>"}],
    },
}
BAD_CSV = "input,expected_output\nfine,yes\n,no input here\nalso fine,ok\n"


def test_two_picked_notebooks_become_a_dataset_with_versions(
    live_app: LiveApp,
    scripted_model: ScriptedServer,
    page: Any,
    artifacts_dir: Path,
    tmp_path: Path,
) -> None:
    scripted_model.load(
        Script(rules=[Rule(name="answer", reply=Reply(text=HOSTILE_ANSWER))]),
        reset_log=True,
    )
    ids = []
    for question in ("What is the total?", "And the total again?"):
        ids.append(
            start_notebook(
                page, live_app, question, agent="function_calling", mode="auto"
            )
        )
        page.locator(".cell-answer").wait_for()

    page.goto(f"{live_app.url}/traces/")
    for task_id in ids:
        page.locator(f"tr[data-task-id='{task_id}']").get_by_role("checkbox").check()
    add = page.get_by_role("button", name="Add 2 notebooks to dataset")
    assert page.get_by_label("Dataset").input_value() == "new"
    page.get_by_label("Name").fill("Totals <i>regressions</i>")
    shots_at_both_sizes(page, artifacts_dir, "datasets-01-traces-pick")
    add.click()
    added = page.locator("#dataset-added")
    added.wait_for()
    assert "version 1 holds 2 examples" in added.inner_text(), added.inner_text()
    assert page.locator("tr input.pick:checked").count() == 0
    added.get_by_role("link").click()

    page.wait_for_url("**/review/datasets/*/")
    assert (
        page.get_by_role("link", name="Review", exact=True).get_attribute(
            "aria-current"
        )
        == "page"
    )
    heading = page.get_by_role("heading", level=1)
    assert heading.inner_text() == "Totals <i>regressions</i>"
    rows = page.locator("table.dataset-examples tbody tr")
    assert rows.count() == 2
    messages = rows.locator(".example-message").all_inner_texts()
    assert messages == ["What is the total?", "And the total again?"]
    answers = rows.locator(".example-answer-text").all_inner_texts()
    assert answers == [HOSTILE_ANSWER, HOSTILE_ANSWER]  # as text: every tag shown
    assert (
        page.locator("table.dataset-examples").locator("script, img, b, i").count() == 0
    )
    assert page.locator("h1 i").count() == 0
    assert page.title() != "pwned"
    links = rows.locator(".example-meta a").evaluate_all(
        "links => links.map(a => a.getAttribute('href'))"
    )
    assert links == [f"/traces/{ids[0]}/", f"/traces/{ids[1]}/"]
    shots_at_both_sizes(page, artifacts_dir, "datasets-02-dataset-page")
    assert_accessible(page, "the dataset page")

    # the export link downloads JSONL whose lines are dataset items
    export = page.locator("#export-link")
    href = export.get_attribute("href")
    assert href and href.endswith("/export?version=1")
    body = page.request.get(f"{live_app.url}{href}")
    assert body.headers["content-type"] == "application/jsonl"
    items = [json.loads(line) for line in body.text().splitlines()]
    assert [set(i) for i in items] == [
        {"id", "input", "expected_output", "metadata"}
    ] * 2
    assert items[0]["expected_output"]["answer"] == HOSTILE_ANSWER
    assert items[1]["metadata"]["source_notebook"] == ids[1]

    # a bad file is refused with its row's line, and nothing is imported
    bad = tmp_path / "rows.csv"
    bad.write_text(BAD_CSV)
    page.get_by_label("Import examples").set_input_files(str(bad))
    page.get_by_role("button", name="Import as a new version").click()
    problem = page.locator("#import-error")
    problem.wait_for()
    assert "Nothing was imported" in problem.inner_text()
    assert "line 3: input.message" in problem.inner_text()
    assert page.locator("table.versions tbody tr").count() == 1
    shots_at_both_sizes(page, artifacts_dir, "datasets-03-import-refused")

    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps(HAND_MADE) + "\n")
    page.get_by_label("Import examples").set_input_files(str(good))
    page.get_by_role("button", name="Import as a new version").click()
    page.locator(".message-success", has_text="Imported into version 2").wait_for()
    assert page.locator("table.dataset-examples tbody tr").count() == 3
    hand = page.locator("tr[data-example-id='by-hand']")
    assert hand.locator(".example-calls li").all_inner_texts() == [
        'sql_query({"query": "<img src=x onerror=alert(1)>"})'
    ]
    refused = hand.locator(".example-refused li").inner_text()
    assert "must not call" in refused and "chart({})" in refused
    assert "— <b>a table was asked for</b>" in refused
    assert hand.locator("img, b").count() == 0

    # the expected answer edited on the page: a new version, the rest of the example kept
    hand.get_by_text("Edit the expected answer").click()
    box = hand.get_by_label("Expected answer of example 3")
    assert box.input_value() == "Yes."
    box.fill("Yes, from the north table.")
    shots_at_both_sizes(page, artifacts_dir, "datasets-04-edit-answer")
    hand.get_by_role("button", name="Save as a new version").click()
    page.locator(".message-success", has_text="Saved as version 3").wait_for()
    assert (
        hand.locator(".example-answer-text").inner_text()
        == "Yes, from the north table."
    )
    assert hand.locator(".example-calls li").count() == 1

    # removing is a new version; the version before keeps the example
    first = page.locator("table.dataset-examples tbody tr").first
    first.get_by_role("button", name="Remove example 1").click()
    page.locator(".message-success", has_text="version 3 still has it").wait_for()
    assert page.locator("table.dataset-examples tbody tr").count() == 2
    version_rows = page.locator("table.versions tbody tr")
    assert version_rows.count() == 4
    assert "+0 −1 ~0" in version_rows.first.locator(".version-change").inner_text()
    assert "+0 −0 ~1" in version_rows.nth(1).locator(".version-change").inner_text()
    assert (
        "Against version 3: 0 added, 1 removed"
        in page.locator("#version-diff").inner_text()
    )
    page.get_by_role("link", name="v1", exact=True).click()
    page.wait_for_url("**?version=1")
    assert page.locator("table.dataset-examples tbody tr").count() == 2
    assert page.get_by_role("button", name="Remove example 1").count() == 0
    shots_at_both_sizes(page, artifacts_dir, "datasets-05-old-version")

    page.get_by_role("link", name="Datasets", exact=True).first.click()
    listed = page.locator("table.datasets tbody tr")
    assert listed.count() == 1 and "Totals <i>regressions</i>" in listed.inner_text()
    assert "v4" in listed.inner_text()
    shots_at_both_sizes(page, artifacts_dir, "datasets-06-list")
    assert_accessible(page, "the datasets list")
    dataset_id = listed.get_attribute("data-dataset-id")
    refused = [f"HTTP 422 {live_app.url}/review/datasets/{dataset_id}/import"]
    assert page.console_errors == refused, page.console_errors


def test_the_demo_dataset_is_one_click_away(live_app: LiveApp, page: Any) -> None:
    page.goto(f"{live_app.url}/review/datasets/")
    page.get_by_role(
        "button", name="Make the demo dataset from the example prompts"
    ).click()
    page.wait_for_url("**/review/datasets/*/")
    assert page.locator("table.dataset-examples tbody tr").count() >= 5
    assert page.locator("table.dataset-examples .badge").first.inner_text()  # the agent
    assert not page.console_errors, page.console_errors
