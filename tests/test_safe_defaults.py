"""Safe defaults (issue 24, item 7): DEBUG off unless asked for, JSON errors for the APIs.

The settings themselves (DEBUG's default, the TLS settings and their checks) are in
tests/test_settings.py. Here: the error answers in-process (tests run with DEBUG off), and the
app as `make run` serves it with DEBUG off: static files, the login link, error pages.
"""

from __future__ import annotations

import http.cookiejar
import json
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from browser_helpers import LiveApp, served_app
from django.test import Client, RequestFactory, override_settings
from django.urls import get_resolver

from agentui import errors
from tests.live_support import make_notebook, make_user


def _json(response: Any) -> dict[str, Any]:
    assert response["Content-Type"] == "application/json", response.content[:200]
    data: dict[str, Any] = json.loads(response.content)
    return data


@pytest.mark.parametrize("path", ["/api/nope", "/api/v1/nope", "/agui/nope/deeper"])
def test_an_unknown_api_address_is_a_json_404(path: str) -> None:
    response = Client().get(path)
    assert response.status_code == 404
    body = _json(response)
    assert body["code"] == "not_found" and body["error"]
    assert ("detail" in body) == path.startswith("/api/v1/")  # the REST API's shape


def test_an_unknown_page_is_a_plain_404_without_the_url_map() -> None:
    response = Client().get("/no-such-page/")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")
    assert b"api/v1/" not in response.content and b"URLconf" not in response.content


@pytest.mark.db
@pytest.mark.django_db
def test_api_refusals_are_json_400_403_and_413() -> None:
    user = make_user()
    task = make_notebook(user)
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    # no CSRF token on the page's JSON endpoint
    response = client.post(
        f"/api/tasks/{task.pk}/annotations/",
        {"comment": "x"},
        content_type="application/json",
    )
    assert response.status_code == 403 and _json(response)["code"] == "csrf_failed"
    # a host that is not ours
    response = Client().get("/api/tasks/", HTTP_HOST="evil.example")
    assert response.status_code == 400 and _json(response)["code"] == "bad_request"
    # over Django's own body check (behind the ASGI guard): 413, not a 500 with a traceback
    token_client = Client()
    token_client.force_login(user)
    with override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1000):
        response = token_client.post(
            f"/api/tasks/{task.pk}/annotations/",
            {"comment": "x" * 5000},
            content_type="application/json",
        )
    assert response.status_code == 413
    assert _json(response)["code"] == "too_large"
    # the same from the REST API, in its own shape
    with override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1000):
        response = token_client.post(
            "/api/v1/notebooks/",
            {"text": "x" * 5000, "agent": "function_calling"},
            content_type="application/json",
        )
    assert response.status_code == 413
    body = _json(response)
    assert body["code"] == "too_large" and body["detail"] == body["error"]


def test_a_server_error_under_an_api_is_json_without_a_traceback() -> None:
    assert get_resolver().resolve_error_handler(500) is errors.server_error
    response = errors.server_error(RequestFactory().get("/api/v1/notebooks"))
    assert response.status_code == 500
    body = _json(response)
    assert body["code"] == "server_error" and "Traceback" not in body["error"]
    page = errors.server_error(RequestFactory().get("/notebooks/1/"))
    assert page.status_code == 500 and page["Content-Type"].startswith("text/html")


@pytest.fixture
def served(subprocess_env: Callable[..., dict[str, str]]) -> Iterator[LiveApp]:
    with served_app(subprocess_env(DEBUG="false"), prefix="agentui-nodebug-") as app:
        yield app


def test_with_debug_off_the_app_serves_static_files_logs_in_and_answers_errors(
    served: LiveApp,
) -> None:
    app = served
    with urllib.request.urlopen(f"{app.url}/static/js/notebook.js", timeout=20) as js:
        assert js.status == 200 and "javascript" in js.headers["Content-Type"]
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    with opener.open(app.login_link(), timeout=20) as start:
        assert start.status == 200 and start.url == f"{app.url}/"
        assert b"Start a notebook" in start.read()
    with pytest.raises(urllib.error.HTTPError) as missing:
        opener.open(f"{app.url}/no-such-page/", timeout=20)
    assert missing.value.code == 404
    assert b"URLconf" not in missing.value.read()
    with pytest.raises(urllib.error.HTTPError) as missing:
        opener.open(f"{app.url}/api/v1/no-such-thing", timeout=20)
    assert missing.value.code == 404
    assert json.loads(missing.value.read())["code"] == "not_found"
