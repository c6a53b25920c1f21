"""API tokens: stored only as a hash, shown once, revocable; `request_user` takes a token or
the session and refuses a bad or revoked token with 401."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.contrib.sessions.backends.db import SessionStore
from django.test import Client, RequestFactory

from runs.models import ApiToken
from runs.service.tokens import (
    AuthFailed,
    create_token,
    request_user,
    revoke_token,
    token_digest,
)

pytestmark = [pytest.mark.db, pytest.mark.django_db]


def user(name: str) -> object:
    return get_user_model().objects.create_user(username=name)


def bearer(token: str, method: str = "get") -> object:
    request = getattr(RequestFactory(), method)(
        "/api/x", HTTP_AUTHORIZATION=f"Bearer {token}"
    )
    request.user = AnonymousUser()
    return request


def test_a_token_is_stored_as_its_hash_only() -> None:
    alice = user("alice")
    row, token = create_token(alice, "script")
    assert token.startswith("agentui_") and len(token) > 40
    stored = ApiToken.objects.get(pk=row.pk)
    assert stored.digest == token_digest(token)
    values = [
        str(v) for v in ApiToken.objects.filter(pk=row.pk).values().get().values()
    ]
    assert token not in values
    assert token.startswith(stored.prefix) and len(stored.prefix) < len(token) / 3


def test_request_user_by_token_and_last_used() -> None:
    alice = user("alice")
    row, token = create_token(alice, "script")
    assert row.last_used_at is None
    assert request_user(bearer(token)) == alice
    row.refresh_from_db()
    assert row.last_used_at is not None
    # POST with a token needs no CSRF token
    assert request_user(bearer(token, "post")) == alice


@pytest.mark.parametrize(
    "header, reason",
    [
        ("Bearer agentui_nope", "Unknown API token."),
        ("Token abc", "Authorization header must be 'Bearer <API token>'."),
        ("Bearer ", "Authorization header must be 'Bearer <API token>'."),
    ],
)
def test_bad_tokens_fail_with_401(header: str, reason: str) -> None:
    request = RequestFactory().get("/api/x", HTTP_AUTHORIZATION=header)
    request.user = AnonymousUser()
    with pytest.raises(AuthFailed) as failed:
        request_user(request)
    assert (failed.value.status, failed.value.reason) == (401, reason)


def test_a_revoked_token_fails_even_with_a_session() -> None:
    alice = user("alice")
    row, token = create_token(alice, "script")
    assert revoke_token(alice, row.pk)
    assert not revoke_token(alice, row.pk)  # already revoked
    request = bearer(token)
    request.user = alice  # a session too: the token still decides
    with pytest.raises(AuthFailed) as failed:
        request_user(request)
    assert failed.value.status == 401
    assert "revoked" in failed.value.reason


def test_nobody_revokes_someone_elses_token() -> None:
    alice, bob = user("alice"), user("bob")
    row, token = create_token(alice, "script")
    assert not revoke_token(bob, row.pk)
    assert request_user(bearer(token)) == alice


def test_an_inactive_users_token_fails() -> None:
    alice = user("alice")
    _, token = create_token(alice, "script")
    get_user_model().objects.filter(pk=alice.pk).update(is_active=False)
    with pytest.raises(AuthFailed):
        request_user(bearer(token))


def test_session_fallback_and_csrf_for_unsafe_methods() -> None:
    alice = user("alice")
    factory = RequestFactory()
    anonymous = factory.get("/api/x")
    anonymous.user = AnonymousUser()
    assert request_user(anonymous) is None

    get = factory.get("/api/x")
    get.user = alice
    assert request_user(get) == alice

    post = factory.post("/api/x")
    post.user = alice
    post.session = SessionStore()
    with pytest.raises(AuthFailed) as failed:
        request_user(post)
    assert failed.value.status == 403 and "CSRF" in failed.value.reason


def test_settings_page_creates_shows_once_and_revokes() -> None:
    alice, bob = user("alice"), user("bob")
    client = Client()
    client.force_login(alice)
    page = client.get("/settings/tokens/")
    assert page.status_code == 200 and b"No tokens yet." in page.content

    created = client.post("/settings/tokens/", {"name": "nightly report"})
    assert created.status_code == 201
    row = ApiToken.objects.get(user=alice)
    token = created.context["new_token"]
    assert token_digest(token) == row.digest
    assert token.encode() in created.content
    again = client.get("/settings/tokens/")
    assert token.encode() not in again.content  # shown once
    assert b"nightly report" in again.content and row.prefix.encode() in again.content

    bob_client = Client()
    bob_client.force_login(bob)
    assert b"nightly report" not in bob_client.get("/settings/tokens/").content
    bob_client.post(f"/settings/tokens/{row.pk}/revoke")
    row.refresh_from_db()
    assert row.revoked_at is None  # not bob's to revoke

    client.post(f"/settings/tokens/{row.pk}/revoke", {"confirmed": "yes"})
    row.refresh_from_db()
    assert row.revoked_at is not None
    assert b"revoked" in client.get("/settings/tokens/").content


@pytest.mark.parametrize(
    "name, message",
    [
        ("", "Give the token a name"),
        ("x" * 101, "at most 100 characters"),
        ("nul\x00name", "The name"),
    ],
)
def test_a_bad_name_is_refused_and_kept(name: str, message: str) -> None:
    alice = user("alice")
    client = Client()
    client.force_login(alice)
    refused = client.post("/settings/tokens/", {"name": name})
    assert refused.status_code == 400
    assert message in refused.context["error"]
    assert not ApiToken.objects.exists()


def test_the_header_links_to_the_settings_page() -> None:
    client = Client()
    client.force_login(user("alice"))
    assert b'href="/settings/tokens/"' in client.get("/").content
