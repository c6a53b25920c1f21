"""A tool described by a JSON schema rather than a Python signature: an MCP server's tool.

Its arguments are checked against the schema as given (``jsonschema``, with RE2 behind the
schema's regular expressions: ``schema_check``, so a hostile pattern cannot hold the event loop),
both the model's and a person's edit of a pending call, and a call goes to an async function
that returns the ``ToolOutput`` (an error output when the other side failed).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from .schema_check import SafeSchema, SchemaRefused
from .tools import BaseTool, ToolMetadata, ToolOutput, schema_error

# a problem quotes the value: a model's megabyte string is not sent back to it whole
MAX_MESSAGE_CHARS = 300

SchemaCall = Callable[[dict[str, Any]], Awaitable[ToolOutput]]


class SchemaTool(BaseTool):
    """A tool whose parameters are the JSON schema ``parameters``; ``call`` runs it."""

    def __init__(
        self, name: str, description: str, parameters: dict[str, Any], call: SchemaCall
    ) -> None:
        try:
            self._schema = SafeSchema(parameters)
        except SchemaRefused as exc:
            raise ValueError(f"the tool {name!r}: its input schema {exc}") from None
        self._call = call
        self.metadata = ToolMetadata(
            name=name, description=description, parameters_json=parameters
        )

    def problems(self, kwargs: dict[str, Any]) -> list[tuple[str, str]]:
        return [
            (
                ".".join(str(p) for p in error.absolute_path) or "arguments",
                error.message[:MAX_MESSAGE_CHARS],
            )
            for error in self._schema.errors(kwargs)
        ]

    def validate(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        problems = self.problems(kwargs)
        if problems:
            raise schema_error(self.metadata.name, problems)
        return dict(kwargs)

    async def acall(self, **kwargs: Any) -> ToolOutput:
        output = await super().acall(**kwargs)
        if isinstance(output.raw_output, ToolOutput):  # what `call` said, as it said it
            return output.raw_output.model_copy(
                update={"tool_name": self.metadata.name, "raw_input": kwargs}
            )
        return output

    async def _acall(self, **kwargs: Any) -> Any:
        return await self._call(kwargs)
