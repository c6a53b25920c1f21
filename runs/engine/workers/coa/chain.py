"""Reading an abstract chain: placeholders ``[FUNC name(args) = yN]`` and the references between them.

The model reasons with placeholders instead of values::

    The trip costs [FUNC add(120, 45) = y1] dollars, so each of four pays [FUNC divide(y1, 4) = y2].

Arguments are JSON (or Python) literals, positional (filling the tool's parameters in order) or
``name=value``, and results of other placeholders, bare (``y1``) or quoted (``"y1"``): inside the
arguments a string that is exactly ``yN`` is a reference. Quotes and commas inside strings are
kept (the scanner is the LLMCompiler plan's). Nothing here raises on a bad chain: a placeholder
that cannot run carries its ``error``, which becomes its value in the filled-in chain.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from pydantic import BaseModel, Field

from ...tools import BaseTool, ToolOutput
from ..llm_compiler.plan import PlanSyntaxError, parse_arguments, scan_arguments
from ..llm_compiler.refs import result_value
from .stubs import parameter_names

_OPEN = re.compile(r"\[\s*FUNC\b", re.IGNORECASE)
_NAME = re.compile(r"\s*([A-Za-z_][\w.]*)\s*\(")
_TAIL = re.compile(r"\s*=\s*([\"']?)(y\d+)\1\s*\]")
OUTPUT_NAME = re.compile(r"y(\d+)")
# a result named in the prose: y1 must not match the start of y10, nor the end of "xy1"
_TOKEN = re.compile(r"(?<![\w$])y(\d+)(?!\w)")
SHAPE = "[FUNC name(arguments) = yN]"


class ChainCall(BaseModel):
    """One placeholder: the call it asks for, the results it uses, and (once run) its result."""

    text: str  # the placeholder as written
    start: int  # where it sits in the chain's text
    end: int
    tool_name: str = (
        ""  # empty when the placeholder is too malformed to name a function
    )
    output: str | None = None  # "y2": the name of its result
    kwargs: dict[str, Any] = Field(default_factory=dict)  # references stay as "yN" text
    depends_on: list[str] = Field(default_factory=list)
    error: str | None = None  # a problem with the placeholder itself
    graph_error: str | None = (
        None  # a problem with its references (undefined, a cycle, a duplicate)
    )
    result: ToolOutput | None = None
    # the id its call is shown, approved and edited under, fixed when the chain is written down
    tool_id: str | None = None

    @property
    def index(self) -> int | None:
        """N of ``yN``: its place in the DAG (like an LLMCompiler plan index)."""
        return int(self.output[1:]) if self.output else None

    @property
    def problem(self) -> str | None:
        return self.error or self.graph_error

    @property
    def label(self) -> str:
        return self.output or "a placeholder"


class Chain(BaseModel):
    """The model's reasoning with its placeholders, in order of appearance."""

    text: str
    calls: list[ChainCall] = Field(default_factory=list)

    def defined(self) -> dict[str, ChainCall]:
        """Each result name with the placeholder that computes it (the first, if written twice)."""
        named: dict[str, ChainCall] = {}
        for call in self.calls:
            if call.output and call.output not in named:
                named[call.output] = call
        return named


# --- reading -------------------------------------------------------------------------------------


def _reference(name: str) -> str | None:
    return name if OUTPUT_NAME.fullmatch(name) else None


def references(value: Any) -> Iterator[str]:
    """Every ``yN`` a JSON value refers to, in order (a string that is exactly ``yN``)."""
    if isinstance(value, str):
        if OUTPUT_NAME.fullmatch(value.strip()):
            yield value.strip()
    elif isinstance(value, list | tuple):
        for item in value:
            yield from references(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from references(item)


def _malformed(text: str, start: int, why: str) -> ChainCall:
    # the placeholder ends at its "]", or with its line when it has none
    close, newline = text.find("]", start), text.find("\n", start)
    if newline < 0:
        newline = len(text)
    end = close + 1 if 0 <= close < newline else newline
    return ChainCall(
        text=text[start:end],
        start=start,
        end=end,
        error=f"{why}; a placeholder reads {SHAPE}",
    )


def _read(text: str, start: int, body: int, tools: Mapping[str, BaseTool]) -> ChainCall:
    name = _NAME.match(text, body)
    if name is None:
        return _malformed(text, start, "the placeholder names no function call")
    scanned = scan_arguments(text, name.end())
    if scanned is None:
        return _malformed(
            text, start, f"the arguments of {name.group(1)}( are never closed with ')'"
        )
    args_text, after = scanned
    tail = _TAIL.match(text, after)
    if tail is None:
        return _malformed(
            text, start, f"{name.group(1)}(...) is not followed by '= yN]'"
        )
    call = ChainCall(
        text=text[start : tail.end()],
        start=start,
        end=tail.end(),
        tool_name=name.group(1),
        output=tail.group(2),
    )
    tool = tools.get(call.tool_name)
    if tool is None:
        known = ", ".join(sorted(tools)) or "none"
        call.error = f"there is no function named {call.tool_name!r} (the functions are: {known})"
        return call
    params = parameter_names(tool)
    try:
        call.kwargs = parse_arguments(args_text, params, _reference)
    except PlanSyntaxError as exc:
        call.error = f"{call.tool_name}(): {exc}"
        return call
    call.error = arity_problem(tool, call.kwargs)
    call.depends_on = list(dict.fromkeys(references(call.kwargs)))
    return call


def arity_problem(tool: BaseTool, kwargs: Mapping[str, Any]) -> str | None:
    """Missing or unexpected arguments, in words; None when the names fit the tool."""
    schema = tool.metadata.parameters
    properties = schema.get("properties") or {}
    required = list(schema.get("required") or [])
    name = tool.metadata.name
    unexpected = [key for key in kwargs if key not in properties]
    if unexpected:
        return f"{name}() got unexpected argument(s) {', '.join(unexpected)} (it takes {', '.join(properties) or 'none'})"
    missing = [key for key in required if key not in kwargs]
    if missing:
        return f"{name}() is missing argument(s) {', '.join(missing)}"
    return None


def parse_chain(text: str, tools: Mapping[str, BaseTool]) -> Chain:
    """Every placeholder of ``text``, read and linked (see ``link``)."""
    calls: list[ChainCall] = []
    position = 0
    while (opening := _OPEN.search(text, position)) is not None:
        call = _read(text, opening.start(), opening.end(), tools)
        calls.append(call)
        position = max(call.end, opening.end())
    chain = Chain(text=text, calls=calls)
    link(chain)
    return chain


# --- the graph -----------------------------------------------------------------------------------


def link(chain: Chain) -> None:
    """Set each call's ``graph_error``: a duplicate result name, an undefined reference, a cycle."""
    defined = chain.defined()
    for call in chain.calls:
        call.graph_error = None
        if call.output and defined.get(call.output) is not call:
            call.graph_error = (
                f"{call.output} is already the result of an earlier placeholder"
            )
            continue
        undefined = [name for name in call.depends_on if name not in defined]
        if undefined:
            call.graph_error = f"{call.label} uses {', '.join(undefined)}, which no placeholder computes"
    for call in _on_cycles(chain, defined):
        others = [name for name in call.depends_on if name in defined]
        if call.output in others:
            call.graph_error = f"{call.output} uses its own result"
        else:
            call.graph_error = f"{call.label} is part of a cycle: it uses {', '.join(others)}, which needs {call.label}"


def _on_cycles(chain: Chain, defined: Mapping[str, ChainCall]) -> list[ChainCall]:
    """The calls that reach themselves through their references (each waits for itself)."""
    found = []
    for call in chain.calls:
        if call.graph_error or not call.output:
            continue
        seen: set[str] = set()
        frontier = list(call.depends_on)
        while frontier:
            name = frontier.pop()
            if name == call.output:
                found.append(call)
                break
            if name in seen or name not in defined:
                continue
            seen.add(name)
            frontier.extend(defined[name].depends_on)
    return found


# --- values --------------------------------------------------------------------------------------


def substitute(value: Any, results: Mapping[str, ToolOutput]) -> Any:
    """``value`` with each reference replaced by that result's value (its own type: 165 stays a number)."""
    if isinstance(value, str):
        name = value.strip()
        if OUTPUT_NAME.fullmatch(name) and name in results:
            return result_value(results[name])
        return value
    if isinstance(value, list | tuple):
        return [substitute(item, results) for item in value]
    if isinstance(value, dict):
        return {key: substitute(item, results) for key, item in value.items()}
    return value


def value_text(call: ChainCall) -> str:
    """What a placeholder becomes in the filled-in chain: its result, or what went wrong."""
    if call.result is None:
        return call.text
    if call.result.is_error:
        message = call.result.content.removeprefix("Error: ")
        if not call.tool_name:
            return f"[unreadable placeholder: {message}]"
        return f"[{call.label} = {call.tool_name}(...) failed: {message}]"
    return call.result.content


def fill(chain: Chain) -> str:
    """The chain with each placeholder replaced by its value and each ``yN`` in the prose by its result.

    Substitution is on token boundaries: ``y1`` never touches ``y10``.
    """
    defined = chain.defined()

    def prose(text: str) -> str:
        def one(match: re.Match[str]) -> str:
            call = defined.get(match.group(0))
            if call is None or call.result is None:
                return match.group(0)
            return (
                f"[{call.output}: no value]"
                if call.result.is_error
                else call.result.content
            )

        return _TOKEN.sub(one, text)

    parts: list[str] = []
    position = 0
    for call in sorted(chain.calls, key=lambda c: c.start):
        parts.append(prose(chain.text[position : call.start]))
        parts.append(value_text(call))
        position = call.end
    parts.append(prose(chain.text[position:]))
    return "".join(parts)
