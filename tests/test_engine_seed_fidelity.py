"""Where the engine follows the seeds more closely than it did (issue 43, item 5).

Each test names one difference that was closed; docs/engine.md's Differences table lists those kept.
"""

from __future__ import annotations

import typing

from runs.engine import AgentOutput, ChatMessage
from runs.engine.events import AgentEvent, BaseEvent, StateChange


def test_agent_output_prints_as_its_reply_text() -> None:
    said = AgentOutput(task_id="t", response=ChatMessage.assistant("405"))
    silent = AgentOutput(task_id="t", response=ChatMessage.assistant(None))
    assert (str(said), f"{said}", str(silent)) == ("405", "405", "")


def test_every_event_class_says_what_it_means() -> None:
    union = typing.get_args(typing.get_args(AgentEvent)[0])
    classes = [BaseEvent, StateChange, *union]
    assert len(union) == 24
    undocumented = [cls.__name__ for cls in classes if not cls.__doc__]
    assert undocumented == []
