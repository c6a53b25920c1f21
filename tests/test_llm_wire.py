"""The model client's hot path: messages encoded once, the body assembled from the pieces, SSE
decoded off the bytes. The recorded provider exchanges (test_llm_realworld.py) cover the replies.
What reads the stream (broken, quiet, slow, cancelled) runs on both transports (`llm_transport`)."""

from __future__ import annotations

import asyncio
import gc
import json
import weakref

import pytest
from engine_helpers import arithmetic_tools, llm_for, serving

from runs.engine import ChatMessage, ImagePart, LLMError
from runs.engine.llms import Transport
from runs.engine.llms.openai import message_to_openai
from runs.engine.llms.sse import SSEDecoder
from runs.engine.llms.wire_cache import WireCache
from runs.engine.testing import Reply, Rule, Timing

DATA_URL = "data:image/png;base64," + "iVBORw0KGgo" * 20_000

STREAM = (
    b": keep-alive\r\n"
    b'data: {"a": 1}\r\n\r\n'
    b"event: error\n"
    b'data: {"b":\n'
    b"data: 2}\n"
    b"\n"
    b"id: 7\n"
    b"data:[DONE]"  # no closing blank line: the stream just ends
)


def test_sse_events_are_the_same_however_the_bytes_are_split() -> None:
    expected = [(None, b'{"a": 1}'), ("error", b'{"b":\n2}'), (None, b"[DONE]")]
    for cut in range(len(STREAM) + 1):
        for step in (1, 3, len(STREAM)):
            decoder = SSEDecoder()
            pieces = [STREAM[:cut]] + [
                STREAM[i : i + step] for i in range(cut, len(STREAM), step)
            ]
            events = [e for piece in pieces for e in decoder.feed(piece)]
            events += decoder.close()
            assert [(e.event, e.data) for e in events] == expected, (cut, step)


def test_the_body_is_each_message_as_the_api_expects_and_tools_as_given() -> None:
    with serving(Rule(reply=Reply(text="ok"))) as server:
        llm = llm_for(server)
        history = [
            ChatMessage.system("be brief"),
            ChatMessage.user(
                "what is this? ünïcode", images=(ImagePart(url=DATA_URL),)
            ),
        ]
        llm.chat(history, tools=arithmetic_tools(), stop=["END"])
        body = server.requests[-1].body
        assert body["messages"] == [message_to_openai(m) for m in history]
        assert [t["function"]["name"] for t in body["tools"]] == ["multiply", "add"]
        assert body["stop"] == ["END"] and body["model"] == "scripted"
        assert body["stream"] is True and body["stream_options"] == {
            "include_usage": True
        }


def test_a_message_is_encoded_once_and_an_edit_is_a_new_piece() -> None:
    with serving(Rule(reply=Reply(text="a cat"))) as server:
        llm = llm_for(server)
        image = ChatMessage.user("what is this?", images=(ImagePart(url=DATA_URL),))
        history = [image]
        for turn in range(3):
            history += [llm.chat(history).message, ChatMessage.user(f"and {turn}?")]
            if turn == 0:
                piece = llm._wire.get(image, lambda m: b"not cached")
        # the image's JSON (220 KB) is the very bytes object encoded on the first call
        assert llm._wire.get(image, lambda m: b"not cached") is piece
        assert json.loads(piece) == message_to_openai(image)
        edited = history[1].model_copy(update={"content": "a dog"})
        history[1] = edited
        llm.chat(history)
        sent = server.requests[-1].messages
        assert sent[1]["content"] == "a dog" and len(sent) == len(history)
        assert llm._wire.get(edited, lambda m: b"not cached") != b"not cached"


def test_histories_that_grow_shrink_fork_and_interleave_convert_like_fresh_ones() -> (
    None
):
    """The recent-history shortcut must give exactly the pieces a fresh conversion gives."""
    cache: WireCache[str] = WireCache(size=1_000, recent=2)
    converted: list[str] = []

    def convert(message: ChatMessage) -> str:
        converted.append(message.content or "")
        return f"<{message.content}>"

    def expect(history: list[ChatMessage]) -> list[str]:
        return [f"<{m.content}>" for m in history]

    a = [ChatMessage.user(f"a{i}") for i in range(5)]
    b = [ChatMessage.user(f"b{i}") for i in range(3)]
    assert cache.get_all(a[:3], convert) == expect(a[:3])
    assert cache.get_all(a, convert) == expect(a)  # grows: only the tail is new
    assert converted == ["a0", "a1", "a2", "a3", "a4"]
    assert cache.get_all(b, convert) == expect(b)  # another conversation between
    assert cache.get_all(a[:2], convert) == expect(a[:2])  # undo: shorter
    edited = [a[0], ChatMessage.user("a1 edited"), *a[2:]]
    assert cache.get_all(edited, convert) == expect(edited)  # a new object mid-history
    assert converted[-1] == "a1 edited" and converted.count("a1") == 1
    returned = cache.get_all(a, convert)
    returned.append("caller's own")  # the caller's list is a copy
    assert cache.get_all(a, convert) == expect(a)
    assert cache.get_all(b + [ChatMessage.user("b3")], convert)[-1] == "<b3>"


def test_remembered_histories_keep_no_message_alive() -> None:
    """A finished conversation (a data-URL image, a long tool output) is freed at once."""
    cache: WireCache[bytes] = WireCache(size=1_000)
    history = [ChatMessage.user("look", images=(ImagePart(url=DATA_URL),))]
    history.append(ChatMessage.assistant("a cat"))
    image = weakref.ref(history[0])
    cache.get_all(history, lambda m: m.model_dump_json().encode())
    del history
    gc.collect()
    assert image() is None and len(cache) == 0
    after = [ChatMessage.user("new")]  # may reuse a dead message's id: converted anew
    assert cache.get_all(after, lambda m: b"new piece") == [b"new piece"]


@pytest.mark.parametrize(
    ("sse", "says"),
    [
        ('data: {"choices": [\n\n', "not JSON"),
        ("data: [1, 2]\n\n", "not a JSON object"),
        (
            'event: error\ndata: {"message": "overloaded"}\n\n',
            "error inside the stream: overloaded",
        ),
        (
            'data: {"error": {"message": "quota", "code": 429}}\n\n',
            "error inside the stream: quota",
        ),
    ],
)
def test_a_broken_stream_is_an_llm_error_that_says_what_broke(
    sse: str, says: str, llm_transport: Transport
) -> None:
    with serving(Rule(reply=Reply(raw_sse=sse))) as server:
        with pytest.raises(LLMError) as info:
            llm_for(server, transport=llm_transport).chat([ChatMessage.user("hi")])
        assert says in str(info.value)


def test_a_reply_that_is_not_json_is_an_llm_error(llm_transport: Transport) -> None:
    with serving(Rule(reply=Reply(raw_json=[1, 2]))) as server:
        llm = llm_for(server, transport=llm_transport)
        llm.streaming = False
        with pytest.raises(LLMError) as info:
            llm.chat([ChatMessage.user("hi")])
        assert "not a JSON object" in str(info.value)


FOREVER = 600.0  # far longer than any test waits


@pytest.mark.parametrize(
    ("timing", "where"),
    [
        (Timing(ttft_s=FOREVER), "before its first byte"),
        (Timing(token_delay_s=FOREVER), "between two chunks"),
    ],
)
async def test_a_stream_that_goes_quiet_is_an_llm_error_saying_where(
    timing: Timing, where: str, llm_transport: Transport
) -> None:
    # the response's headers come at once, then nothing: the reads are what time out
    with serving(Rule(reply=Reply(text="one two"), timing=timing)) as server:
        llm = llm_for(server, transport=llm_transport)
        llm.first_byte_timeout = llm.chunk_timeout = 0.5
        with pytest.raises(LLMError) as info:
            await llm.achat([ChatMessage.user("hi")])
    assert f"nothing for 0.5 s {where} (timeout)" in str(info.value)


async def test_a_slow_reader_of_the_stream_is_not_a_quiet_model(
    llm_transport: Transport,
) -> None:
    # only waits for the model count: a reader busy for longer than the timeout is no timeout
    with serving(Rule(reply=Reply(text="one two three"))) as server:
        llm = llm_for(server, transport=llm_transport)
        llm.first_byte_timeout = llm.chunk_timeout = 0.3
        chunks = []
        async for chunk in llm.astream_chat([ChatMessage.user("hi")]):
            chunks.append(chunk)
            if len(chunks) == 1:
                await asyncio.sleep(0.8)
    assert chunks[-1].message.text == "one two three"


async def test_cancelling_a_read_is_a_cancel_not_a_timeout(
    llm_transport: Transport,
) -> None:
    # Stop cancels the step's task while it waits for the model: that must stay a cancel
    with serving(
        Rule(reply=Reply(text="one two"), timing=Timing(token_delay_s=FOREVER))
    ) as server:
        llm = llm_for(server, transport=llm_transport)
        llm.first_byte_timeout = llm.chunk_timeout = 30.0
        first = asyncio.Event()

        async def read() -> None:
            async for _ in llm.astream_chat([ChatMessage.user("hi")]):
                first.set()

        reader = asyncio.ensure_future(read())
        await first.wait()
        reader.cancel()
        with pytest.raises(asyncio.CancelledError):
            await reader
