"""A client generated from our OpenAPI document drives a whole run (issue 29).

`openapi-python-client` (requirements-test.txt) generates a typed Python client from the
document agentui serves at /api/v1/openapi.json, at test time, into tmp_path (generated code
is never committed). The test imports it and, only through its typed functions, against
agentui served by daphne with the scripted model: starts a notebook in step mode, approves the
model's step, edits one tool call's arguments, rejects the other, approves, reads the steps,
the final answer, the events, the trace and a comparison. A document the generator cannot read,
or an answer that does not fit the schema it declares, fails here.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
from browser_helpers import USERNAME, LiveApp, served_app

from tests.live_support import ANSWER, QUESTION, analyst_script

GENERATOR = Path(sys.executable).with_name("openapi-python-client")
PACKAGE = "agentui_generated_client"


@pytest.fixture
def app(subprocess_env: Callable[..., dict[str, str]]) -> Iterator[LiveApp]:
    with served_app(subprocess_env(), analyst_script(), "agentui-gen-") as live:
        yield live


def _generate(app: LiveApp, where: Path) -> dict[str, ModuleType]:
    """The generated package's modules this test uses, generated from the served document."""
    document = where / "openapi.json"
    document.write_text(httpx.get(f"{app.url}/api/v1/openapi.json").text)
    config = where / "config.json"
    config.write_text(json.dumps({"post_hooks": [], "package_name_override": PACKAGE}))
    result = subprocess.run(
        [
            str(GENERATOR),
            "generate",
            "--path",
            str(document),
            "--config",
            str(config),
            "--meta",
            "none",
            "--output-path",
            str(where / PACKAGE),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    # a warning means a piece of the document it could not read (and left out of the client)
    assert result.returncode == 0 and "Warning" not in result.stdout, (
        result.stdout + result.stderr
    )
    # the package is loaded from where it was generated (its submodules found through its own
    # __path__), without adding a directory outside the repo to the import path
    init = where / PACKAGE / "__init__.py"
    spec = importlib.util.spec_from_file_location(
        PACKAGE, init, submodule_search_locations=[str(init.parent)]
    )
    assert spec is not None and spec.loader is not None
    package = importlib.util.module_from_spec(spec)
    sys.modules[PACKAGE] = package
    spec.loader.exec_module(package)
    names = [
        "",
        ".models",
        ".api.act.create_notebook",
        ".api.act.approve_step",
        ".api.act.edit_step",
        ".api.act.reject_tool_call",
        ".api.act.set_mode",
        ".api.read.wait_for_notebook",
        ".api.read.get_notebook",
        ".api.read.list_steps",
        ".api.read.list_events",
        ".api.read.get_trace",
        ".api.review.fork_notebook_at",
        ".api.review.compare_two_notebooks",
    ]
    return {
        n.rsplit(".", 1)[-1] or "client": importlib.import_module(PACKAGE + n)
        for n in names
    }


@pytest.fixture
def gen(app: LiveApp, tmp_path: Path) -> Iterator[dict[str, Any]]:
    modules = _generate(app, tmp_path)
    token = app.shell(
        "from django.contrib.auth import get_user_model; "
        "from runs.service.tokens import create_token; "
        f"user = get_user_model().objects.get(username={USERNAME!r}); "
        "print(create_token(user, 'generated')[1])"
    ).split()[-1]
    client = modules["client"].AuthenticatedClient(
        base_url=app.url,  # the document's paths start with /api/v1/
        token=token,
        raise_on_unexpected_status=True,
        timeout=httpx.Timeout(90),
    )
    with client:
        yield {**modules, "api": client}
    for name in list(sys.modules):
        if name == PACKAGE or name.startswith(PACKAGE + "."):
            del sys.modules[name]


def _settled(gen: dict[str, Any], pk: int) -> Any:
    for _ in range(10):
        detail = gen["wait_for_notebook"].sync(pk, client=gen["api"], timeout=30)
        assert isinstance(detail, gen["models"].NotebookDetail), detail
        if detail.settled:
            return detail
    raise AssertionError(f"notebook {pk} never settled")


def test_a_generated_client_drives_a_run_in_step_mode(
    app: LiveApp, gen: dict[str, Any]
) -> None:
    models, api = gen["models"], gen["api"]

    created = gen["create_notebook"].sync_detailed(
        client=api,
        body=models.NotebookIn(
            text=QUESTION, agent="function_calling", mode=models.NotebookInMode.STEP
        ),
    )
    assert created.status_code == 201, created.content
    notebook = created.parsed
    assert isinstance(notebook, models.NotebookDetail)
    pk = notebook.id

    # step mode: the model's step waits before it runs; change what it is asked
    detail = _settled(gen, pk)
    assert detail.status == "waiting" and len(detail.waiting) == 1
    first = detail.waiting[0]
    assert first.kind == "llm"
    asked = f"{QUESTION}, briefly"
    answer = gen["edit_step"].sync(
        pk, first.step_id, client=api, body=models.EditIn(input_=asked)
    )
    assert isinstance(answer, models.Accepted), answer
    _settled(gen, pk)
    # from the next step on, ask before each tool call (tools mode), then run the step
    answer = gen["set_mode"].sync(
        pk, client=api, body=models.ModeIn(mode=models.ModeInMode.TOOLS)
    )
    assert isinstance(answer, models.Accepted), answer
    approved = gen["approve_step"].sync_detailed(pk, first.step_id, client=api)
    assert approved.status_code == 202, approved.content
    assert isinstance(approved.parsed, models.Accepted)

    # its two tool calls wait: change add's arguments, reject multiply, run the step
    detail = _settled(gen, pk)
    calls_step = detail.waiting[0]
    assert calls_step.kind == "tool_calls", detail.to_dict()
    calls = [item.to_dict() for item in calls_step.tool_calls]
    assert [c["tool_name"] for c in calls] == ["add", "multiply"]
    edited = [
        {"tool_id": c["tool_id"], "tool_kwargs": {"a": 20, "b": 3}}
        if c["tool_name"] == "add"
        else {"tool_id": c["tool_id"], "tool_kwargs": c["tool_kwargs"]}
        for c in calls
    ]
    answer = gen["edit_step"].sync(
        pk,
        calls_step.step_id,
        client=api,
        body=models.EditIn(input_=json.dumps(edited)),
    )
    assert isinstance(answer, models.Accepted), answer
    _settled(gen, pk)
    multiply = next(c for c in calls if c["tool_name"] == "multiply")
    answer = gen["reject_tool_call"].sync(
        pk,
        calls_step.step_id,
        multiply["tool_id"],
        client=api,
        body=models.RejectIn(reason="only the sum, please"),
    )
    assert isinstance(answer, models.Accepted), answer
    _settled(gen, pk)
    answer = gen["approve_step"].sync(pk, calls_step.step_id, client=api)
    assert isinstance(answer, models.Accepted), answer

    # the model's answer needs no tool: in tools mode it runs on and ends the turn
    detail = _settled(gen, pk)
    assert (detail.status, detail.waiting, detail.response) == ("idle", [], ANSWER)
    assert gen["get_notebook"].sync(pk, client=api).response == ANSWER

    steps = gen["list_steps"].sync(pk, client=api)
    assert isinstance(steps, models.PageStepOut)
    assert [(s.kind, s.status) for s in steps.items] == [
        ("llm", "completed"),
        ("tool_calls", "completed"),
        ("llm", "completed"),
    ]
    assert steps.items[0].input_ == asked  # `input` shadows a builtin
    ran = {c.to_dict()["tool_name"]: c.to_dict() for c in steps.items[1].tool_calls}
    assert ran["add"]["tool_kwargs"] == {"a": 20, "b": 3}

    results = gen["list_events"].sync(pk, client=api, type_="tool_call_result")
    outputs = {
        e.event.to_dict()["tool_name"]: e.event.to_dict()["tool_output"]["content"]
        for e in results.items
    }
    assert outputs["add"] == "23", "the edited arguments are what ran"
    assert "only the sum, please" in outputs["multiply"], "the model was told why"
    actions = gen["list_events"].sync(
        pk, client=api, type_="human_action", page_size=50
    )
    assert [
        (e.event.to_dict()["action"], e.event.to_dict()["by"]) for e in actions.items
    ] == [
        ("edited_input", USERNAME),
        ("approved", USERNAME),
        ("edited_arguments", USERNAME),
        ("rejected_call", USERNAME),
        ("approved", USERNAME),
    ]

    trace = gen["get_trace"].sync(pk, client=api).to_dict()
    assert trace["turns"][0]["response"] == ANSWER
    assert [s["step_id"] for s in trace["turns"][0]["steps"]] == [
        s.step_id for s in steps.items
    ]

    # fork after the model's first step and compare with the original
    fork = gen["fork_notebook_at"].sync(
        pk, client=api, body=models.ForkIn(step_id=first.step_id)
    )
    assert isinstance(fork, models.NotebookDetail), fork
    compared = gen["compare_two_notebooks"].sync(client=api, a=pk, b=fork.id)
    assert isinstance(compared, models.CompareOut), compared
    assert [s.id for s in compared.sides] == [pk, fork.id]
    step_rows = [r for r in compared.rows if r.kind == models.CompareRowKind.STEP]
    assert step_rows[0].differs is False
    assert compared.summary.first is not None and compared.summary.first.step == 2

    # a refusal comes back as the declared ErrorOut
    refused = gen["approve_step"].sync_detailed(pk, first.step_id, client=api)
    assert refused.status_code == 409
    assert isinstance(refused.parsed, models.ErrorOut)
    assert refused.parsed.code in ("not_allowed", "already_running")
