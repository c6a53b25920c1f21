"""One model turn with its events: AgentInput, then AgentStream per delta, then AgentOutput."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from typing import Any, Unpack

from ..errors import LLMError
from ..events import AgentInput, AgentOutput, AgentStream
from ..llms.base import LLM, ChatOptions, ChatResponse
from ..messages import ChatMessage, ToolSelection
from ..stopped_note import take_note, with_note
from ..types import Task, TaskStep, new_id


def _ids(
    task: Task, step: TaskStep, agent_name: str, phase: str | None
) -> dict[str, Any]:
    """The fields every event of the turn carries (defaults left out: fewer to validate)."""
    ids: dict[str, Any] = {"task_id": task.task_id, "step_id": step.step_id}
    if agent_name != "agent":
        ids["current_agent_name"] = agent_name
    if phase is not None:
        ids["phase"] = phase
    return ids


class _DistinctCallIds:
    """Gives each tool call of a reply an id no other call of the conversation has.

    A call's id is all that ties it to its answer (the tool message), to a person's edit or
    rejection, and to its cards on every surface. A model may repeat one (two calls of a reply
    named alike, or the same id in every reply, as some servers send): a rejection meant for one
    call would then reject another, and the model could not tell which answer is whose. Such a
    call gets a fresh id here, before anything records or runs the reply, so the audit, the
    tools and the model's next request all name it the same way.
    """

    def __init__(self, task: Task, messages: Sequence[ChatMessage]) -> None:
        self.taken: set[str] = set()
        for message in [*task.memory.get_all(), *messages]:
            self.taken.update(call.tool_id for call in message.tool_calls)
            if message.tool_call_id:
                self.taken.add(message.tool_call_id)
        # a renamed call's position in the reply -> its new id (the same in every chunk)
        self.renamed: dict[int, str] = {}

    def __call__(self, reply: ChatResponse) -> ChatResponse:
        calls = reply.message.tool_calls
        if not calls:
            return reply
        seen: set[str] = set()
        fixed: list[ToolSelection] = []
        for index, call in enumerate(calls):
            tool_id = self.renamed.get(index)
            if tool_id is None and (call.tool_id in self.taken or call.tool_id in seen):
                tool_id = self.renamed[index] = f"call_{new_id().replace('-', '')[:24]}"
            seen.add(tool_id or call.tool_id)
            fixed.append(
                call
                if tool_id is None
                else call.model_copy(update={"tool_id": tool_id})
            )
        if fixed == list(calls):
            return reply
        message = reply.message.model_copy(update={"tool_calls": tuple(fixed)})
        return reply.model_copy(update={"message": message})


async def _finish(task: Task, ids: dict[str, Any], final: ChatResponse | None) -> None:
    if final is None:
        raise LLMError("the model sent nothing: its reply stream was empty")
    await task.emit(
        AgentOutput(
            **ids,
            response=final.message,
            tool_calls=list(final.message.tool_calls),
            usage=final.usage,
        )
    )


async def _ask(
    task: Task, step: TaskStep, ids: dict[str, Any], messages: Sequence[ChatMessage]
) -> list[ChatMessage]:
    """What the model is sent, announced: the step's first request after a Stop that cut off
    calls it had begun also tells it of them (runs.engine.stopped_note)."""
    note = take_note(task, step)
    if note is not None:
        await task.emit(note)
    sent = with_note(messages, note)
    await task.emit(AgentInput(**ids, input=sent))
    return sent


async def iter_turn(
    llm: LLM,
    task: Task,
    step: TaskStep,
    messages: Sequence[ChatMessage],
    *,
    phase: str | None = None,
    agent_name: str = "agent",
    **options: Unpack[ChatOptions],
) -> AsyncGenerator[ChatResponse, None]:
    """Stream one reply like ``stream_turn``, also yielding each chunk to the caller as it arrives.

    For workers that act on a reply while it is being written (LLMCompiler dispatches plan lines).
    Each chunk is yielded after its AgentStream event; the last chunk is the complete reply, and
    AgentOutput is emitted once the caller has consumed it.
    """
    ids = _ids(task, step, agent_name, phase)
    messages = await _ask(task, step, ids, messages)
    distinct = _DistinctCallIds(task, messages)
    final: ChatResponse | None = None
    async for chunk in llm.astream_chat(messages, **options):
        final = chunk = distinct(chunk)
        if chunk.delta:
            await task.emit(
                AgentStream(**ids, delta=chunk.delta, response=chunk.message.text)
            )
        yield chunk
    await _finish(task, ids, final)


async def stream_turn(
    llm: LLM,
    task: Task,
    step: TaskStep,
    messages: Sequence[ChatMessage],
    *,
    phase: str | None = None,
    agent_name: str = "agent",
    **options: Unpack[ChatOptions],
) -> ChatResponse:
    """Stream one reply from ``llm``, emitting every delta, and return the complete reply:
    ``iter_turn`` with its chunks left to the events (one loop serves both)."""
    final: ChatResponse | None = None
    async for chunk in iter_turn(
        llm, task, step, messages, phase=phase, agent_name=agent_name, **options
    ):
        final = chunk
    assert final is not None  # iter_turn raises on an empty stream
    return final
