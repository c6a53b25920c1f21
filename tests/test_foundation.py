"""The app shell: login, one-time login links, the start page, preflight."""

from __future__ import annotations

import io
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import openai
import pytest
from conftest import ROOT
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client

from agentui import login_limit
from runs.demo import server as demo
from runs.engine.testing import Match, Reply, Rule, Script
from runs.management.commands import login_link as login_link_command
from runs.service import make_login_token
from runs.service.llm import DEMO_LABEL, llm_settings


def _no_llm(settings: Any) -> None:
    settings.OPENAI_API_KEY = ""
    settings.OPENAI_BASE_URL = ""
    settings.AGENTUI_MODEL = ""


# --- Login ------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/", "/admin/"])
@pytest.mark.db
@pytest.mark.django_db
def test_pages_need_login(client: Client, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 302
    assert (
        response["Location"].startswith("/login/")
        or "/admin/login/" in response["Location"]
    )


@pytest.mark.db
@pytest.mark.django_db
def test_login_page_and_stylesheet_are_public(client: Client) -> None:
    assert client.get("/login/").status_code == 200
    css = client.get("/static/css/app.css")
    assert css.status_code == 200
    assert b"--status-interrupted" in b"".join(css.streaming_content)


@pytest.mark.db
@pytest.mark.django_db
def test_password_checks_per_address_are_limited(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each POST /login/ costs a password hash; past the limit an address is told to wait."""
    monkeypatch.setattr(login_limit, "ATTEMPTS", login_limit._Attempts())
    settings.AGENTUI_LOGIN_ATTEMPTS_PER_MINUTE = 3
    User.objects.create_user("ana", password="right horse battery")
    guesser = Client(REMOTE_ADDR="203.0.113.7")
    for guess in ("one", "two", "three"):
        wrong = guesser.post("/login/", {"username": "ana", "password": guess})
        assert wrong.status_code == 200 and b"match. Please try again" in wrong.content

    refused = guesser.post(
        "/login/", {"username": "ana", "password": "right horse battery"}
    )
    assert refused.status_code == 429
    assert 1 <= int(refused["Retry-After"]) <= 60
    assert b"Too many login attempts from your address" in refused.content
    assert _signed_in_as(guesser) is None  # the password was not even checked

    admin_login = guesser.post(  # nor through the admin's login page
        "/admin/login/", {"username": "ana", "password": "right horse battery"}
    )
    assert admin_login.status_code == 429
    assert Client().get("/admin/login/").status_code == 200  # still the admin's page

    ana = Client(REMOTE_ADDR="198.51.100.2")  # another address is not held up
    response = ana.post(
        "/login/", {"username": "ana", "password": "right horse battery"}
    )
    assert response.status_code == 302 and _signed_in_as(ana) == "ana"


@pytest.mark.db
@pytest.mark.django_db
def test_an_ipv6_client_is_counted_by_its_64_however_it_rotates_addresses(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(login_limit, "ATTEMPTS", login_limit._Attempts())
    settings.AGENTUI_LOGIN_ATTEMPTS_PER_MINUTE = 2
    User.objects.create_user("ana", password="right horse battery")

    def attempt(address: str) -> int:
        guess = {"username": "ana", "password": "wrong"}
        return Client(REMOTE_ADDR=address).post("/login/", guess).status_code

    assert attempt("2001:db8:1:2::1") == 200
    assert attempt("2001:db8:1:2:ffff:ffff:ffff:fffe") == 200
    assert attempt("2001:db8:1:2:abcd::9") == 429  # the same /64
    assert attempt("2001:db8:1:3::1") == 200  # the next /64 is someone else

    # IPv4 as itself, whether a dual-stack socket reports it mapped into IPv6 or not
    assert attempt("203.0.113.7") == 200
    assert attempt("::ffff:203.0.113.7") == 200
    assert attempt("::ffff:cb00:7107") == 429
    assert attempt("203.0.113.8") == 200


def test_clients_are_keyed_ipv4_as_is_ipv6_by_64_mapped_as_ipv4() -> None:
    key = login_limit.client_key
    assert key("198.51.100.2") == "198.51.100.2"
    assert key("2001:DB8:0:0:1::7") == "2001:db8::/64"
    assert key("::ffff:198.51.100.2") == "198.51.100.2"
    assert key("fe80::1%eth0") == "fe80::/64"
    assert key("unknown") == "unknown"


def test_a_flood_from_more_addresses_than_are_kept_locks_no_one_else_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the table full of running windows, a new client takes the oldest one's place
    instead of being refused."""
    monkeypatch.setattr(login_limit, "MAX_CLIENTS", 50)
    attempts = login_limit._Attempts()
    for n in range(50):  # 10.0.0.0 to 10.0.0.49, a window each, begun 0.1 s apart
        assert attempts.take(f"10.0.0.{n}", 1, now=100.0 + n / 10) == 0
    assert attempts.take("198.51.100.2", 1, now=130.0) == 0  # ana, mid-flood
    assert len(attempts.windows) == 50
    assert "10.0.0.0" not in attempts.windows  # the oldest window made room
    assert attempts.take("198.51.100.2", 1, now=131.0) > 0  # and ana is counted
    assert attempts.take("10.0.0.40", 1, now=131.0) > 0  # as are the ones kept

    # a client whose window ended and who tries again begins a new one, the newest
    assert attempts.take("10.0.0.1", 1, now=160.15) == 0
    assert attempts.take("192.0.2.1", 1, now=160.15) == 0
    assert "10.0.0.1" in attempts.windows and "10.0.0.2" not in attempts.windows


@pytest.mark.db
@pytest.mark.django_db
def test_login_link_works_exactly_once(client: Client) -> None:
    user = User.objects.create_user("ana")
    link = f"/login/{make_login_token(user)}/"

    response = client.get(link)
    assert (response.status_code, response["Location"]) == (302, "/")
    assert client.get("/").status_code == 200

    replay = Client().get(link)
    assert replay.status_code == 403
    assert b"no longer works" in replay.content
    assert Client().get("/").status_code == 302


def _signed_in_as(client: Client) -> str | None:
    user_id = client.session.get("_auth_user_id")
    return User.objects.get(pk=user_id).username if user_id else None


@pytest.mark.db
@pytest.mark.django_db
def test_login_link_asks_before_switching_a_browser_logged_in_as_someone_else() -> None:
    ana = User.objects.create_user("ana")
    mallory = User.objects.create_user("mallory")
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(ana)
    link = f"/login/{make_login_token(mallory)}/"

    asked = browser.get(link)
    assert asked.status_code == 200
    assert b"You are signed in as <strong>ana</strong>" in asked.content
    assert b"Continue as mallory" in asked.content
    assert _signed_in_as(browser) == "ana"
    mallory.refresh_from_db()
    assert mallory.last_login is None  # the link is not spent by asking

    # a POST from another site's page carries no CSRF token: refused, nothing switched
    assert browser.post(link).status_code == 403
    assert _signed_in_as(browser) == "ana"

    csrf = asked.context["csrf_token"]
    switched = browser.post(link, {"csrfmiddlewaretoken": str(csrf)})
    assert (switched.status_code, switched["Location"]) == (302, "/")
    assert _signed_in_as(browser) == "mallory"
    assert Client().get(link).status_code == 403  # spent


@pytest.mark.db
@pytest.mark.django_db
def test_login_link_of_the_same_user_logs_in_at_once_and_once() -> None:
    ana = User.objects.create_user("ana")
    browser = Client()
    browser.force_login(ana)
    link = f"/login/{make_login_token(ana)}/"
    assert browser.get(link).status_code == 302
    assert _signed_in_as(browser) == "ana"
    assert Client().get(link).status_code == 403


@pytest.mark.db
@pytest.mark.django_db
def test_login_link_rejects_forged_and_expired_tokens(
    client: Client, settings: Any
) -> None:
    user = User.objects.create_user("ben")
    token = make_login_token(user)
    assert client.get(f"/login/{token[:-2]}xx/").status_code == 403
    settings.AGENTUI_LOGIN_LINK_MAX_AGE = -1
    assert client.get(f"/login/{token}/").status_code == 403


@pytest.mark.db
@pytest.mark.django_db
def test_ensure_user_creates_one_user_with_a_working_link(client: Client) -> None:
    out = io.StringIO()
    call_command(
        "ensure_user", "--username", "cleo", "--base-url", "http://h:1", stdout=out
    )
    user = User.objects.get()
    assert (user.username, user.is_superuser, user.has_usable_password()) == (
        "cleo",
        True,
        False,
    )
    link = next(w for w in out.getvalue().split() if w.startswith("http://h:1/login/"))

    assert client.get(link.removeprefix("http://h:1")).status_code == 302
    assert client.get("/").status_code == 200

    again = io.StringIO()
    call_command("ensure_user", stdout=again)
    assert User.objects.count() == 1
    assert "login-link" in again.getvalue()


@pytest.mark.db
@pytest.mark.django_db
def test_login_link_command(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="no users"):
        call_command("login_link")
    User.objects.create_user("dan")
    monkeypatch.setenv("HOST", "0.0.0.0")
    monkeypatch.setenv("PORT", "8123")
    out = io.StringIO()
    call_command("login_link", stdout=out)
    assert out.getvalue().startswith("http://127.0.0.1:8123/login/")

    # Without HOST/PORT, the address the last `make run` served on (noted in .local/served).
    monkeypatch.delenv("HOST")
    monkeypatch.delenv("PORT")
    monkeypatch.setattr(login_link_command, "served_file", lambda: tmp_path / "served")
    out = io.StringIO()
    call_command("login_link", stdout=out)
    assert out.getvalue().startswith("http://127.0.0.1:8000/login/")
    (tmp_path / "served").write_text("localhost 8089\n")
    out = io.StringIO()
    call_command("login_link", stdout=out)
    assert out.getvalue().startswith("http://localhost:8089/login/")
    monkeypatch.setenv("PORT", "9001")  # given now: wins over the note
    out = io.StringIO()
    call_command("login_link", stdout=out)
    assert out.getvalue().startswith("http://localhost:9001/login/")

    User.objects.create_user("eve")
    with pytest.raises(CommandError, match="several users"):
        call_command("login_link")
    with pytest.raises(CommandError, match="no active user"):
        call_command("login_link", "zed")
    out = io.StringIO()
    call_command("login_link", "eve", stdout=out)
    assert "/login/" in out.getvalue()


# --- Start page ---------------------------------------------------------------


@pytest.fixture
def logged_in(client: Client) -> Client:
    client.force_login(User.objects.create_user("fay"))
    return client


@pytest.mark.db
@pytest.mark.django_db
def test_index_shows_demo_model(logged_in: Client, settings: Any) -> None:
    _no_llm(settings)
    page = logged_in.get("/").content.decode()
    assert "agentui is running" in page
    assert DEMO_LABEL in page
    assert "OPENAI_API_KEY" in page and "OPENAI_BASE_URL" in page
    assert 'href="/" aria-current="page">Home</a>' in page
    assert 'href="/new/">New notebook</a>' in page
    assert "/static/css/app.css" in page


@pytest.mark.db
@pytest.mark.django_db
def test_index_shows_configured_model(logged_in: Client, settings: Any) -> None:
    settings.OPENAI_API_KEY = ""
    settings.OPENAI_BASE_URL = "http://gpu-box:8000/v1"
    settings.AGENTUI_MODEL = "qwen2.5-7b"
    page = logged_in.get("/").content.decode()
    assert "qwen2.5-7b" in page
    assert "gpu-box:8000" in page
    assert DEMO_LABEL not in page


@pytest.mark.db
@pytest.mark.django_db
def test_index_lists_demo_examples(
    logged_in: Client, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_llm(settings)
    monkeypatch.setattr(demo, "_demos", {})
    monkeypatch.setattr(
        demo, "_server", None
    )  # leave a running demo server's script alone
    demo.register_demo(
        [
            Rule(
                name="hi",
                match=Match(last_user_contains="plan a trip"),
                reply=Reply(text="ok"),
            )
        ],
        example_prompt="Plan a trip to Lisbon",
        preset="planner",
    )
    page = logged_in.get("/").content.decode()
    assert "Plan a trip to Lisbon" in page
    assert "planner" in page


# --- The offline demo model -----------------------------------------------------


def test_demo_model_answers_honestly(settings: Any) -> None:
    _no_llm(settings)
    llm = llm_settings()
    assert llm.is_demo and llm.base_url.startswith("http://127.0.0.1:")
    assert llm_settings().base_url == llm.base_url  # one server per process

    client = openai.OpenAI(
        base_url=llm.base_url, api_key=llm.api_key, max_retries=0, timeout=10
    )
    reply = client.chat.completions.create(
        model=llm.model, messages=[{"role": "user", "content": "What is 2 + 2?"}]
    )
    text = reply.choices[0].message.content or ""
    assert "No real language model is configured" in text
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AGENTUI_MODEL"):
        assert name in text


def test_demo_server_starts_once_under_concurrent_first_use(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(demo, "_server", None)
    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            urls = set(pool.map(lambda _: demo.demo_base_url(), range(16)))
        assert len(urls) == 1
    finally:
        demo.stop_demo_server()


# --- Preflight ---------------------------------------------------------------------


def _preflight(
    subprocess_env: Callable[..., dict[str, str]], tmp_path: Any, **env: str
) -> Any:
    return subprocess.run(
        [sys.executable, "manage.py", "preflight", "--no-llm"],
        env=subprocess_env(
            **{"DATABASE_URL": f"sqlite:///{tmp_path}/db.sqlite3", **env}
        ),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_preflight_reports_unreachable_redis_in_one_line(
    subprocess_env: Callable[..., dict[str, str]], tmp_path: Any, unused_tcp_port: int
) -> None:
    url = f"redis://127.0.0.1:{unused_tcp_port}"
    result = _preflight(subprocess_env, tmp_path, REDIS_URL=url)
    assert result.returncode == 1
    assert (
        result.stderr.strip()
        == f"REDIS_URL: cannot connect to {url} (Connection refused)"
    )


def test_preflight_reports_unreachable_database_in_one_line(
    subprocess_env: Callable[..., dict[str, str]], tmp_path: Any, unused_tcp_port: int
) -> None:
    result = _preflight(
        subprocess_env,
        tmp_path,
        DATABASE_URL=f"postgres://agentui:secret@127.0.0.1:{unused_tcp_port}/notes",
    )
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"DATABASE_URL: cannot connect to postgresql://agentui@127.0.0.1:{unused_tcp_port}/notes"
        " (Connection refused)"
    )


def test_preflight_passes_on_defaults(
    subprocess_env: Callable[..., dict[str, str]], tmp_path: Any
) -> None:
    result = _preflight(subprocess_env, tmp_path)
    assert result.returncode == 0, result.stderr
    assert "ok: database: SQLite file" in result.stdout
    assert "in-memory" in result.stdout


@pytest.mark.db
@pytest.mark.django_db
def test_preflight_checks_the_llm_server(
    settings: Any, scripted_server: Callable[..., Any], unused_tcp_port: int
) -> None:
    server = scripted_server(Script(models=["llama3.1"]))
    settings.OPENAI_API_KEY = ""
    settings.OPENAI_BASE_URL = server.base_url
    settings.AGENTUI_MODEL = "llama3.1"
    out, err = io.StringIO(), io.StringIO()
    call_command("preflight", stdout=out, stderr=err)
    assert f"ok: LLM: llama3.1 at 127.0.0.1:{server.port}" in out.getvalue()
    assert err.getvalue() == ""

    settings.AGENTUI_MODEL = "mistral"
    call_command("preflight", stdout=out, stderr=err)
    assert (
        "warning: AGENTUI_MODEL: 'mistral' is not among the models served ("
        in err.getvalue()
    )

    settings.OPENAI_BASE_URL = f"http://127.0.0.1:{unused_tcp_port}/v1"
    err = io.StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command("preflight", stdout=io.StringIO(), stderr=err)
    assert exited.value.code == 1
    assert err.getvalue().strip() == (
        f"OPENAI_BASE_URL: cannot connect to http://127.0.0.1:{unused_tcp_port}/v1/models"
        " (Connection refused)"
    )


# --- ASGI ---------------------------------------------------------------------------


@pytest.mark.db
@pytest.mark.django_db(transaction=True)
async def test_asgi_application_serves_http() -> None:
    from channels.testing import HttpCommunicator

    from agentui.asgi import application

    response = await HttpCommunicator(
        application, "GET", "/login/", headers=[(b"host", b"localhost")]
    ).get_response()
    assert response["status"] == 200
    assert b"Log in" in response["body"]
