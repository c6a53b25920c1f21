"""A composed notebook: an agent type, a model, the tools and data it may use, an approval mode.

The start page's "Compose your own" form, a person's saved presets (`UserPreset.config`) and
REST's notebook creation all describe a notebook with a `ComposeConfig`, checked here once:
against the catalog (the agent exists, it has the tools named) and, given a `context`, against
the person (`user_id`: their MCP grants and data tables; `models`: the models this server
offers). A preset is checked again whenever a notebook starts from it, so a server revoked or a
table deleted since it was saved gives a refusal naming what is missing.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from runs.engine import OpenAI
from runs.models import ApprovalMode
from runs.presets.catalog import Preset, get_preset, presets
from runs.presets.mcp import check_mcp_choice
from runs.presets.tools.data import DataError, list_data_tables

MAX_NAME_CHARS = 80
_NAME = Field(max_length=64)


class ComposeError(ValueError):
    """A composition refused; the message says what to change, naming the field's value."""


class ComposeConfig(BaseModel):
    """What a composed notebook is made of; None for `tools`/`data_tables` means all of them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    agent: str = Field(max_length=64, description="the agent type: a preset's name")
    model: str = Field(
        "", max_length=100, description="a model this server offers; empty: the default"
    )
    tools: list[str] | None = Field(
        None,
        max_length=100,
        description="the agent's built-in tools to keep, by name; null: all of them",
    )
    mcp_tools: list[str] = Field(
        default_factory=list,
        max_length=100,
        description="tools from MCP servers granted to you (`server__tool`)",
    )
    data_tables: list[str] | None = Field(
        None,
        max_length=200,
        description="your data tables its data tools may read; null: all of them",
    )
    mode: str = Field(ApprovalMode.AUTO, description="auto, step or tools")

    @model_validator(mode="after")
    def _fits_catalog(self) -> ComposeConfig:
        preset = get_preset(self.agent)
        if preset is None:
            raise ValueError(f"there is no agent preset {self.agent[:64]!r}")
        if self.mode not in ApprovalMode.values:
            raise ValueError(
                f"the mode must be one of {', '.join(ApprovalMode.values)}"
            )
        if self.tools is not None:
            own = tool_names(preset)
            for name in self.tools:
                if name not in own:
                    raise ValueError(_no_such_tool(preset, name, own))
            _builds(preset, self.tools)
        return self


@cache
def _probe_llm() -> OpenAI:
    # never called: a worker is only built here (its HTTP client is made on first use)
    return OpenAI(model="probe", api_base="http://127.0.0.1:9", api_key="unused")


def _builds(preset: Preset, keep: list[str]) -> None:
    """The agent's worker builds with only the tools kept (Chain of Abstraction needs one, for
    instance): ValueError saying why not, now rather than when the first message is sent."""
    try:
        preset.make_worker(_probe_llm(), keep=keep)
    except ValueError as exc:
        raise ValueError(
            f"the agent {preset.label} cannot run with these tools ({exc})"
        ) from None


def _no_such_tool(preset: Preset, name: str, own: list[str]) -> str:
    if not own:
        return f"the agent {preset.label} takes no tools (asked for {name[:80]!r})"
    return (
        f"the agent {preset.label} has no built-in tool {name[:80]!r}; "
        f"its tools: {', '.join(own)}"
    )


def tool_names(preset: Preset) -> list[str]:
    """The names of a preset's own tools, as the model sees them."""
    return [tool.metadata.name for tool in preset.make_tools()]


def builtin_tools() -> list[tuple[str, str, list[str]]]:
    """Every built-in tool of the available presets: name, description, the presets having it."""
    found: dict[str, tuple[str, list[str]]] = {}
    for preset in presets().values():
        for tool in preset.make_tools():
            description, having = found.setdefault(
                tool.metadata.name, (tool.metadata.description, [])
            )
            having.append(preset.name)
    return [(name, d, having) for name, (d, having) in found.items()]


def _first_problem(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error.get("loc", ()))
    message = str(error.get("msg", "invalid")).removeprefix("Value error, ")
    return f"{where}: {message}" if where else message


def check_config(
    raw: Any, *, user_id: int | None = None, models: list[str] | None = None
) -> ComposeConfig:
    """`raw` (a dict or a ComposeConfig) checked against the catalog and, with `user_id` and
    `models`, against what that person may use; ComposeError says the first thing wrong."""
    try:
        config = (
            raw if isinstance(raw, ComposeConfig) else ComposeConfig.model_validate(raw)
        )
    except ValidationError as exc:
        raise ComposeError(_first_problem(exc)) from None
    if models is not None and config.model and config.model not in models:
        raise ComposeError(
            f"the model {config.model[:100]!r} is not offered here; pick one of "
            f"{', '.join(models)}"
        )
    if user_id is None:
        return config
    try:
        mcp = check_mcp_choice(user_id, list(config.mcp_tools))
    except ValueError as exc:
        raise ComposeError(str(exc)) from None
    tables = config.data_tables
    if tables:
        try:
            mine = {table["name"] for table in list_data_tables(user_id)}
        except DataError as exc:
            raise ComposeError(str(exc)) from None
        for table in tables:
            if table not in mine:
                raise ComposeError(
                    f"you have no data table {table[:80]!r} (see the Data page)"
                )
        tables = list(dict.fromkeys(tables))
    return config.model_copy(update={"mcp_tools": mcp, "data_tables": tables})


def clean_name(name: str) -> str:
    """A preset's name as stored: trimmed; ComposeError when empty or too long."""
    name = " ".join(name.split())
    if not name:
        raise ComposeError("name: give the preset a name")
    if len(name) > MAX_NAME_CHARS:
        raise ComposeError(f"name: at most {MAX_NAME_CHARS} characters")
    return name
