"""A scripted OpenAI-compatible HTTP server that tests and benchmarks use instead of a real LLM.

Stdlib and pydantic only: importing this package pulls in no Django and nothing else from
`runs.engine`, so a benchmark or a subprocess can use it on its own.
"""

from .script import (
    Fault,
    Match,
    RecordedRequest,
    Reply,
    Rule,
    Script,
    Timing,
    ToolCallSpec,
    Usage,
)
from .scripted_server import ScriptedServer, ScriptSource

__all__ = [
    "Fault",
    "Match",
    "RecordedRequest",
    "Reply",
    "Rule",
    "Script",
    "ScriptSource",
    "ScriptedServer",
    "Timing",
    "ToolCallSpec",
    "Usage",
]
