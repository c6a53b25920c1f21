"""Agent workers: each turns a TaskStep into a TaskStepOutput under the same runner."""

from .base import BaseAgentWorker
from .coa import CoAAgentPack, CoAAgentWorker
from .function_calling import FunctionCallingAgentWorker
from .llm_compiler import LLMCompilerAgentWorker

__all__ = [
    "BaseAgentWorker",
    "CoAAgentPack",
    "CoAAgentWorker",
    "FunctionCallingAgentWorker",
    "LLMCompilerAgentWorker",
]
