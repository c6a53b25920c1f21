"""ReAct: the model reasons in text (Thought / Action / Action Input / Observation / Answer).

``parser`` reads a reply, ``formatter`` builds a model call's messages, ``prompts`` holds the
system header; the reasoning parts themselves are ``runs.engine.reasoning``. The workflow
agents build on the same parser and formatter.
"""

from ...reasoning import (
    ActionReasoningStep,
    BaseReasoningStep,
    ObservationReasoningStep,
    ReasoningStep,
    ResponseReasoningStep,
)
from .formatter import ReActChatFormatter
from .multimodal import MultimodalReActAgentWorker
from .parser import ReActOutputParser, ReActParseError
from .prompts import REACT_CHAT_SYSTEM_HEADER, REACT_MM_CHAT_SYSTEM_HEADER
from .worker import ReActAgentWorker

__all__ = [
    "REACT_CHAT_SYSTEM_HEADER",
    "REACT_MM_CHAT_SYSTEM_HEADER",
    "ActionReasoningStep",
    "BaseReasoningStep",
    "MultimodalReActAgentWorker",
    "ObservationReasoningStep",
    "ReActAgentWorker",
    "ReActChatFormatter",
    "ReActOutputParser",
    "ReActParseError",
    "ReasoningStep",
    "ResponseReasoningStep",
]
