"""The suite's guard (tests/conftest.py): a test that reaches past this machine fails.

A pytest of its own runs tests that call a model through the real openai SDK: one at an address
off this machine with a developer's key (sync and async clients, and the SDK swallowing the
refusal into APIConnectionError as it does), one at the scripted server on loopback. Only the
loopback one may pass, and nothing may have left the machine.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

# TEST-NET-1 (RFC 5737): never routed, so even a guard that let it through would send nothing.
REMOTE = "http://192.0.2.1/v1"

INNER_TESTS = f'''
import openai
import pytest

from runs.engine.testing import Reply, Rule, Script, ScriptedServer


def test_a_sync_client_off_this_machine():
    client = openai.OpenAI(api_key="sk-developer", base_url="{REMOTE}", max_retries=0, timeout=5)
    with pytest.raises(openai.APIConnectionError):  # the SDK swallows the refusal ...
        client.models.list()
    # ... and the test would pass on its own


async def test_an_async_client_off_this_machine():
    client = openai.AsyncOpenAI(api_key="sk-developer", base_url="{REMOTE}", max_retries=1, timeout=5)
    with pytest.raises(openai.APIConnectionError):
        await client.chat.completions.create(
            model="gpt-4.1-mini", messages=[{{"role": "user", "content": "hi"}}]
        )


def test_the_scripted_server_on_loopback():
    with ScriptedServer(Script(rules=[Rule(reply=Reply(text="hello"))])) as server:
        client = openai.OpenAI(api_key="sk-test", base_url=server.base_url, max_retries=0)
        reply = client.chat.completions.create(
            model="scripted", messages=[{{"role": "user", "content": "hi"}}]
        )
    assert reply.choices[0].message.content == "hello"
'''


def test_a_test_that_reaches_a_remote_model_fails(
    tmp_path: Path, subprocess_env: Any
) -> None:
    (tmp_path / "test_inner.py").write_text(INNER_TESTS)
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "tests.conftest",
            "-p",
            "no:cacheprovider",
            "-q",
            "-rA",
            str(tmp_path / "test_inner.py"),
        ],
        cwd=tmp_path,
        env=subprocess_env(OPENAI_API_KEY="sk-developer"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "2 failed, 1 passed" in output, output
    assert "PASSED test_inner.py::test_the_scripted_server_on_loopback" in output
    for name in (
        "test_a_sync_client_off_this_machine",
        "test_an_async_client_off_this_machine",
    ):
        assert f"FAILED test_inner.py::{name}" in output, output
    assert (
        "a test connected to 192.0.2.1:80, which is not a loopback address" in output
    ), output
