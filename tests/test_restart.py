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
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from runs.engine.stopped_note import NOTE_START
from runs.engine.testing import Match, Reply, Rule, Script, Timing, ToolCallSpec
from runs.models import Event, Step
from tests.live_support import ANSWER, QUESTION, analyst_rules

# longer than pytest.ini's default: a dozen Django processes per test (140 s each under load)
pytestmark = [pytest.mark.db, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[1]
SLOW = "Tell me a long story"


def _admin_params() -> dict[str, Any]:
    """How to reach the test PostgreSQL server's `postgres` database (to create databases)."""
    db = connection.settings_dict
    params = {
        "host": db["HOST"] or "127.0.0.1",
        "port": db["PORT"] or 5432,
        "user": db["USER"],
        "dbname": "postgres",
    }
    if db.get("PASSWORD"):
        params["password"] = db["PASSWORD"]
    return params


def _postgres_url(params: dict[str, Any], name: str) -> str:
    auth = params["user"] + (f":{params['password']}" if "password" in params else "")
    return f"postgres://{auth}@{params['host']}:{params['port']}/{name}"


@contextmanager
def _postgres_database(prefix: str, template: str = "") -> Iterator[tuple[str, str]]:
    """A new PostgreSQL database (a copy of `template` if given): its name and URL; dropped
    at the end."""
    import psycopg

    params = _admin_params()
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    copy = f' TEMPLATE "{template}"' if template else ""
    with psycopg.connect(**params, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"{copy}')
    try:
        yield name, _postgres_url(params, name)
    finally:
        with psycopg.connect(**params, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def migrated_template(
    tmp_path_factory: pytest.TempPathFactory,
    subprocess_env: Callable[..., dict[str, str]],
) -> Iterator[str]:
    """A database of the suite's kind, migrated once for the module and holding the user bob:
    each test starts from a copy (migrations themselves are tested in test_migrations.py)."""
    if connection.vendor != "postgresql":
        url = f"sqlite:///{tmp_path_factory.mktemp('restart') / 'template.sqlite3'}"
        _migrate(subprocess_env(DATABASE_URL=url))
        yield url
        return
    with _postgres_database("agentui_restart_template") as (name, url):
        _migrate(subprocess_env(DATABASE_URL=url))
        yield name


def _migrate(env: dict[str, str]) -> None:
    manage(env, "migrate", "--noinput", "-v", "0")
    manage(env, "ensure_user", "--username", "bob")


@pytest.fixture
def database_url(migrated_template: str, tmp_path: Path) -> Iterator[str]:
    """A migrated database of the suite's kind with the user bob, dropped afterwards."""
    if connection.vendor != "postgresql":
        template = migrated_template.removeprefix("sqlite:///")
        target = tmp_path / "restart.sqlite3"
        # SQLite's backup API: a consistent copy whatever the write-ahead log still holds
        with closing(sqlite3.connect(template)) as source:
            with closing(sqlite3.connect(target)) as copy:
                source.backup(copy)
        yield f"sqlite:///{target}"
        return
    with _postgres_database("agentui_restart", template=migrated_template) as (_, url):
        yield url


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


def query(database_url: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    """Rows of `sql` (with %s placeholders) read straight from the test's database."""
    if database_url.startswith("sqlite:///"):
        with closing(sqlite3.connect(database_url.removeprefix("sqlite:///"))) as db:
            return db.execute(sql.replace("%s", "?"), params).fetchall()
    import psycopg

    with psycopg.connect(database_url) as db:
        return db.execute(sql, params).fetchall()


def stored_stream_text(database_url: str, pk: str) -> str:
    """What the database holds of the notebook's running step's streamed text ("" if none)."""
    table = Step._meta.db_table
    text, task, status = (
        Step._meta.get_field(name).column for name in ("stream_text", "task", "status")
    )
    sql = f"SELECT {text} FROM {table} WHERE {task} = %s AND {status} = 'running'"
    return "".join(row[0] or "" for row in query(database_url, sql, int(pk)))


def stored_payloads(database_url: str, pk: str, kind: str) -> list[dict[str, Any]]:
    """The payloads of the notebook's stored events of type `kind`, oldest first."""
    table = Event._meta.db_table
    payload, task, type_, seq = (
        Event._meta.get_field(name).column
        for name in ("payload", "task", "type", "seq")
    )
    sql = f"SELECT {payload} FROM {table} WHERE {task} = %s AND {type_} = %s ORDER BY {seq}"
    rows = query(database_url, sql, int(pk), kind)
    return [json.loads(p) if isinstance(p, str) else p for (p,) in rows]


def crash_mid_step(
    child: dict[str, str],
    pk: str,
    text: str = SLOW,
    until: Callable[[], object] | None = None,
    what: str = "the slow step's stream was never stored",
) -> None:
    """Send `text` in a process of its own and kill -9 it mid-step, once `until()` holds (by
    default: some of SLOW's stream is stored)."""
    url = child["DATABASE_URL"]
    if until is None:
        until = lambda: stored_stream_text(url, pk).startswith("once once")  # noqa: E731
    crashing = subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "notebook", "send", pk, text],
        env=child,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not until():
            assert time.monotonic() < deadline, what
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


ARCHIVE = "Archive the quarterly report"
HEEDED = "The archive may have happened already; I will not archive it again."


def test_a_crash_mid_tool_call_is_told_to_the_model_when_the_step_runs_again(
    env: Any,
) -> None:
    """kill -9 while a plain-function tool runs (the demo's slow archive): after recovery the
    step, run again, asks its model afresh, and that request ends with the note naming the
    call that had begun; the stored `stopped_calls_note` is exactly what the model got."""
    server, child = env
    told = Rule(
        name="told", match=Match(system_contains=NOTE_START), reply=Reply(text=HEEDED)
    )
    archive = Rule(
        name="archive",
        match=Match(last_user_contains=ARCHIVE, tool_results_since_user=0),
        reply=Reply(
            text="Archiving it.",
            tool_calls=[
                ToolCallSpec(
                    name="archive_report",
                    arguments={"title": "Q3", "seconds": 60},
                    id="call_archive",
                )
            ],
        ),
    )
    server.load(Script(rules=[told, archive]), reset_log=True)
    pk = manage(child, "notebook", "create", "bob").strip()
    url = child["DATABASE_URL"]
    # killed while the tool sleeps in its thread: its call was stored before it began
    crash_mid_step(
        child,
        pk,
        ARCHIVE,
        lambda: stored_payloads(url, pk, "tool_call"),
        "the archive call never began",
    )
    assert [r.rule_name for r in server.requests] == ["archive"]
    assert not stored_payloads(url, pk, "tool_call_result")

    assert "1 interrupted" in manage(child, "recover_runs", "--force")
    turn = only_turn(show(child, pk))
    (step_id,) = turn["step_status"]
    assert turn["step_status"] == {step_id: "interrupted"}
    (owed,) = turn["task"]["extra_state"]["stopped_calls"]
    assert owed["tool_name"] == "archive_report" and owed["state"] == "server_stopped"
    manage(child, "recover_runs", "--force")  # a further restart: owed once still
    assert only_turn(show(child, pk))["task"]["extra_state"]["stopped_calls"] == [owed]

    manage(child, "notebook", "approve", pk, step_id)  # the person runs it again
    assert [r.rule_name for r in server.requests] == ["archive", "told"]
    sent = server.requests[-1].messages
    (note,) = stored_payloads(url, pk, "stopped_calls_note")
    assert sent[-1] == {"role": "system", "content": note["text"]}
    assert sent[:-1] == server.requests[0].messages  # asked afresh, then told
    assert note["text"].startswith(NOTE_START)
    assert (
        "the server stopped while an earlier run was making these tool calls"
        in (note["text"])
    )
    assert (
        '- "archive_report" with arguments {"title": "Q3", "seconds": 60}:'
        in (note["text"])
    )
    assert [c["tool_id"] for c in note["calls"]] == ["call_archive"]
    final = only_turn(show(child, pk))
    assert final["response"] == HEEDED
    assert "stopped_calls" not in final["task"]["extra_state"]  # given once
    types = [e[1] for e in show(child, pk)["events"]]
    assert types[types.index("stopped_calls_note") + 1] == "agent_input"
