"""Hostile clients: hundreds of malformed, oversized, unknown or not-allowed messages.

Each must get exactly one `error` (echoing the request id when one could be read), the socket
must stay open, and the database must not change. The messages come from a seeded generator,
so a failure replays exactly.
"""

from __future__ import annotations

import json
import random
import string
from collections.abc import Callable
from typing import Any

import pytest
from channels.db import database_sync_to_async

from runs import service
from runs.protocol import MAX_MESSAGE_BYTES, MAX_TEXT_CHARS, ErrorCode
from runs.protocol.checks import storable_problem
from tests.live_support import (
    QUESTION,
    Client,
    analyst_script,
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    db_snapshot,
    llm_at,
    make_notebook,
    make_user,
)

pytestmark = [pytest.mark.ws, pytest.mark.db, pytest.mark.django_db(transaction=True)]

INVALID = ErrorCode.INVALID_INPUT.value
SEED = 20_251_122
COUNT = 1_000

Frame = tuple[str | bytes, set[str]]  # what to send, the error codes that may answer it


class Hostile:
    """Generates messages that must all be refused, for a notebook waiting at a tool-call step."""

    def __init__(
        self,
        rng: random.Random,
        waiting: str,
        tool_ids: list[str],
        foreign: str,
        last_seq: int,
    ) -> None:
        self.rng = rng
        self.waiting = waiting
        self.tool_ids = tool_ids
        self.foreign = foreign
        self.last_seq = last_seq
        self.kinds: list[Callable[[], Frame]] = [
            self.bad_json,
            self.not_an_object,
            self.unknown_action,
            self.wrong_types,
            self.extra_fields,
            self.too_large,
            self.binary,
            self.foreign_ids,
            self.not_allowed_now,
            self.bad_tool_arguments,
            self.deep_nesting,
            self.unstorable_text,
            self.deeply_nested_input,
            self.odd_tool_ids,
        ]

    def text(self, n: int) -> str:
        return "".join(self.rng.choice(string.printable) for _ in range(n))

    def rid(self) -> dict[str, Any]:
        return (
            {"request_id": f"f{self.rng.randrange(10**6)}"}
            if self.rng.random() < 0.8
            else {}
        )

    def frame(self) -> Frame:
        return self.rng.choice(self.kinds)()

    def bad_json(self) -> Frame:
        options = [
            " ",
            "{",
            "}",
            "nul",
            "{'action': 'undo'}",
            '{"action": "undo",}',
            '{"action": undo}',
            self.text(40),
            '{"action": "approve", "step_id": "' + "x" * 10,
            "\x00\x01",
            "NaN]",
            '"unterminated',
        ]
        return self.rng.choice(options), {"bad_json"}

    def not_an_object(self) -> Frame:
        value: Any = self.rng.choice(
            [[], [1, 2], 3, -1.5, "approve", None, True, [{"action": "undo"}]]
        )
        return json.dumps(value), {"bad_json"}

    def unknown_action(self) -> Frame:
        action: Any = self.rng.choice(
            [
                "",
                "APPROVE",
                "delete",
                "drop_table",
                "approve ",
                self.text(8),
                7,
                None,
                [],
                {"a": 1},
            ]
        )
        message: dict[str, Any] = {"step_id": self.waiting, **self.rid()}
        if self.rng.random() < 0.9:
            message["action"] = action
        return json.dumps(message), {"unknown_action"}

    def wrong_types(self) -> Frame:
        choices: list[dict[str, Any]] = [
            {
                "action": "send_message",
                "text": self.rng.choice([1, None, "", ["hi"], {"t": 1}, True]),
            },
            {"action": "send_message", "text": "x" * (MAX_TEXT_CHARS + 1)},
            {
                "action": "approve",
                "step_id": self.rng.choice([1, None, "", "x" * 65, ["a"], False]),
            },
            {"action": "approve"},
            {"action": "edit_input", "step_id": self.waiting},
            {
                "action": "edit_input",
                "step_id": self.waiting,
                "input": self.rng.choice([1, None, ["a"], {"b": 2}]),
            },
            {
                "action": "reject_tool_call",
                "step_id": self.waiting,
                "tool_id": self.rng.choice(["", 3, None]),
            },
            {
                "action": "reject_tool_call",
                "step_id": self.waiting,
                "tool_id": "call_add",
                "reason": "r" * 2001,
            },
            {"action": "undo", "step_id": self.rng.choice([5, "", ["x"]])},
            {
                "action": "set_mode",
                "mode": self.rng.choice(["AUTO", "fast", "", 1, None, "tool"]),
            },
            {
                "action": "resume",
                "last_seq": self.rng.choice([-1, "3", 1.5, True, None, 2**40, [1]]),
            },
            {"action": "resume"},
            {"action": "abandon", "request_id": self.rng.choice([7, ["r"], "r" * 129])},
        ]
        return json.dumps({**self.rid(), **self.rng.choice(choices)}), {INVALID}

    def extra_fields(self) -> Frame:
        message = self.rng.choice(
            [
                {"action": "abandon", "force": True},
                {"action": "undo", "steps": 3},
                {"action": "approve", "step_id": self.waiting, "owner": 1},
                {"action": "set_mode", "mode": "auto", "task": 1},
            ]
        )
        return json.dumps({**self.rid(), **message}), {INVALID}

    def too_large(self) -> Frame:
        size = MAX_MESSAGE_BYTES + self.rng.randrange(1, 200_000)
        message = {"action": "send_message", "text": "y" * size, **self.rid()}
        return json.dumps(message), {"too_large"}

    def binary(self) -> Frame:
        payload = json.dumps({"action": "approve", "step_id": self.waiting}).encode()
        return self.rng.choice(
            [payload, bytes(self.rng.randrange(256) for _ in range(20))]
        ), {"bad_json"}

    def foreign_ids(self) -> Frame:
        step_id = self.rng.choice(
            [
                self.foreign,
                "00000000-0000-0000-0000-000000000000",
                self.text(20).strip() or "z",
            ]
        )
        message = self.rng.choice(
            [
                {"action": "approve", "step_id": step_id},
                {"action": "edit_input", "step_id": step_id, "input": "steal"},
                {
                    "action": "reject_tool_call",
                    "step_id": step_id,
                    "tool_id": "call_add",
                    "reason": "x",
                },
                {"action": "undo", "step_id": step_id},
            ]
        )
        return json.dumps({**self.rid(), **message}), {"not_found"}

    def not_allowed_now(self) -> Frame:
        frames: list[Frame] = [
            (
                json.dumps({"action": "send_message", "text": QUESTION, **self.rid()}),
                {"not_allowed"},
            ),
            (
                json.dumps({"action": "undo", "step_id": self.waiting, **self.rid()}),
                {"not_allowed"},
            ),
            (
                json.dumps(
                    {
                        "action": "resume",
                        "last_seq": self.last_seq + self.rng.randrange(1, 99),
                        **self.rid(),
                    }
                ),
                {INVALID},
            ),
            (
                json.dumps(
                    {
                        "action": "reject_tool_call",
                        "step_id": self.waiting,
                        "tool_id": "call_nope",
                        "reason": "x",
                    }
                ),
                {"not_found"},
            ),
        ]
        return self.rng.choice(frames)

    def bad_tool_arguments(self) -> Frame:
        tool_id = self.rng.choice(self.tool_ids)
        edit = self.rng.choice(
            [
                "not json",
                "{}",
                "[1, 2]",
                json.dumps([{"tool_id": "call_nope", "tool_kwargs": {}}]),
                json.dumps([{"tool_id": tool_id, "tool_kwargs": {"a": "two", "b": 3}}]),
                json.dumps([{"tool_id": tool_id, "tool_kwargs": "a=1"}]),
                json.dumps(
                    [{"tool_id": tool_id, "tool_kwargs": {"a": [1], "b": {"c": 1}}}]
                ),
            ]
        )
        message = {
            "action": "edit_input",
            "step_id": self.waiting,
            "input": edit,
            **self.rid(),
        }
        return json.dumps(message), {"invalid_tool_arguments"}

    def deep_nesting(self) -> Frame:
        depth = self.rng.randrange(5_000, 30_000)
        return "[" * depth + "]" * depth, {"bad_json"}

    def unstorable_text(self) -> Frame:
        """A NUL or a lone surrogate (JSON's \\ud800) in any string field: PostgreSQL cannot store it."""
        bad = self.text(self.rng.randrange(0, 6)) + self.rng.choice(
            ["\x00", "\ud800", "\udfff", "\udc00x", "a\x00b"]
        )
        message = self.rng.choice(
            [
                {"action": "send_message", "text": bad},
                {"action": "approve", "step_id": bad},
                {"action": "edit_input", "step_id": self.waiting, "input": bad},
                {"action": "edit_input", "step_id": bad, "input": "x"},
                {
                    "action": "reject_tool_call",
                    "step_id": self.waiting,
                    "tool_id": self.rng.choice([bad, self.tool_ids[0]]),
                    "reason": bad,
                },
                {"action": "undo", "step_id": bad},
                {"action": "abandon", "request_id": bad},
            ]
        )
        return json.dumps({**self.rid(), **message}), {INVALID}

    def deeply_nested_input(self) -> Frame:
        depth = self.rng.choice([33, 100, 1_000, 10_000])
        nested = self.rng.choice(["[", '{"a":']) * depth
        closing = "]" * depth if nested.startswith("[") else "}" * depth
        inner = nested + "1" + closing
        if self.rng.random() < 0.5:  # as a tool call's arguments
            inner = '[{"tool_id": "x", "tool_kwargs": {"a": ' + inner + "}}]"
        message = {
            "action": "edit_input",
            "step_id": self.waiting,
            "input": inner,
            **self.rid(),
        }
        frame = json.dumps(message)
        return frame, {INVALID, "too_large"} if len(frame) > MAX_MESSAGE_BYTES else {
            INVALID
        }

    def odd_tool_ids(self) -> Frame:
        tool_id = self.rng.choice([["call_add"], {"id": 1}, 5, None, True, 1.5])
        edit = json.dumps([{"tool_id": tool_id, "tool_kwargs": {"a": 1, "b": 2}}])
        message = {
            "action": "edit_input",
            "step_id": self.waiting,
            "input": edit,
            **self.rid(),
        }
        return json.dumps(message), {"invalid_tool_arguments"}


async def test_hostile_messages_change_nothing(scripted_server: Any) -> None:
    server = scripted_server(analyst_script())
    with llm_at(server):
        alice = await database_sync_to_async(make_user)("alice")
        bob = await database_sync_to_async(make_user)("bob")
        notebook = await database_sync_to_async(make_notebook)(alice, mode="tools")
        await service.send_message(notebook.pk, QUESTION)
        await service.wait_idle()
        other = await service.create_notebook(bob, QUESTION, "function_calling", "step")

        before = await database_sync_to_async(db_snapshot)()
        waiting = next(
            s
            for s in before["step"]
            if s["task_id"] == notebook.pk and s["queue_position"] == 0
        )
        foreign = next(s["step_id"] for s in before["step"] if s["task_id"] == other.pk)
        assert waiting["kind"] == "tool_calls"
        last_seq = next(t["last_seq"] for t in before["task"] if t["id"] == notebook.pk)
        tool_ids = [c["tool_id"] for c in waiting["tool_calls"]]

        client = await Client.open(alice, notebook.pk)
        hostile = Hostile(
            random.Random(SEED), waiting["step_id"], tool_ids, foreign, last_seq
        )
        seen_codes: set[str] = set()
        for number in range(COUNT):
            frame, codes = hostile.frame()
            if isinstance(frame, bytes):
                await client.ws.send_to(bytes_data=frame)
            else:
                await client.send_raw(frame)
            reply = await client.receive(timeout=10)
            assert reply["type"] == "error", (number, frame[:200], reply)
            assert reply["code"] in codes, (number, frame[:200], reply)
            sent_id = _request_id(frame)
            if sent_id is not None and reply["code"] not in ("bad_json", "too_large"):
                assert reply.get("request_id") == sent_id, (number, reply)
            seen_codes.add(reply["code"])
        assert seen_codes >= {
            "bad_json",
            "too_large",
            INVALID,
            "unknown_action",
            "not_found",
            "not_allowed",
            "invalid_tool_arguments",
        }

        await client.send("resume", last_seq=0)  # still open, still answering
        done = await client.until(lambda m: m["type"] == "replay_done")
        assert done["last_seq"] == last_seq
        await client.close()
        assert await database_sync_to_async(db_snapshot)() == before
        assert len(server.requests) == 1  # only the setup's model turn


def _request_id(frame: str | bytes) -> str | None:
    if isinstance(frame, bytes):
        return None
    try:
        data = json.loads(frame)
    except (ValueError, RecursionError):
        return None
    value = data.get("request_id") if isinstance(data, dict) else None
    if isinstance(value, str) and storable_problem(value) is not None:
        return None  # not echoed: it is not text the server can store or send back
    return value if isinstance(value, str) and len(value) <= 128 else None
