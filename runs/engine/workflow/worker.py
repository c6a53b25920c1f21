"""AgentWorkflowWorker: each agent turn (one model call and the tool calls it chose) is one TaskStep.

So the runner's undo, step editing and tool approval work on multi-agent runs as on single-agent
ones. The workflow's state lives in ``task.extra_state`` (see ``run_state``): undoing a step that
handed off gives control back to the agent that handed off.

Steps: an LLM step is one agent's turn; with approval on, its calls become a TOOL_CALLS step; a
call that asks the person a question pauses the turn in a HUMAN_INPUT step, whose input is the
answer (the waiting calls run again then, the others' results are kept).
"""

from __future__ import annotations

import asyncio
import copy
import json
from typing import TYPE_CHECKING, Any

from ..errors import WorkflowConfigError
from ..events import (
    AgentEvent,
    AgentHandoff,
    HumanResponseEvent,
    StateChange,
    StateChanged,
)
from ..messages import ChatMessage, MessageRole, TokenUsage
from ..tools import BaseTool, FunctionTool, ToolOutput, tools_by_name
from ..types import (
    AgentChatResponse,
    PendingToolCall,
    StepKind,
    Task,
    TaskStep,
    TaskStepOutput,
)
from ..workers.base import BaseAgentWorker
from ..workers.tool_calls import returns_direct, run_one_call, show_what_runs
from .context import Context, WaitingForInput
from .prompts import fill, render_state
from .run_state import KEY, WorkflowRunState, question_waiters

if TYPE_CHECKING:
    from .workflow import AgentWorkflow


def _last_user_text(task: Task) -> str:
    for message in reversed(task.memory.messages):
        if message.role is MessageRole.USER:
            return message.text
    return task.input


class AgentWorkflowWorker(BaseAgentWorker):
    def __init__(self, workflow: AgentWorkflow) -> None:
        self.workflow = workflow

    def initialize_step(self, task: Task, **kwargs: Any) -> TaskStep:
        if KEY not in task.extra_state:
            self.workflow.fresh_run_state().save(task)
        return TaskStep(task_id=task.task_id, input=task.input or None)

    def announcements(self, task: Task, output: TaskStepOutput) -> list[AgentEvent]:
        """The questions a paused step waits on, once the pause is stored."""
        run = WorkflowRunState.of(task)
        return [
            run.questions[waiter].event(task.task_id)
            for following in output.next_steps
            if following.kind is StepKind.HUMAN_INPUT
            for waiter in question_waiters(following)
            if waiter in run.questions
        ]

    def carry_over(self, previous: Task) -> dict[str, Any]:
        """The next task starts with the state and current agent the previous one ended with."""
        if KEY not in previous.extra_state:
            return {}
        return {KEY: WorkflowRunState.of(previous).carried().model_dump(mode="json")}

    def get_tools(self, input: str = "") -> list[BaseTool]:
        seen: dict[str, BaseTool] = {}
        for agent in self.workflow.agents.values():
            for tool in [*agent.tools, *self.workflow.handoff_tools(agent)]:
                seen.setdefault(
                    tool.metadata.name, tool
                )  # handoff: one schema for all agents
        return list(seen.values())

    async def arun_step(
        self, step: TaskStep, task: Task, **kwargs: Any
    ) -> TaskStepOutput:
        run = WorkflowRunState.of(task)
        state_before = copy.deepcopy(run.state)
        ctx = Context.for_step(self.workflow, task, step, run)
        if step.kind is StepKind.HUMAN_INPUT:
            output = await self._answered(step, task, run, ctx)
        elif step.kind is StepKind.TOOL_CALLS:
            show_what_runs(task.memory, list(step.tool_calls or []))
            output = await self._run_calls(
                step, task, run, ctx, list(step.tool_calls or []), {}, "", None
            )
        else:
            output = await self._turn(step, task, run, ctx)
        run.check_saveable()
        if run.state != state_before:
            changes = {
                k: StateChange(before=state_before.get(k), after=run.state.get(k))
                for k in sorted(set(state_before) | set(run.state))
                if state_before.get(k) != run.state.get(k)
            }
            await task.emit(
                StateChanged(
                    task_id=task.task_id,
                    step_id=step.step_id,
                    state=run.state,
                    changes=changes,
                )
            )
        run.save(task)
        return output

    # --- a turn ----------------------------------------------------------------------------------

    async def _turn(
        self, step: TaskStep, task: Task, run: WorkflowRunState, ctx: Context
    ) -> TaskStepOutput:
        agent = self.workflow.agents[run.current_agent]
        if step.input:
            text = step.input
            if run.state:
                text = fill(
                    self.workflow.state_prompt, state=render_state(run.state), msg=text
                )
            task.memory.put(ChatMessage.user(text))
        tools = await self.workflow.tools_for(agent, _last_user_text(task))
        turn = await agent.take_turn(task, step, task.memory.get(), tools)
        task.memory.put(turn.message)
        task.memory.put_messages(turn.extra_messages)
        if turn.go_on:
            return TaskStepOutput(
                output=AgentChatResponse(response=turn.text, usage=turn.usage),
                task_step=step,
                next_steps=[step.get_next_step(step_state={})],
            )
        if not turn.tool_calls:
            return TaskStepOutput(
                output=AgentChatResponse(
                    response=agent.final_text(turn.text), usage=turn.usage
                ),
                task_step=step,
                is_last=True,
            )
        calls = [PendingToolCall.from_selection(s) for s in turn.tool_calls]
        if task.approve_tool_calls:
            approval = step.get_next_step(
                kind=StepKind.TOOL_CALLS, tool_calls=calls, step_state={}
            )
            approval.input = approval.tool_calls_as_input()
            return TaskStepOutput(
                output=AgentChatResponse(response=turn.text, usage=turn.usage),
                task_step=step,
                next_steps=[approval],
            )
        return await self._run_calls(
            step, task, run, ctx, calls, {}, turn.text, turn.usage
        )

    # --- tool calls ------------------------------------------------------------------------------

    async def _run_calls(
        self,
        step: TaskStep,
        task: Task,
        run: WorkflowRunState,
        ctx: Context,
        calls: list[PendingToolCall],
        done: dict[str, ToolOutput],
        text: str,
        usage: TokenUsage | None,
    ) -> TaskStepOutput:
        """Run the calls not yet ``done``; pause if any waits for the person, else finish the turn."""
        agent = self.workflow.agents[run.current_agent]
        tools = tools_by_name(
            await self.workflow.tools_for(agent, _last_user_text(task))
        )
        todo = [c for c in calls if c.tool_id not in done]
        results = await asyncio.gather(
            *(
                run_one_call(task, step, _with_context(tools, call, ctx), call)
                for call in todo
            ),
            return_exceptions=True,
        )
        waiting: list[PendingToolCall] = []
        for call, result in zip(todo, results):
            if isinstance(result, WaitingForInput):
                waiting.append(call)
            elif isinstance(result, BaseException):
                raise result
            else:
                done[call.tool_id] = result
        if waiting:
            return self._pause(step, run, calls, done, waiting, text, usage)
        outputs = [done[c.tool_id] for c in calls]
        task.memory.put_messages(agent.result_messages(calls, outputs))
        run.answers.clear()  # every call that asked has its result now
        following = step.get_next_step(step_state={})
        if run.handoff_to is not None:
            await task.emit(
                AgentHandoff(
                    task_id=task.task_id,
                    step_id=step.step_id,
                    from_agent=run.current_agent,
                    to_agent=run.handoff_to,
                    reason=run.handoff_reason,
                )
            )
            run.current_agent, run.handoff_to, run.handoff_reason = (
                run.handoff_to,
                None,
                "",
            )
        else:
            direct = returns_direct(tools, outputs)
            if direct is not None:
                return TaskStepOutput(
                    output=AgentChatResponse(
                        response=direct.content, sources=outputs, usage=usage
                    ),
                    task_step=step,
                    is_last=True,
                )
        return TaskStepOutput(
            output=AgentChatResponse(response=text, sources=outputs, usage=usage),
            task_step=step,
            next_steps=[following],
        )

    def _pause(
        self,
        step: TaskStep,
        run: WorkflowRunState,
        calls: list[PendingToolCall],
        done: dict[str, ToolOutput],
        waiting: list[PendingToolCall],
        text: str,
        usage: TokenUsage | None,
    ) -> TaskStepOutput:
        waiting_ids = {c.tool_id for c in waiting}
        questions = [q for q in run.questions.values() if q.tool_id in waiting_ids]
        state = {
            "calls": [c.model_dump(mode="json") for c in calls],
            "done": {
                tool_id: out.model_dump(mode="json") for tool_id, out in done.items()
            },
            "questions": [q.waiter_id for q in questions],
        }
        ask = step.get_next_step(
            kind=StepKind.HUMAN_INPUT, tool_calls=waiting, step_state=state
        )
        asked = (
            "; ".join(q.prefix for q in questions if q.prefix)
            or "a question from a tool"
        )
        return TaskStepOutput(
            output=AgentChatResponse(
                response=text or f"Waiting for the person: {asked}", usage=usage
            ),
            task_step=step,
            next_steps=[ask],
        )

    async def _answered(
        self, step: TaskStep, task: Task, run: WorkflowRunState, ctx: Context
    ) -> TaskStepOutput:
        """Take the person's answer(s) from the step's input and run the calls that waited for them."""
        waiters = question_waiters(step)
        answers = _parse_answers(step.input, waiters)
        for waiter_id, answer in answers.items():
            run.answers[waiter_id] = answer
            asked = run.questions.pop(waiter_id, None)
            await task.emit(
                HumanResponseEvent(
                    task_id=task.task_id,
                    step_id=step.step_id,
                    response=answer,
                    waiter_id=waiter_id,
                    tool_id=asked.tool_id if asked else None,
                )
            )
        calls = [
            PendingToolCall.model_validate(c) for c in step.step_state.get("calls", [])
        ]
        done = {
            tool_id: ToolOutput.model_validate(out)
            for tool_id, out in step.step_state.get("done", {}).items()
        }
        return await self._run_calls(step, task, run, ctx, calls, done, "", None)


def _parse_answers(text: str | None, waiters: list[str]) -> dict[str, str]:
    """The step's input as answers: plain text answers every question; a JSON object maps waiter id to answer."""
    if not text or not text.strip():
        raise WorkflowConfigError(
            "the question needs an answer: write it as this step's input"
        )
    if len(waiters) > 1:
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError:
            parsed = None
        if isinstance(parsed, dict) and parsed and set(parsed) <= set(waiters):
            return {str(k): str(v) for k, v in parsed.items()}
    return dict.fromkeys(waiters, text)


def _with_context(
    tools: dict[str, BaseTool], call: PendingToolCall, ctx: Context
) -> dict[str, BaseTool]:
    """``tools`` with the called one given this call's context, if it takes one."""
    tool = tools.get(call.tool_name)
    if not isinstance(tool, FunctionTool) or not tool.requires_context:
        return tools
    return {**tools, call.tool_name: tool.bind_context(ctx.for_call(call))}
