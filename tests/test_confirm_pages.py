"""Destructive settings forms ask on the server too (runs/web/confirming.py): a POST without
`confirmed=yes` (the page's script had not run, or JavaScript is off) changes nothing and answers
with a page naming the thing; posting that page's form acts. Someone else's thing is not named."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from runs.models import ApiToken, PolicyDecision, ToolPolicy, UserPreset, Webhook
from runs.service.tokens import create_token
from tests.live_support import (
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
)

# transaction: revoking a rule goes through async_to_sync, whose ORM thread has its own connection
pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]


@dataclass(frozen=True)
class Destructive:
    """One destructive form: how to make its thing, its URL, and how to tell it is gone."""

    make: Callable[[Any], Any]
    url: str  # with {pk}
    question: str  # the confirmation page's heading
    button: str
    cancel_url: str
    gone: Callable[[Any], bool]
    done: str  # the message after it acted


def _token(owner: Any) -> ApiToken:
    return create_token(owner, "nightly report")[0]


def _rule(owner: Any) -> ToolPolicy:
    return ToolPolicy.objects.create(
        owner=owner, tool="add", decision=PolicyDecision.ALLOW, set_by="ana"
    )


def _webhook(owner: Any) -> Webhook:
    return Webhook.objects.create(
        owner=owner, url="https://hooks.example/agentui", events=["step.waiting"]
    )


def _preset(owner: Any) -> UserPreset:
    return UserPreset.objects.create(
        owner=owner, name="Shop visits", config={"agent": "react"}
    )


def _revoked(row: Any) -> bool:
    row.refresh_from_db()
    return row.revoked_at is not None


def _deleted(row: Any) -> bool:
    return not type(row).objects.filter(pk=row.pk).exists()


FORMS = {
    "api token": Destructive(
        _token,
        "/settings/tokens/{pk}/revoke",
        "Revoke the token “nightly report”?",
        "Revoke token",
        "/settings/tokens/",
        _revoked,
        "Token revoked.",
    ),
    "policy rule": Destructive(
        _rule,
        "/policies/{pk}/revoke",
        "Revoke rule #{pk}, “always allow add”?",
        "Revoke rule",
        "/policies/",
        _revoked,
        "revoked: always allow add",
    ),
    "webhook": Destructive(
        _webhook,
        "/settings/webhooks/{pk}/delete",
        "Delete the webhook to https://hooks.example/agentui?",
        "Delete webhook",
        "/settings/webhooks/",
        _deleted,
        "Webhook deleted",
    ),
    "preset": Destructive(
        _preset,
        "/presets/{pk}/delete",
        "Delete your preset “Shop visits”?",
        "Delete preset",
        "/new/",
        _deleted,
        "Deleted the preset.",
    ),
}


def login(name: str) -> tuple[Any, Client]:
    person = get_user_model().objects.create_user(username=name)
    client = Client(enforce_csrf_checks=True)
    client.force_login(person)
    return person, client


def csrf_of(client: Client, page: str) -> str:
    client.get(page)
    return client.cookies["csrftoken"].value


@pytest.mark.parametrize("kind", FORMS)
def test_unconfirmed_asks_and_changes_nothing_then_confirmed_acts(kind: str) -> None:
    form = FORMS[kind]
    person, client = login("ana")
    row = form.make(person)
    url = form.url.format(pk=row.pk)
    token = csrf_of(client, form.cancel_url)

    asked = client.post(url, {"csrfmiddlewaretoken": token, "confirmed": "no"})
    assert asked.status_code == 200
    assert not form.gone(row)
    body = asked.content.decode()
    question = form.question.format(pk=row.pk)
    assert f'<h1 id="confirm-heading">{question}</h1>' in body
    # the page's own form: this URL again, confirmed, with the CSRF token; Cancel goes back
    assert f'<form method="post" action="{url}"' in body
    assert '<input type="hidden" name="confirmed" value="yes">' in body
    assert 'name="csrfmiddlewaretoken"' in body
    assert f'<button type="submit" class="danger">{form.button}</button>' in body
    assert f'<a href="{form.cancel_url}">Cancel</a>' in body

    done = client.post(
        url, {"csrfmiddlewaretoken": token, "confirmed": "yes"}, follow=True
    )
    assert done.redirect_chain[0][1] == 302
    assert form.gone(row)
    assert form.done in done.content.decode()


@pytest.mark.parametrize("kind", FORMS)
def test_anothers_thing_is_neither_named_nor_touched(kind: str) -> None:
    form = FORMS[kind]
    owner, _ = login("ana")
    row = form.make(owner)
    _, stranger = login("bo")
    token = csrf_of(stranger, form.cancel_url)
    url = form.url.format(pk=row.pk)
    for confirmed in ("", "yes"):
        answer = stranger.post(
            url, {"csrfmiddlewaretoken": token, "confirmed": confirmed}, follow=True
        )
        assert answer.redirect_chain == [(form.cancel_url, 302)]
        assert form.question.format(pk=row.pk) not in answer.content.decode()
        assert not form.gone(row)


def test_the_page_asks_only_about_a_thing_still_there() -> None:
    person, client = login("ana")
    row = _token(person)
    token = csrf_of(client, "/settings/tokens/")
    url = f"/settings/tokens/{row.pk}/revoke"
    client.post(url, {"csrfmiddlewaretoken": token, "confirmed": "yes"})
    again = client.post(url, {"csrfmiddlewaretoken": token}, follow=True)
    assert "No such active token." in again.content.decode()
    assert "Revoke the token" not in again.content.decode()


def test_a_post_without_the_csrf_token_is_refused() -> None:
    person, client = login("ana")
    row = _token(person)
    refused = client.post(f"/settings/tokens/{row.pk}/revoke", {"confirmed": "yes"})
    assert refused.status_code == 403
    assert not _revoked(row)
