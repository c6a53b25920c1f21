"""runs/conf.py: every AGENTUI_* setting in one typed object, read from the environment once,
followed at use time, and the one source of docs/operations.md's table."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings

from runs.conf import (
    NAV,
    Conf,
    ConfError,
    conf,
    env_name,
    from_environ,
    from_settings_py,
    table,
    variable_name,
)
from runs.engine import ChatMessage
from runs.engine.testing import Fault, Reply, Rule, Script
from runs.management.commands.settings_table import BEGIN, END, docs_path

ROOT = Path(__file__).resolve().parents[1]


def test_docs_list_every_setting_as_the_object_declares_it() -> None:
    text = docs_path().read_text()
    listed = text.split(BEGIN + "\n", 1)[1].split(END, 1)[0]
    assert listed == table(), "run: manage.py settings_table --write"
    for field in fields(Conf):
        assert f"| `{variable_name(field)}` |" in listed


def test_every_agentui_setting_of_django_is_in_the_object() -> None:
    declared = {env_name(f) for f in fields(Conf)}
    in_django = {name for name in dir(settings) if name.startswith("AGENTUI_")}
    assert in_django == declared


def test_the_app_reads_agentui_settings_only_through_the_object() -> None:
    scattered = re.compile(
        r"""getattr\(\s*settings,\s*["']AGENTUI_|settings\.AGENTUI_"""
    )
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in [*ROOT.glob("runs/**/*.py"), *ROOT.glob("agentui/**/*.py")]
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if scattered.search(line)
    ]
    assert found == []


def test_values_come_from_the_environment_checked() -> None:
    values = from_environ(
        {
            "AGENTUI_LLM_TIMEOUT_S": "7.5",
            "AGENTUI_LLM_MAX_RETRIES": " 0 ",
            "AGENTUI_SQL_MAX_ROWS": "200.0",
            "AGENTUI_DELTA_GATHER_S": "1",
            "AGENTUI_LOG_LEVEL": "debug",
            "AGENTUI_MODEL": "",
        },
        base_dir=Path("/srv/agentui"),
    )
    assert (values.llm_timeout_s, values.llm_max_retries) == (7.5, 0)
    assert values.sql_max_rows == 200 and values.log_level == "DEBUG"
    assert values.delta_gather_s == 0.05  # never more than issue 15's bound
    assert values.model == "" and values.data_dir == "/srv/agentui/.local/data"
    # a token leaves as it comes, with or without Redis (agentui/pubsub_layer.py)
    assert from_environ({}, base_dir=Path("/x")).delta_gather_s == 0.0


@pytest.mark.parametrize(
    ("name", "raw", "reason"),
    [
        ("AGENTUI_LLM_TIMEOUT_S", "soon", "expected seconds (>= 0), got 'soon'"),
        ("AGENTUI_LLM_TIMEOUT_S", "-1", "expected seconds (>= 0)"),
        ("AGENTUI_LLM_TIMEOUT_S", "nan", "expected seconds (>= 0)"),
        ("AGENTUI_LLM_MAX_RETRIES", "2.5", "expected a whole number >= 0"),
        ("AGENTUI_MAX_IMAGE_BYTES", "0", "expected a whole number >= 1"),
        ("AGENTUI_LOG_LEVEL", "loud", "expected DEBUG, INFO, WARNING or ERROR"),
        (
            "AGENTUI_EVALUATORS",
            "myproject.evals.tone, tone",
            "expected dotted paths such as myproject.evals.tone, comma-separated; got 'tone'",
        ),
        ("AGENTUI_EVALUATORS", "evals.tone()", "got 'evals.tone()'"),
    ],
)
def test_a_malformed_value_is_one_error_naming_it(
    name: str, raw: str, reason: str
) -> None:
    with pytest.raises(ConfError) as error:
        from_environ({name: raw}, base_dir=Path("/x"))
    assert str(error.value).startswith(f"{name}: ") and reason in str(error.value)


def test_custom_evaluators_are_dotted_paths_read_comma_separated() -> None:
    read = from_environ(
        {"AGENTUI_EVALUATORS": " a.b.tone ,c.d , "}, base_dir=Path("/x")
    )
    assert read.evaluators == ("a.b.tone", "c.d")
    assert from_environ({}, base_dir=Path("/x")).evaluators == ()


def test_the_upload_limit_follows_the_image_and_body_limits() -> None:
    def made(**env: str) -> Conf:
        return from_environ(env, base_dir=Path("/x"))

    assert made().max_upload_body_bytes == 5 * 1024 * 1024 + 64 * 1024
    assert made(AGENTUI_MAX_BODY_BYTES="8000000").max_upload_body_bytes == 8_000_000
    assert (
        made(AGENTUI_MAX_IMAGE_BYTES="65536").max_upload_body_bytes == 2 * 1024 * 1024
    )
    with pytest.raises(
        ConfError, match="^AGENTUI_MAX_UPLOAD_BODY_BYTES: 70000 leaves no"
    ):
        made(AGENTUI_MAX_IMAGE_BYTES="80000", AGENTUI_MAX_UPLOAD_BODY_BYTES="70000")


def test_a_data_part_must_fit_in_a_request_body() -> None:
    def made(**env: str) -> Conf:
        return from_environ(env, base_dir=Path("/x"))

    assert made(AGENTUI_DATA_PART_BYTES="2097152").data_part_bytes == 2 * 1024 * 1024
    with pytest.raises(
        ConfError, match="^AGENTUI_DATA_PART_BYTES: 2097153 is more than a request body"
    ):
        made(AGENTUI_DATA_PART_BYTES="2097153")


# Module constants tests may still set: how the code works, not what an operator tunes.
INTERNAL_CONSTANTS = {
    "ALONE_FOR_S",  # agentui/pubsub_layer.py: the channel layer's own echo window
    "MAX_CLIENTS",  # agentui/login_limit.py: the memory bound of the login rate limiter
    "ATTEMPTS",  # agentui/login_limit.py: the limiter's state (a test starts it afresh)
    "COPY_BATCH",  # runs/service/datasets.py: rows per INSERT when a version is copied
}


def test_tests_change_settings_not_module_constants() -> None:
    """What an operator could tune is a setting (a test overrides it with `settings`); a test
    that patches an upper-case name of a module is patching a setting that bypasses conf()."""
    patched = re.compile(r"""\.setattr\(\s*[\w.]+,\s*["']([A-Z][A-Z0-9_]*)["']""")
    found = sorted(
        f"{path.relative_to(ROOT)}: {name}"
        for path in ROOT.glob("tests/**/*.py")
        for name in patched.findall(path.read_text())
        if name not in INTERNAL_CONSTANTS
    )
    assert found == []


def test_host_port_from_make_run_settings_py_ones_never_from_the_environment() -> None:
    values = from_environ(
        {"HOST": "0.0.0.0", "PORT": "8123", "AGENTUI_NAV": "x", "AGENTUI_PRESETS": "y"},
        base_dir=Path("/x"),
    )
    assert (values.host, values.port) == ("0.0.0.0", "8123")
    assert (values.nav, values.presets, values.telemetry) == (NAV, None, None)
    written = [f.name for f in fields(Conf) if from_settings_py(f)]
    assert written == ["nav", "presets", "telemetry"]


def test_the_settings_py_ones_follow_django_settings_too() -> None:
    made = object()  # settings.py makes a TelemetryConfig; conf() passes it on as it is
    home = (("Home", "runs:index"),)
    with override_settings(
        AGENTUI_TELEMETRY=made, AGENTUI_NAV=home, AGENTUI_PRESETS={"react": None}
    ):
        assert conf().telemetry is made
        assert (conf().nav, conf().presets) == (home, {"react": None})
    assert conf().nav == settings.AGENTUI_NAV == NAV


def test_the_email_link_follows_the_host_and_port_settings() -> None:
    from runs.service.notify import site_url

    with override_settings(
        AGENTUI_HOST="notebooks.test", AGENTUI_PORT="9000", AGENTUI_PUBLIC_URL=""
    ):
        assert site_url() == "http://notebooks.test:9000"
    with override_settings(AGENTUI_PUBLIC_URL="https://agentui.example/"):
        assert site_url() == "https://agentui.example"


def test_the_object_follows_django_settings_at_use_time() -> None:
    before = conf()
    assert before.lease_stale_s == settings.AGENTUI_LEASE_STALE_S
    with override_settings(AGENTUI_LEASE_STALE_S=1.5, AGENTUI_LLM_MAX_RETRIES=0):
        assert (conf().lease_stale_s, conf().llm_max_retries) == (1.5, 0)
    assert conf() == before


@pytest.mark.django_db
def test_llm_max_retries_and_timeout_reach_the_sdk(
    scripted_server: Any, settings: Any
) -> None:
    """The model client the service builds retries as often as AGENTUI_LLM_MAX_RETRIES says."""
    from runs.service.runtime import make_llm

    failing = Rule(reply=Reply(text="never"), fault=Fault(status=500))
    server = scripted_server(Script(rules=[failing]))
    settings.OPENAI_BASE_URL = server.base_url
    settings.OPENAI_API_KEY = "sk-test"
    settings.AGENTUI_MODEL = "scripted"
    for retries in (0, 1):
        settings.AGENTUI_LLM_MAX_RETRIES = retries
        settings.AGENTUI_LLM_TIMEOUT_S = 9.0
        llm, _ = make_llm()
        assert (llm.timeout, llm.max_retries) == (9.0, retries)
        server.clear_requests()
        with pytest.raises(Exception):  # noqa: B017 - the model's 500, however wrapped
            llm.chat([ChatMessage.user("hi")])
        assert len(server.requests) == retries + 1


def test_llm_settings_are_settable_from_the_environment(subprocess_env: Any) -> None:
    shown = subprocess.run(
        [
            sys.executable,
            "-c",
            "import django; django.setup()\n"
            "from runs.service.runtime import make_llm\n"
            "llm, _ = make_llm()\n"
            "print(llm.timeout, llm.max_retries)",
        ],
        env=subprocess_env(
            AGENTUI_LLM_TIMEOUT_S="12.5",
            AGENTUI_LLM_MAX_RETRIES="0",
            OPENAI_BASE_URL="http://127.0.0.1:9/v1",
            AGENTUI_MODEL="m",
        ),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.split() == ["12.5", "0"]
