"""Multi-agent workflows: agents that share a conversation and state and hand off to each other."""

from .agents import BaseWorkflowAgent, FunctionAgent, ToolRetriever
from .context import Context
from .handler import WorkflowHandler
from .history import close_open_tool_calls
from .worker import AgentWorkflowWorker
from .workflow import AgentWorkflow

__all__ = [
    "AgentWorkflow",
    "AgentWorkflowWorker",
    "BaseWorkflowAgent",
    "Context",
    "FunctionAgent",
    "ToolRetriever",
    "WorkflowHandler",
    "close_open_tool_calls",
]
