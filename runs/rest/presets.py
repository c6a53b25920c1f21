"""Presets for scripts: the built-in agents and your own composed ones (README "Compose a
notebook"). Yours are yours alone: another person's preset is a 404, as one that does not exist.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest
from ninja import Field, Status

from runs.protocol import ErrorCode, ProtocolError
from runs.protocol.checks import storable_problem
from runs.rest.router import router
from runs.rest.schemas import ErrorOut, Input, PresetOut
from runs.service import (
    MAX_PRESET_NAME_CHARS,
    ComposeConfig,
    delete_user_preset,
    save_user_preset,
    user_presets,
)
from runs.service.surfaces import all_presets

NOT_FOUND: dict[int | tuple[int, ...], Any] = {404: ErrorOut}


class UserPresetIn(Input):
    """One of your own presets: a name and what notebooks made with it are made of."""

    name: str = Field(
        min_length=1, max_length=MAX_PRESET_NAME_CHARS, examples=["Quick sums"]
    )
    config: ComposeConfig


def _mine(preset: dict[str, Any]) -> dict[str, Any]:
    config = preset["config"]
    return {
        "name": preset["name"],
        "label": preset["name"],
        "description": f"Your preset: {preset['agent_label']}",
        "accepts_images": False,
        "kind": "mine",
        "id": preset["id"],
        "config": config,
    }


@router.get("/presets/", tags=["presets"], response=list[PresetOut])
def list_presets(request: HttpRequest) -> list[dict[str, Any]]:
    """The agents a notebook can use: the built-in presets, then your own by name."""
    builtin = [
        {
            "name": p.name,
            "label": p.label,
            "description": p.description,
            "accepts_images": p.accepts_images,
        }
        for p in all_presets()
    ]
    return builtin + [_mine(p) for p in user_presets(request.auth)]  # type: ignore[attr-defined]


def _checked_name(body: UserPresetIn) -> None:
    problem = storable_problem(body.name)
    if problem:
        raise ProtocolError(ErrorCode.INVALID_INPUT, f"name: {problem}")


@router.post("/presets/", tags=["presets"], response={201: PresetOut, 422: ErrorOut})
async def add_preset(request: HttpRequest, body: UserPresetIn) -> Status[Any]:
    """Save a composition as your own preset; 422 names what does not fit (an unknown agent or
    tool, an MCP tool not granted to you, a table you do not have, a name you use already)."""
    _checked_name(body)
    saved = await sync_to_async(save_user_preset)(
        request.auth,  # type: ignore[attr-defined]
        body.name,
        body.config.model_dump(),
    )
    return Status(201, _mine(saved))


@router.put(
    "/presets/{int:pk}",
    tags=["presets"],
    response={200: PresetOut, 422: ErrorOut, **NOT_FOUND},
)
async def change_preset(request: HttpRequest, pk: int, body: UserPresetIn) -> Any:
    """Rename or change your preset `pk` (notebooks started from it keep their settings)."""
    _checked_name(body)
    saved = await sync_to_async(save_user_preset)(
        request.auth,  # type: ignore[attr-defined]
        body.name,
        body.config.model_dump(),
        pk,
    )
    return _mine(saved)


@router.delete("/presets/{int:pk}", tags=["presets"], response={204: None, **NOT_FOUND})
async def delete_preset(request: HttpRequest, pk: int) -> Status[None]:
    """Delete your preset `pk`."""
    await sync_to_async(delete_user_preset)(request.auth, pk)  # type: ignore[attr-defined]
    return Status(204, None)
