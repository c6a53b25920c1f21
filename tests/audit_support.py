"""Driving a notebook through `runs.service` the way a person would, and reading back what ran.

Shared by the fork-edit tests, the audit invariant test and the surface tests: which steps wait,
approving them in order (answering a Team question on the way), what the scripted server and the
tools saw, and where a surface's account of a run disagrees with that.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from channels.db import database_sync_to_async

from runs import service
from runs.engine.messages import new_in_call
from runs.engine.testing import Match, RecordedRequest, Reply, Rule, ToolCallSpec
from runs.engine.tools import call_tool_by_name
from runs.engine.workers.tool_calls import REJECTION_PREFIX
from runs.models import Event, Step, Task
from runs.presets import get_preset
from tests.live_support import make_notebook, make_user


@dataclass(frozen=True)
class Waiting:
    """A step of the active turn that waits for the person."""

    step_id: str
    kind: str
    status: str
    input: str | None
    tool_calls: list[dict[str, Any]] | None


def _waiting(task_pk: int) -> list[Waiting]:
    rows = (
        Step.objects.filter(
            task_id=task_pk,
            queue_position__isnull=False,
            turn__status="active",
            turn__deleted_at__isnull=True,
        )
        .exclude(status="running")
        .order_by("queue_position")
    )
    return [Waiting(r.step_id, r.kind, r.status, r.input, r.tool_calls) for r in rows]


async def started(agent: str, prompt: str, mode: str = "tools", by: str = "ana") -> int:
    """A new notebook of `agent` for a new user `by`, sent `prompt`, its first steps run."""
    user = await database_sync_to_async(make_user)(by)
    task = await database_sync_to_async(make_notebook)(user, agent=agent, mode=mode)
    await service.send_message(task.pk, prompt)
    await service.wait_idle()
    return int(task.pk)


async def waiting_steps(task_pk: int) -> list[Waiting]:
    return await database_sync_to_async(_waiting)(task_pk)


async def approve_all(task_pk: int, answer: str = "All regions please") -> None:
    """Approve every waiting step in turn (answering a question with `answer`) until none waits
    or one has failed (approving it again would only ask the same again)."""
    for _ in range(60):
        waiting = await waiting_steps(task_pk)
        if not waiting or waiting[0].status == "failed":
            return
        step = waiting[0]
        if step.kind == "human_input":
            await service.edit_input(task_pk, step.step_id, answer)
        await service.approve(task_pk, step.step_id)
        await service.wait_idle()
    steps = await database_sync_to_async(_dump)(task_pk)
    raise AssertionError(f"the turn did not finish after 60 approvals: {steps}")


def stored_events(task_pk: int, kind: str | None = None) -> list[dict[str, Any]]:
    """The notebook's stored events in order (only those of type `kind` when given)."""
    rows = Event.objects.filter(task_id=task_pk)
    if kind is not None:
        rows = rows.filter(type=kind)
    return list(rows.order_by("seq").values_list("payload", flat=True))


async def events_of(task_pk: int, kind: str) -> list[dict[str, Any]]:
    return await database_sync_to_async(stored_events)(task_pk, kind)


async def run_tool(agent: str, name: str, kwargs: dict[str, Any]) -> str:
    """What the preset's tool `name` answers to `kwargs`, run here as the engine runs it."""
    preset = get_preset(agent)
    assert preset is not None
    tools = {tool.metadata.name: tool for tool in preset.make_tools()}
    output = await call_tool_by_name(tools, name, kwargs)
    assert not output.is_error, output.content
    return output.content


def request_text(request: RecordedRequest) -> str:
    return "\n".join(request.texts())


def notebook(task: Task | int) -> int:
    return task if isinstance(task, int) else task.pk


def _dump(task_pk: int) -> list[tuple[str, str, str, Any]]:
    return [
        (r.kind, r.status, (r.input or "")[:60], r.error[:300])
        for r in Step.objects.filter(task_id=task_pk).order_by("created_at", "pk")
    ]


# --- what reached the wire against what a surface says (tests/test_surface_*.py) --------------
#
# A surface (the page, REST, AG-UI) is read back into events, or into `Ran` calls; the checks
# below hold them against the scripted server's request log and the tools' own record of what
# they ran (tests/recorded_tools.py). Each returns the problems it found, [] when all agree.


@dataclass(frozen=True, order=True)
class Ran:
    """One tool call's run: its id, tool, arguments (as canonical JSON) and what it answered."""

    tool_id: str
    tool: str
    arguments: str
    output: str

    @classmethod
    def of(cls, result: dict[str, Any]) -> Ran:
        """From a stored `tool_call_result` event."""
        return cls(
            result["tool_id"],
            result["tool_name"],
            canonical(result["tool_kwargs"]),
            result["tool_output"]["content"],
        )


def canonical(value: Any) -> str:
    """`value` as JSON with sorted keys: equal arguments compare equal however they were sent."""
    if isinstance(value, str):
        value = json.loads(value)
    return json.dumps(value, sort_keys=True)


def rejected(result: dict[str, Any]) -> bool:
    return bool(result["tool_output"]["content"].startswith(REJECTION_PREFIX))


# a plan's call that waited on a failed or rejected one answers so, without running
_NOT_RUN = re.compile(r"^(Error: )?not run because ")


def skipped(result: dict[str, Any]) -> bool:
    """A call its plan never ran (one it depends on failed or was rejected)."""
    return bool(_NOT_RUN.match(result["tool_output"]["content"]))


def results_in(events: list[dict[str, Any]]) -> list[Ran]:
    """Every tool call result the event log holds, undone ones too, in the log's order."""
    return [Ran.of(e) for e in events if e["type"] == "tool_call_result"]


def shown_to_model(request: RecordedRequest) -> set[Ran]:
    """The tool runs a model request carries: each call of an assistant message (as the model
    is told it called it) with the tool message answering it."""
    return shown_in(request.messages)


def shown_in(messages: list[dict[str, Any]]) -> set[Ran]:
    """The tool runs a conversation shows, in OpenAI's wire names or AG-UI's (`toolCalls`)."""
    calls: dict[str, tuple[str, str]] = {}
    shown = set()
    for message in messages:
        for call in message.get("tool_calls") or message.get("toolCalls") or []:
            function = call["function"]
            calls[call["id"]] = (function["name"], canonical(function["arguments"]))
        if message.get("role") == "tool":
            tool_id = message.get("tool_call_id") or message["toolCallId"]
            name, arguments = calls[tool_id]
            shown.add(Ran(tool_id, name, arguments, message["content"]))
    return shown


def _message(
    message: dict[str, Any], calls: list[tuple[str, str, Any]]
) -> tuple[Any, ...]:
    """A message as (role, text, its calls as (id, name, canonical arguments), the call it answers)."""
    return (
        message["role"],
        message.get("content") or None,
        tuple(
            (tool_id, name, canonical(arguments)) for tool_id, name, arguments in calls
        ),
        message.get("tool_call_id"),
    )


def _wire_message(message: dict[str, Any]) -> tuple[Any, ...]:
    calls = message.get("tool_calls") or []
    return _message(
        message,
        [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in calls],
    )


def _audited_message(message: dict[str, Any]) -> tuple[Any, ...]:
    calls = message.get("tool_calls") or []
    return _message(
        message, [(c["tool_id"], c["tool_name"], c["tool_kwargs"]) for c in calls]
    )


def _as_stored(request: RecordedRequest) -> tuple[int, tuple[tuple[Any, ...], ...]]:
    """A request as its `agent_input` event stores it: how many messages it leaves out (those
    an earlier call already sent), and the others."""
    messages = request.messages
    keep = new_in_call([str(m.get("role")) for m in messages])
    return len(messages) - len(keep), tuple(_wire_message(messages[i]) for i in keep)


def wire_problems(
    requests: list[RecordedRequest],
    events: list[dict[str, Any]],
    executed: list[tuple[str, dict[str, Any]]],
    calls_as_messages: bool = True,
    reached: bool = True,
) -> list[str]:
    """Where the audit (`events`: the stored events of the notebooks that made `requests`, as a
    surface gives them) disagrees with what reached the model and the tools.

    - the tools ran exactly the calls the audit says ran (a rejected call: not at all), each once;
    - each model request is one audited model call (`agent_input`) with the same messages, so no
      call went unrecorded or was made twice;
    - every tool run the model was shown is an audited run (the arguments that ran, never the
      ones first proposed; a rejection with its reason), and every audited run reached it.
      A worker with a plan (`calls_as_messages=False`: LLMCompiler, CoA) tells the model its
      calls in text: there each audited result must reach it.

    `reached=False` leaves out that last check, for a log a person may still be in the middle
    of (a run whose next model call has not happened yet, or was undone before it):
    `unheard_problems` checks it in order instead.
    """
    problems = []
    results = [e for e in events if e["type"] == "tool_call_result"]
    audited = Counter(
        (r["tool_name"], canonical(r["tool_kwargs"]))
        for r in results
        if not rejected(r) and not skipped(r)
    )
    ran = Counter((tool, canonical(kwargs)) for tool, kwargs in executed)
    if audited != ran:
        problems.append(f"the tools ran {dict(ran)}, the audit says {dict(audited)}")
    asked = Counter(_as_stored(request) for request in requests)
    recorded = Counter(
        (e.get("input_omitted", 0), tuple(_audited_message(m) for m in e["input"]))
        for e in events
        if e["type"] == "agent_input"
    )
    if asked != recorded:
        problems.append(
            f"{len(requests)} model requests, {sum(recorded.values())} audited model calls; "
            f"only on the wire: {list((asked - recorded).elements())}; "
            f"only in the audit: {list((recorded - asked).elements())}"
        )
    runs = set(results_in(events))
    if not calls_as_messages:
        texts = [json.dumps(r.messages, ensure_ascii=False) for r in requests]
        for run in sorted(runs) if reached else []:
            if not any(json.dumps(run.output)[1:-1] in text for text in texts):
                problems.append(f"the audit holds {run}, which never reached the model")
        return problems
    shown = set().union(*(shown_to_model(r) for r in requests)) if requests else set()
    for run in sorted(shown - runs):
        problems.append(f"the model was shown {run}, which the audit does not hold")
    for run in sorted(runs - shown) if reached else []:
        problems.append(f"the audit holds {run}, which never reached the model")
    return problems


def unheard_problems(events: list[dict[str, Any]]) -> list[str]:
    """Where a tool run did not reach the model call its turn made next.

    Every run's result (the rejection and its reason, for a rejected call) must be in the next
    model call of its turn (`agent_input`, which `wire_problems` holds against the wire), unless
    the person undid its step before that call; a turn stopped, or not yet gone on, has no next
    call to check.
    """
    problems = []
    for i, result in enumerate(events):
        if result["type"] != "tool_call_result" or skipped(result):
            continue  # a call not run: what reaches the model is why (its failed input's run)
        turn, step = result["task_id"], result["step_id"]
        for later in events[i + 1 :]:
            if later["type"] == "human_action" and later["action"] == "undone":
                if later["step_id"] == step:
                    break  # taken back before the model heard it
            elif later["type"] == "agent_input" and later["task_id"] == turn:
                said = json.dumps(later["input"], ensure_ascii=False)
                output = json.dumps(
                    result["tool_output"]["content"], ensure_ascii=False
                )
                if output[1:-1] not in said:
                    problems.append(
                        f"{Ran.of(result)} is not in the next model call of its turn "
                        f"(step {later['step_id']})"
                    )
                break
    return problems


def approval_problems(events: list[dict[str, Any]]) -> list[str]:
    """Where a tool ran without the person's approval (tools and step mode), or one approval
    ran a step twice.

    Per step: after it waits (`step_waiting`), its next start needs an `approved` human action
    in between, and one approval starts it once; a tool runs only in a step that waited.
    """
    problems = []
    waiting: set[str] = set()
    waited: set[str] = set()
    approved: Counter[str] = Counter()
    for event in events:
        step, kind = event.get("step_id") or "", event["type"]
        if kind == "step_waiting":
            waiting.add(step)
            waited.add(step)
        elif kind == "human_action" and event["action"] == "approved":
            approved[step] += 1
        elif kind == "step_started" and step in waiting:
            if approved[step] != 1:
                problems.append(f"step {step} started on {approved[step]} approvals")
            approved[step] = 0
            waiting.discard(step)
        elif kind == "tool_call_result" and step not in waited and not rejected(event):
            problems.append(f"{Ran.of(event)} ran in a step that never waited")
    return problems


def human_actions(events: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """The decisions a person made, in order: (action, by, tool id, before, after, reason)."""
    return [
        (
            e["action"],
            e["by"],
            e.get("tool_id"),
            e.get("before"),
            e.get("after"),
            e.get("reason"),
        )
        for e in events
        if e["type"] == "human_action"
    ]


def step_view_problems(
    steps: list[dict[str, Any]], events: list[dict[str, Any]]
) -> list[str]:
    """Where a surface's steps (each with `step_id`, `status`, `tool_calls` and `sources`, as
    REST and the trace give them) say a call ran otherwise than its last audited run."""
    last: dict[tuple[str, str], Ran] = {}
    asked: set[tuple[str, str]] = (
        set()
    )  # a Team question's call, whose answer is its result
    for e in events:
        if e["type"] == "tool_call_result":
            last[(e["step_id"], e["tool_id"])] = Ran.of(e)
        elif e["type"] == "input_required":
            asked.add((e["step_id"], e["tool_id"]))
    problems = []
    for step in steps:
        if step["status"] != "completed" or not step.get("tool_calls"):
            continue
        calls, sources = step["tool_calls"], step["sources"]
        # a call with no result yet may only be a question still waiting for its answer
        for call in calls[len(sources) :]:
            key = (step["step_id"], call["tool_id"])
            if key not in asked or key in last:
                problems.append(f"step {step['step_id']}: {call} shows no result")
        for call, source in zip(calls, sources):
            shown = Ran(
                call["tool_id"],
                call["tool_name"],
                canonical(call["tool_kwargs"]),
                source["content"],
            )
            if shown != last.get((step["step_id"], call["tool_id"])):
                problems.append(
                    f"step {step['step_id']} shows {shown}, the audit "
                    f"{last.get((step['step_id'], call['tool_id']))}"
                )
            if (call["decision"] == "rejected") != shown.output.startswith(
                REJECTION_PREFIX
            ):
                problems.append(f"step {step['step_id']}: {call} vs {source}")
    return problems


# --- the surface tests' scenario: one model, a person who edits, rejects, undoes and forks ----

LEDGER_QUESTION = "Audit these sums please"
LEDGER_ANSWER = "Checked: that is the total."
EDITED_ADD = {"a": 2, "b": 30}  # the person's correction of add(2, 3)
REJECTION = "Not needed: skip the product"
EDITED_DOUBLE = {"a": 32, "b": 2}  # after an undo: double the corrected sum, not 5
FORK_DOUBLE = {"a": 7, "b": 3}  # in a fork at the step that proposed the doubling


def ledger_rules() -> list[Rule]:
    """The model proposes add(2, 3) and multiply(4, 5) at once, then multiply(5, 2), then answers."""

    def turn(after: int, text: str, *calls: tuple[str, str, dict[str, Any]]) -> Rule:
        specs = [ToolCallSpec(name=n, id=i, arguments=a) for n, i, a in calls]
        return Rule(
            name=f"after {after} results",
            match=Match(tool_results_since_user=after),
            reply=Reply(text=text, tool_calls=specs),
        )

    return [
        turn(
            0,
            "Two calls.",
            ("add", "call_add", {"a": 2, "b": 3}),
            ("multiply", "call_mul", {"a": 4, "b": 5}),
        ),
        turn(2, "Now double it.", ("multiply", "call_dbl", {"a": 5, "b": 2})),
        turn(3, LEDGER_ANSWER),
    ]


def ledger_executions() -> list[tuple[str, dict[str, Any]]]:
    """What the tools must have run after the scenario, and nothing else: never add(2, 3),
    never the rejected multiply(4, 5); the doubling once as proposed (then undone), once as
    edited, and once as edited in the fork."""
    return [
        ("add", EDITED_ADD),
        ("multiply", {"a": 5, "b": 2}),
        ("multiply", EDITED_DOUBLE),
        ("multiply", FORK_DOUBLE),
    ]


def edited_sql(sql: str) -> str:
    """The person's correction: only the first nine months of 2024, or only multi-unit sales."""
    if re.search(r"LIKE '(\d{4})%'", sql):
        return re.sub(r"LIKE '(\d{4})%'", r"LIKE '\1-0%'", sql)
    return sql.replace(" GROUP BY", " WHERE s.quantity > 1 GROUP BY", 1)


def telemetry_problems(
    tool_spans: list[dict[str, Any]], events: list[dict[str, Any]]
) -> list[str]:
    """Where the exported TOOL spans (tool.id, tool.name, input.value, output.value) say a call
    ran otherwise than the audit: one span per audited run, with the arguments that ran."""
    exported = Counter(
        Ran(
            a["tool.id"],
            a["tool.name"],
            canonical(a["input.value"]),
            a["output.value"],
        )
        for a in (span["attributes"] for span in tool_spans)
    )
    audited = Counter(results_in(events))
    if exported == audited:
        return []
    return [
        f"exported, not audited: {list((exported - audited).elements())}; "
        f"audited, not exported: {list((audited - exported).elements())}"
    ]
