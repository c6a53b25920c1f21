"""What the person sees is what ran: one invariant, held after every action of random sessions.

A Hypothesis state machine plays a person on a notebook of each worker (function
calling, ReAct, LLMCompiler, Chain-of-Abstraction, the Team workflow, parallel research), through
`runs.service`, the one entrance every surface uses, with the scripted OpenAI-compatible server
as the model (the worker's demo script, over real HTTP) and the analyst's tools wrapped so each
execution is noted before it runs (tests/recorded_tools.py). Each session's notebook is in step
mode (every step waits) or tools mode (a model step's calls wait on their own, the only way to
edit their arguments or reject one). Its actions, in any order:

- approve the waiting step as it is, or after editing its input (a model step's text, a Team
  question's answer, a research branch's question), or a call's arguments, or rejecting a call
  with a reason;
- undo the last completed step; stop (abandon) the turn; send the prompt again once it ended;
- fork the notebook after a completed step and go on in the fork (its waiting step is then
  edited like any other);
- restart the server process: every cached runner, publisher and turn dropped
  (`runtime.forget_all`) and every lease treated as dead, then the startup recovery
  (`recover_interrupted(force=True)`), so the next action rebuilds everything from the database.

After every action the rules below must hold for every notebook of the session
(tests/audit_support.py holds the checks shared with the surface tests):

(a) every request the model server received and every tool execution is one audited model call
    (`agent_input`, the same messages) or one audited tool run, and the other way round: an
    edited value is what reached the model or the tool, never the original; a rejected call never
    ran, and its reason reached the model (`wire_problems`, and `unheard_problems`: each result
    is in the next model call of its turn unless its step was undone first); an accepted edit is
    what the step holds and what the audit records (`edit_took`), and what the next run of that
    call or step used (`decision_problems`);
(b) nothing ran that the person had not approved: a waiting step starts once per approval, a tool
    runs only in a step that waited (`approval_problems`);
(c) nothing ran twice: counted, not only compared as sets, in (a);
(d) the stored audit and what the page and REST read (`runs.traces.export.trace_json`: its events,
    and its steps' calls and results) say the same thing (`step_view_problems`: every call a step
    shows is exactly the call that ran, for every worker; a plan's call that uses an earlier
    result, LLMCompiler's `$1` or CoA's `y1`, waits for it and is shown, approved and edited
    with its value), and so do the exported spans: the process exports as a server
    set up for OTLP does, into an in-memory exporter, one TOOL span per audited run with the
    arguments that ran (`telemetry_problems`).

An action the service refuses (a `ProtocolError`) is a person's click that changed nothing; the
invariant must hold after it too. The team's own tools (a note, a question, a handoff) take the
workflow's context and are not wrapped: their runs are taken from the audit.

Sessions are few and short (`derandomize=True`: the same ones on every run, so the suite stays
deterministic and quick; no shrinking, which would take minutes): a failure prints the actions of
the failing session and each notebook's log, one line per event.

Seen to fail: with `_edit` in runs/service/step_actions.py recording an edit without applying it,
function calling and the Team fail at `edit_took`. It found the parallel synthesis approved
while its branches waited (recorded, never run: tests/test_parallel_branches.py) and a Team
answer that left no human action (tests/test_team_notebook.py). With the plans' waiting calls
shown with their `$1` / `y1` references (as before the waves of runs/engine/workers/
llm_compiler/worker.py and coa/worker.py), LLMCompiler fails at `step_view_problems`: the step
showed `evaluate("($2 - $1) / $1 * 100")` and the audit the values that ran.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
from channels.db import database_sync_to_async
from django.test import override_settings
from hypothesis import HealthCheck, Phase, settings
from hypothesis import event as note
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from runs import service
from runs.demo import DEMOS
from runs.engine.testing import Script, ScriptedServer
from runs.models import Step, Task
from runs.protocol import ProtocolError
from runs.service import Origin, runtime
from runs.service.recovery import recover_interrupted
from runs.store.fork import ForkError
from runs.telemetry import recorder as telemetry
from runs.telemetry.config import TelemetryConfig
from runs.traces.export import trace_json
from tests import audit_support as audit
from tests.live_support import (
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    llm_at,
    make_notebook,
    make_user,
)
from tests.recorded_tools import LOG_VARIABLE, executions

pytestmark = [
    pytest.mark.db,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(600),
]

T = TypeVar("T")

_RECORDED = ["recorded_tools.RECORDED_TOOLS"]
_TEAM_TOOLS = [
    "runs.presets.tools.team.save_note",
    "runs.presets.tools.team.ask_person",
]
# every tool-calling preset runs the analyst's tools through the recorder
RECORDED_PRESETS = {
    "function_calling": {"tools": _RECORDED},
    "react": {"tools": _RECORDED},
    "llm_compiler": {"tools": _RECORDED},
    "coa": {"tools": _RECORDED},
    "team": {"tools": [*_RECORDED, *_TEAM_TOOLS]},
}
# The team's own tools (a note in the shared state, a question to the person, a handoff) take the workflow's
# context and are not wrapped: their runs are taken from the audit, every other tool's from its
# own record.
UNRECORDED = {"save_note", "ask_person", "handoff"}
# workers that tell the model their calls' results in text (a plan), not as tool messages
PLANNERS = {"llm_compiler", "coa"}
WORKERS = (
    "function_calling",
    "react",
    "llm_compiler",
    "coa",
    "team",
    "parallel_research",
)
PERSON = "ana"
REASON = "Not that one: the person wants another figure"
ANSWERS = ("All regions please", "Europe please")
EDIT_NOTE = " (answer in one line)"


@dataclass
class Session:
    """What one example of the machine made: its notebooks, and how much of each was copied."""

    agent: str
    notebooks: list[int] = field(default_factory=list)
    copied: dict[int, int] = field(
        default_factory=dict
    )  # fork -> events copied from its source


def edited_arguments(kwargs: dict[str, Any]) -> dict[str, Any] | None:
    """A person's correction of a call's arguments, or None when this test has none for it."""
    if isinstance(kwargs.get("sql"), str):
        sql = audit.edited_sql(kwargs["sql"])
        if sql == kwargs["sql"]:
            sql = re.sub(r";?\s*$", " LIMIT 3", sql, count=1)
        return {**kwargs, "sql": sql}
    for key, value in kwargs.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return {**kwargs, key: value + 1}
    if isinstance(kwargs.get("expression"), str):
        return {**kwargs, "expression": f"({kwargs['expression']}) + 1"}
    for key, value in kwargs.items():
        if isinstance(value, str) and key != "sql":
            return {**kwargs, key: value + EDIT_NOTE}
    return None


# --- reading back ----------------------------------------------------------------------------


def _page_view(task_pk: int) -> dict[str, Any]:
    """What the page's Export JSON and the REST trace give (runs.traces.export)."""
    return trace_json(Task.objects.get(pk=task_pk))


def _completed(task_pk: int) -> list[tuple[str, str]]:
    """(step id, kind) of the completed steps of the notebook's turns, oldest first."""
    return list(
        Step.objects.filter(
            task_id=task_pk, status="completed", turn__deleted_at__isnull=True
        )
        .order_by("created_at", "pk")
        .values_list("step_id", "kind")
    )


def _step_input(step_id: str) -> tuple[str | None, list[dict[str, Any]] | None]:
    return Step.objects.values_list("input", "tool_calls").get(step_id=step_id)


def _last_seq(task_pk: int) -> int:
    return int(Task.objects.values_list("last_seq", flat=True).get(pk=task_pk))


def _has_active_turn(task_pk: int) -> bool:
    return (
        Task.objects.get(pk=task_pk)
        .turns.filter(status="active", deleted_at__isnull=True)
        .exists()
    )


def outline(events: list[dict[str, Any]]) -> str:
    """A notebook's log in one line per event, for a failure's message."""
    return "\n".join(
        " ".join(
            str(x)
            for x in (
                e["type"],
                (e.get("step_id") or "")[:8],
                e.get("action") or e.get("tool_name") or "",
                e.get("status") or e.get("reason") or "",
            )
        )
        for e in events
    )


def decision_problems(events: list[dict[str, Any]]) -> list[str]:
    """Where a run did not use what the person last decided for it.

    An edit of a call's arguments is what that call next runs with; a rejected call next answers
    with the rejection and its reason; an edited input is in the next model call that step makes
    (a Team question's answer: the person's response the workflow receives). An undo takes the
    step back, so what was decided before it is spent.
    """
    problems = []
    pending: dict[tuple[str, str | None], dict[str, Any]] = {}
    for event in events:
        kind, step = event["type"], event.get("step_id") or ""
        if kind == "human_action":
            action = event["action"]
            if action in ("edited_arguments", "rejected_call", "edited_input"):
                pending[(step, event.get("tool_id"))] = event
            elif action == "undone":
                pending = {k: v for k, v in pending.items() if k[0] != step}
        elif kind == "tool_call_result":
            decided = pending.pop((step, event["tool_id"]), None)
            if decided is None:
                continue
            if decided["action"] == "edited_arguments":
                if audit.canonical(decided["after"]) != audit.canonical(
                    event["tool_kwargs"]
                ):
                    problems.append(
                        f"{event['tool_id']} was edited to {decided['after']} "
                        f"and ran with {event['tool_kwargs']}"
                    )
            elif not (
                audit.rejected(event) and REASON in event["tool_output"]["content"]
            ):
                problems.append(f"{event['tool_id']} was rejected and answered {event}")
        elif kind in ("agent_input", "human_response"):
            decided = pending.pop((step, None), None)
            if decided is None:
                continue
            said = json.dumps(event, ensure_ascii=False)
            if json.dumps(decided["after"], ensure_ascii=False)[1:-1] not in said:
                problems.append(
                    f"step {step}'s input was edited to {decided['after']!r}, "
                    f"and its next {kind} is {said[:500]}"
                )
    return problems


# --- the person --------------------------------------------------------------------------------


class Person(RuleBasedStateMachine):
    """A person using one worker's notebooks through the service (see the module docstring).

    `setup` (below) binds the class to a running event loop, the scripted server and the agent.
    """

    loop: asyncio.AbstractEventLoop
    server: ScriptedServer
    tool_log: Path
    spans: InMemorySpanExporter
    agent: str
    examples = 0

    def __init__(self) -> None:
        super().__init__()
        type(self).examples += 1
        self.session = Session(self.agent)
        self.current = 0

    # a coroutine on the test's event loop, where the notebooks' steps run too
    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=120)

    def db(self, fn: Any, *args: Any) -> Any:
        return self.run(database_sync_to_async(fn)(*args))

    def settle(self) -> None:
        self.run(service.wait_idle(60))

    def refused(self, coro: Coroutine[Any, Any, Any]) -> bool:
        """Run a person's action; True when the service refused it (it then changed nothing)."""
        name = coro.__qualname__
        try:
            self.run(coro)
        except ProtocolError:
            note(f"{name}: refused")  # what a session did, for a reader of its run
            return True
        finally:
            self.settle()
        note(f"{name}: done")
        return False

    @initialize(mode=st.sampled_from(["step", "tools"]))
    def start(self, mode: str) -> None:
        """A new person, a new notebook of the worker, sent its example prompt: in step mode
        (every step waits) or tools mode (a model step's tool calls wait on their own, so their
        arguments can be edited or the call rejected)."""
        self.server.load(Script(rules=DEMOS[self.agent][0]()), reset_log=True)
        self.tool_log.write_text("")
        user = self.db(make_user, f"{PERSON}{self.examples}")
        task = self.db(make_notebook, user, self.agent, mode)
        self.session.notebooks.append(task.pk)
        self.current = task.pk
        self.run(service.send_message(task.pk, DEMOS[self.agent][1], Origin(by=PERSON)))
        self.settle()

    # -- actions --

    @rule(
        decisions=st.lists(
            st.tuples(
                st.sampled_from(["as_is", "edit", "reject"]),
                st.integers(min_value=0, max_value=7),
            ),
            min_size=1,
            max_size=4,
        )
    )
    def decide(self, decisions: list[tuple[str, int]]) -> None:
        """Decide on the waiting steps, one after another."""
        for how, pick in decisions:
            self.decide_one(how, pick)

    def decide_one(self, how: str, pick: int) -> None:
        """Approve a waiting step (one of them: research branches wait side by side), as it is,
        edited, or with one of its calls rejected."""
        waiting = self.run(audit.waiting_steps(self.current))
        if not waiting:
            return
        step = waiting[pick % len(waiting)]
        origin = Origin(by=PERSON)
        inputs: list[str] = []
        rejections: list[tuple[str, str]] = []
        if step.kind == "human_input":
            inputs.append(ANSWERS[pick % len(ANSWERS)])
        elif how == "edit" and step.tool_calls:
            calls = step.tool_calls
            call = calls[pick % len(calls)]
            changed = edited_arguments(call["tool_kwargs"])
            if changed is not None:
                inputs.append(
                    json.dumps([{"tool_id": call["tool_id"], "tool_kwargs": changed}])
                )
        elif how == "edit" and step.input:
            inputs.append(step.input + EDIT_NOTE)
        elif how == "reject" and step.tool_calls:
            call = step.tool_calls[pick % len(step.tool_calls)]
            rejections.append((call["tool_id"], REASON))
        for text in inputs:
            if self.refused(
                service.edit_input(self.current, step.step_id, text, origin)
            ):
                return
            self.edit_took(step, text)
        for tool_id, reason in rejections:
            if self.refused(
                service.reject_tool_call(
                    self.current, step.step_id, tool_id, reason, origin
                )
            ):
                return
        self.refused(service.approve(self.current, step.step_id, origin))

    def edit_took(self, step: audit.Waiting, text: str) -> None:
        """An accepted edit is what the step now holds, and the audit says so (an edit that is
        recorded but not applied, or applied but not recorded, fails here)."""
        held, calls = self.db(_step_input, step.step_id)
        log = self.db(audit.stored_events, self.current)
        edits = [
            e
            for e in log
            if e["type"] == "human_action"
            and e["step_id"] == step.step_id
            and e["action"] in ("edited_input", "edited_arguments")
        ]
        if step.kind == "tool_calls":
            (wanted,) = json.loads(text)
            held_kwargs = {c["tool_id"]: c["tool_kwargs"] for c in calls or []}
            assert held_kwargs.get(wanted["tool_id"]) == wanted["tool_kwargs"], (
                f"edited {wanted}, the step holds {calls}"
            )
            before = {c["tool_id"]: c["tool_kwargs"] for c in step.tool_calls or []}
            if before.get(wanted["tool_id"]) != wanted["tool_kwargs"]:
                assert edits and edits[-1]["after"] == wanted["tool_kwargs"], edits
        else:
            assert held == text, f"edited to {text!r}, the step holds {held!r}"
            if step.input != text:
                assert edits and edits[-1]["after"] == text, outline(log)

    @rule()
    def undo(self) -> None:
        self.refused(service.undo(self.current, None, Origin(by=PERSON)))

    @rule()
    def stop(self) -> None:
        if self.db(_has_active_turn, self.current):
            self.refused(service.abandon(self.current, Origin(by=PERSON)))

    @rule()
    def send_again(self) -> None:
        """Once the turn has ended (answered or stopped), ask the example question again."""
        if not self.db(_has_active_turn, self.current):
            prompt = DEMOS[self.agent][1]
            self.refused(service.send_message(self.current, prompt, Origin(by=PERSON)))

    @rule(pick=st.integers(min_value=0, max_value=7))
    def fork(self, pick: int) -> None:
        """Fork after one of the completed steps and carry on in the fork."""
        completed = self.db(_completed, self.current)
        if not completed:
            return
        step_id, _ = completed[pick % len(completed)]
        try:
            fork = self.db(service.fork_notebook, self.current, step_id)
        except (ForkError, ProtocolError):
            return  # a step a fork cannot start after (the service says why)
        note("fork: done")
        self.session.copied[fork.pk] = self.db(_last_seq, fork.pk)
        self.session.notebooks.append(fork.pk)
        self.current = fork.pk
        self.settle()

    @rule()
    def restart(self) -> None:
        """A new server process on the same database: nothing of this one's memory is left."""
        self.settle()
        runtime.forget_all()
        self.run(recover_interrupted(force=True))
        self.settle()
        note("restart: done")

    # -- the invariant --

    def tool_spans(self) -> list[dict[str, Any]]:
        """The TOOL spans exported for this session's notebooks (a fork's copied runs were
        exported once, by its source)."""
        sink = telemetry.sink()
        assert sink is not None and sink.flush(10)
        sessions = {telemetry.session_id(pk) for pk in self.session.notebooks}
        return [
            {"attributes": dict(span.attributes or {})}
            for span in self.spans.get_finished_spans()
            if (span.attributes or {}).get("openinference.span.kind") == "TOOL"
            and (span.attributes or {}).get("session.id") in sessions
        ]

    @invariant()
    def what_ran_is_what_the_audit_says(self) -> None:
        if not self.session.notebooks:
            return
        logs = {pk: self.db(audit.stored_events, pk) for pk in self.session.notebooks}
        # a fork's log starts with its source's, copied: those runs happened once, in the source
        own = [
            e for pk, log in logs.items() for e in log[self.session.copied.get(pk, 0) :]
        ]
        ran = executions(self.tool_log)
        # the team's own tools are not wrapped: their runs are the audited ones
        ran += [
            (r["tool_name"], r["tool_kwargs"])
            for r in own
            if r["type"] == "tool_call_result"
            and r["tool_name"] in UNRECORDED
            and not audit.rejected(r)
            and not audit.skipped(r)
        ]
        problems = audit.wire_problems(
            self.server.requests,
            own,
            ran,
            calls_as_messages=self.agent not in PLANNERS,
            reached=False,
        )
        problems += audit.telemetry_problems(self.tool_spans(), own)
        for pk, log in logs.items():
            problems += [f"notebook {pk}: {p}" for p in audit.approval_problems(log)]
            problems += [f"notebook {pk}: {p}" for p in decision_problems(log)]
            problems += [f"notebook {pk}: {p}" for p in audit.unheard_problems(log)]
            view = self.db(_page_view, pk)
            if [e["event"] for e in view["events"]] != log:
                problems.append(
                    f"notebook {pk}: the page's events are not the stored ones"
                )
            steps = [s for turn in view["turns"] for s in turn["steps"]]
            problems += [
                f"notebook {pk}: {p}" for p in audit.step_view_problems(steps, log)
            ]
        assert not problems, "\n".join(
            problems + [outline(log) for log in logs.values()]
        )


@pytest.mark.parametrize("agent", WORKERS)
async def test_what_the_person_sees_is_what_ran(
    agent: str,
    scripted_server: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = scripted_server(Script(rules=DEMOS[agent][0]()))
    tool_log = tmp_path / "tools.jsonl"
    monkeypatch.setenv(LOG_VARIABLE, str(tool_log))
    machine = type(
        f"Person_{agent}",
        (Person,),
        {
            "loop": asyncio.get_running_loop(),
            "server": server,
            "tool_log": tool_log,
            "spans": InMemorySpanExporter(),
            "agent": agent,
        },
    )
    budget = settings(
        # parallel research's branches each answer after a second: fewer sessions
        max_examples=8 if agent == "parallel_research" else 20,
        stateful_step_count=8,
        deadline=None,
        derandomize=True,
        phases=[Phase.explicit, Phase.reuse, Phase.generate],
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    # the process exports its spans as a server set up for OTLP does, into memory
    config = TelemetryConfig(endpoint="http://127.0.0.1:9/v1/traces", setting="test")
    telemetry.configure(config, exporter=machine.spans)
    try:
        with (
            llm_at(server),
            override_settings(
                AGENTUI_PRESETS=RECORDED_PRESETS, AGENTUI_DATA_DIR=str(tmp_path)
            ),
        ):
            await asyncio.to_thread(run_state_machine_as_test, machine, settings=budget)
    finally:
        telemetry.configure(None)
    assert machine.examples >= 1
