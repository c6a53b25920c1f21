"""One model turn with its events: AgentInput, then AgentStream per delta, then AgentOutput."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from typing import Any

from ..errors import LLMError
from ..events import AgentInput, AgentOutput, AgentStream
from ..llms.base import LLM, ChatResponse, ToolChoice
from ..messages import ChatMessage
from ..tools import BaseTool
from ..types import Task, TaskStep


async def iter_turn(
    llm: LLM,
    task: Task,
    step: TaskStep,
    messages: Sequence[ChatMessage],
    tools: Sequence[BaseTool] | None = None,
    stop: Sequence[str] | None = None,
    phase: str | None = None,
    agent_name: str = "agent",
    tool_choice: ToolChoice | None = None,
    parallel_tool_calls: bool | None = None,
) -> AsyncGenerator[ChatResponse, None]:
    """Stream one reply like ``stream_turn``, also yielding each chunk to the caller as it arrives.

    For workers that act on a reply while it is being written (LLMCompiler dispatches plan lines).
    Each chunk is yielded after its AgentStream event; the last chunk is the complete reply, and
    AgentOutput is emitted once the caller has consumed it.
    """
    ids: dict[str, Any] = {"task_id": task.task_id, "step_id": step.step_id}
    await task.emit(
        AgentInput(
            **ids, input=list(messages), current_agent_name=agent_name, phase=phase
        )
    )
    final: ChatResponse | None = None
    async for chunk in llm.astream_chat(
        messages,
        tools=tools,
        stop=stop,
        tool_choice=tool_choice,
        parallel_tool_calls=parallel_tool_calls,
    ):
        final = chunk
        if chunk.delta:
            await task.emit(
                AgentStream(
                    **ids,
                    delta=chunk.delta,
                    response=chunk.message.text,
                    current_agent_name=agent_name,
                    phase=phase,
                )
            )
        yield chunk
    if final is None:
        raise LLMError("the model sent nothing: its reply stream was empty")
    await task.emit(
        AgentOutput(
            **ids,
            response=final.message,
            tool_calls=list(final.message.tool_calls),
            usage=final.usage,
            current_agent_name=agent_name,
            phase=phase,
        )
    )


async def stream_turn(
    llm: LLM,
    task: Task,
    step: TaskStep,
    messages: Sequence[ChatMessage],
    tools: Sequence[BaseTool] | None = None,
    stop: Sequence[str] | None = None,
    phase: str | None = None,
    agent_name: str = "agent",
    tool_choice: ToolChoice | None = None,
    parallel_tool_calls: bool | None = None,
) -> ChatResponse:
    """Stream one reply from ``llm``, emitting every delta, and return the complete reply."""
    final: ChatResponse | None = None
    async for chunk in iter_turn(
        llm,
        task,
        step,
        messages,
        tools=tools,
        stop=stop,
        phase=phase,
        agent_name=agent_name,
        tool_choice=tool_choice,
        parallel_tool_calls=parallel_tool_calls,
    ):
        final = chunk
    assert final is not None  # iter_turn raises on an empty stream
    return final
