"""CoAAgentWorker: Chain-of-Abstraction reasoning (Gao et al., "Efficient Tool Use with
Chain-of-Abstraction Reasoning", 2024).

A task runs as three steps, each one visible and steerable:

1. **reasoning** (kind ``llm``): the model answers with an abstract chain, every tool use a
   placeholder ``[FUNC name(args) = yN]``. With no placeholder, its reply is the answer.
2. **calls** (kind ``tool_calls``, one step per wave): every placeholder whose inputs are known,
   shown with those values in place of its ``yN`` references (what runs), all run at once; the
   next wave's step follows from their results. Being a tool-call step, each wave waits for a
   person in the notebook's step and tools modes: arguments can be corrected, calls approved or
   rejected with a reason.
3. **refine** (kind ``llm``): the model reads the question and the chain with its values filled
   in (errors and rejections included) and writes the answer.

Only the question and the final answer enter the task's memory, once, when the task finishes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from pydantic import BaseModel

from ...errors import ToolArgumentsError
from ...events import AgentStream
from ...llms.base import LLM
from ...messages import ChatMessage, TokenUsage
from ...tools import BaseTool, ToolRetriever, tools_by_name, tools_for_query
from ...types import (
    AgentChatResponse,
    StepKind,
    Task,
    TaskStep,
    TaskStepOutput,
)
from ..base import BaseAgentWorker
from ..llm_turn import stream_turn
from .chain import Chain, ChainCall, arity_problem, fill, parse_chain
from .executor import offered_call, ready_calls, run_wave
from .prompts import (
    REASONING_FIELDS,
    REASONING_PROMPT_TEMPLATE,
    REFINE_FIELDS,
    REFINE_REASONING_PROMPT_TEMPLATE,
    check_template,
)
from .stubs import tool_stub

STATE_KEY = "chain_of_abstraction"
PHASE = "coa_phase"
REASONING, CALLS, REFINE = "reasoning", "calls", "refine"


class ChainParser(Protocol):
    """Reads a model's reply into a chain of placeholders against the tools it may call."""

    def parse(self, text: str, tools: Mapping[str, BaseTool]) -> Chain: ...


class ChainOfAbstractionParser:
    """The default parser: ``[FUNC name(args) = yN]`` placeholders (see ``chain.py``)."""

    def __init__(self, verbose: bool = False) -> None:
        self.verbose = verbose

    def parse(self, text: str, tools: Mapping[str, BaseTool]) -> Chain:
        chain = parse_chain(text, tools)
        if self.verbose:
            for call in chain.calls:
                print(
                    f"> {call.text}"
                    + (f"  [problem: {call.problem}]" if call.problem else "")
                )
        return chain


class CoAState(BaseModel):
    """What a task keeps between its steps, as plain JSON in ``task.extra_state`` (undo restores it)."""

    question: str = ""
    reasoning_step_id: str = ""
    chain: Chain | None = None
    filled: str | None = None

    @classmethod
    def load(cls, task: Task) -> CoAState:
        return cls.model_validate(task.extra_state.get(STATE_KEY) or {})

    def save(self, task: Task) -> None:
        task.extra_state[STATE_KEY] = self.model_dump(mode="json")

    def tool_id(self, call: ChainCall) -> str:
        """The id a placeholder's call runs under: stable per task and placeholder.

        Fixed on the call when the chain is written down (`name_calls`): a fork renames the
        reasoning step, and a person's decisions must still find the calls they were made on.
        """
        if call.tool_id:
            return call.tool_id
        prefix = self.reasoning_step_id[:8]
        first = (
            self.chain is not None
            and call.output is not None
            and self.chain.defined().get(call.output) is call
        )
        return f"{prefix}-{call.output}" if first else f"{prefix}-at{call.start}"


class CoAAgentWorker(BaseAgentWorker):
    """Chain-of-Abstraction agent worker: abstract chain, concurrent placeholder calls, refine."""

    def __init__(
        self,
        llm: LLM,
        reasoning_prompt_template: str,
        refine_reasoning_prompt_template: str,
        output_parser: ChainParser,
        tools: Sequence[BaseTool] | None = None,
        tool_retriever: ToolRetriever | None = None,
        callback_manager: Any = None,
        verbose: bool = False,
    ) -> None:
        if not tools and tool_retriever is None:
            raise ValueError(
                "CoAAgentWorker needs tools or a tool_retriever: a chain of abstraction calls functions"
            )
        self.llm = llm
        self.tools = list(tools or [])
        tools_by_name(
            self.tools
        )  # refuses two tools with one name now rather than mid-chain
        self.tool_retriever = tool_retriever
        self.reasoning_prompt_template = check_template(
            reasoning_prompt_template, REASONING_FIELDS, "reasoning_prompt_template"
        )
        self.refine_reasoning_prompt_template = check_template(
            refine_reasoning_prompt_template,
            REFINE_FIELDS,
            "refine_reasoning_prompt_template",
        )
        self.output_parser = output_parser
        self.callback_manager = callback_manager
        self.verbose = verbose

    @classmethod
    def from_tools_arguments(cls, arguments: dict[str, Any]) -> dict[str, Any]:
        """The default prompts and parser where none is given, and ``OpenAI()`` for ``llm``."""
        arguments = super().from_tools_arguments(arguments)
        arguments["reasoning_prompt_template"] = (
            arguments.get("reasoning_prompt_template") or REASONING_PROMPT_TEMPLATE
        )
        arguments["refine_reasoning_prompt_template"] = (
            arguments.get("refine_reasoning_prompt_template")
            or REFINE_REASONING_PROMPT_TEMPLATE
        )
        if arguments.get("output_parser") is None:
            arguments["output_parser"] = ChainOfAbstractionParser(
                verbose=bool(arguments.get("verbose"))
            )
        return arguments

    # --- tools ------------------------------------------------------------------------------------

    def get_tools(self, input: str = "") -> list[BaseTool]:
        """The worker's tools, plus those the retriever picks for ``input`` when one is given."""
        return self.tools_for(input) if input else list(self.tools)

    def tools_for(self, question: str) -> list[BaseTool]:
        """The worker's tools plus those the retriever picks for ``question``."""
        return tools_for_query(self.tools, self.tool_retriever, question)

    def validate_tool_kwargs(
        self, tool_name: str, kwargs: dict[str, Any]
    ) -> dict[str, Any]:
        """Check a person's edit of a placeholder's arguments: names first (the schema ignores extra
        ones), then the schema, for arguments that are not results of other placeholders."""
        tool = next((t for t in self.get_tools() if t.metadata.name == tool_name), None)
        problem = arity_problem(tool, kwargs) if tool is not None else None
        if problem:
            raise ToolArgumentsError(problem)
        return super().validate_tool_kwargs(tool_name, kwargs)

    def streams_answer(self, event: AgentStream) -> bool:
        # the reasoning streams as phase "reasoning": text without a phase is the refine step's answer
        return event.phase is None

    # --- steps ------------------------------------------------------------------------------------

    def initialize_step(self, task: Task, **kwargs: Any) -> TaskStep:
        CoAState(question=task.input).save(task)
        return TaskStep(
            task_id=task.task_id, input=task.input, step_state={PHASE: REASONING}
        )

    async def arun_step(
        self, step: TaskStep, task: Task, **kwargs: Any
    ) -> TaskStepOutput:
        phase = step.step_state.get(PHASE, REASONING)
        if phase == CALLS:
            return await self._run_calls(step, task)
        if phase == REFINE:
            return await self._refine(step, task)
        return await self._reason(step, task)

    def _finish(
        self,
        step: TaskStep,
        task: Task,
        question: str,
        answer: str,
        usage: TokenUsage | None,
    ) -> TaskStepOutput:
        # the only messages a task leaves in memory: its question and its answer
        task.memory.put(ChatMessage.user(question))
        task.memory.put(ChatMessage.assistant(answer))
        return TaskStepOutput(
            output=AgentChatResponse(response=answer, usage=usage),
            task_step=step,
            is_last=True,
        )

    async def _reason(self, step: TaskStep, task: Task) -> TaskStepOutput:
        # the (possibly edited) input of the reasoning step is the task's question
        state = CoAState(
            question=step.input or task.input, reasoning_step_id=step.step_id
        )
        tools = self.tools_for(state.question)
        stubs = "\n\n".join(tool_stub(tool) for tool in tools)
        if self.verbose:
            print(f"> Functions:\n{stubs}")
        prompt = self.reasoning_prompt_template.format(
            functions=stubs, question=state.question
        )
        reply = await stream_turn(
            self.llm,
            task,
            step,
            [*task.memory.get(), ChatMessage.user(prompt)],
            phase=REASONING,
        )
        text = reply.message.text
        if self.verbose:
            print(f"> Chain:\n{text}")
        chain = self.output_parser.parse(text, tools_by_name(tools))
        if not chain.calls:
            state.save(task)
            return self._finish(step, task, state.question, text, reply.usage)
        state.chain = chain
        for call in chain.calls:
            call.tool_id = state.tool_id(call)
        state.save(task)
        return TaskStepOutput(
            output=AgentChatResponse(response=text, usage=reply.usage),
            task_step=step,
            next_steps=[self._wave_step(step, state, chain)],
        )

    def _wave_step(self, step: TaskStep, state: CoAState, chain: Chain) -> TaskStep:
        """The step of the calls that can run now, shown with the values they run with."""
        ready = ready_calls(chain)
        if not ready:  # `link` gives a cycle or an unknown reference a problem: it waits for nothing
            raise RuntimeError("no placeholder of the chain can run")
        pending = [
            offered_call(call, chain, state.tool_id(call))
            for call in ready
            if call.tool_name
        ]
        calls = step.get_next_step(
            kind=StepKind.TOOL_CALLS, tool_calls=pending, step_state={PHASE: CALLS}
        )
        calls.input = calls.tool_calls_as_input()
        return calls

    async def _run_calls(self, step: TaskStep, task: Task) -> TaskStepOutput:
        state = CoAState.load(task)
        chain = state.chain
        if chain is None:
            raise RuntimeError(
                "this task has no chain to run; run its reasoning step first"
            )
        decisions = {call.tool_id: call for call in step.tool_calls or []}
        wave = ready_calls(chain)
        for call in wave:
            if call.tool_name and state.tool_id(call) not in decisions:
                # never run a call as the model wrote it when the person was shown another
                raise RuntimeError(
                    f"{call.label} has no call in this step to run as approved "
                    f"({state.tool_id(call)!r})"
                )
        for call in wave:
            decided = decisions.get(state.tool_id(call))
            offered = offered_call(call, chain, state.tool_id(call))
            if decided is not None and decided.tool_kwargs != offered.tool_kwargs:
                call.kwargs = dict(decided.tool_kwargs)  # a person's correction ran
        tools = tools_by_name(self.tools_for(state.question))
        await run_wave(task, step, tools, chain, wave, state.tool_id, decisions)
        sources = [
            call.result for call in wave if call.result is not None and call.tool_name
        ]
        if any(call.result is None for call in chain.calls):
            state.save(task)
            done = ", ".join(call.label for call in wave if call.tool_name)
            return TaskStepOutput(
                output=AgentChatResponse(
                    response=f"Ran {done}; their results are in the next calls",
                    sources=sources,
                ),
                task_step=step,
                next_steps=[self._wave_step(step, state, chain)],
            )
        state.filled = fill(chain)
        state.save(task)
        if self.verbose:
            print(f"> Filled in:\n{state.filled}")
        refine = step.get_next_step(step_state={PHASE: REFINE})
        return TaskStepOutput(
            output=AgentChatResponse(response=state.filled, sources=sources),
            task_step=step,
            next_steps=[refine],
        )

    async def _refine(self, step: TaskStep, task: Task) -> TaskStepOutput:
        state = CoAState.load(task)
        prompt = self.refine_reasoning_prompt_template.format(
            question=state.question, prev_reasoning=state.filled or ""
        )
        if step.input:  # a person's note, typed into the refine step before it ran
            prompt = f"{prompt}\n\n(A note from the user: {step.input})"
        reply = await stream_turn(
            self.llm, task, step, [*task.memory.get(), ChatMessage.user(prompt)]
        )
        if self.verbose:
            print(f"> Answer: {reply.message.text}")
        return self._finish(step, task, state.question, reply.message.text, reply.usage)
