"""Agent workers: each turns a TaskStep into a TaskStepOutput under the same runner."""

from .base import BaseAgentWorker
from .coa import CoAAgentPack, CoAAgentWorker
from .custom import CustomSimpleAgentWorker
from .fn import FnAgentWorker
from .function_calling import FunctionCallingAgentWorker
from .llm_compiler import LLMCompilerAgentWorker
from .react import MultimodalReActAgentWorker, ReActAgentWorker

__all__ = [
    "BaseAgentWorker",
    "CoAAgentPack",
    "CoAAgentWorker",
    "CustomSimpleAgentWorker",
    "FnAgentWorker",
    "FunctionCallingAgentWorker",
    "LLMCompilerAgentWorker",
    "MultimodalReActAgentWorker",
    "ReActAgentWorker",
]
