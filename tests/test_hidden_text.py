"""Characters a page would not show, in a name a model wrote, on the pages the server renders
(runs/web/hidden_text.py; the notebook's cards do the same in static/js/hidden.js, tested in
tests/test_browser_hidden_chars.py). The two lists are checked against each other here, over
every code point, so neither can drift from the other."""

from __future__ import annotations

import json
import shutil
import subprocess
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from runs.models import PolicyDecision, ToolPolicy
from runs.web.hidden_text import is_hidden, reveal
from tests.live_support import (
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
)

# the page test revokes through async_to_sync, whose ORM thread has its own connection (closed
# after every test of the module by close_db_connections)
pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]

RLO = "\u202e"
HIDDEN_JS = Path(__file__).resolve().parent.parent / "static" / "js" / "hidden.js"
# every code point the page's revealText shows as [U+…], printed as a JSON list
JS_HIDDEN_POINTS = """
const { revealText } = await import(process.argv[1]);
const shown = [];
for (let point = 0; point <= 0x10ffff; point++) {
  if (point >= 0xd800 && point <= 0xdfff) continue;
  const char = String.fromCodePoint(point);
  if (revealText(char) !== char) shown.push(point);
}
console.log(JSON.stringify(shown));
"""


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("sql_query", "sql_query"),
        (f"pay{RLO}dlrow", "pay[U+202E]dlrow"),
        ("a\u200bb\u2066c\u2069", "a[U+200B]b[U+2066]c[U+2069]"),
        ("ok\U000e0041\U000e007f", "ok[U+E0041][U+E007F]"),  # tag characters
        ("x\ufe0fy\u00adz\u2028", "x[U+FE0F]y[U+00AD]z[U+2028]"),
        ("tabs\tand\nlines\r", "tabs\tand\nlines\r"),
        ("Zürich 東京 مرحبا", "Zürich 東京 مرحبا"),
    ],
)
def test_each_hidden_character_is_written_as_its_code_point(
    text: str, shown: str
) -> None:
    assert reveal(text) == shown


def test_the_server_and_the_page_hide_the_same_characters(require_service: Any) -> None:
    """The Policies page (Python) shows exactly the characters the notebook's cards (JavaScript)
    show, but for those the two Unicode versions disagree on: characters Python's version has
    not assigned yet (node's may be newer) may be shown by the page alone."""
    node = shutil.which("node")
    if node is None:
        require_service(
            "node", "no node on PATH (make test installs nodejs where absent)"
        )
    done = subprocess.run(
        [str(node), "--input-type=module", "-e", JS_HIDDEN_POINTS, HIDDEN_JS.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    page = set(json.loads(done.stdout))
    server = {
        point
        for point in range(0x110000)
        if not 0xD800 <= point <= 0xDFFF and is_hidden(chr(point))
    }
    assert len(server) > 4000  # the tag characters alone are 4,096
    assert not server - page, sorted(map(hex, server - page))[:20]
    newer = [p for p in page - server if unicodedata.category(chr(p)) != "Cn"]
    assert not newer, sorted(map(hex, newer))[:20]


def test_the_policies_page_and_its_question_name_a_hidden_character() -> None:
    """A rule set from the card of a call whose tool name hides a character (the button said
    `sql_query[U+202E]`) reads the same on the Policies page and when revoking it."""
    person = get_user_model().objects.create_user(username="ana")
    rule = ToolPolicy.objects.create(
        owner=person,
        tool=f"sql_query{RLO}",
        decision=PolicyDecision.ALLOW,
        set_by="ana",
    )
    client = Client()
    client.force_login(person)
    page = client.get("/policies/").content.decode()
    assert RLO not in page
    assert "<code>sql_query[U+202E]</code>" in page
    assert "always allow sql_query[U+202E]" in page
    asked = client.post(f"/policies/{rule.pk}/revoke").content.decode()
    assert RLO not in asked and "always allow sql_query[U+202E]" in asked
    done = client.post(
        f"/policies/{rule.pk}/revoke", {"confirmed": "yes"}, follow=True
    ).content.decode()
    assert RLO not in done
    assert f"Rule #{rule.pk} revoked: always allow sql_query[U+202E]." in done
    assert f"#{rule.pk} always allow sql_query[U+202E] (" in done  # the revoked list
