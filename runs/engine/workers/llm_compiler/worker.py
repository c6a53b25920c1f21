"""LLMCompilerAgentWorker: plan tool calls as a DAG, run them as the plan streams in, then join.

After Kim et al., "An LLM Compiler for Parallel Function Calling" (ICML 2024). Each round is one
step of kind PLAN: the planner's reply is streamed and every call is dispatched the moment its
line is complete and the calls it uses have finished, while the planner is still writing; then
the joiner reads every result and either finishes or asks for a new round (a new PLAN step).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import aclosing
from typing import Any

from ...errors import AgentError, LLMError
from ...llms.base import LLM, ChatResponse
from ...memory import ChatMemoryBuffer
from ...messages import ChatMessage, TokenUsage
from ...templates import PromptTemplateLike
from ...tools import (
    BaseTool,
    ToolOutput,
    ToolRetriever,
    tools_by_name,
    tools_for_query,
)
from ...types import (
    AgentChatResponse,
    StepKind,
    Task,
    TaskStep,
    TaskStepOutput,
)
from ..base import BaseAgentWorker
from ..llm_turn import iter_turn, stream_turn
from .executor import PlanExecutor, call_tool_id, offered_call, ready_calls, run_wave
from .joiner import JoinerDecision, parse_joiner_reply
from .plan import END_OF_PLAN, PlannedCall, PlanParser, call_line
from .prompts import (
    DEFAULT_JOINER_PROMPT,
    DEFAULT_PLANNER_EXAMPLE,
    LAST_ROUND_NOTE,
    planner_system_prompt,
    planner_user_message,
    render_joiner_prompt,
)
from .rounds import CompilerState, RoundRecord, format_rounds

DEFAULT_MAX_REPLANS = 3
_ROUND = "round"
_PENDING_ROUND = "pending_round"
_PLAN_STEP = "plan_step_id"


class PlanError(AgentError):
    """A round could not produce an answer and no round is left to try again."""

    code = "plan_failed"


def _add_usage(total: TokenUsage | None, more: TokenUsage | None) -> TokenUsage | None:
    if more is None:
        return total
    return more if total is None else total + more


def tool_params(tools: Sequence[BaseTool]) -> dict[str, list[str]]:
    """Each tool's parameter names in order, for positional arguments in a plan."""
    return {
        tool.metadata.name: list(tool.metadata.parameters.get("properties", {}))
        for tool in tools
    }


class LLMCompilerAgentWorker(BaseAgentWorker):
    """Plans tool calls, runs them in parallel as a dependency graph, and joins their results.

    ``max_replans`` counts replans, as in LlamaIndex: the default 3 allows up to four planning
    rounds, 0 allows one. A joiner that still asks for a new plan on the last round gets its
    answer forced from what is known (its own words about the results), as LlamaIndex does.
    ``tool_retriever`` adds tools picked for the question to ``tools``. ``stop`` defaults to
    ``["<END_OF_PLAN>"]``. ``joiner_prompt`` is a template with ``{query_str}`` and ``{context_str}``.
    """

    def __init__(
        self,
        tools: Sequence[BaseTool],
        llm: LLM,
        callback_manager: Any | None = None,
        verbose: bool = False,
        tool_retriever: ToolRetriever | None = None,
        planner_example_prompt_str: str | None = None,
        stop: Sequence[str] | None = None,
        joiner_prompt: str | PromptTemplateLike | None = None,
        max_replans: int = DEFAULT_MAX_REPLANS,
    ) -> None:
        if max_replans < 0:
            raise ValueError(
                "max_replans is how many times a task may plan again; it cannot be negative"
            )
        self.tools = list(tools)
        tools_by_name(
            self.tools
        )  # refuses two tools with one name now rather than mid-plan
        self.llm = llm
        self.verbose = verbose
        self.callback_manager = callback_manager
        self.tool_retriever = tool_retriever
        self.planner_example_prompt_str = (
            planner_example_prompt_str or DEFAULT_PLANNER_EXAMPLE
        )
        self.stop = list(stop) if stop is not None else [END_OF_PLAN]
        self.joiner_prompt: str | PromptTemplateLike = (
            joiner_prompt or DEFAULT_JOINER_PROMPT
        )
        self.max_replans = max_replans
        # without a retriever the tools never change, so neither do the planner's prompts
        self.system_prompt = planner_system_prompt(
            self.tools, self.planner_example_prompt_str
        )
        self.system_prompt_replan = planner_system_prompt(
            self.tools, self.planner_example_prompt_str, replan=True
        )

    def get_tools(self, input: str = "") -> list[BaseTool]:
        """The worker's tools, plus those the retriever picks for ``input`` when one is given."""
        return self._round_tools(input) if input else list(self.tools)

    async def arun_llm(
        self,
        input: str,
        previous_context: str | None = None,
        is_replan: bool = False,
    ) -> ChatResponse:
        """Ask the planner for a plan for ``input`` (the seed's helper; a step's rounds stream theirs).

        ``is_replan`` asks for a new round, ``previous_context`` saying what earlier rounds found.
        The call emits no events: it belongs to no task.
        """
        if is_replan and previous_context is None:
            raise ValueError(
                "a replan needs previous_context: what the earlier rounds found"
            )
        system = self._planner_system(self._round_tools(input), is_replan)
        context = previous_context if is_replan else None
        user = planner_user_message(input, context, None, None)
        messages = [ChatMessage.system(system), ChatMessage.user(user)]
        return await self.llm.achat(messages, stop=self.stop)

    async def ajoin(
        self,
        input: str,
        tasks: dict[int, PlannedCall],
        is_final: bool = False,
    ) -> JoinerDecision:
        """Ask the joiner to finish or replan from these calls and their results (the seed's helper).

        ``tasks`` are a plan's calls by index, as ``PlanParser`` gives them with their outputs
        filled in. With ``is_final`` no replan is allowed: a joiner asking for one gets its
        answer forced from what is known. The call emits no events: it belongs to no task.
        """
        record = RoundRecord(round=1, calls=[tasks[index] for index in sorted(tasks)])
        prompt = self._joiner_prompt(input, [record], is_final)
        reply = await self.llm.achat([ChatMessage.user(prompt)])
        decision = parse_joiner_reply(reply.message.text)
        self._say_verdict(decision)
        if decision.replan and is_final:
            decision = self._forced_finish(decision, record)
        return decision

    def initialize_step(self, task: Task, **kwargs: Any) -> TaskStep:
        CompilerState().save(task)
        return TaskStep(
            task_id=task.task_id,
            input=task.input,
            kind=StepKind.PLAN,
            step_state={_ROUND: 1},
        )

    async def arun_step(
        self, step: TaskStep, task: Task, **kwargs: Any
    ) -> TaskStepOutput:
        state = CompilerState.load(task)
        if step.kind is StepKind.TOOL_CALLS:
            return await self._run_approved(step, task, state)
        return await self._run_round(step, task, state)

    # --- one round ----------------------------------------------------------------------------

    async def _run_round(
        self, step: TaskStep, task: Task, state: CompilerState
    ) -> TaskStepOutput:
        round_no = int(step.step_state.get(_ROUND, 1))
        note = step.input if round_no > 1 else None
        if round_no == 1:
            # the (possibly edited) input of the first round is the question of the whole task
            state = CompilerState(
                question=step.input or task.input, history_length=len(task.memory)
            )
            task.memory.put(ChatMessage.user(state.question))
        tools = self._round_tools(state.question)
        earlier = state.outputs()
        parser = PlanParser(
            tool_params(tools), first_index=state.next_index(), earlier=earlier
        )
        executor = (
            None
            if task.approve_tool_calls
            else PlanExecutor(task, step, tools_by_name(tools), earlier)
        )
        messages = self._planner_messages(task, state, tools, round_no, note)
        usage: TokenUsage | None = None
        try:
            # aclosing: if dispatching raises, the planner's HTTP stream is closed now, not at GC
            async with aclosing(
                iter_turn(self.llm, task, step, messages, stop=self.stop, phase="plan")
            ) as chunks:
                async for chunk in chunks:
                    for call in parser.feed(chunk.delta):
                        if executor is not None:
                            executor.submit(call)
                    usage = chunk.usage or usage
            for call in parser.close():
                if executor is not None:
                    executor.submit(call)
        except BaseException as exc:
            if executor is not None:
                await executor.cancel()
            if isinstance(exc, LLMError):
                raise LLMError(
                    f"the planner's reply broke off after {len(parser.calls)} planned call(s), so round {round_no} "
                    f"has no answer; the task is as it was before this step, which can be run again ({exc})"
                ) from exc
            raise
        record = RoundRecord(
            round=round_no,
            plan=parser.text,
            calls=parser.calls,
            problems=parser.problems,
        )
        if self.verbose:
            print(f"> Plan (round {round_no}):\n{parser.text}")
        if executor is None and record.calls:
            state.save(task)
            return self._approval_step(step, record, earlier, step.step_id, usage)
        if executor is not None:
            outputs = await executor.wait()
            for call in record.calls:
                call.output = outputs.get(call.index)
        return await self._join(step, task, state, record, usage)

    def _approval_step(
        self,
        step: TaskStep,
        record: RoundRecord,
        earlier: dict[int, ToolOutput],
        plan_step_id: str,
        usage: TokenUsage | None = None,
        sources: list[ToolOutput] | None = None,
    ) -> TaskStepOutput:
        """Hand a person the calls that can run now, their references to earlier results replaced
        by those results: what they approve or edit is exactly what runs. The calls that use
        results not known yet wait for a later step of their own."""
        plan_step = TaskStep(task_id=step.task_id, step_id=plan_step_id)
        ready = ready_calls(record, earlier)
        if not ready:  # every dependency is an earlier call, so one is always ready
            raise RuntimeError(f"no call of round {record.round}'s plan can run")
        pending = []
        for call in ready:
            call.tool_id = call.tool_id or call_tool_id(plan_step, call.index)
            pending.append(offered_call(call, {**earlier, **record.outputs()}))
        state = {
            _ROUND: record.round,
            _PENDING_ROUND: record.model_dump(mode="json"),
            _PLAN_STEP: plan_step_id,
        }
        approval = step.get_next_step(
            kind=StepKind.TOOL_CALLS, tool_calls=pending, step_state=state
        )
        approval.input = approval.tool_calls_as_input()
        if step.kind is StepKind.TOOL_CALLS:
            text = f"{len(sources or [])} call(s) ran; {len(pending)} can run now"
        else:
            text = record.plan
        return TaskStepOutput(
            output=AgentChatResponse(response=text, usage=usage, sources=sources or []),
            task_step=step,
            next_steps=[approval],
        )

    async def _run_approved(
        self, step: TaskStep, task: Task, state: CompilerState
    ) -> TaskStepOutput:
        """Run the calls of this step as the person left them, then offer the calls their
        results made runnable, or join once every call of the round has a result."""
        record = RoundRecord.model_validate(step.step_state[_PENDING_ROUND])
        plan_step_id = str(step.step_state[_PLAN_STEP])
        earlier = state.outputs()
        approvals = {call.tool_id: call for call in step.tool_calls or []}
        wave = ready_calls(record, earlier)
        for call in wave:
            if call.tool_id not in approvals:
                # never run a call as planned when the person was shown another
                raise RuntimeError(
                    f"call {call.index} of the plan has no call in this step to run as approved"
                )
        known = {**earlier, **record.outputs()}
        for call in wave:
            approval = approvals[str(call.tool_id)]
            if approval.tool_kwargs != offered_call(call, known).tool_kwargs:
                # a person edited the arguments: the joiner reads what ran
                call.kwargs = dict(approval.tool_kwargs)
                call.line = call_line(call.tool_name, call.kwargs)
        tools = tools_by_name(self._round_tools(state.question))
        outputs = await run_wave(task, step, tools, wave, approvals)
        for call, output in zip(wave, outputs):
            call.output = output
        if any(call.output is None for call in record.calls):
            return self._approval_step(
                step, record, earlier, plan_step_id, sources=outputs
            )
        return await self._join(step, task, state, record, None, sources=outputs)

    # --- joining ------------------------------------------------------------------------------

    async def _join(
        self,
        step: TaskStep,
        task: Task,
        state: CompilerState,
        record: RoundRecord,
        usage: TokenUsage | None,
        sources: list[ToolOutput] | None = None,
    ) -> TaskStepOutput:
        """Ask the joiner for the answer or a new round. ``sources`` are the results this step
        shows (by default every call of the round: they all ran in it)."""
        last_round = (
            record.round > self.max_replans
        )  # round 1 is the plan, every later one a replan
        prompt = self._joiner_prompt(
            state.question, [*state.rounds, record], last_round
        )
        messages = [*self._history(task, state), ChatMessage.user(prompt)]
        reply = await stream_turn(self.llm, task, step, messages, phase="join")
        usage = _add_usage(usage, reply.usage)
        decision = parse_joiner_reply(reply.message.text)
        record.thought = decision.thought
        if sources is None:
            sources = [c.output for c in record.calls if c.output is not None]
        self._say_verdict(decision)
        if decision.replan and last_round:
            decision = self._forced_finish(decision, record)
        if not decision.replan:
            state.rounds.append(record)
            state.save(task)
            task.memory.put(ChatMessage.assistant(decision.answer))
            response = AgentChatResponse(
                response=decision.answer, sources=sources, usage=usage
            )
            return TaskStepOutput(output=response, task_step=step, is_last=True)
        record.replan_reason = decision.reason
        state.rounds.append(record)
        state.save(task)
        following = step.get_next_step(
            kind=StepKind.PLAN, step_state={_ROUND: record.round + 1}
        )
        response = AgentChatResponse(
            response=f"Replan: {decision.reason}", sources=sources, usage=usage
        )
        return TaskStepOutput(output=response, task_step=step, next_steps=[following])

    def _joiner_prompt(
        self, question: str, rounds: list[RoundRecord], last_round: bool
    ) -> str:
        context = format_rounds(rounds)
        if last_round:
            context = f"{context}\n\n{LAST_ROUND_NOTE}"
        return render_joiner_prompt(self.joiner_prompt, question, context)

    def _say_verdict(self, decision: JoinerDecision) -> None:
        if self.verbose:
            verdict = (
                f"Replan({decision.reason})"
                if decision.replan
                else f"Finish({decision.answer})"
            )
            print(f"> Thought: {decision.thought}\n> Action: {verdict}")

    def _forced_finish(
        self, decision: JoinerDecision, record: RoundRecord
    ) -> JoinerDecision:
        """No replan is left: the joiner's own account of what is known becomes the answer."""
        answer = decision.reason or decision.thought
        if not answer:
            found = [
                f"{call.tool_name}: {call.output.content}"
                for call in record.calls
                if call.output is not None
            ]
            answer = "; ".join(found) or "No answer could be found."
        if self.verbose:
            print(
                f"> No replan left after round {record.round} (max_replans={self.max_replans}): finishing"
            )
        return JoinerDecision(thought=decision.thought, answer=answer)

    # --- prompts and tools ----------------------------------------------------------------------

    def _round_tools(self, question: str) -> list[BaseTool]:
        return tools_for_query(self.tools, self.tool_retriever, question)

    def _history(self, task: Task, state: CompilerState) -> list[ChatMessage]:
        """The conversation before this task's question, within the memory's token limit."""
        earlier = task.memory.get_all()[: state.history_length]
        return ChatMemoryBuffer(
            token_limit=task.memory.token_limit, messages=earlier
        ).get()

    def _planner_messages(
        self,
        task: Task,
        state: CompilerState,
        tools: list[BaseTool],
        round_no: int,
        note: str | None,
    ) -> list[ChatMessage]:
        replan = round_no > 1
        system = self._planner_system(tools, replan)
        context = format_rounds(state.rounds) if replan else None
        user = planner_user_message(state.question, context, state.next_index(), note)
        return [
            ChatMessage.system(system),
            *self._history(task, state),
            ChatMessage.user(user),
        ]

    def _planner_system(self, tools: list[BaseTool], replan: bool) -> str:
        if self.tool_retriever is None:
            return self.system_prompt_replan if replan else self.system_prompt
        return planner_system_prompt(
            tools, self.planner_example_prompt_str, replan=replan
        )
