"""MultimodalReActAgentWorker: ReAct with the task's images in its first user message.

``create_task(input, extra_state={"image_docs": [...]})`` as in the seed. The images are sent as
OpenAI ``image_url`` content parts. A model server that refuses them gives an LLMError that says
what to change (``refusal_advice``: give ``multi_modal_llm`` a vision model; an application's
subclass names its own setting instead).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...errors import LLMError
from ...llms.base import LLM
from ...messages import ChatMessage
from ...tools import BaseTool, ToolRetriever
from ...types import Task, TaskStep, TaskStepOutput
from ..base import default_llm
from .formatter import ReActChatFormatter
from .images import image_parts, image_urls
from .parser import ReActOutputParser
from .prompts import REACT_MM_CHAT_SYSTEM_HEADER
from .worker import DEFAULT_MAX_ITERATIONS, ReActAgentWorker

IMAGE_DOCS = "image_docs"
# statuses with which servers say "I do not take this input" (as opposed to being down or busy)
_REFUSED = frozenset({400, 404, 415, 422})


class MultimodalReActAgentWorker(ReActAgentWorker):
    """ReAct whose first user message carries the task's ``image_docs``; the seed's parameters."""

    # the last sentence of the error a server's refusal of images gives: what to change
    refusal_advice = (
        "Set multi_modal_llm to a model that accepts image input (a vision model)."
    )

    def __init__(
        self,
        tools: Sequence[BaseTool],
        multi_modal_llm: LLM,
        max_iterations: int = DEFAULT_MAX_ITERATIONS,
        react_chat_formatter: ReActChatFormatter | None = None,
        output_parser: ReActOutputParser | None = None,
        callback_manager: Any = None,
        verbose: bool = False,
        tool_retriever: ToolRetriever | None = None,
    ) -> None:
        super().__init__(
            tools,
            multi_modal_llm,
            max_iterations=max_iterations,
            react_chat_formatter=react_chat_formatter
            or ReActChatFormatter.from_defaults(REACT_MM_CHAT_SYSTEM_HEADER),
            output_parser=output_parser,
            callback_manager=callback_manager,
            verbose=verbose,
            tool_retriever=tool_retriever,
        )

    @classmethod
    def from_tools_arguments(cls, arguments: dict[str, Any]) -> dict[str, Any]:
        """``llm`` is another name for ``multi_modal_llm`` (which wins when both are given)."""
        llm = arguments.pop("llm", None)
        if arguments.get("multi_modal_llm") is None:
            arguments["multi_modal_llm"] = llm if llm is not None else default_llm()
        return arguments

    @property
    def multi_modal_llm(self) -> LLM:
        return self.llm

    def initialize_step(self, task: Task, **kwargs: Any) -> TaskStep:
        if IMAGE_DOCS not in task.extra_state:
            raise ValueError(
                "Image docs not found in task extra state: create_task(..., extra_state={'image_docs': [...]})"
            )
        # read files now, so the task keeps its images as data and never depends on a path again
        task.extra_state[IMAGE_DOCS] = image_urls(task.extra_state[IMAGE_DOCS])
        return super().initialize_step(task, **kwargs)

    def user_message(self, step: TaskStep, task: Task, text: str) -> ChatMessage:
        return ChatMessage.user(
            text, images=image_parts(task.extra_state.get(IMAGE_DOCS, []))
        )

    async def arun_step(
        self, step: TaskStep, task: Task, **kwargs: Any
    ) -> TaskStepOutput:
        try:
            return await super().arun_step(step, task, **kwargs)
        except LLMError as exc:
            if exc.status_code in _REFUSED and task.extra_state.get(IMAGE_DOCS):
                raise LLMError(
                    f"the model server refused a request with images ({exc}). "
                    + self.refusal_advice,
                    status_code=exc.status_code,
                ) from exc
            raise
