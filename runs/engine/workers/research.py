"""ParallelResearchWorker: a question split into independent sub-questions, answered side by side.

Built on ``CustomSimpleAgentWorker``. The first step asks the model to split the question; it
queues one step per sub-question and a synthesis step that waits for all of them (its
``prev_steps``). Under ``ParallelAgentRunner`` the sub-questions are answered concurrently, each
as its own step (a person may edit, run or undo each on its own); the synthesis step then
writes the answer from what the branches found. Under ``AgentRunner`` the same steps run one
after another.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field

from ..messages import ChatMessage
from ..types import AgentChatResponse, Task, TaskStep, TaskStepOutput
from .custom import CustomSimpleAgentWorker

SPLIT_PROMPT = (
    "You plan research. Split the user's question into at most {limit} independent "
    "sub-questions that can be answered separately and at the same time. Reply with the "
    "sub-questions only, one per line, numbered 1., 2., ..."
)
ANSWER_PROMPT = (
    "You answer one sub-question of a larger question, briefly and factually, in two or "
    "three sentences."
)
SYNTHESIS_PROMPT = (
    "You write the final answer to a question from the findings of its sub-questions. "
    "Use only the findings; say which ones you relied on."
)
SPLIT, ANSWER, SYNTHESIZE = "split", "answer", "synthesize"
_NUMBERED = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s*(.+?)\s*$")


def parse_subquestions(text: str, limit: int) -> list[str]:
    """The sub-questions of a split reply: numbered or bulleted lines (else every line)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    marked = [m.group(1) for m in map(_NUMBERED.match, lines) if m]
    found: list[str] = []
    for question in marked or lines:
        if question not in found:
            found.append(question)
    return found[:limit]


def answer_key(step_id: str) -> str:
    """Where a branch step keeps its finding in ``task.extra_state`` (one key per branch)."""
    return f"finding:{step_id}"


class ParallelResearchWorker(CustomSimpleAgentWorker):
    """Splits a question, answers each sub-question as its own step, then synthesizes."""

    max_subquestions: int = Field(default=4, ge=1, le=8)

    def _initialize_state(self, task: Task, **kwargs: Any) -> dict[str, Any]:
        return {"phase": SPLIT}

    def _run_step(
        self, state: dict[str, Any], task: Task, input: str | None = None
    ) -> tuple[AgentChatResponse, bool]:
        raise NotImplementedError(
            "ParallelResearchWorker runs on the async API (arun_step), as every runner does"
        )

    async def _arun_step(
        self, state: dict[str, Any], task: Task, input: str | None = None
    ) -> tuple[AgentChatResponse, bool]:
        phase = state.get("phase", SPLIT)
        if phase == SPLIT:
            question = input or task.input
            prompt = SPLIT_PROMPT.format(limit=self.max_subquestions)
            reply = await self.astream_llm(
                task, [ChatMessage.system(prompt), ChatMessage.user(question)]
            )
            subs = parse_subquestions(reply.message.text, self.max_subquestions)
            state["question"] = question
            state["subquestions"] = subs or [question]
            listing = "\n".join(
                f"{i}. {q}" for i, q in enumerate(state["subquestions"], 1)
            )
            return AgentChatResponse(response=listing, usage=reply.usage), False
        if phase == ANSWER:
            reply = await self.astream_llm(
                task,
                [
                    ChatMessage.system(ANSWER_PROMPT),
                    ChatMessage.user(input or state.get("subquestion", "")),
                ],
            )
            state["finding"] = reply.message.text
            return AgentChatResponse(
                response=reply.message.text, usage=reply.usage
            ), False
        question = str(state.get("question", task.input))
        findings = [
            task.extra_state.get(answer_key(branch))
            for branch in state.get("branches", [])
        ]
        lines = [
            f"- {f['question']}: {f['answer']}" for f in findings if isinstance(f, dict)
        ]
        request = f"Question: {question}\n\nFindings:\n" + "\n".join(lines)
        if input:
            request += f"\n\nNote from the person: {input}"
        reply = await self.astream_llm(
            task, [ChatMessage.system(SYNTHESIS_PROMPT), ChatMessage.user(request)]
        )
        memory = state["memory"]
        memory.put(ChatMessage.user(question))
        memory.put(ChatMessage.assistant(reply.message.text))
        return AgentChatResponse(response=reply.message.text, usage=reply.usage), True

    def _step_output(
        self,
        response: AgentChatResponse,
        step: TaskStep,
        task: Task,
        state: dict[str, Any],
        is_done: bool,
    ) -> TaskStepOutput:
        phase = state.get("phase", SPLIT)
        if phase == SPLIT:
            branches = [
                step.get_next_step(
                    input=sub, step_state={"phase": ANSWER, "subquestion": sub}
                )
                for sub in state["subquestions"]
            ]
            synthesis = step.get_next_step(
                step_state={
                    "phase": SYNTHESIZE,
                    "question": state["question"],
                    "branches": [b.step_id for b in branches],
                }
            )
            synthesis.prev_steps = [b.step_id for b in branches]
            return TaskStepOutput(
                output=response, task_step=step, next_steps=[*branches, synthesis]
            )
        if phase == ANSWER:
            # one key per branch, so branches running side by side never write the same key
            task.extra_state[answer_key(step.step_id)] = {
                "question": step.input or state.get("subquestion", ""),
                "answer": state["finding"],
            }
            return TaskStepOutput(output=response, task_step=step)
        return super()._step_output(response, step, task, state, is_done)

    def _finalize_task(self, state: dict[str, Any], **kwargs: Any) -> None:
        """Nothing beyond the scaffold's: the question and answer join the conversation."""
