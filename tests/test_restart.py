"""Restarts: a new server process on the same database finds every notebook as it was left.

Every step of these tests is a separate process (`manage.py notebook ...`) on a database made
for the test (a SQLite file, or a fresh PostgreSQL database in the services pass), so nothing
can survive in memory between them. One process is killed in the middle of a step, as a crash.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from runs.engine.testing import Match, Reply, Rule, Script, Timing
from runs.models import Step
from tests.live_support import ANSWER, QUESTION, analyst_rules

# longer than pytest.ini's default: a dozen Django processes per test (140 s each under load)
pytestmark = [pytest.mark.db, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[1]
SLOW = "Tell me a long story"


@pytest.fixture
def database_url(tmp_path: Path) -> Iterator[str]:
    """An empty database of the kind the suite runs on, dropped afterwards."""
    if connection.vendor != "postgresql":
        yield f"sqlite:///{tmp_path / 'restart.sqlite3'}"
        return
    import psycopg

    db = connection.settings_dict
    name = f"agentui_restart_{uuid.uuid4().hex[:10]}"
    params = {
        "host": db["HOST"] or "127.0.0.1",
        "port": db["PORT"] or 5432,
        "user": db["USER"],
        "dbname": "postgres",
    }
    if db.get("PASSWORD"):
        params["password"] = db["PASSWORD"]
    with psycopg.connect(**params, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    try:
        yield f"postgres://{auth}@{params['host']}:{params['port']}/{name}"
    finally:
        with psycopg.connect(**params, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def env(
    scripted_server: Any, subprocess_env: Any, database_url: str, tmp_path: Path
) -> Any:
    slow = Rule(
        name="slow",
        match=Match(last_user_contains=SLOW),
        reply=Reply(text="once " * 300),
        timing=Timing(token_delay_s=0.03),
        max_uses=1,
    )
    fast = Rule(
        name="fast", match=Match(last_user_contains=SLOW), reply=Reply(text="The end.")
    )
    server = scripted_server(Script(rules=[slow, fast, *analyst_rules()]))
    child_env = subprocess_env(
        DATABASE_URL=database_url,
        OPENAI_BASE_URL=server.base_url,
        OPENAI_API_KEY="sk-test",
        AGENTUI_MODEL="scripted",
    )
    manage(child_env, "migrate", "--noinput", "-v", "0")
    manage(child_env, "ensure_user", "--username", "bob")
    return server, child_env


def manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, (
        f"manage.py {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    )
    return done.stdout


def show(env: dict[str, str], pk: str) -> dict[str, Any]:
    return json.loads(manage(env, "notebook", "show", pk))


def only_turn(state: dict[str, Any]) -> dict[str, Any]:
    (turn,) = state["turns"].values()
    return turn


def stored_stream_text(database_url: str, pk: str) -> str:
    """What the database holds of the notebook's running step's streamed text ("" if none)."""
    table = Step._meta.db_table
    text, task, status = (
        Step._meta.get_field(name).column for name in ("stream_text", "task", "status")
    )
    query = f"SELECT {text} FROM {table} WHERE {task} = %s AND {status} = 'running'"
    if database_url.startswith("sqlite:///"):
        with closing(sqlite3.connect(database_url.removeprefix("sqlite:///"))) as db:
            rows = db.execute(query.replace("%s", "?"), (int(pk),)).fetchall()
    else:
        import psycopg

        with psycopg.connect(database_url) as db:
            rows = db.execute(query, (int(pk),)).fetchall()
    return "".join(row[0] or "" for row in rows)


def crash_mid_step(child: dict[str, str], pk: str) -> None:
    """Send SLOW in a process of its own and kill -9 it while the step streams, once some of
    the stream is stored."""
    crashing = subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "notebook", "send", pk, SLOW],
        env=child,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not stored_stream_text(child["DATABASE_URL"], pk).startswith("once once"):
            assert time.monotonic() < deadline, (
                "the slow step's stream was never stored"
            )
            assert crashing.poll() is None
            time.sleep(0.02)
        os.kill(crashing.pid, signal.SIGKILL)
    finally:
        crashing.wait(timeout=10)


def test_a_notebook_mid_turn_survives_a_restart(env: Any) -> None:
    server, child = env
    pk = manage(child, "notebook", "create", "bob", "--mode", "step").strip()
    manage(child, "notebook", "send", pk, QUESTION)
    first = only_turn(show(child, pk))["step_queue"][0]["step_id"]
    manage(
        child, "notebook", "approve", pk, first
    )  # a process that runs one step and exits

    left = show(child, pk)
    assert show(child, pk) == left  # every new process reads the same state
    turn = only_turn(left)
    assert turn["status"] == "active"
    assert [s["task_step"]["step_id"] for s in turn["completed_steps"]] == [first]
    assert {s["content"] for s in turn["completed_steps"][0]["output"]["sources"]} == {
        "5",
        "20",
    }
    (pending,) = turn["step_queue"]
    assert (
        pending["prev_steps"] == [first] and turn["step_status"] == {}
    )  # pending, as left
    assert [m["role"] for m in turn["task"]["memory"]["messages"]] == [
        "user",
        "assistant",
        "tool",
        "tool",
    ]
    assert (
        left["memory"] == []
    )  # the agent's memory changes only when the turn finishes
    assert [e[0] for e in left["events"]] == list(range(1, len(left["events"]) + 1))

    manage(
        child, "notebook", "approve", pk, pending["step_id"]
    )  # yet another process goes on
    assert [m["role"] for m in server.requests[-1].messages][-4:] == [
        "user",
        "assistant",
        "tool",
        "tool",
    ]
    finished = show(child, pk)
    assert only_turn(finished)["response"] == ANSWER
    assert [m["role"] for m in finished["memory"]] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]


def test_a_crash_mid_step_leaves_the_step_interrupted_and_nothing_lost(
    env: Any,
) -> None:
    _, child = env
    pk = manage(child, "notebook", "create", "bob").strip()
    manage(child, "notebook", "send", pk, QUESTION)  # one finished turn, to be kept
    before = show(child, pk)

    crash_mid_step(child, pk)

    found = show(child, pk)
    slow_turn = next(t for t in found["turns"].values() if t["task"]["input"] == SLOW)
    (step,) = slow_turn["step_queue"]
    assert slow_turn["step_status"] == {
        step["step_id"]: "running"
    }  # what the dead process left
    row = next(s for s in found["steps"] if s["step_id"] == step["step_id"])
    assert row["stream_text"].startswith(
        "once once"
    )  # the text streamed before the crash

    assert "1 interrupted" in manage(child, "recover_runs", "--force")
    recovered = show(child, pk)
    slow_turn = next(
        t for t in recovered["turns"].values() if t["task"]["input"] == SLOW
    )
    assert slow_turn["step_status"] == {step["step_id"]: "interrupted"}
    assert (
        slow_turn["completed_steps"] == []
        and [m["role"] for m in slow_turn["task"]["memory"]["messages"]][-1]
        == "assistant"
    )
    assert recovered["memory"] == before["memory"]  # the finished turn is intact
    assert before["turns"].items() <= recovered["turns"].items()
    assert recovered["events"][-1][1] == "step_interrupted"
    assert [e[0] for e in recovered["events"]] == list(
        range(1, len(recovered["events"]) + 1)
    )

    manage(
        child, "notebook", "approve", pk, step["step_id"]
    )  # offered for re-run: it runs
    final = show(child, pk)
    slow_turn = next(t for t in final["turns"].values() if t["task"]["input"] == SLOW)
    assert slow_turn["response"] == "The end."
    assert [m["content"] for m in final["memory"]][-2:] == [SLOW, "The end."]


def test_a_server_takes_over_a_dead_process_turn_with_no_browser(env: Any) -> None:
    """The lease sweep: daphne on the database finds the orphan by itself (no socket, no
    request), interrupts its step and runs the turn on to its answer."""
    server, child = env
    pk = manage(child, "notebook", "create", "bob").strip()
    crash_mid_step(child, pk)
    daphne = Path(sys.executable).with_name("daphne")
    serving = subprocess.Popen(
        [str(daphne), "-b", "127.0.0.1", "-p", "0", "agentui.asgi:application"],
        env={**child, "AGENTUI_LEASE_STALE_S": "2", "AGENTUI_LEASE_SWEEP_S": "0.5"},
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            (turn,) = show(child, pk)["turns"].values()
            if turn["response"] is not None:
                break
            assert time.monotonic() < deadline, "the server never took the turn over"
            assert serving.poll() is None, "daphne exited"
            time.sleep(0.5)
    finally:
        serving.terminate()
        serving.wait(timeout=10)
    assert turn["response"] == "The end."
    types = [e[1] for e in show(child, pk)["events"]]
    cut = types.index("step_interrupted")
    assert types[:cut].count("step_started") == 1  # the run the crash cut off
    assert types[cut + 1 :].count("step_started") == 1  # run once more, to the end
    assert types[-1] == "task_completed"
    # the cut-off call, then the one that answered
    assert [r.rule_name for r in server.requests] == ["slow", "fast"]
