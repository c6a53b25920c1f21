"""Agent workers: each turns a TaskStep into a TaskStepOutput under the same runner."""

from .base import BaseAgentWorker
from .coa import CoAAgentPack, CoAAgentWorker
from .custom import CustomSimpleAgentWorker
from .fn import FnAgentWorker
from .function_calling import FunctionCallingAgentWorker
from .llm_compiler import LLMCompilerAgentWorker
from .react import MultimodalReActAgentWorker, ReActAgentWorker
from .research import ParallelResearchWorker

__all__ = [
    "BaseAgentWorker",
    "CoAAgentPack",
    "CoAAgentWorker",
    "CustomSimpleAgentWorker",
    "FnAgentWorker",
    "FunctionCallingAgentWorker",
    "LLMCompilerAgentWorker",
    "MultimodalReActAgentWorker",
    "ParallelResearchWorker",
    "ReActAgentWorker",
]
