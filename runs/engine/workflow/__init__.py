"""Multi-agent workflows: agents that share a conversation and state and hand off to each other."""

from .agents import BaseWorkflowAgent, FunctionAgent, ToolRetriever
from .context import Context
from .handler import WorkflowHandler
from .history import close_open_tool_calls
from .react_agent import ReActAgent
from .worker import AgentWorkflowWorker
from .workflow import AgentWorkflow

__all__ = [
    "AgentWorkflow",
    "AgentWorkflowWorker",
    "BaseWorkflowAgent",
    "Context",
    "FunctionAgent",
    "ReActAgent",
    "ToolRetriever",
    "WorkflowHandler",
    "close_open_tool_calls",
]
