"""An MCP server's question to the person during one of its tools' calls (`elicitation/create`).

Sessions are shared by every notebook of a process, and a stdio server's request names no call,
so a question the session receives belongs to the calls running on it (`runs.presets.mcp.calls`).
When they are all of one turn it goes to that turn's notebook, on the oldest call's card
(usually the only one); when calls of several turns are running it cannot be told whose it is,
and it is declined (never shown to a person it may not be for). A question with no call running
is declined too.

The form comes from the server, so it is untrusted: only a flat object of primitive properties
(string, number, integer, boolean, enum; as the MCP spec allows) within size caps becomes a form,
its texts are cut and cleaned, and anything else is declined at once with the card saying why.
The person's answer is checked against the form on the server (`check_answer`) before it goes to
the server. A question waits at most `AGENTUI_MCP_ELICITATION_TIMEOUT_S`, then the server is
told `cancel`; the tool call's own limits do not run meanwhile.

What the page sees are two events in the run's stream, emitted in the asking call's context (so
under its lease): `elicitation_asked` and `elicitation_closed`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from runs.conf import conf
from runs.engine import ElicitationAsked, ElicitationClosed, ElicitationField
from runs.presets.mcp.calls import McpCall, calls_on, emit
from runs.presets.mcp.listing import clean_description

if TYPE_CHECKING:
    from mcp import types
    from mcp.client.session import ClientRequestContext

logger = logging.getLogger(__name__)

MAX_SCHEMA_BYTES = 16 * 1024
MAX_FIELDS = 20
MAX_MESSAGE_CHARS = 2000
MAX_TITLE_CHARS = 200
MAX_FIELD_DESCRIPTION_CHARS = 500
MAX_NAME_CHARS = 64
MAX_OPTIONS = 50
MAX_OPTION_CHARS = 200
MAX_STRING_CHARS = 10_000

Action = Literal["accept", "decline", "cancel"]
_KINDS = {"string", "number", "integer", "boolean"}


class FormRefused(ValueError):
    """The server's form is not one agentui shows; the message says why."""


class AnswerRefused(ValueError):
    """The person's answer does not fit the form; the message says where."""


def _text(value: Any, cap: int) -> str:
    cleaned = clean_description(value)
    return cleaned if len(cleaned) <= cap else cleaned[: cap - 1] + "…"


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _count(value: Any) -> int | None:
    return (
        value
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0
        else None
    )


def _options(prop: dict[str, Any], name: str) -> tuple[list[str], list[str]]:
    """An enum's values and the titles shown for them (`enum` + `enumNames`, or `oneOf` consts)."""
    if "enum" in prop:
        values, titles = prop["enum"], prop.get("enumNames") or []
    else:
        choices = prop["oneOf"] if "oneOf" in prop else prop.get("anyOf")
        if not isinstance(choices, list) or not all(
            isinstance(c, dict) for c in choices
        ):
            raise FormRefused(
                f"the field {name!r} offers its choices in a form agentui does not show"
            )
        values = [c.get("const") for c in choices]
        titles = [c.get("title", c.get("const")) for c in choices]
    if not isinstance(values, list) or not values or len(values) > MAX_OPTIONS:
        raise FormRefused(f"the field {name!r} must offer 1 to {MAX_OPTIONS} choices")
    if not all(isinstance(v, str) and 0 < len(v) <= MAX_OPTION_CHARS for v in values):
        raise FormRefused(
            f"the choices of {name!r} must be texts of at most {MAX_OPTION_CHARS} characters"
        )
    if not isinstance(titles, list) or len(titles) != len(values):
        titles = []
    return list(values), [
        _text(t, MAX_OPTION_CHARS) or v for t, v in zip(titles, values)
    ]


def _field(name: str, prop: Any, required: bool) -> ElicitationField:
    if not isinstance(prop, dict):
        raise FormRefused(f"the field {name!r} is not described by an object")
    kind = prop.get("type")
    is_enum = "enum" in prop or "oneOf" in prop or "anyOf" in prop
    if is_enum and kind in (None, "string"):
        values, titles = _options(prop, name)
        choice = prop.get("default")
        return ElicitationField(
            name=name,
            kind="enum",
            title=_text(prop.get("title"), MAX_TITLE_CHARS),
            description=_text(prop.get("description"), MAX_FIELD_DESCRIPTION_CHARS),
            required=required,
            default=choice if choice in values else None,
            options=values,
            option_titles=titles,
        )
    if kind not in _KINDS:
        shown = json.dumps(kind)[:40]
        raise FormRefused(
            f"the field {name!r} is of type {shown}: only strings, numbers, integers, "
            "booleans and choices can be asked"
        )
    made = ElicitationField(
        name=name,
        kind=kind,
        title=_text(prop.get("title"), MAX_TITLE_CHARS),
        description=_text(prop.get("description"), MAX_FIELD_DESCRIPTION_CHARS),
        required=required,
        minimum=_number(prop.get("minimum")) if kind in ("number", "integer") else None,
        maximum=_number(prop.get("maximum")) if kind in ("number", "integer") else None,
        min_length=_count(prop.get("minLength")) if kind == "string" else None,
        max_length=_count(prop.get("maxLength")) if kind == "string" else None,
    )
    raw_default = prop.get("default")
    if raw_default is None:
        return made
    try:
        default = _checked_value(made, raw_default)
    except AnswerRefused:
        return made  # a default that does not fit its own field is not offered
    return made.model_copy(update={"default": default})


def form_fields(schema: Any) -> list[ElicitationField]:
    """The fields of a requested schema; FormRefused when it is not a flat form of primitives."""
    if not isinstance(schema, dict):
        raise FormRefused("its form is not a JSON object")
    try:
        size = len(json.dumps(schema))
    except (TypeError, ValueError, RecursionError):
        raise FormRefused("its form is not JSON data") from None
    if size > MAX_SCHEMA_BYTES:
        raise FormRefused(f"its form is over {MAX_SCHEMA_BYTES:,} bytes")
    if schema.get("type") != "object":
        raise FormRefused("its form is not of type object")
    properties = schema.get("properties", {})
    if not isinstance(properties, dict):
        raise FormRefused("its form's properties are not an object")
    if len(properties) > MAX_FIELDS:
        raise FormRefused(
            f"its form has {len(properties)} fields; at most {MAX_FIELDS} are shown"
        )
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise FormRefused("its form's `required` is not a list of field names")
    fields = []
    for name, prop in properties.items():
        if not (0 < len(name) <= MAX_NAME_CHARS) or not name.isprintable():
            raise FormRefused(
                f"a field name must be 1-{MAX_NAME_CHARS} printable characters"
            )
        fields.append(_field(name, prop, name in required))
    missing = [r for r in required if r not in properties]
    if missing:
        raise FormRefused(
            f"its form requires {missing[0][:MAX_NAME_CHARS]!r}, which it does not describe"
        )
    return fields


def _checked_value(f: ElicitationField, value: Any) -> str | int | float | bool:
    label = f.title or f.name
    if f.kind == "boolean":
        if not isinstance(value, bool):
            raise AnswerRefused(f"{label}: must be yes or no")
        return value
    if f.kind in ("number", "integer"):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise AnswerRefused(f"{label}: must be a number")
        number: int | float = value
        if not math.isfinite(number):
            raise AnswerRefused(f"{label}: must be a number")
        if f.kind == "integer":
            if isinstance(number, float) and not number.is_integer():
                raise AnswerRefused(f"{label}: must be a whole number")
            number = int(number)
        if f.minimum is not None and number < f.minimum:
            raise AnswerRefused(f"{label}: must be at least {f.minimum:g}")
        if f.maximum is not None and number > f.maximum:
            raise AnswerRefused(f"{label}: must be at most {f.maximum:g}")
        return number
    if not isinstance(value, str):
        raise AnswerRefused(f"{label}: must be text")
    text: str = value
    if f.kind == "enum":
        if text not in f.options:
            raise AnswerRefused(f"{label}: must be one of the choices offered")
        return text
    cap = (
        MAX_STRING_CHARS
        if f.max_length is None
        else min(f.max_length, MAX_STRING_CHARS)
    )
    if len(text) > cap:
        raise AnswerRefused(f"{label}: at most {cap:,} characters")
    if f.min_length is not None and len(text) < f.min_length:
        raise AnswerRefused(f"{label}: at least {f.min_length} characters")
    return text


def check_answer(
    fields: list[ElicitationField], content: Any
) -> dict[str, str | int | float | bool]:
    """The accepted form's values as the server is sent them; AnswerRefused naming a problem."""
    if not isinstance(content, dict):
        raise AnswerRefused("the answer must be the form's fields and their values")
    known = {f.name for f in fields}
    extra = [k for k in content if k not in known]
    if extra:
        raise AnswerRefused(f"the form has no field {str(extra[0])[:MAX_NAME_CHARS]!r}")
    checked: dict[str, str | int | float | bool] = {}
    for f in fields:
        value = content.get(f.name)
        if value is None or (value == "" and f.kind != "string"):
            if f.required:
                raise AnswerRefused(f"{f.title or f.name}: required")
            continue
        if value == "" and not f.required:
            continue
        checked[f.name] = _checked_value(f, value)
    return checked


# --- the calls running on each session, and the questions waiting ------------------------------


@dataclass(frozen=True)
class Answer:
    """What the server is sent, and by whom (a person) or why (agentui, when no one answered)."""

    action: Action
    content: dict[str, str | int | float | bool] | None = None
    by: str = ""
    reason: str = ""


@dataclass
class _Waiting:
    call: McpCall
    answered: asyncio.Future[Answer]


_sending: set[asyncio.Task[None]] = set()  # asyncio keeps only weak references to tasks
_waiting: dict[str, _Waiting] = {}  # by elicitation id


@contextmanager
def asking_during(call: McpCall | None) -> Iterator[None]:
    """Questions still open when `call` ends are cancelled (the server has its answer)."""
    try:
        yield
    finally:
        for elicitation_id in list(call.waits if call is not None else ()):
            wait = _waiting.get(elicitation_id)
            if wait is not None and not wait.answered.done():
                wait.answered.set_result(
                    Answer("cancel", reason="the tool call ended before an answer")
                )


def _call_for(session: Any) -> McpCall | None:
    calls = calls_on(session)
    if not calls:
        return None
    if len({id(c.running.task) for c in calls}) > 1:
        return None
    return calls[0]


def waiting(elicitation_id: str) -> bool:
    """Whether the question waits for an answer in this process."""
    wait = _waiting.get(elicitation_id)
    return wait is not None and not wait.answered.done()


def resolve(elicitation_id: str, answer: Answer) -> bool:
    """Give a waiting question its answer; False if it is not waiting here (any more)."""
    wait = _waiting.get(elicitation_id)
    if wait is None or wait.answered.done():
        return False
    wait.answered.set_result(answer)
    return True


def _hold(call: McpCall) -> None:
    if call.clock is not None:
        call.clock.hold()


def _release(call: McpCall) -> None:
    if call.clock is not None:
        call.clock.release()


def _result(answer: Answer) -> types.ElicitResult:
    from mcp import types

    content: dict[str, str | int | float | bool | list[str] | None] | None = (
        dict(answer.content) if answer.content is not None else None
    )
    return types.ElicitResult(action=answer.action, content=content)


async def on_elicitation(
    context: ClientRequestContext, params: types.ElicitRequestParams
) -> types.ElicitResult:
    """The session's elicitation callback: ask the person in the asking call's notebook."""
    from mcp import types

    call = _call_for(context.session)
    if call is None:
        logger.warning(
            "an MCP server asked the person with no call of one turn running on its session; "
            "declined"
        )
        return types.ElicitResult(action="decline")
    running = call.running
    elicitation_id = uuid.uuid4().hex
    base: dict[str, Any] = {
        "task_id": running.task.task_id,
        "step_id": running.step_id,
        "elicitation_id": elicitation_id,
        "tool_id": running.tool_id,
    }
    message = _text(getattr(params, "message", ""), MAX_MESSAGE_CHARS)
    try:
        if not isinstance(params, types.ElicitRequestFormParams):
            raise FormRefused(
                "it asked to open a web address (URL mode), which agentui does not do yet"
            )
        fields = form_fields(params.requested_schema)
    except FormRefused as exc:
        reason = f"declined: {exc}"
        await emit(
            call,
            ElicitationAsked(
                **base, server=call.server, message=message, refused=reason
            ),
        )
        await emit(call, ElicitationClosed(**base, action="decline", reason=reason))
        return types.ElicitResult(action="decline")
    deadline_s = conf().mcp_elicitation_timeout_s
    answered: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
    _waiting[elicitation_id] = _Waiting(call, answered)
    call.waits.add(elicitation_id)
    _hold(call)
    try:
        await emit(
            call,
            ElicitationAsked(
                **base,
                server=call.server,
                message=message,
                fields=fields,
                deadline_at=time.time() + deadline_s,
            ),
        )
        try:
            answer = await asyncio.wait_for(asyncio.shield(answered), deadline_s)
        except TimeoutError:
            answer = Answer(
                "cancel",
                reason=f"no answer within {deadline_s:g} s (AGENTUI_MCP_ELICITATION_TIMEOUT_S)",
            )
            if not answered.done():
                answered.set_result(answer)
            answer = answered.result()
        closed = ElicitationClosed(
            **base,
            action=answer.action,
            content=answer.content,
            by=answer.by,
            reason=answer.reason,
        )
        await emit(call, closed)
    except asyncio.CancelledError:
        # the server withdrew its question, or the session ended: the card must not stay open
        withdrawn = ElicitationClosed(
            **base, action="cancel", reason="the MCP server withdrew its question"
        )
        sending = asyncio.get_running_loop().create_task(
            running.task.emit(withdrawn), context=call.context.copy()
        )
        _sending.add(sending)
        sending.add_done_callback(_sending.discard)
        raise
    finally:
        _waiting.pop(elicitation_id, None)
        call.waits.discard(elicitation_id)
        _release(call)
    return _result(answer)
