"""Corrections as records (issue 46): what people edited, rejected, undid, answered and judged,
derived from the audit of real runs (the scripted model over HTTP, driven through the service),
the corrected answers kept beside the agent's, their REST surface, the traces list's filter,
and a notebook as a dataset example.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.test import Client as HttpClient

from runs import service
from runs.engine.testing import Script, ScriptedServer
from runs.models import CorrectedAnswer, Task, Turn
from runs.protocol import ProtocolError
from runs.service import Origin
from runs.traces.annotations import NewAnnotation, add_annotation
from runs.traces.corrections import corrections_from, corrections_of
from runs.traces.examples import dataset_example
from runs.traces.word_diff import word_diff
from tests.audit_support import (
    EDITED_ADD,
    EDITED_DOUBLE,
    LEDGER_ANSWER,
    LEDGER_QUESTION,
    REJECTION,
    approve_all,
    human_actions,
    ledger_rules,
    started,
    stored_events,
    waiting_steps,
)
from tests.live_support import (
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    llm_at,
    make_notebook,
    make_user,
)
from tests.rest_support import Api, user_with_token
from tests.test_group_reviewers import may_review, team

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]

ANA = Origin(by="ana")
CORRECTED = "The sum is 32 and doubled it is 64."


def calls_json(**kwargs: dict[str, Any]) -> str:
    return json.dumps([{"tool_id": k, "tool_kwargs": v} for k, v in kwargs.items()])


async def ledger_notebook(server: ScriptedServer) -> int:
    """The surface tests' scenario, by ana through the service: add(2, 3) edited, multiply(4, 5)
    rejected with a reason, the doubling approved, then the answer and the doubling undone and
    the doubling edited before it runs again."""
    with llm_at(server):
        pk = await started("function_calling", LEDGER_QUESTION, mode="tools", by="ana")
        first = (await waiting_steps(pk))[0]
        await service.edit_input(
            pk, first.step_id, calls_json(call_add=EDITED_ADD), ANA
        )
        await service.reject_tool_call(pk, first.step_id, "call_mul", REJECTION, ANA)
        await service.approve(pk, first.step_id, ANA)
        await service.wait_idle()
        double = (await waiting_steps(pk))[0]
        await service.approve(pk, double.step_id, ANA)
        await service.wait_idle()
        await service.undo(pk, origin=ANA)
        await service.wait_idle()
        await service.undo(pk, origin=ANA)
        await service.wait_idle()
        again = (await waiting_steps(pk))[0]
        assert again.step_id == double.step_id
        await service.edit_input(
            pk, again.step_id, calls_json(call_dbl=EDITED_DOUBLE), ANA
        )
        await service.approve(pk, again.step_id, ANA)
        await service.wait_idle()
        await approve_all(pk)
    return pk


@pytest.fixture
def ledger_server(scripted_server: Any) -> ScriptedServer:
    server: ScriptedServer = scripted_server(Script(rules=ledger_rules()))
    return server


def last_turn(pk: int) -> Turn:
    return Turn.objects.filter(task_id=pk).order_by("-index").first()  # type: ignore[return-value]


def audited_corrections(events: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """The audit's own account of the corrections, as tests/audit_support reads it."""
    wanted = {"edited_input", "edited_arguments", "rejected_call", "undone"}
    return [a for a in human_actions(events) if a[0] in wanted]


async def test_the_corrections_are_what_the_audit_recorded(
    ledger_server: ScriptedServer,
) -> None:
    pk = await ledger_notebook(ledger_server)

    def check() -> None:
        task = Task.objects.get(pk=pk)
        events = stored_events(pk)
        found = corrections_of(task)
        as_audit = [
            (c.kind.value, c.by, c.tool_id, c.before, c.after, c.reason) for c in found
        ]
        assert as_audit == audited_corrections(events)
        assert as_audit == [
            ("edited_arguments", "ana", "call_add", {"a": 2, "b": 3}, EDITED_ADD, None),
            ("rejected_call", "ana", "call_mul", None, None, REJECTION),
            ("undone", "ana", None, None, None, None),
            ("undone", "ana", None, None, None, None),
            (
                "edited_arguments",
                "ana",
                "call_dbl",
                {"a": 5, "b": 2},
                EDITED_DOUBLE,
                None,
            ),
        ]
        assert [c.tool_name for c in found] == [
            "add",
            "multiply",
            None,
            None,
            "multiply",
        ]
        # each names its event in the log, in the log's order
        seqs = [c.seq for c in found]
        assert seqs == sorted(seqs)
        assert all(events[s - 1]["type"] == "human_action" for s in seqs)  # type: ignore[operator]

        # an annotation and a corrected answer join them, after the log's
        turn = last_turn(pk)
        ana = task.owner
        add_annotation(
            task,
            ana,
            NewAnnotation(
                target="answer", turn_id=turn.engine_id, rating=-1, comment="too short"
            ),
        )
        service.correct_answer(task, ana, turn.engine_id, "The sum is 32.")
        service.correct_answer(task, ana, turn.engine_id, CORRECTED)
        found = corrections_of(task)
        note, answer = found[-2:]
        assert (note.kind, note.rating, note.note, note.target) == (
            "annotation",
            -1,
            "too short",
            "answer",
        )
        assert (answer.kind, answer.before, answer.after, answer.versions) == (
            "corrected_answer",
            LEDGER_ANSWER,
            CORRECTED,
            2,
        )
        assert "".join(p.text for p in answer.diff or [] if p.op != "added") == (
            LEDGER_ANSWER
        )
        # beside the agent's answer, never over it
        turn.refresh_from_db()
        assert turn.response == LEDGER_ANSWER
        assert list(
            CorrectedAnswer.objects.filter(turn=turn).values_list("text", flat=True)
        ) == ["The sum is 32.", CORRECTED]

    await database_sync_to_async(check)()


async def test_an_answer_to_a_question_is_an_answer_not_an_edit(
    scripted_server: Any,
) -> None:
    from runs.demo import DEMOS

    rules, prompt = DEMOS["team"]
    server: ScriptedServer = scripted_server(Script(rules=rules()))
    with llm_at(server):
        pk = await started("team", prompt, mode="tools", by="ana")
        await approve_all(pk, answer="Only the north region")

    def check() -> None:
        task = Task.objects.get(pk=pk)
        found = corrections_of(task)
        answers = [c for c in found if c.kind == "answered_question"]
        assert [(a.after, a.by) for a in answers] == [("Only the north region", "")]
        assert answers[0].question  # the question the team asked
        assert not [c for c in found if c.kind == "edited_input"]
        # the list filter agrees: an answer is not an edit
        http = HttpClient()
        http.force_login(task.owner)
        listed = http.get("/api/tasks/", {"corrected": "edit"}).json()
        assert [r["id"] for r in listed["results"]] == []

    await database_sync_to_async(check)()


async def test_a_notebook_as_a_dataset_example(ledger_server: ScriptedServer) -> None:
    pk = await ledger_notebook(ledger_server)

    def check() -> None:
        events = stored_events(pk)
        example = dataset_example(events, metadata={"notebook": pk})
        assert example["input"]["message"] == LEDGER_QUESTION
        expected = example["expected_output"]
        assert expected["answer"] == LEDGER_ANSWER
        assert example["metadata"] == {"notebook": pk, "answer_from": "agent"}
        # as the calls ran after the edits; the doubling that ran as proposed, then was undone,
        # is not there
        assert [(c["tool"], c["arguments"]) for c in expected["trajectory"]] == [
            ("add", EDITED_ADD),
            ("multiply", EDITED_DOUBLE),
        ]
        assert [
            (c["tool"], c["arguments"], c["reason"]) for c in expected["must_not_call"]
        ] == [("multiply", {"a": 4, "b": 5}, REJECTION)]
        corrected = dataset_example(events, CORRECTED)
        assert corrected["expected_output"]["answer"] == CORRECTED
        assert corrected["metadata"]["answer_from"] == "corrected"

    await database_sync_to_async(check)()


def test_corrections_from_a_log_read_only_peoples_corrections() -> None:
    log = [
        {"type": "tool_call", "tool_id": "c1", "tool_name": "sql", "step_id": "s1"},
        {"type": "human_action", "action": "approved", "by": "ana", "at": 1.0},
        {
            "type": "human_action",
            "action": "auto_refused",
            "by": "rule",
            "tool_id": "c1",
            "at": 2.0,
        },
        {
            "type": "human_action",
            "action": "rejected_call",
            "by": "ana",
            "tool_id": "c1",
            "step_id": "s1",
            "reason": "the deadline passed",
            "automatic": "the deadline of 10 min passed",
            "at": 3.0,
        },
    ]
    found = corrections_from(enumerate(log, 1))
    assert [(c.kind, c.seq, c.tool_name, c.automatic) for c in found] == [
        ("rejected_call", 4, "sql", "the deadline of 10 min passed")
    ]
    assert found[0].at.startswith("1970-01-01T00:00:03")


def test_the_word_diff_keeps_both_texts_and_their_markup_as_text() -> None:
    agent = 'The total is <b>5</b> <script>alert("x")</script> units.'
    corrected = "The total is 32 units."
    parts = word_diff(agent, corrected)
    assert "".join(p.text for p in parts if p.op != "added") == agent
    assert "".join(p.text for p in parts if p.op != "removed") == corrected
    assert [p.op for p in parts] == ["same", "removed", "added", "same"]
    assert [p.model_dump() for p in word_diff("same words", "same words")] == [
        {"op": "same", "text": "same words"}
    ]


def test_a_corrected_answer_is_refused_when_it_does_not_fit() -> None:
    ana = make_user("ana")
    task = make_notebook(ana)
    turn = Turn.objects.create(
        task=task,
        engine_id="t-1",
        index=1,
        input="hi",
        response="hello",
        token_limit=100_000,
    )
    open_turn = Turn.objects.create(
        task=task, engine_id="t-2", index=2, input="more", token_limit=100_000
    )
    for turn_id, text, why in (
        ("t-1", "   ", "Write the answer"),
        ("t-1", "x" * 20_001, "at most 20,000"),
        ("t-1", "a\x00b", "NUL"),
        ("t-2", "fine", "has no answer"),
        ("t-9", "fine", "has no answer"),
    ):
        with pytest.raises(ProtocolError, match=why):
            service.correct_answer(task, ana, turn_id, text)
    assert not CorrectedAnswer.objects.exists()
    first = service.correct_answer(task, ana, "t-1", "  hello there ")
    # the same text again stores nothing
    assert service.correct_answer(task, ana, "t-1", "hello there").pk == first.pk
    assert first.text == "hello there" and open_turn.corrected_answers.count() == 0
    assert turn.corrected_answers.count() == 1


# --- REST ---------------------------------------------------------------------------------


async def test_rest_lists_corrections_and_keeps_every_corrected_answer(
    ledger_server: ScriptedServer,
) -> None:
    pk = await ledger_notebook(ledger_server)
    ana, token = await user_with_token("ana")
    api = Api(token)
    listed = (await api.get(f"/notebooks/{pk}/corrections")).json()
    assert [c["kind"] for c in listed] == [
        "edited_arguments",
        "rejected_call",
        "undone",
        "undone",
        "edited_arguments",
    ]
    assert listed[1]["reason"] == REJECTION
    turn_id = (await database_sync_to_async(last_turn)(pk)).engine_id
    path = f"/notebooks/{pk}/turns/{turn_id}/corrected-answer"
    empty = (await api.get(path)).json()
    assert (empty["text"], empty["versions"], empty["agent_answer"]) == (
        None,
        [],
        LEDGER_ANSWER,
    )
    first = await api.put(path, {"text": "The sum is 32."})
    assert first.status_code == 200, first.content
    second = (await api.put(path, {"text": CORRECTED})).json()
    assert (second["text"], second["by"]) == (CORRECTED, "ana")
    assert [v["text"] for v in second["versions"]] == ["The sum is 32.", CORRECTED]
    assert {p["op"] for p in second["diff"]} == {"same", "removed", "added"}
    listed = (await api.get(f"/notebooks/{pk}/corrections")).json()
    assert listed[-1]["kind"] == "corrected_answer" and listed[-1]["versions"] == 2
    # refusals: an empty text names the field; a turn without an answer is not found
    empty_text = await api.put(path, {"text": ""})
    assert empty_text.status_code == 422 and "text" in empty_text.json()["detail"]
    missing = await api.put(
        f"/notebooks/{pk}/turns/nope/corrected-answer", {"text": "x"}
    )
    assert missing.status_code == 404
    # the traces list: filter and counts
    rows = (await api.get("/notebooks/", corrected="answer")).json()["items"]
    assert [r["id"] for r in rows] == [pk]
    assert rows[0]["corrections"] == {
        "edits": 2,
        "rejections": 1,
        "corrected_answers": 1,
    }
    assert (await api.get("/notebooks/", corrected="nonsense")).status_code == 422


async def test_only_the_owner_and_their_group_reviewers_may_correct(
    ledger_server: ScriptedServer,
) -> None:
    pk = await ledger_notebook(ledger_server)

    def setup() -> None:
        ana = make_user("ana")
        rita, sam = make_user("rita"), make_user("sam")
        team("sales", ana, rita, sam)
        may_review(rita)

    await database_sync_to_async(setup)()
    turn_id = (await database_sync_to_async(last_turn)(pk)).engine_id
    path = f"/notebooks/{pk}/turns/{turn_id}/corrected-answer"
    _, rita = await user_with_token("rita")
    _, sam = await user_with_token("sam")
    written = await Api(rita).put(path, {"text": CORRECTED})
    assert written.status_code == 200 and written.json()["by"] == "rita"
    assert (await Api(rita).get(f"/notebooks/{pk}/corrections")).status_code == 200
    for call in (
        Api(sam).put(path, {"text": "mine"}),
        Api(sam).get(f"/notebooks/{pk}/corrections"),
        Api(sam).get(path),
    ):
        assert (await call).status_code == 404
    versions = await database_sync_to_async(
        lambda: list(CorrectedAnswer.objects.values_list("author__username", "text"))
    )()
    assert versions == [("rita", CORRECTED)]
