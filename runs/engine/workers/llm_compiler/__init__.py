"""LLMCompiler: plan tool calls as a dependency graph, run them while the plan streams in, then join."""

from ...tools import ToolRetriever
from .executor import PlanExecutor
from .joiner import JoinerDecision, parse_joiner_reply
from .plan import END_OF_PLAN, PlannedCall, PlanParser, parse_plan
from .refs import find_references, substitute
from .worker import LLMCompilerAgentWorker, PlanError

__all__ = [
    "END_OF_PLAN",
    "JoinerDecision",
    "LLMCompilerAgentWorker",
    "PlanError",
    "PlanExecutor",
    "PlanParser",
    "PlannedCall",
    "ToolRetriever",
    "find_references",
    "parse_joiner_reply",
    "parse_plan",
    "substitute",
]
