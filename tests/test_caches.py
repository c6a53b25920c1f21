"""Process-wide caches stay bounded: they never keep alive what nothing else uses."""

from __future__ import annotations

import asyncio
import gc
import weakref

from engine_helpers import llm_for, serving

from runs.engine import ChatMessage, ImagePart
from runs.engine.testing import Reply, Rule
from runs.realtime import publisher as publishers

DATA_URL = "data:image/png;base64," + "A" * 2_000_000


# --- the OpenAI LLM's converted messages ------------------------------------------------------------


def test_converted_messages_go_with_their_messages() -> None:
    with serving(Rule(reply=Reply(text="a cat"))) as server:
        llm = llm_for(server)  # one LLM for the whole process, as the app has
        history = [ChatMessage.user("what is this?", images=(ImagePart(url=DATA_URL),))]
        for turn in range(3):
            history += [llm.chat(history).message, ChatMessage.user(f"and now? {turn}")]
        # each message sent was converted once, and reused every turn
        assert len(llm._wire) == len(history) - 2
        image = weakref.ref(history[0])
        others = [ChatMessage.user(f"notebook {n}") for n in range(50)]
        llm.chat(others)
        assert len(llm._wire) == len(history) - 2 + 50
        del history, others
        gc.collect()
        assert image() is None  # the 2 MB image was not kept by the cache
        assert len(llm._wire) == 0


def test_converted_messages_are_reused_while_their_message_lives() -> None:
    with serving(Rule(reply=Reply(text="ok"))) as server:
        llm = llm_for(server)
        kept = ChatMessage.user("kept")
        llm.chat([kept])
        for n in range(20):
            # each passing message dies at once
            llm.chat([kept, ChatMessage.user(f"passing {n}")])
        gc.collect()
        assert len(llm._wire) == 1
        again = {"converted": "again"}
        assert llm._wire.get(kept, lambda m: again) is not again


def test_the_cache_has_a_ceiling_for_messages_that_all_stay_alive() -> None:
    with serving(Rule(reply=Reply(text="ok"))) as server:
        llm = llm_for(server)
        llm._wire.size = 10
        alive = [ChatMessage.user(f"m{n}") for n in range(25)]
        llm.chat(alive)
        assert len(llm._wire) == 10  # the least recently used went first
        assert llm._wire.get(alive[-1], lambda m: {}) != {}  # the newest stayed


# --- publishers ---------------------------------------------------------------------------------------


def publishers_of_this_loop() -> int:
    return len(publishers._publishers.get(asyncio.get_running_loop(), {}))


async def test_a_publisher_stays_while_used_and_goes_when_nothing_uses_it() -> None:
    used = publishers.publisher_for(10**9)
    for pk in range(10**9 + 1, 10**9 + 1001):  # notebooks opened once, long ago
        publishers.publisher_for(pk)
    gc.collect()
    # one per notebook while in use: its events keep their order
    assert publishers.publisher_for(10**9) is used
    assert publishers.existing_publisher(10**9 + 1) is None
    assert publishers_of_this_loop() == 1


def test_a_finished_event_loop_takes_its_publishers_with_it() -> None:
    async def open_notebooks() -> list[object]:
        return [publishers.publisher_for(pk) for pk in range(10**9, 10**9 + 20)]

    before = len(publishers._publishers)
    held = asyncio.run(open_notebooks())  # even while they are still referenced
    del held
    gc.collect()
    assert len(publishers._publishers) == before
