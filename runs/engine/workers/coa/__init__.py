"""Chain-of-Abstraction: an abstract chain of placeholder calls, run as a graph, then refined."""

from .chain import Chain, ChainCall, fill, parse_chain
from .executor import ready_calls, run_wave
from .pack import CoAAgentPack
from .prompts import REASONING_PROMPT_TEMPLATE, REFINE_REASONING_PROMPT_TEMPLATE
from .stubs import function_stub, tool_stub
from .worker import ChainOfAbstractionParser, CoAAgentWorker, CoAState

__all__ = [
    "REASONING_PROMPT_TEMPLATE",
    "REFINE_REASONING_PROMPT_TEMPLATE",
    "Chain",
    "ChainCall",
    "ChainOfAbstractionParser",
    "CoAAgentPack",
    "CoAAgentWorker",
    "CoAState",
    "fill",
    "function_stub",
    "parse_chain",
    "ready_calls",
    "run_wave",
    "tool_stub",
]
