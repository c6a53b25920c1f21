"""The Content-Security-Policy and the other security headers on every response, and the endpoint
browsers report CSP violations to (agentui/security.py)."""

from __future__ import annotations

import json
import logging

import pytest
from django.conf import settings
from django.test import AsyncClient, Client
from django.utils.module_loading import import_string

pytestmark = [pytest.mark.db, pytest.mark.django_db]

HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
}


def directives(policy: str) -> dict[str, list[str]]:
    return {
        part.split()[0]: part.split()[1:] for part in policy.split(";") if part.strip()
    }


@pytest.mark.parametrize(
    "path", ["/login/", "/static/js/render/chart.js", "/api/v1/openapi.json"]
)
def test_every_response_has_the_policy_and_the_headers(path: str) -> None:
    response = Client().get(path, HTTP_HOST="localhost")
    policy = directives(response["Content-Security-Policy"])
    assert policy["default-src"] == ["'self'"]
    assert policy["script-src"][0] == "'self'"
    assert policy["style-src"] == ["'self'"]
    assert policy["connect-src"] == ["'self'", "ws://localhost"]
    assert policy["img-src"] == ["'self'", "data:", "blob:"]
    for name in ("object-src", "frame-ancestors", "base-uri"):
        assert policy[name] == ["'none'"]
    assert policy["form-action"] == ["'self'"]
    assert policy["report-uri"] == ["/csp-report/"]
    assert "unsafe" not in response["Content-Security-Policy"]
    for name, value in HEADERS.items():
        assert response[name] == value
    if not path.startswith("/static/"):  # (files: frame-ancestors says it)
        assert response["X-Frame-Options"] == "DENY"


async def test_under_asgi_static_files_are_served_and_the_chain_stays_async() -> None:
    """One sync-only middleware makes Django run every request's chain in a thread, where an
    async view's background work can wait for that thread forever (agentui/static_files.py)."""
    sync_only = [
        name
        for name in settings.MIDDLEWARE
        if not getattr(import_string(name), "async_capable", False)
    ]
    assert sync_only == []
    response = await AsyncClient().get(
        "/static/js/render/chart.js", HTTP_HOST="localhost"
    )
    body = b"".join(response.streaming_content)  # a file: read in this thread
    assert response.status_code == 200 and b"export" in body
    assert "default-src 'self'" in response["Content-Security-Policy"]
    missing = await AsyncClient().get(
        "/static/js/nothing-here.js", HTTP_HOST="localhost"
    )
    assert missing.status_code == 404


def test_a_page_with_a_script_carries_the_nonce_of_its_policy(
    django_user_model: type,
) -> None:
    client = Client()
    client.force_login(django_user_model.objects.create_user("ana"))
    response = client.get("/traces/", HTTP_HOST="localhost")
    nonces = [
        s for s in directives(response["Content-Security-Policy"])["script-src"][1:]
    ]
    assert len(nonces) == 1 and nonces[0].startswith("'nonce-")
    assert f'nonce="{nonces[0][7:-1]}"' in response.content.decode()


def test_the_websocket_origin_follows_tls() -> None:
    response = Client().get("/login/", HTTP_HOST="localhost", secure=True)
    policy = directives(response["Content-Security-Policy"])
    assert policy["connect-src"] == ["'self'", "wss://localhost"]


REPORT = {
    "csp-report": {
        "document-uri": "http://localhost/tasks/1/",
        "violated-directive": "img-src",
        "effective-directive": "img-src",
        "blocked-uri": "http://evil.example/?data=secret",
        "original-policy": "default-src 'self'",
    }
}


def test_a_report_is_counted_and_logged_as_one_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from agentui.security import REPORTS

    before = REPORTS.total
    with caplog.at_level(logging.WARNING, logger="agentui.csp"):
        response = Client().post(
            "/csp-report/",
            json.dumps(REPORT),
            content_type="application/csp-report",
            HTTP_HOST="localhost",
        )
    assert response.status_code == 204
    assert REPORTS.total == before + 1
    [line] = [r.getMessage() for r in caplog.records if r.name == "agentui.csp"]
    assert "http://evil.example/?data=secret" in line and "img-src" in line
    assert "original-policy" not in line


def test_a_report_nested_too_deep_to_read_is_logged_as_unreadable(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Anyone may post a report: one JSON cannot read for its depth is a line, not a 500."""
    with caplog.at_level(logging.WARNING, logger="agentui.csp"):
        response = Client().post(
            "/csp-report/",
            "[" * 15_000,
            content_type="application/csp-report",
            HTTP_HOST="localhost",
        )
    assert response.status_code == 204
    [line] = [r.getMessage() for r in caplog.records if r.name == "agentui.csp"]
    assert "unreadable" in line


def test_a_report_too_large_or_not_posted_is_refused() -> None:
    client = Client()
    big = client.post(
        "/csp-report/",
        "x" * (17 * 1024),
        content_type="application/csp-report",
        HTTP_HOST="localhost",
    )
    assert big.status_code == 413
    assert client.get("/csp-report/", HTTP_HOST="localhost").status_code == 405
