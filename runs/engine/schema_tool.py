"""A tool described by a JSON schema rather than a Python signature: an MCP server's tool.

Its arguments are checked against the schema as given (``jsonschema``), both the model's and a
person's edit of a pending call, and a call goes to an async function that returns the
``ToolOutput`` (an error output when the other side failed).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from jsonschema import SchemaError
from jsonschema.validators import validator_for

from .tools import BaseTool, ToolMetadata, ToolOutput, schema_error

SchemaCall = Callable[[dict[str, Any]], Awaitable[ToolOutput]]


class SchemaTool(BaseTool):
    """A tool whose parameters are the JSON schema ``parameters``; ``call`` runs it."""

    def __init__(
        self, name: str, description: str, parameters: dict[str, Any], call: SchemaCall
    ) -> None:
        validator_class = validator_for(parameters)
        try:
            validator_class.check_schema(parameters)
        except SchemaError as exc:
            raise ValueError(
                f"the tool {name!r} has an invalid schema: {exc.message}"
            ) from None
        self._validator = validator_class(parameters)
        self._call = call
        self.metadata = ToolMetadata(
            name=name, description=description, parameters_json=parameters
        )

    def problems(self, kwargs: dict[str, Any]) -> list[tuple[str, str]]:
        return [
            (
                ".".join(str(p) for p in error.absolute_path) or "arguments",
                error.message,
            )
            for error in self._validator.iter_errors(kwargs)
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
