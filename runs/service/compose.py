"""Composed notebooks and a person's own presets (runs.presets.compose; README "Compose").

Every new notebook is described by a `ComposeConfig` resolved here, whatever it came from: a
built-in preset's name (with the MCP tools ticked), the start page's "Compose your own" form, a
REST body, or one of the person's saved presets (`UserPreset`), which is checked again against
what they may use now. So a notebook started from a user preset goes the same way as one
started from a built-in preset, and a preset whose MCP server was revoked or whose table was
deleted is refused with a message naming what is missing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction

from runs.models import UserPreset
from runs.presets import get_preset
from runs.presets.compose import (
    MAX_NAME_CHARS,
    ComposeConfig,
    ComposeError,
    builtin_tools,
    check_config,
    clean_name,
    tool_names,
)
from runs.presets.tools.data import DataError, list_data_tables
from runs.protocol import ErrorCode, ProtocolError
from runs.service.llm import offered_models

MAX_PRESETS_PER_USER = 100
MAX_PRESET_NAME_CHARS = MAX_NAME_CHARS


def _invalid(reason: str) -> ProtocolError:
    return ProtocolError(ErrorCode.INVALID_INPUT, reason)


def checked_for(owner: User, raw: Any) -> ComposeConfig:
    """`raw` checked against the catalog and what `owner` may use; ProtocolError (invalid
    input) naming the first problem. A full pick of the agent's tools is stored as "all"."""
    try:
        config = check_config(raw, user_id=owner.pk, models=offered_models())
    except ComposeError as exc:
        raise _invalid(str(exc)) from None
    preset = get_preset(config.agent)
    if (
        preset is not None
        and config.tools is not None
        and set(config.tools) == set(tool_names(preset))
    ):
        config = config.model_copy(update={"tools": None})
    return config


def _own_preset(owner: User, pk: int) -> UserPreset:
    # someone else's preset is "not found", like one that does not exist
    preset = UserPreset.objects.filter(owner=owner, pk=pk).first()
    if preset is None:
        raise ProtocolError(ErrorCode.NOT_FOUND, f"you have no preset {pk}")
    return preset


def notebook_config(
    owner: User,
    agent: str,
    mode: str,
    mcp_tools: list[str] | None = None,
    *,
    model: str = "",
    tools: list[str] | None = None,
    data_tables: list[str] | None = None,
    preset: int | None = None,
) -> ComposeConfig:
    """What a new notebook is made of: the owner's preset `preset` (checked again now), or the
    agent preset and picks given; ProtocolError says what is wrong or missing."""
    if preset is not None:
        saved = _own_preset(owner, preset)
        try:
            return checked_for(owner, saved.config)
        except ProtocolError as exc:
            raise _invalid(
                f"your preset {saved.name!r} cannot start: {exc.reason}. "
                "Edit the preset to go on."
            ) from None
    if not agent:
        raise _invalid(
            "agent: give a built-in preset's name, or `preset`: one of your own"
        )
    return checked_for(
        owner,
        {
            "agent": agent,
            "mode": mode,
            "mcp_tools": list(mcp_tools or []),
            "model": model,
            "tools": tools,
            "data_tables": data_tables,
        },
    )


# --- the person's own presets -----------------------------------------------------------------


def describe_user_preset(preset: UserPreset) -> dict[str, Any]:
    """A user preset as the start page and REST show it."""
    config = dict(preset.config)
    agent = get_preset(str(config.get("agent", "")))
    return {
        "id": preset.pk,
        "name": preset.name,
        "label": preset.name,
        "agent_label": agent.label if agent else str(config.get("agent", "")),
        "config": config,
        "created_at": preset.created_at,
        "updated_at": preset.updated_at,
    }


def user_presets(owner: User) -> list[dict[str, Any]]:
    """The owner's presets by name."""
    return [describe_user_preset(p) for p in UserPreset.objects.filter(owner=owner)]


def save_user_preset(
    owner: User, name: str, raw: Any, pk: int | None = None
) -> dict[str, Any]:
    """Save `raw` as the owner's preset `name` (a new one, or their preset `pk` renamed and
    changed); ProtocolError for a bad config or name, or a name they use already."""
    if pk is not None:
        _own_preset(owner, pk)  # someone else's is not found, whatever the body says
    try:
        name = clean_name(name)
    except ComposeError as exc:
        raise _invalid(str(exc)) from None
    config = checked_for(owner, raw).model_dump()
    with transaction.atomic():
        if pk is None:
            if UserPreset.objects.filter(owner=owner).count() >= MAX_PRESETS_PER_USER:
                raise _invalid(
                    f"you have {MAX_PRESETS_PER_USER} presets already; delete some first"
                )
            preset = UserPreset(owner=owner)
        else:
            preset = _own_preset(owner, pk)
        preset.name, preset.config = name, config
        try:
            with transaction.atomic():
                preset.save()
        except IntegrityError:
            raise _invalid(f"name: you have a preset named {name!r} already") from None
    return describe_user_preset(preset)


def delete_user_preset(owner: User, pk: int) -> None:
    """Delete the owner's preset `pk` (notebooks started from it keep their settings)."""
    _own_preset(owner, pk).delete()


# --- what the compose form offers -------------------------------------------------------------


@dataclass(frozen=True)
class ToolChoice:
    """A built-in tool the compose form offers, and the agents that have it."""

    name: str
    description: str
    agents: tuple[str, ...]


@dataclass(frozen=True)
class ComposeChoices:
    models: list[str]
    tools: list[ToolChoice]
    tables: list[str]
    tables_note: str  # why the tables could not be listed ("" when they could)


def compose_choices(owner: User) -> ComposeChoices:
    """The models, built-in tools and data tables `owner` may compose a notebook from (the
    MCP tools are the new-notebook form's own list)."""
    try:
        tables = [table["name"] for table in list_data_tables(owner.pk)]
        note = ""
    except DataError as exc:
        tables, note = [], str(exc)
    return ComposeChoices(
        models=offered_models(),
        tools=[ToolChoice(n, d, tuple(a)) for n, d, a in builtin_tools()],
        tables=tables,
        tables_note=note,
    )


__all__ = [
    "ComposeChoices",
    "ComposeConfig",
    "ToolChoice",
    "checked_for",
    "compose_choices",
    "delete_user_preset",
    "notebook_config",
    "save_user_preset",
    "user_presets",
]
