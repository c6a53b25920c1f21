"""CoAAgentPack: a Chain-of-Abstraction agent ready to chat (LlamaIndex's pack, on our runner)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...llms.base import LLM
from ...runner import AgentRunner
from ...tools import BaseTool
from ...types import AgentChatResponse
from .worker import CoAAgentWorker


class CoAAgentPack:
    """A CoAAgentWorker wrapped in an AgentRunner; ``run(message)`` chats."""

    def __init__(
        self,
        tools: Sequence[BaseTool],
        llm: LLM | None = None,
        callback_manager: Any = None,
        agent_worker_kwargs: dict[str, Any] | None = None,
        agent_runner_kwargs: dict[str, Any] | None = None,
    ) -> None:
        if llm is None:
            from ...llms.openai import OpenAI

            llm = OpenAI()
        self.llm = llm
        self.callback_manager = callback_manager
        self.agent_worker = CoAAgentWorker.from_tools(
            tools=tools,
            llm=llm,
            callback_manager=callback_manager,
            **(agent_worker_kwargs or {}),
        )
        self.agent = AgentRunner(
            self.agent_worker,
            callback_manager=callback_manager,
            **(agent_runner_kwargs or {}),
        )

    def get_modules(self) -> dict[str, Any]:
        """The pack's parts: ``llm``, ``callback_manager``, ``agent_worker`` and ``agent``."""
        return {
            "llm": self.llm,
            "callback_manager": self.callback_manager,
            "agent_worker": self.agent_worker,
            "agent": self.agent,
        }

    def run(self, *args: Any, **kwargs: Any) -> AgentChatResponse:
        """Chat: ``run("question")`` runs a task to its end and returns the refined answer."""
        return self.agent.chat(*args, **kwargs)
