"""What the REST API takes and returns, as pydantic models (they make the OpenAPI schema).

Request bodies declare the websocket protocol's limits (lengths, counts) so the OpenAPI schema
states them; `runs.protocol.validate_action` applies them again with the rest (storable text,
JSON nesting), as it does for a socket's frame.
"""

from __future__ import annotations

import datetime as dt
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from ninja import Field, Path, Schema
from pydantic import model_validator

from runs.protocol import MAX_TEXT_CHARS

Mode = Literal["auto", "step", "tools"]


def _kinds(annotation: Any) -> set[type]:
    """The JSON kinds (as Python types) a field's annotation admits: str, int, float, bool,
    list, dict, or NoneType; `object` for anything else (a nested model)."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _kinds(get_args(annotation)[0])
    if origin is Literal:
        return {type(value) for value in get_args(annotation)}
    if origin in (Union, UnionType):
        return set().union(*(_kinds(arg) for arg in get_args(annotation)))
    if origin in (list, tuple, set):
        return {list}
    if annotation in (str, int, float, bool, type(None)):
        return {annotation}
    return {object}


class Input(Schema):
    """A request body: a value of a JSON kind its field's schema does not take is refused, not
    coerced (`"1"` is not a number, `1` not `true`, `true` not 1), so what the schema refuses
    the server refuses too. A number's own forms stay (`2.0` is the integer 2, as in JSON
    Schema)."""

    @model_validator(mode="before")
    @classmethod
    def _as_typed(cls, data: Any) -> Any:
        # ninja's Schema hands its validators the body wrapped (DjangoGetter): read the dict
        given = getattr(data, "_obj", data)
        if not isinstance(given, dict):
            return data
        for name, field in cls.model_fields.items():
            key = field.alias or name
            if key not in given:
                continue
            kinds = _kinds(field.annotation)
            value = given[key]
            if object in kinds:
                continue
            if isinstance(value, bool):
                wrong = bool not in kinds
            elif isinstance(value, str):
                wrong = str not in kinds
            elif isinstance(value, int | float):
                wrong = not kinds & {int, float}
            else:
                wrong = False
            if wrong:
                raise ValueError(f"{key}: expected {_named(kinds)}")
        return data


def _named(kinds: set[type]) -> str:
    names = {str: "a string", int: "a number", float: "a number", bool: "true or false"}
    said = sorted({names[k] for k in kinds if k in names})
    return " or ".join(said + (["null"] if type(None) in kinds else [])) or "a list"


class ErrorOut(Schema):
    """Every refusal: a machine-readable code and a sentence naming what was wrong."""

    code: str = Field(examples=["invalid_input"])
    detail: str = Field(examples=["text: String should have at least 1 character"])


class Usage(Schema):
    """Tokens that model calls used (a turn's or a step's), and what they cost."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    cost_usd: float | None = Field(
        None,
        description="USD at the notebook's model's price (ModelPrice); null: the price is unknown",
    )


class CorrectionCounts(Schema):
    """How much people corrected a notebook: edits of inputs and call arguments (answers to
    questions not counted), rejected calls, and turns with a corrected answer."""

    edits: int
    rejections: int
    corrected_answers: int


class NotebookOut(Schema):
    """A notebook as lists show it: its agent and mode, its status, how its last turn ended, and
    totals over its turns."""

    id: int
    title: str
    agent: str
    mode: str
    status: str = Field(description="idle, running, waiting, failed or interrupted")
    created_at: dt.datetime
    updated_at: dt.datetime
    turns: int | None = None
    url: str = Field(description="the notebook's page")
    trace_url: str = Field(description="the whole trace as JSON")
    outcome: str = Field(
        description="how the last turn ended: answered, stopped, failed, max_iterations, "
        "waiting, running, interrupted or empty"
    )
    by: str | None = Field(None, description="for a stopped turn: who pressed Stop")
    stopped_steps: list[int] = Field(
        default_factory=list,
        description="for a stopped turn: the numbers of the steps that were running when "
        "Stop was pressed (every one of them), or of the step that waited",
    )
    steps: int
    tool_calls: int
    tokens: int
    cost_usd: float | None = Field(
        None,
        description="USD at the notebook's model's price (ModelPrice); null: the price is unknown",
    )
    human_actions: int
    corrections: CorrectionCounts
    wall_time_s: float
    answer: str = Field(description="first line of the last turn's answer")


class WaitingStep(Schema):
    """A queued step of the active turn, the first one next: what it would run, and the budget
    it waits on, if one."""

    step_id: str
    kind: str
    status: str
    input: str | None
    tool_calls: list[dict[str, Any]] | None
    budget: dict[str, Any] | None = Field(
        None,
        description="it waits because a budget was reached: scope (run or day), unit (usd or "
        "tokens), limit, spent, reason, raise_to (approving raises the budget to it)",
    )


class NotebookDetail(NotebookOut):
    """One notebook in full: the list's fields, what the next action needs (newest seq, whether
    it is settled, the waiting steps), its answer and its picks (model, tools, data tables, MCP
    tools, budgets)."""

    last_seq: int = Field(description="seq of the newest stored event")
    settled: bool = Field(
        description="nothing runs or is being changed: the next action can be sent"
    )
    active_turn: str | None = Field(description="engine id of the unfinished turn")
    waiting: list[WaitingStep] = Field(
        description="the active turn's queued steps, the first one next"
    )
    response: str | None = Field(description="the latest finished turn's answer")
    mcp_tools: list[str] = Field(
        default_factory=list, description="the MCP tools picked for it (`server__tool`)"
    )
    model: str = Field("", description="the model it calls; empty: the default")
    tools: list[str] | None = Field(
        None, description="the preset's built-in tools it kept; null: all of them"
    )
    data_tables: list[str] | None = Field(
        None, description="your data tables it may read; null: all of them"
    )
    budget: dict[str, Any] | None = Field(
        None,
        description="its budgets in force and what the active run and you today spent "
        "(as GET /notebooks/{id}/budget)",
    )


class TurnOut(Schema):
    """One turn of a notebook: the message that started it, its answer or how it ended, and what
    its steps used."""

    id: str = Field(description="the engine's task id")
    index: int
    input: str
    status: str
    response: str | None
    abandoned: bool
    created_at: dt.datetime
    finished_at: dt.datetime | None
    usage: Usage | None = Field(None, description="what its completed steps used")


class StepOut(Schema):
    """One step of a turn as stored: its input as created and as it runs (after edits), its tool
    calls, output, sources, its edges in the turn's DAG, usage, how many times it was started,
    and its times."""

    step_id: str
    turn: str
    kind: str
    status: str
    original_input: str | None
    input: str | None
    tool_calls: list[dict[str, Any]] | None
    output: str
    sources: list[Any]
    is_last: bool
    error: str | None
    next_steps: list[str]
    prev_steps: list[str]
    usage: Usage
    runs: int
    queued: bool
    created_at: dt.datetime
    started_at: dt.datetime | None
    ended_at: dt.datetime | None


class EventOut(Schema):
    """One stored event of a notebook, in order of `seq`; `event` is the engine's typed event as
    the socket carries it."""

    seq: int
    type: str
    step_id: str | None
    turn: str | None
    at: float
    event: dict[str, Any] = Field(description="the stored event (docs/protocol.md)")


class PresetOut(Schema):
    """An agent a notebook can be made with: a built-in preset or one of your own."""

    name: str = Field(
        description="a built-in preset's name (`agent` of POST /notebooks/), or yours"
    )
    label: str
    description: str
    accepts_images: bool
    kind: Literal["builtin", "mine"] = Field(
        "builtin", description="built in, or one of your own (POST /presets/)"
    )
    id: int | None = Field(
        None, description="your preset's id (`preset` of POST /notebooks/)"
    )
    config: dict[str, Any] | None = Field(
        None,
        description="what your preset is made of: agent, model, tools, mcp_tools, "
        "data_tables, mode (as in POST /presets/)",
    )


MAX_IMAGES = 4
MAX_REASON_CHARS = 2000
MAX_STEP_ID_CHARS = 64
MAX_TOOL_ID_CHARS = 128
ImageId = Annotated[int, Field(ge=1, le=2**31)]
# path parameters, as long as the protocol lets them be
StepId = Annotated[str, Path(min_length=1, max_length=MAX_STEP_ID_CHARS)]
ToolId = Annotated[str, Path(min_length=1, max_length=MAX_TOOL_ID_CHARS)]
Text = Annotated[str, Field(min_length=1, max_length=MAX_TEXT_CHARS)]


class NotebookIn(Input):
    """A new notebook: its first message and the agent (a built-in preset, or one of yours) with
    its mode and picks."""

    text: Text = Field(description="the first message")
    agent: str = Field(
        "",
        examples=["function_calling"],
        description="a built-in preset's name (needed unless `preset` is given)",
        max_length=64,
    )
    mode: Mode = "auto"
    images: list[ImageId] = Field(
        default=[], max_length=MAX_IMAGES, description="ids from POST /api/images/"
    )
    mcp_tools: list[Annotated[str, Field(max_length=64)]] = Field(
        default=[],
        max_length=100,
        description="tools from MCP servers offered besides the preset's, by the name the "
        "model sees (`server__tool`); the new-notebook page lists those you may use",
    )
    model: str = Field(
        "",
        max_length=100,
        description="a model this server offers (AGENTUI_MODELS); empty: the default",
    )
    tools: list[Annotated[str, Field(max_length=64)]] | None = Field(
        None,
        max_length=100,
        description="the preset's built-in tools to keep, by name; null: all of them",
    )
    data_tables: list[Annotated[str, Field(max_length=64)]] | None = Field(
        None,
        max_length=200,
        description="your data tables its data tools may read; null: all of them",
    )
    preset: int | None = Field(
        None,
        ge=1,
        le=2**31,
        description="one of your own presets (GET /presets/, `id`): the notebook is made "
        "as it says, checked again now; agent, mode and the picks above are then ignored",
    )


class MessageIn(Input):
    """A message that starts the notebook's next turn, with images to show the model."""

    text: Text
    images: list[ImageId] = Field(default=[], max_length=MAX_IMAGES)


class EditIn(Input):
    """A queued step's new input, before it runs."""

    input: str = Field(
        max_length=MAX_TEXT_CHARS,
        description="the step's new input; for a tool-call step, its calls as JSON",
    )


class AnswerIn(Input):
    """The answer to the question a step waits on (a tool asked the person)."""

    answer: Text = Field(description="your answer to the question the step waits on")


ElicitationId = Annotated[str, Path(min_length=1, max_length=64)]


class ElicitationAnswerIn(Input):
    """The answer to an MCP server's question (an `elicitation_asked` event of the notebook)."""

    answer: Literal["accept", "decline", "cancel"] = Field(
        description="accept sends `content` to the server; decline and cancel send nothing"
    )
    content: dict[str, str | int | float | bool] | None = Field(
        None,
        description="with accept: the form's fields and their values, checked against the form",
    )


class RejectIn(Input):
    """Why a tool call is rejected; the model is told."""

    reason: str = Field("", max_length=MAX_REASON_CHARS)


class UndoIn(Input):
    """Which step to undo: the newest completed one; naming it makes a repeated request harmless."""

    step_id: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_STEP_ID_CHARS,
        description="the completed step you mean to undo (safe against doubles)",
    )


class ModeIn(Input):
    """How the notebook runs its steps from now on: auto, one step at a time, or stopping before
    tool calls."""

    mode: Mode


class Accepted(Schema):
    """An action was taken; its effects arrive as events (and in the notebook's status)."""

    action: str
    notebook: int
    turn: str | None = Field(None, description="the turn a message started")
