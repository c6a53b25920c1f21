"""The agent engine: a step-wise agent API in plain Python (no Django).

Follows LlamaIndex's lower-level agent API (AgentRunner, AgentWorker, Task, TaskStep,
TaskStepOutput) and adds what it left unbuilt: undoing a step, steering a pending step, and
approving tool calls one by one.
"""

from .errors import (
    AgentError,
    LLMError,
    NothingToUndoError,
    StepFailedError,
    StepNotEditableError,
    TaskFinishedError,
    ToolArgumentsError,
    UnknownStepError,
    UnknownTaskError,
)
from .events import (
    AgentEvent,
    AgentInput,
    AgentOutput,
    AgentStream,
    StepCompleted,
    StepCreated,
    StepFailed,
    StepInputEdited,
    StepStarted,
    StepUndone,
    TaskCompleted,
    TaskCreated,
    TaskDeleted,
    ToolCall,
    ToolCallDecided,
    ToolCallResult,
    parse_event,
)
from .llms import LLM, ChatResponse, LLMMetadata, OpenAI
from .memory import ChatMemoryBuffer
from .messages import ChatMessage, ImagePart, MessageRole, TokenUsage, ToolSelection
from .runner import AgentRunner
from .state import Checkpoint, InMemoryStateStore, StateStore, TaskState, TaskStatus
from .streaming import StreamingAgentChatResponse
from .tools import BaseTool, FunctionTool, ToolMetadata, ToolOutput
from .types import (
    AgentChatResponse,
    PendingToolCall,
    StepKind,
    StepStatus,
    Task,
    TaskStep,
    TaskStepOutput,
    ToolCallDecision,
)
from .workers import (
    BaseAgentWorker,
    CoAAgentPack,
    CoAAgentWorker,
    FunctionCallingAgentWorker,
    LLMCompilerAgentWorker,
)

__all__ = [
    "AgentChatResponse",
    "AgentError",
    "AgentEvent",
    "AgentInput",
    "AgentOutput",
    "AgentRunner",
    "AgentStream",
    "BaseAgentWorker",
    "BaseTool",
    "ChatMemoryBuffer",
    "ChatMessage",
    "ChatResponse",
    "Checkpoint",
    "CoAAgentPack",
    "CoAAgentWorker",
    "FunctionCallingAgentWorker",
    "FunctionTool",
    "ImagePart",
    "InMemoryStateStore",
    "LLM",
    "LLMCompilerAgentWorker",
    "LLMError",
    "LLMMetadata",
    "MessageRole",
    "NothingToUndoError",
    "OpenAI",
    "PendingToolCall",
    "StateStore",
    "StepCompleted",
    "StepCreated",
    "StepFailed",
    "StepFailedError",
    "StepInputEdited",
    "StepKind",
    "StepNotEditableError",
    "StepStarted",
    "StepStatus",
    "StepUndone",
    "StreamingAgentChatResponse",
    "Task",
    "TaskCompleted",
    "TaskCreated",
    "TaskDeleted",
    "TaskFinishedError",
    "TaskState",
    "TaskStatus",
    "TaskStep",
    "TaskStepOutput",
    "TokenUsage",
    "ToolArgumentsError",
    "ToolCall",
    "ToolCallDecided",
    "ToolCallDecision",
    "ToolCallResult",
    "ToolMetadata",
    "ToolOutput",
    "ToolSelection",
    "UnknownStepError",
    "UnknownTaskError",
    "parse_event",
]
