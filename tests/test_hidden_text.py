"""Characters a page would not show, in a name a model wrote, on the pages the server renders
(runs/web/hidden_text.py; the notebook's cards do the same in static/js/hidden.js, tested in
tests/test_browser_hidden_chars.py)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from runs.models import PolicyDecision, ToolPolicy
from runs.web.hidden_text import reveal
from tests.live_support import (
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
)

# the page test revokes through async_to_sync, whose ORM thread has its own connection (closed
# after every test of the module by close_db_connections)
pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]

RLO = "\u202e"


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
