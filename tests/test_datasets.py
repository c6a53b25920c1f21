"""Datasets (issue 46 item 3): examples made from notebooks people corrected (their edits,
rejections and corrected answers becoming the expected answer and trajectory), versions that
never change, imports refused whole with each bad row's line, the JSONL export whose lines are
Langfuse and LangSmith dataset items, and the REST surface with who may read and change.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import AsyncClient, override_settings

from runs import service
from runs.engine.testing import ScriptedServer
from runs.models import (
    Attachment,
    Dataset,
    DatasetVersion,
    Example,
    Immutable,
    Task,
)
from runs.protocol import ProtocolError
from runs.rest.datasets import from_notebooks
from runs.traces.annotations import NewAnnotation, add_annotation
from runs.traces.datasets import export_lines, version_diff, version_of
from tests.audit_support import EDITED_ADD, EDITED_DOUBLE, LEDGER_QUESTION, REJECTION
from tests.live_support import (
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    make_notebook,
    make_user,
)
from tests.rest_support import API, Api, user_with_token
from tests.test_corrections import (  # noqa: F401  (ledger_server: a fixture)
    CORRECTED,
    last_turn,
    ledger_notebook,
    ledger_server,
)
from tests.test_group_reviewers import may_review, team

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]


def simple(key: str, message: str, answer: str | None = None) -> Any:
    return service.checked_example(
        {"id": key, "input": message, "expected_output": answer}
    )


def keys(version: DatasetVersion) -> list[str]:
    return list(version.examples.order_by("position").values_list("key", flat=True))


def digests(version: DatasetVersion) -> list[tuple[str, str]]:
    return list(version.examples.order_by("position").values_list("key", "digest"))


def contents(version: DatasetVersion) -> list[tuple[Any, ...]]:
    return list(
        version.examples.order_by("position").values_list(
            "key", "input", "expected_output", "metadata"
        )
    )


# --- from a notebook -------------------------------------------------------------------------


async def test_a_corrected_notebook_becomes_an_example_with_its_trajectory(
    ledger_server: ScriptedServer,
) -> None:
    pk = await ledger_notebook(ledger_server)

    def check() -> None:
        task = Task.objects.get(pk=pk)
        ana = task.owner
        turn = last_turn(pk)
        service.correct_answer(task, ana, turn.engine_id, CORRECTED)
        image = Attachment.objects.create(
            owner=ana,
            task=task,
            turn_engine_id=turn.engine_id,
            name="chart.png",
            mime="image/png",
            size=3,
            data=b"png",
        )
        add_annotation(
            task,
            ana,
            NewAnnotation(target="answer", turn_id=turn.engine_id, rating=-1),
        )
        dataset = service.create_dataset(
            ana, "Ledger", examples=from_notebooks(ana, [pk])
        )
        version = version_of(dataset, None)
        assert version is not None and version.number == 1
        example = version.examples.get()
        assert example.key == f"notebook-{pk}" and example.source_notebook == pk
        asked = example.input
        assert asked["message"] == LEDGER_QUESTION
        assert (asked["agent"], asked["mode"]) == ("function_calling", "tools")
        assert asked["model"]  # the configured one, named: a rerun uses the same
        assert {"add", "multiply"} <= set(asked["tools"])
        assert asked["setup"]["tools"] is None
        # images by reference (their bytes stay in the database)
        assert asked["attachments"] == [
            {
                "id": image.pk,
                "name": "chart.png",
                "mime": "image/png",
                "size": 3,
                "turn": 1,
            }
        ]
        assert example.metadata["verdict"] == "fail"  # the 👎 on the final answer
        # the corrected answer, not the agent's
        assert example.expected_output == CORRECTED
        assert example.metadata["answer_from"] == "corrected"
        assert example.metadata["reviewer"] == "ana"
        assert example.metadata["source_notebook"] == pk
        # the calls as they ran after the edits; the rejected one must not be made, and why
        trajectory = example.expected_trajectory
        assert [(c["tool"], c["arguments"]) for c in trajectory["calls"]] == [
            ("add", EDITED_ADD),
            ("multiply", EDITED_DOUBLE),
        ]
        assert [
            (c["tool"], c["arguments"], c["reason"])
            for c in trajectory["must_not_call"]
        ] == [("multiply", {"a": 4, "b": 5}, REJECTION)]

        # added again after a newer correction: the same example, changed, in version 2
        service.correct_answer(task, ana, last_turn(pk).engine_id, CORRECTED + " Sure.")
        again = service.add_examples(dataset, ana, from_notebooks(ana, [pk]))
        assert (again.number, again.changed, again.added) == (2, 1, 0)
        assert again.examples.get().expected_output == CORRECTED + " Sure."
        assert version.examples.get().expected_output == CORRECTED  # v1 as it was

    await database_sync_to_async(check)()


# --- versions --------------------------------------------------------------------------------


def test_each_change_is_a_new_version_and_a_version_never_changes() -> None:
    ana = make_user("ana")
    dataset = service.create_dataset(
        ana, "Smoke", "a few", [simple("a", "one", "1"), simple("b", "two", "2")]
    )
    v1 = version_of(dataset, 1)
    assert v1 is not None
    before = contents(v1)
    v2 = service.add_examples(dataset, ana, [simple("c", "three", "3")], "more")
    v3 = service.remove_examples(dataset, ana, ["a"])
    v4 = service.edit_example(
        dataset, ana, "b", {"input": "two?", "expected_output": "2!"}
    )
    assert [v.number for v in (v2, v3, v4)] == [2, 3, 4]
    assert keys(v1) == ["a", "b"] and contents(v1) == before
    assert keys(v2) == ["a", "b", "c"] and keys(v3) == ["b", "c"]
    assert v4.examples.get(key="b").expected_output == "2!"
    assert v3.examples.get(key="b").expected_output == "2"
    # what each version changed, counted when it was made
    assert [
        (v.added, v.removed, v.changed, v.example_count) for v in (v1, v2, v3, v4)
    ] == [
        (2, 0, 0, 2),
        (1, 0, 0, 3),
        (0, 1, 0, 2),
        (0, 0, 1, 2),
    ]
    diff = version_diff(v1, v4)
    assert (diff["added"], diff["removed"], diff["changed"], diff["same"]) == (
        ["c"],
        ["a"],
        ["b"],
        0,
    )
    # a change that changes nothing makes no version
    same = service.add_examples(dataset, ana, [simple("c", "three", "3")])
    assert same.pk == v4.pk and dataset.versions.count() == 4
    # stored rows refuse to be changed
    with pytest.raises(Immutable):
        v1.note = "rewritten"
        v1.save()
    row = v1.examples.first()
    assert row is not None
    with pytest.raises(Immutable):
        row.expected_output = "changed"
        row.save()
    # refusals name what is wrong and store nothing
    for act, why in (
        (lambda: service.remove_examples(dataset, ana, ["zzz"]), "no example 'zzz'"),
        (
            lambda: service.edit_example(dataset, ana, "a", {"input": "x"}),
            "no example 'a'",
        ),
        (
            lambda: service.edit_example(dataset, ana, "b", {"input": ""}),
            "input",
        ),
        (lambda: service.create_dataset(ana, "Smoke"), "already have"),
        (lambda: service.create_dataset(ana, "   "), "Give the dataset a name"),
    ):
        with pytest.raises(ProtocolError, match=why):
            act()
    assert dataset.versions.count() == 4 and Dataset.objects.count() == 1


# --- import ----------------------------------------------------------------------------------

GOOD_CSV = (
    "id,input,expected_output,agent,expected_trajectory,metadata.topic\n"
    'q1,What is 2+3?,5,function_calling,"[{""tool"": ""add"", ""arguments"": {""a"": 2, ""b"": 3}}]",sums\n'
    'q2,"A question\nover two lines",,,,\n'
)
BAD_CSV = (
    "input,expected_output,mode\n"
    "fine,yes,tools\n"
    ",no input,\n"  # line 3
    'also fine,"an answer\nover lines",\n'
    "bad mode,x,sometimes\n"  # line 6
    "too,many,cells,here\n"  # line 7
)


def test_an_import_is_whole_or_nothing_and_names_each_bad_line() -> None:
    ana = make_user("ana")
    dataset = service.create_dataset(ana, "Imported", examples=[simple("a", "one")])
    v2 = service.import_examples(dataset, ana, "good.csv", GOOD_CSV.encode())
    assert keys(v2) == ["a", "q1", "q2"] and v2.note == "imported good.csv"
    q1 = v2.examples.get(key="q1")
    assert q1.input == {"message": "What is 2+3?", "agent": "function_calling"}
    assert q1.expected_output == "5" and q1.metadata == {"topic": "sums"}
    assert q1.expected_trajectory["calls"] == [
        {"tool": "add", "arguments": {"a": 2, "b": 3}}
    ]
    assert v2.examples.get(key="q2").input["message"] == "A question\nover two lines"
    assert v2.examples.get(key="q2").expected_output is None

    with pytest.raises(service.ImportRefused) as refused:
        service.import_examples(dataset, ana, "bad.csv", BAD_CSV.encode())
    assert [line for line, _ in refused.value.problems] == [3, 6, 7]
    assert "input.message" in refused.value.problems[0][1]
    assert "mode" in refused.value.problems[1][1]
    assert (
        "line 3:" in refused.value.reason
        and "Nothing was imported" in refused.value.reason
    )
    jsonl = (
        '{"input": "fine"}\n'
        "not json\n"
        '{"input": {"message": "x", "colour": "red"}}\n'
        '{"id": "k", "input": "one"}\n'
        '{"id": "k", "input": "two"}\n'
    )
    with pytest.raises(service.ImportRefused) as refused:
        service.import_examples(dataset, ana, "bad.jsonl", jsonl.encode())
    assert [line for line, _ in refused.value.problems] == [2, 3, 5]
    assert "colour" in refused.value.problems[1][1]
    for name, data, why in (
        ("notes.txt", b"input\nx\n", "Upload a .csv or .jsonl"),
        ("latin.csv", "input\ncaf\xe9\n".encode("latin-1"), "not UTF-8"),
        ("empty.jsonl", b"\n\n", "no examples"),
        ("header.csv", b"input,colour\nx,red\n", "unknown column 'colour'"),
    ):
        with pytest.raises(ProtocolError, match=why):
            service.import_examples(dataset, ana, name, data)
    # nothing half-imported: still version 2, as it was
    assert dataset.versions.count() == 2 and Example.objects.count() == 1 + 3


@override_settings(AGENTUI_DATASET_IMPORT_MAX_BYTES=2048)
def test_an_import_past_the_size_limit_is_refused() -> None:
    ana = make_user("ana")
    dataset = service.create_dataset(ana, "Big")
    with pytest.raises(ProtocolError, match="at most 2,048"):
        service.import_examples(dataset, ana, "big.csv", b"input\n" + b"x\n" * 2000)
    assert not dataset.versions.exists()


# --- export ----------------------------------------------------------------------------------


def test_the_export_is_langfuse_and_langsmith_items_and_imports_back_the_same() -> None:
    ana = make_user("ana")
    given = {
        "id": "ex-1",
        "input": {
            "message": "Sum 2 and 3",
            "agent": "function_calling",
            "mode": "tools",
        },
        "expected_output": {
            "answer": "5",
            "trajectory": [{"tool": "add", "arguments": {"a": 2, "b": 3}}],
            "must_not_call": [
                {"tool": "multiply", "arguments": {"a": 4}, "reason": "not asked"}
            ],
        },
        "metadata": {"verdict": "pass", "categories": ["arithmetic"]},
    }
    dataset = service.create_dataset(
        ana, "Export", examples=[service.checked_example(given), simple("b", "hi")]
    )
    version = version_of(dataset, None)
    assert version is not None
    lines = list(export_lines(version))
    items = [json.loads(line) for line in lines]
    assert all(line.endswith("\n") for line in lines)
    assert items[0] == given  # one to one: what was given is what is exported
    assert set(items[1]) == {"id", "input", "expected_output", "metadata"}
    assert items[1]["expected_output"] == {
        "answer": None,
        "trajectory": [],
        "must_not_call": [],
    }
    # the export imported into another dataset is the same examples
    copy = service.create_dataset(ana, "Copy")
    service.import_examples(copy, ana, "export.jsonl", "".join(lines).encode())
    copied = version_of(copy, None)
    assert copied is not None
    assert digests(copied) == digests(version)


def test_the_demo_dataset_holds_the_example_prompts() -> None:
    from runs.demo import demo_example_prompts

    ana = make_user("ana")
    dataset = service.demo_dataset(ana)
    assert service.demo_dataset(ana).pk == dataset.pk  # made once
    version = version_of(dataset, None)
    assert version is not None
    prompts = {e.prompt for e in demo_example_prompts() if not e.needs}
    messages = {e.input["message"] for e in version.examples.all()}
    assert prompts <= messages and len(messages) >= 5
    assert all(e.input.get("agent") for e in version.examples.all())


# --- REST ----------------------------------------------------------------------------------


async def test_rest_builds_pages_diffs_exports_and_imports(
    ledger_server: ScriptedServer,
) -> None:
    pk = await ledger_notebook(ledger_server)
    _, token = await user_with_token("ana")
    api = Api(token)
    made = await api.post("/datasets/", {"name": "Regressions", "notebooks": [pk]})
    assert made.status_code == 201, made.content
    detail = made.json()
    ds = detail["id"]
    assert (detail["latest_version"], detail["example_count"]) == (1, 1)
    assert detail["version_list"][0]["added"] == 1
    page = (await api.get(f"/datasets/{ds}/examples")).json()
    example = page["items"][0]
    assert example["id"] == f"notebook-{pk}" and page["count"] == 1
    assert example["expected_trajectory"]["must_not_call"][0]["reason"] == REJECTION
    added = await api.post(
        f"/datasets/{ds}/examples",
        {
            "examples": [{"id": "hand", "input": "Hello?", "expected_output": "Hi."}],
            "note": "by hand",
        },
    )
    assert added.status_code == 201 and added.json()["number"] == 2, added.content
    edited = await api.put(
        f"/datasets/{ds}/examples/hand",
        {"example": {"input": "Hello there?", "expected_output": "Hi."}},
    )
    assert edited.json()["changed"] == 1 and edited.json()["number"] == 3
    removed = await api.delete(f"/datasets/{ds}/examples/notebook-{pk}")
    assert removed.json()["removed"] == 1 and removed.json()["example_count"] == 1
    diff = (await api.get(f"/datasets/{ds}/diff", base=1)).json()
    assert (diff["added"], diff["removed"], diff["to_version"]) == (
        ["hand"],
        [f"notebook-{pk}"],
        4,
    )
    versions = (await api.get(f"/datasets/{ds}/versions")).json()
    assert [(v["number"], v["note"]) for v in versions][:3] == [
        (4, f"removed notebook-{pk}"),
        (3, "edited hand"),
        (2, "by hand"),
    ]
    old = (await api.get(f"/datasets/{ds}/examples", version=1)).json()
    assert [e["id"] for e in old["items"]] == [f"notebook-{pk}"]
    export = await api.get(f"/datasets/{ds}/export", version=3)
    assert export.status_code == 200 and export["Content-Type"] == "application/jsonl"
    assert "Regressions-v3.jsonl" in export["Content-Disposition"]
    body = b"".join([chunk async for chunk in export.streaming_content])
    lines = [json.loads(x) for x in body.splitlines()]
    assert [x["id"] for x in lines] == [f"notebook-{pk}", "hand"]
    assert lines[1]["input"] == {"message": "Hello there?"}

    client = AsyncClient()
    headers = {"Authorization": f"Bearer {token}"}
    bad = SimpleUploadedFile("rows.csv", BAD_CSV.encode(), content_type="text/csv")
    refused = await client.post(
        f"{API}/datasets/{ds}/import", {"file": bad}, headers=headers
    )
    assert refused.status_code == 422
    assert [p["line"] for p in refused.json()["problems"]] == [3, 6, 7]
    good = SimpleUploadedFile("rows.csv", GOOD_CSV.encode(), content_type="text/csv")
    imported = await client.post(
        f"{API}/datasets/{ds}/import", {"file": good}, headers=headers
    )
    assert imported.status_code == 201 and imported.json()["added"] == 2
    listed = (await api.get("/datasets/")).json()
    assert [
        (d["name"], d["latest_version"], d["example_count"]) for d in listed["items"]
    ] == [("Regressions", 5, 3)]
    # refusals: a name taken, a notebook not yours, a version that is not there
    taken = await api.post("/datasets/", {"name": "Regressions"})
    assert taken.status_code == 409 and "already have" in taken.json()["detail"]
    assert (
        await api.post("/datasets/", {"name": "X", "notebooks": [pk + 999]})
    ).status_code == 404
    assert (await api.get(f"/datasets/{ds}/examples", version=99)).status_code == 404
    assert (await api.post("/datasets/", {"name": "  "})).status_code == 422


async def test_group_reviewers_read_a_dataset_and_only_its_owner_changes_it() -> None:
    _, ana = await user_with_token("ana")
    _, rita = await user_with_token("rita")
    _, sam = await user_with_token("sam")

    def setup() -> None:
        users = {u.username: u for u in get_user_model().objects.all()}
        team("sales", users["ana"], users["rita"], users["sam"])
        may_review(users["rita"])

    await database_sync_to_async(setup)()
    made = await Api(ana).post(
        "/datasets/", {"name": "Team set", "examples": [{"id": "a", "input": "hi"}]}
    )
    ds = made.json()["id"]
    assert (await Api(rita).get(f"/datasets/{ds}")).status_code == 200
    assert [d["id"] for d in (await Api(rita).get("/datasets/")).json()["items"]] == [
        ds
    ]
    change = await Api(rita).delete(f"/datasets/{ds}/examples/a")
    assert change.status_code == 409 and "owner" in change.json()["detail"]
    for call in (
        Api(sam).get(f"/datasets/{ds}"),
        Api(sam).get(f"/datasets/{ds}/export"),
        Api(sam).delete(f"/datasets/{ds}/examples/a"),
    ):
        assert (await call).status_code == 404
    assert (await Api(sam).get("/datasets/")).json()["items"] == []


def test_a_notebook_without_a_message_makes_no_example() -> None:
    ana = make_user("ana")
    task = make_notebook(ana)
    with pytest.raises(ProtocolError, match="no message yet"):
        from_notebooks(ana, [task.pk])
    with pytest.raises(ProtocolError, match="No such notebook"):
        from_notebooks(make_user("bob"), [task.pk])


def test_an_import_may_send_a_larger_body_than_other_requests() -> None:
    from agentui.body_limit import FORM_ROOM, general_limit, limit_for
    from runs.conf import conf

    larger = conf().dataset_import_max_bytes + FORM_ROOM
    assert larger > general_limit()
    for path in ("/api/v1/datasets/7/import", "/review/datasets/7/import"):
        assert limit_for(path) == larger
    for path in (
        "/api/v1/datasets/7/examples",
        "/api/v1/datasets/",
        "/review/datasets/7/",
    ):
        assert limit_for(path) == general_limit()


def test_the_pages_show_a_reviewer_the_dataset_without_its_changes() -> None:
    from django.test import Client

    ana, rita, sam = make_user("ana"), make_user("rita"), make_user("sam")
    team("sales", ana, rita, sam)
    may_review(rita)
    dataset = service.create_dataset(
        ana, "Team set", examples=[simple("a", "hi <b>x</b>")]
    )
    page = f"/review/datasets/{dataset.pk}/"
    owner, reviewer, stranger = Client(), Client(), Client()
    owner.force_login(ana)
    reviewer.force_login(rita)
    stranger.force_login(sam)
    mine = owner.get(page).content.decode()
    assert "Import as a new version" in mine and "Remove</button>" in mine
    assert "hi &lt;b&gt;x&lt;/b&gt;" in mine
    theirs = reviewer.get(page).content.decode()
    assert "you review their work" in theirs and "hi &lt;b&gt;x&lt;/b&gt;" in theirs
    assert "Import as a new version" not in theirs and "Remove</button>" not in theirs
    assert "(you review)" in reviewer.get("/review/datasets/").content.decode()
    # a reviewer's change is refused on the page too, and changes nothing
    refused = reviewer.post(f"{page}examples/a/remove", follow=True)
    assert "Only the dataset&#x27;s owner changes it" in refused.content.decode()
    assert dataset.versions.count() == 1
    assert stranger.get(page).status_code == 404
    assert stranger.post(f"{page}examples/a/remove").status_code == 404
    assert "Team set" not in stranger.get("/review/datasets/").content.decode()
    # a new dataset from the list page; a name taken is said, not a 500
    made = owner.post("/review/datasets/", {"name": "Second", "description": ""})
    assert made.status_code == 302
    empty = owner.get(made["Location"]).content.decode()
    assert "No version yet" in empty and "Export version" not in empty
    again = owner.post("/review/datasets/", {"name": "Second"})
    assert again.status_code == 422 and "already have" in again.content.decode()


def test_a_failure_while_storing_a_version_leaves_nothing_of_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from runs.service import datasets as module

    ana = make_user("ana")
    dataset = service.create_dataset(ana, "Whole", examples=[simple("a", "one")])
    monkeypatch.setattr(module, "COPY_BATCH", 2)
    stored = Example.objects.bulk_create
    calls = []

    def second_batch_fails(rows: list[Example]) -> list[Example]:
        calls.append(len(rows))
        if len(calls) == 2:
            raise RuntimeError("the disk is full")
        return stored(rows)

    monkeypatch.setattr(Example.objects, "bulk_create", second_batch_fails)
    csv = "input\n" + "".join(f"question {n}\n" for n in range(5))
    with pytest.raises(RuntimeError, match="disk is full"):
        service.import_examples(dataset, ana, "five.csv", csv.encode())
    assert calls == [2, 2]  # the first batch was written, then undone with the rest
    assert dataset.versions.count() == 1 and Example.objects.count() == 1


def test_the_page_edits_an_expected_answer_as_a_new_version() -> None:
    from django.test import Client

    ana = make_user("ana")
    given = {
        "id": "a",
        "input": {"message": "Sum?", "agent": "function_calling"},
        "expected_output": {
            "answer": "4",
            "trajectory": [{"tool": "add", "arguments": {"a": 2, "b": 2}}],
        },
        "metadata": {"topic": "sums"},
    }
    dataset = service.create_dataset(
        ana, "Edited", examples=[service.checked_example(given)]
    )
    owner = Client()
    owner.force_login(ana)
    page = f"/review/datasets/{dataset.pk}/"
    assert "Edit the expected answer" in owner.get(page).content.decode()
    saved = owner.post(f"{page}examples/a/answer", {"answer": " 4, since 2 + 2 = 4 "})
    assert saved.status_code == 302
    v1, v2 = version_of(dataset, 1), version_of(dataset, 2)
    assert v1 is not None and v2 is not None and v2.changed == 1
    before, after = v1.examples.get(), v2.examples.get()
    assert (before.expected_output, after.expected_output) == (
        "4",
        "4, since 2 + 2 = 4",
    )
    # the rest of the example as it was
    assert after.input == before.input and after.metadata == before.metadata
    assert after.expected_trajectory == before.expected_trajectory
    assert v2.note == "expected answer of a"
    cleared = owner.post(f"{page}examples/a/answer", {"answer": ""})
    assert cleared.status_code == 302
    assert version_of(dataset, 3).examples.get().expected_output is None  # type: ignore[union-attr]
    assert owner.post(f"{page}examples/zz/answer", {"answer": "x"}).status_code == 404
