"""Where the engine follows the seeds more closely than it did (issue 43, item 5).

Each test names one difference that was closed; docs/engine.md's Differences table lists those kept.
"""

from __future__ import annotations

import typing
from typing import Any

from engine_helpers import SEED_QUESTION, make_agent, seed_rules, serving

from runs.engine import AgentOutput, BaseCallbackHandler, CallbackManager, ChatMessage
from runs.engine.events import AgentEvent, BaseEvent, StateChange


class Ends(BaseCallbackHandler):
    """Records the type of every span a callback manager closes, with the task it belongs to."""

    def __init__(self) -> None:
        self.ended: list[tuple[str, str]] = []

    def on_event_end(
        self,
        event_type: Any,
        payload: dict[str, Any] | None = None,
        event_id: str = "",
        **kwargs: Any,
    ) -> None:
        assert payload is not None
        self.ended.append((str(event_type), payload["event"].task_id))


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


def test_create_task_forwards_its_callback_manager_to_that_task_alone() -> None:
    runner_ends, task_ends = Ends(), Ends()
    with serving(*seed_rules()) as server:
        agent, _ = make_agent(server, callback_manager=CallbackManager([runner_ends]))
        manager = CallbackManager([task_ends])
        task = agent.create_task(SEED_QUESTION, callback_manager=manager)
        assert agent.get_task(task.task_id).callback_manager is manager
        out = agent.run_step(task.task_id)
        while not out.is_last:
            out = agent.run_step(task.task_id)
        agent.finalize_response(task.task_id)
        other = agent.create_task(SEED_QUESTION)
        assert agent.get_task(other.task_id).callback_manager is agent.callback_manager
        agent.run_step(other.task_id)
    kinds = [kind for kind, _ in task_ends.ended]
    assert kinds.count("agent_step") == 3 and kinds.count("function_call") == 2
    assert {task_id for _, task_id in task_ends.ended} == {task.task_id}
    # the runner's own manager still hears every task
    assert {task_id for _, task_id in runner_ends.ended} == {
        task.task_id,
        other.task_id,
    }
