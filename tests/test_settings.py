"""Settings come from the environment; each case imports them in a fresh process."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest
from conftest import ROOT

# Prints what the settings resolved to, as JSON.
SHOW_SETTINGS = """
import json
import django
from django.conf import settings
django.setup()  # runs.service (where llm_settings lives) loads the models
from runs.service.llm import llm_settings

db = settings.DATABASES["default"]
layer = settings.CHANNEL_LAYERS["default"]
llm = llm_settings(start_demo=False)
print(json.dumps({
    "engine": db["ENGINE"], "name": str(db["NAME"]), "host": db.get("HOST"),
    "port": db.get("PORT"), "user": db.get("USER"), "test_name": db.get("TEST", {}).get("NAME"),
    "layer": layer["BACKEND"], "layer_hosts": layer.get("CONFIG", {}).get("hosts"),
    "layer_prefix": layer.get("CONFIG", {}).get("prefix"),
    "turns": settings.CHANNEL_LAYERS.get("turns"),
    "is_demo": llm.is_demo, "model": llm.model, "base_url": llm.base_url, "label": llm.label,
    "debug": settings.DEBUG, "allowed_hosts": settings.ALLOWED_HOSTS,
    "secret_key": settings.SECRET_KEY,
    "tls": [settings.SECURE_SSL_REDIRECT, settings.SECURE_PROXY_SSL_HEADER,
            settings.SECURE_HSTS_SECONDS, settings.SECURE_HSTS_INCLUDE_SUBDOMAINS,
            settings.SECURE_HSTS_PRELOAD, settings.CSRF_TRUSTED_ORIGINS,
            settings.SESSION_COOKIE_SECURE, settings.CSRF_COOKIE_SECURE],
    "bodies": [settings.DATA_UPLOAD_MAX_MEMORY_SIZE, settings.FILE_UPLOAD_MAX_MEMORY_SIZE],
}))
"""

EnvFactory = Callable[..., dict[str, str]]


def resolved(subprocess_env: EnvFactory, **env: str | None) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-c", SHOW_SETTINGS],
        env=subprocess_env(**env),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def manage_check(
    subprocess_env: EnvFactory, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", "check"],
        env=subprocess_env(**env),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_defaults_are_sqlite_in_memory_layer_and_demo_model(
    subprocess_env: EnvFactory,
) -> None:
    s = resolved(subprocess_env)
    assert s["engine"] == "django.db.backends.sqlite3"
    assert s["name"] == str(ROOT / "db.sqlite3")
    assert s["layer"] == "agentui.inmemory_layer.InMemoryLayer"
    assert s["is_demo"] is True
    assert s["label"] == "Offline demo model — no LLM configured"
    assert s["debug"] is False  # on only with DEBUG=true
    assert s["allowed_hosts"] == ["localhost", "127.0.0.1", "[::1]"]
    assert s["tls"] == [False, None, 0, False, False, [], False, False]
    assert s["bodies"] == [2 * 1024**2, 64 * 1024]


def test_postgres_url_selects_postgres(subprocess_env: EnvFactory) -> None:
    s = resolved(subprocess_env, DATABASE_URL="postgres://postgres@127.0.0.1:5432/test")
    assert s["engine"] == "agentui.postgresql"  # Django's, with throttled health checks
    assert (s["name"], s["host"], s["port"], s["user"]) == (
        "test",
        "127.0.0.1",
        5432,
        "postgres",
    )
    assert s["test_name"] is None  # pytest-django then uses test_test


def test_test_database_name_can_be_set(subprocess_env: EnvFactory) -> None:
    s = resolved(
        subprocess_env,
        DATABASE_URL="postgres://postgres@127.0.0.1:5432/test",
        AGENTUI_TEST_DB_NAME="test_agentui_42",
    )
    assert s["test_name"] == "test_agentui_42"


def test_sqlite_url_is_accepted(subprocess_env: EnvFactory) -> None:
    s = resolved(
        subprocess_env, DATABASE_URL="sqlite:////tmp/agentui-elsewhere.sqlite3"
    )
    assert (s["engine"], s["name"]) == (
        "django.db.backends.sqlite3",
        "/tmp/agentui-elsewhere.sqlite3",
    )


def test_redis_url_selects_redis_channel_layer(subprocess_env: EnvFactory) -> None:
    s = resolved(subprocess_env, REDIS_URL="redis://127.0.0.1:6379/0")
    assert s["layer"] == "agentui.pubsub_layer.PubSubLayer"
    assert s["layer_hosts"] == [
        {
            "address": "redis://127.0.0.1:6379/0",
            "socket_timeout": 30,
            "max_connections": 1000,
        }
    ]
    # pub/sub channels are server-wide: the database number keeps two sites apart
    assert s["layer_prefix"] == "agentui.db0."
    other = resolved(subprocess_env, REDIS_URL="redis://127.0.0.1:6379/3")
    assert other["layer_prefix"] == "agentui.db3."


def test_turn_workers_add_a_queue_layer_beside_the_pub_sub_one(
    subprocess_env: EnvFactory,
) -> None:
    assert (
        resolved(subprocess_env, REDIS_URL="redis://127.0.0.1:6379/0")["turns"] is None
    )
    s = resolved(
        subprocess_env,
        REDIS_URL="redis://127.0.0.1:6379/2",
        AGENTUI_TURN_WORKERS="1",
        AGENTUI_TURN_QUEUE_CAPACITY="7",
    )
    assert s["layer"] == "agentui.pubsub_layer.PubSubLayer"
    # a queue: each action is taken by one worker (a pub/sub channel reaches every worker)
    assert s["turns"]["BACKEND"] == "channels_redis.core.RedisChannelLayer"
    assert s["turns"]["CONFIG"]["hosts"] == [{"address": "redis://127.0.0.1:6379/2"}]
    assert s["turns"]["CONFIG"]["channel_capacity"] == {"agentui.actions": 7}
    assert s["turns"]["CONFIG"]["capacity"] == 1000  # the web processes' reply channels


def test_turn_workers_need_redis(subprocess_env: EnvFactory) -> None:
    result = manage_check(subprocess_env, AGENTUI_TURN_WORKERS="1")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "AGENTUI_TURN_WORKERS: needs REDIS_URL (the turn workers' queue is in Redis)"
    ]


def test_openai_key_selects_openai(subprocess_env: EnvFactory) -> None:
    s = resolved(subprocess_env, OPENAI_API_KEY="sk-test")
    assert s["is_demo"] is False
    assert s["base_url"] == "https://api.openai.com/v1"
    assert s["model"] == "gpt-4.1-mini"
    assert s["label"] == "gpt-4.1-mini at api.openai.com"


def test_local_server_and_model_are_honoured(subprocess_env: EnvFactory) -> None:
    s = resolved(
        subprocess_env,
        OPENAI_BASE_URL="http://localhost:11434/v1/",
        AGENTUI_MODEL="llama3.1",
    )
    assert s["is_demo"] is False
    assert (s["base_url"], s["model"]) == ("http://localhost:11434/v1", "llama3.1")
    assert s["label"] == "llama3.1 at localhost:11434"


def test_plain_settings_are_honoured(subprocess_env: EnvFactory) -> None:
    s = resolved(
        subprocess_env,
        SECRET_KEY="k" * 50,
        DEBUG="false",
        ALLOWED_HOSTS="agentui.example, 10.0.0.5",
    )
    assert s["secret_key"] == "k" * 50
    assert s["debug"] is False
    assert s["allowed_hosts"] == ["agentui.example", "10.0.0.5"]


def test_debug_and_tls_settings_are_honoured(subprocess_env: EnvFactory) -> None:
    s = resolved(
        subprocess_env,
        DEBUG="true",
        SECURE_SSL_REDIRECT="true",
        SECURE_PROXY_SSL_HEADER="X-Forwarded-Proto, https",
        SECURE_HSTS_SECONDS="31536000",
        SECURE_HSTS_INCLUDE_SUBDOMAINS="true",
        SECURE_HSTS_PRELOAD="yes",
        CSRF_TRUSTED_ORIGINS="https://agentui.example, https://*.example.org:8443/",
        SESSION_COOKIE_SECURE="1",
        CSRF_COOKIE_SECURE="on",
        AGENTUI_MAX_BODY_BYTES="1048576",
    )
    assert s["debug"] is True
    assert s["tls"] == [
        True,
        ["HTTP_X_FORWARDED_PROTO", "https"],
        31536000,
        True,
        True,
        ["https://agentui.example", "https://*.example.org:8443"],
        True,
        True,
    ]
    assert s["bodies"] == [1048576, 64 * 1024]


def test_generated_secret_key_is_kept(subprocess_env: EnvFactory) -> None:
    first = resolved(subprocess_env, SECRET_KEY=None)
    second = resolved(subprocess_env, SECRET_KEY=None)
    assert len(str(first["secret_key"])) >= 50
    assert first["secret_key"] == second["secret_key"]
    assert (ROOT / ".local" / "secret_key").read_text().strip() == first["secret_key"]


@pytest.mark.parametrize(
    ("name", "value", "reason"),
    [
        ("DATABASE_URL", "mysql+foo://user@host/db", "unsupported scheme 'mysql+foo'"),
        ("DATABASE_URL", "postgres://user@host:notaport/db", "bad port"),
        ("DATABASE_URL", "postgres://user@host:5432", "no database name"),
        ("DATABASE_URL", "redis://127.0.0.1:6379/0", "unsupported scheme 'redis'"),
        ("REDIS_URL", "redis://127.0.0.1:99999/0", "bad port"),
        ("REDIS_URL", "memcached://127.0.0.1:11211", "unsupported scheme 'memcached'"),
        ("REDIS_URL", "redis://127.0.0.1:6379/zero", "is not a number"),
        ("OPENAI_BASE_URL", "localhost:11434", "expected an http(s) URL"),
        ("DEBUG", "perhaps", "expected true or false"),
        ("AGENTUI_LLM_TIMEOUT_S", "soon", "expected seconds (>= 0), got 'soon'"),
        ("AGENTUI_LLM_MAX_RETRIES", "-1", "expected a whole number >= 0"),
        ("AGENTUI_LEASE_STALE_S", "half a minute", "expected seconds"),
        ("ALLOWED_HOSTS", "https://agentui.example", "is not a host name"),
        ("CSRF_TRUSTED_ORIGINS", "agentui.example", "is not an origin"),
        ("CSRF_TRUSTED_ORIGINS", "https://agentui.example/app", "has a path"),
        ("SECURE_SSL_REDIRECT", "always", "expected true or false"),
        ("SECURE_PROXY_SSL_HEADER", "X-Forwarded-Proto", "expected a header and its"),
        ("SECURE_HSTS_SECONDS", "a year", "expected a whole number of seconds"),
        ("SECURE_HSTS_PRELOAD", "true", "preload lists need"),
        ("SECURE_HSTS_INCLUDE_SUBDOMAINS", "true", "without SECURE_HSTS_SECONDS"),
        ("SESSION_COOKIE_SECURE", "https", "expected true or false"),
        ("CSRF_COOKIE_SECURE", "2", "expected true or false"),
        ("AGENTUI_LLM_TRANSPORT", "curl", "expected aiohttp or httpx, got 'curl'"),
    ],
)
def test_bad_setting_is_one_line_naming_it(
    subprocess_env: EnvFactory, name: str, value: str, reason: str
) -> None:
    extra = {"AGENTUI_MODEL": "m"} if name == "OPENAI_BASE_URL" else {}
    result = manage_check(subprocess_env, **{name: value, **extra})
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"{name}: ")
    assert reason in lines[0]


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"OPENAI_BASE_URL": "http://localhost:8080/v1"}, "AGENTUI_MODEL"),
        ({"AGENTUI_MODEL": "gpt-4o"}, "OPENAI_API_KEY"),
    ],
)
def test_incomplete_llm_settings_are_one_line(
    subprocess_env: EnvFactory, env: dict[str, str], named: str
) -> None:
    result = manage_check(subprocess_env, **env)
    assert result.returncode == 1
    assert result.stderr.strip().count("\n") == 0
    assert result.stderr.startswith(f"{named}: ")


def test_good_settings_pass_check(subprocess_env: EnvFactory) -> None:
    result = manage_check(subprocess_env)
    assert result.returncode == 0, result.stderr
    assert "no issues" in result.stdout
