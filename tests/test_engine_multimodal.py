"""MultimodalReActAgentWorker: image_docs become image_url parts the scripted server receives."""

from __future__ import annotations

import base64
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

import pytest
from engine_helpers import arithmetic_tools, llm_for, serving

from runs.engine import AgentRunner, MultimodalReActAgentWorker, StepFailedError
from runs.engine.testing import Fault, Match, Reply, Rule


def tiny_png() -> bytes:
    """A valid 2x1 PNG, written by hand."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data))
            + kind
            + data
            + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", 2, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00\x00\x00\xff")
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", pixels)
        + chunk(b"IEND", b"")
    )


ANSWER = Rule(
    name="looks",
    match=Match(has_images=True),
    reply=Reply(text="Thought: I see a red and a blue pixel.\nAnswer: red, blue"),
)


@dataclass
class ImageDocument:
    """Shaped like LlamaIndex's ImageDocument (only the attributes the worker reads)."""

    image: str | None = None
    image_path: str | None = None
    image_url: str | None = None
    image_mimetype: str | None = None


def test_image_docs_reach_the_server_as_image_url_parts(tmp_path: Path) -> None:
    png = tiny_png()
    path = tmp_path / "chart.png"
    path.write_bytes(png)
    expected_data_url = "data:image/png;base64," + base64.b64encode(png).decode()
    docs = [
        str(path),
        "https://example.org/chart.png",
        ImageDocument(image=base64.b64encode(png).decode()),
        {"image_url": "data:image/gif;base64,R0lGODlhAQABAAAAACw="},
    ]
    with serving(ANSWER) as server:
        worker = MultimodalReActAgentWorker.from_tools(
            arithmetic_tools(), multi_modal_llm=llm_for(server)
        )
        agent = AgentRunner(worker)
        task = agent.create_task(
            "What colours are in the chart?", extra_state={"image_docs": docs}
        )
        path.unlink()  # the task read the file when it was created; it no longer needs it
        assert agent.run_step(task.task_id).is_last
        assert agent.finalize_response(task.task_id).response == "red, blue"

        request = server.requests[0]
        assert request.image_urls == [
            expected_data_url,
            "https://example.org/chart.png",
            expected_data_url,
            "data:image/gif;base64,R0lGODlhAQABAAAAACw=",
        ]
        user = next(m for m in request.messages if m["role"] == "user")
        assert user["content"][0] == {
            "type": "text",
            "text": "What colours are in the chart?",
        }
        assert user["content"][1] == {
            "type": "image_url",
            "image_url": {"url": expected_data_url},
        }
        assert "looking at the images" in request.system_text


def test_llm_keyword_is_accepted_and_images_go_only_with_the_first_message() -> None:
    rules = [
        Rule(
            name="act",
            match=Match(last_message_contains="Describe"),
            reply=Reply(
                text='Thought: count\nAction: add\nAction Input: {"a": 1, "b": 1}'
            ),
        ),
        Rule(
            name="answer",
            match=Match(last_message_contains="Observation: 2"),
            reply=Reply(text="Answer: two"),
        ),
    ]
    with serving(*rules) as server:
        worker = MultimodalReActAgentWorker.from_tools(
            arithmetic_tools(), llm=llm_for(server)
        )
        agent = AgentRunner(worker)
        task = agent.create_task(
            "Describe", extra_state={"image_docs": ["https://example.org/a.png"]}
        )
        agent.run_step(task.task_id)
        agent.run_step(task.task_id)
        assert [len(r.image_urls) for r in server.requests] == [
            1,
            1,
        ]  # the same opening message, resent
        assert agent.finalize_response(task.task_id).response == "two"


def test_a_server_that_refuses_images_names_the_setting() -> None:
    refuse = Rule(
        name="no-vision",
        match=Match(has_images=True),
        fault=Fault(
            status=400,
            message="Invalid content type. image_url is only supported by certain models.",
        ),
    )
    with serving(refuse) as server:
        worker = MultimodalReActAgentWorker.from_tools(
            arithmetic_tools(), multi_modal_llm=llm_for(server)
        )
        agent = AgentRunner(worker)
        task = agent.create_task(
            "What is this?", extra_state={"image_docs": ["https://example.org/a.png"]}
        )
        with pytest.raises(StepFailedError) as failure:
            agent.run_step(task.task_id)
        message = str(failure.value)
        assert "HTTP 400" in message and "image_url is only supported" in message
        assert "Set multi_modal_llm to a model that accepts image input" in message
        assert (
            agent.get_upcoming_steps(task.task_id)[0].input == "What is this?"
        )  # nothing lost


def test_bad_image_docs_are_refused_when_the_task_is_created(tmp_path: Path) -> None:
    not_image = tmp_path / "notes.txt"
    not_image.write_text("hello")
    with serving(ANSWER) as server:
        agent = AgentRunner(
            MultimodalReActAgentWorker.from_tools([], multi_modal_llm=llm_for(server))
        )
        with pytest.raises(ValueError, match="Image docs not found"):
            agent.create_task("x")
        with pytest.raises(ValueError, match="is not an image"):
            agent.create_task("x", extra_state={"image_docs": [str(not_image)]})
        with pytest.raises(ValueError, match="no image file"):
            agent.create_task(
                "x", extra_state={"image_docs": [str(tmp_path / "missing.png")]}
            )
        with pytest.raises(ValueError, match="not a PNG, JPEG, GIF or WebP"):
            agent.create_task(
                "x",
                extra_state={
                    "image_docs": [
                        ImageDocument(image=base64.b64encode(b"text").decode())
                    ]
                },
            )
        assert not server.requests
