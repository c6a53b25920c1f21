"""Reading a planner's reply, line by line as it streams, into planned calls.

A plan is numbered calls, one a line, optionally preceded by ``Thought: ...`` lines, ending with
``join()`` (and the stop marker ``<END_OF_PLAN>``, which a server honouring ``stop`` never sends)::

    1. search("Lagos population")
    2. search("Cairo population")
    3. divide($1, "$2")
    Thought: I can answer now.
    4. join()<END_OF_PLAN>

Arguments are Python/JSON literals, positional (mapped onto the tool's parameters in order) or
``name=value``; ``$N`` / ``${N}`` refer to call N's result, quoted or bare. ``PlanParser.feed``
returns each call as soon as its line is complete, so it can be dispatched while the planner is
still writing; nothing here raises on a bad plan: a bad call carries its ``error`` and problems
of the plan as a whole are collected in ``problems``.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field

from ...model_json import deeper_than, too_deep_error
from ...tools import ToolOutput
from .refs import find_references, shift_references

END_OF_PLAN = "<END_OF_PLAN>"
JOIN = "join"

_NUMBERED = re.compile(r"\s*(?:[-*]\s*)?(\d+)\s*[.):]\s*(.*)", re.DOTALL)
_THOUGHT = re.compile(r"\s*Thought\s*:\s*(.*)", re.IGNORECASE | re.DOTALL)
_CALL = re.compile(r"\s*([A-Za-z_][\w.]*)\s*\(")
_REF_AT = re.compile(r"\$(?:\{(\d+)\}|(\d+))")
_REF_NAME = re.compile(r"__ref_(\d+)__")
_NAMED_CONSTANTS: dict[str, Any] = {
    "true": True,
    "false": False,
    "null": None,
    "none": None,
    "True": True,
    "False": False,
    "None": None,
}


class PlannedCall(BaseModel):
    """One call of a plan, as JSON-able data: what to run, what it waits for, and what it gave."""

    index: int
    tool_name: str
    kwargs: dict[str, Any] = Field(default_factory=dict)  # references stay as "$N" text
    depends_on: list[int] = Field(default_factory=list)
    thought: str | None = None
    error: str | None = (
        None  # why it cannot run as planned; it is then answered with this error
    )
    line: str = ""
    output: ToolOutput | None = None  # filled in once it ran
    # the id a person approves and edits it under, when it waits for approval (fixed then: a
    # fork renames the plan step, and the decisions must still find their calls)
    tool_id: str | None = None


def call_line(tool_name: str, kwargs: dict[str, Any]) -> str:
    """A call written as a plan line (without its number), e.g. after a person edited it."""
    arguments = ", ".join(
        f"{name}={json.dumps(value, ensure_ascii=False)}"
        for name, value in kwargs.items()
    )
    return f"{tool_name}({arguments})"


class PlanSyntaxError(ValueError):
    """A call line that cannot be read."""


# --- one call's text -----------------------------------------------------------------------------


def scan_arguments(text: str, start: int) -> tuple[str, int] | None:
    """From just after ``(``, find the closing ``)``; return the argument text and where it ends.

    Bare references outside string literals become the identifiers ``__ref_N__`` so that Python's
    parser accepts them. None means the call is not closed yet (it may continue on the next line).
    """
    out: list[str] = []
    depth = 1
    quote: str | None = None
    i = start
    while i < len(text):
        char = text[i]
        if quote is not None:
            if char == "\\":
                out.append(text[i : i + 2])
                i += 2
                continue
            if text.startswith(quote, i):
                out.append(quote)
                i += len(quote)
                quote = None
                continue
            out.append(char)
        elif char in "\"'":
            quote = text[i : i + 3] if text[i : i + 3] in ('"""', "'''") else char
            out.append(quote)
            i += len(quote)
            continue
        elif char == "$" and (ref := _REF_AT.match(text, i)) is not None:
            out.append(f"__ref_{ref.group(1) or ref.group(2)}__")
            i = ref.end()
            continue
        elif char in "([{":
            depth += 1
            out.append(char)
        elif char in ")]}":
            depth -= 1
            if depth == 0:
                return "".join(out), i + 1
            out.append(char)
        else:
            out.append(char)
        i += 1
    return None


def plan_reference(name: str) -> str | None:
    """A bare name in a plan's arguments as the reference it stands for (``__ref_2__`` -> ``"$2"``)."""
    ref = _REF_NAME.fullmatch(name)
    return f"${ref.group(1)}" if ref is not None else None


def _literal(node: ast.expr, reference: Callable[[str], str | None]) -> Any:
    """The JSON value an argument expression denotes; only literals and references are allowed."""
    if isinstance(node, ast.Constant) and isinstance(
        node.value, str | int | float | bool | type(None)
    ):
        return node.value
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        return [_literal(item, reference) for item in node.elts]
    if isinstance(node, ast.Dict):
        if any(key is None for key in node.keys):
            raise PlanSyntaxError("'**' is not allowed in a plan")
        return {
            _literal(key, reference) if key is not None else "": _literal(
                value, reference
            )
            for key, value in zip(node.keys, node.values)
        }
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        operand = _literal(node.operand, reference)
        if isinstance(operand, int | float) and not isinstance(operand, bool):
            return -operand if isinstance(node.op, ast.USub) else operand
    if isinstance(node, ast.Name):
        ref = reference(node.id)
        if ref is not None:
            return ref
        if node.id in _NAMED_CONSTANTS:
            return _NAMED_CONSTANTS[node.id]
    raise PlanSyntaxError(
        f"cannot read the argument {ast.unparse(node)!r}: use literals (quoted strings, numbers, lists, dicts) "
        "or references to earlier results"
    )


def parse_arguments(
    args_text: str,
    params: Sequence[str] | None,
    reference: Callable[[str], str | None] = plan_reference,
) -> dict[str, Any]:
    """Read ``args_text`` (with refs already as ``__ref_N__``) into keyword arguments.

    ``reference`` turns a bare name into the reference text it stands for (None: not a reference).

    ``params`` are the tool's parameter names in order, for positional arguments; None when the
    tool is unknown (positional arguments are then kept as ``arg1``, ``arg2``, ...).
    """
    try:
        tree = ast.parse(f"_call({args_text})", mode="eval")
    except SyntaxError as exc:
        raise PlanSyntaxError(f"the arguments are not valid ({exc.msg})") from None
    call = tree.body
    if not isinstance(call, ast.Call):  # e.g. "a), (b" closes the call early
        raise PlanSyntaxError("the arguments are not valid")
    if any(isinstance(arg, ast.Starred) for arg in call.args):
        raise PlanSyntaxError("'*' is not allowed in a plan")
    positional = [_literal(arg, reference) for arg in call.args]
    names = (
        list(params)
        if params is not None
        else [f"arg{i + 1}" for i in range(len(positional))]
    )
    if len(positional) > len(names):
        raise PlanSyntaxError(
            f"it takes at most {len(names)} positional arguments but {len(positional)} were given"
        )
    kwargs = dict(zip(names, positional))
    for keyword in call.keywords:
        if keyword.arg is None:
            raise PlanSyntaxError("'**' is not allowed in a plan")
        if keyword.arg in kwargs:
            raise PlanSyntaxError(f"the argument {keyword.arg!r} is given twice")
        kwargs[keyword.arg] = _literal(keyword.value, reference)
    if deeper_than(
        kwargs
    ):  # as for function calling's arguments (runs.engine.model_json)
        raise PlanSyntaxError(f"the arguments are {too_deep_error(args_text)}")
    return kwargs


# --- a whole plan, streamed ------------------------------------------------------------------------


class PlanParser:
    """Turns a streamed plan into calls; feed it text as it arrives.

    ``tool_params`` maps each tool's name to its parameter names in order. ``first_index`` is the
    number this round's calls start from (later rounds continue the task's numbering) and
    ``earlier`` the indices of calls from earlier rounds, which this plan may refer to.
    """

    def __init__(
        self,
        tool_params: Mapping[str, Sequence[str]],
        first_index: int = 1,
        earlier: Iterable[int] = (),
    ) -> None:
        self.tool_params = tool_params
        self.first_index = first_index
        self.calls: list[PlannedCall] = []
        self.problems: list[str] = []
        self.joined = False
        self.ended = False
        self.text = ""
        self._known = set(earlier)
        self._buffer = ""
        self._thought: str | None = None
        self._open: tuple[int, str] | None = (
            None  # a numbered call still missing its ")"
        )
        self._offset: int | None = None
        self._declared: dict[
            int, set[int]
        ] = {}  # every reference, valid or not, for the cycle check

    def feed(self, delta: str) -> list[PlannedCall]:
        """Take more of the reply; return the calls whose lines it completed."""
        self.text += delta
        self._buffer += delta
        ready: list[PlannedCall] = []
        while "\n" in self._buffer:
            line, self._buffer = self._buffer.split("\n", 1)
            ready.extend(self._line(line))
        return ready

    def close(self) -> list[PlannedCall]:
        """The reply is complete: return the last calls and check the plan as a whole."""
        ready = self._line(self._buffer) if self._buffer else []
        self._buffer = ""
        if self._open is not None:
            number, text = self._open
            self._open = None
            index = number + (self._offset or 0)
            error = f"cannot read call {index}: it is not closed (missing ')')"
            ready.extend(
                self._record(
                    PlannedCall(
                        index=index, tool_name="?", line=text.strip(), error=error
                    )
                )
            )
        if not self.joined:
            self.problems.append(
                "the plan does not end with join(), so it may be incomplete"
                if self.calls
                else "the planner wrote no plan (no numbered calls and no join())"
            )
        cycle = self._find_cycle()
        if cycle:
            path = " -> ".join(str(i) for i in cycle)
            self.problems.append(
                f"calls {path} refer to each other in a cycle, so none of them can run"
            )
        return ready

    # --- lines

    def _line(self, line: str) -> list[PlannedCall]:
        if self.ended:
            return []
        if END_OF_PLAN in line:
            line = line.split(END_OF_PLAN, 1)[0]
            self.ended = True
        if self._open is not None:
            index, text = self._open
            self._open = None
            return self._numbered(index, f"{text}\n{line}")
        if not line.strip():
            return []
        thought = _THOUGHT.fullmatch(line)
        if thought is not None:
            self._thought = thought.group(1).strip()
            return []
        numbered = _NUMBERED.fullmatch(line)
        if numbered is not None:
            return self._numbered(int(numbered.group(1)), numbered.group(2))
        call = _CALL.match(line)
        if call is not None and call.group(1) == JOIN:
            self.joined = True
        elif call is not None:
            self.problems.append(f"ignored a call without a number: {line.strip()!r}")
        return []  # other prose between calls is allowed and ignored

    def _numbered(self, number: int, text: str) -> list[PlannedCall]:
        if self.joined:
            self.problems.append(f"ignored a line after join(): {text.strip()!r}")
            return []
        if self._offset is None:
            # a replanner that restarts at 1 means its own calls; shift them past earlier rounds'
            self._offset = max(self.first_index - number, 0)
        index = number + self._offset
        call = _CALL.match(text)
        if call is None:
            error = f"cannot read call {number}: expected tool(arguments)"
            return self._record(
                PlannedCall(index=index, tool_name="?", line=text.strip(), error=error)
            )
        name = call.group(1)
        scanned = scan_arguments(text, call.end())
        if scanned is None:
            self._open = (number, text)
            return []
        args_text, _ = scanned
        if name == JOIN:
            self.joined = True
            return []
        planned = PlannedCall(index=index, tool_name=name, line=text.strip())
        try:
            kwargs = parse_arguments(args_text, self.tool_params.get(name))
        except PlanSyntaxError as exc:
            planned.error = f"cannot read call {index} ({name}): {exc}"
            return self._record(planned)
        if self._offset:
            kwargs = shift_references(kwargs, self._offset, index, self._known)
        refs = find_references(kwargs, index, self._known)
        planned.kwargs = kwargs
        planned.depends_on = sorted(refs.depends_on)
        planned.error = refs.problem(index)
        return self._record(planned, refs.depends_on | refs.later)

    def _record(
        self, planned: PlannedCall, references: set[int] | None = None
    ) -> list[PlannedCall]:
        """Accept a call, readable or not, unless its number is taken or goes back (a problem then).

        Every call goes through here, so no two calls of a plan (or of a task's rounds) share a number.
        """
        index = planned.index
        if index in self._known:
            self.problems.append(
                f"call number {index} is used twice; the second one was ignored: {planned.line!r}"
            )
            return []
        if self.calls and index < self.calls[-1].index:
            self.problems.append(
                f"call number {index} comes after call {self.calls[-1].index}; it was ignored"
            )
            return []
        if references:
            self._declared[index] = references
        planned.thought, self._thought = self._thought, None
        self._known.add(index)
        self.calls.append(planned)
        return [planned]

    def _find_cycle(self) -> list[int]:
        """A cycle among the calls' references (only forward references can close one)."""
        state: dict[int, int] = {}  # 1 = on the current path, 2 = done
        path: list[int] = []

        def visit(node: int) -> list[int]:
            state[node] = 1
            path.append(node)
            for target in sorted(self._declared.get(node, ())):
                if state.get(target) == 1:
                    return path[path.index(target) :] + [target]
                if target not in state and target in self._declared:
                    found = visit(target)
                    if found:
                        return found
            path.pop()
            state[node] = 2
            return []

        for node in sorted(self._declared):
            if node not in state:
                found = visit(node)
                if found:
                    return found
        return []


def parse_plan(
    text: str,
    tool_params: Mapping[str, Sequence[str]],
    first_index: int = 1,
    earlier: Iterable[int] = (),
) -> PlanParser:
    """Parse a complete plan at once (the parser holds ``calls``, ``problems`` and ``joined``)."""
    parser = PlanParser(tool_params, first_index=first_index, earlier=earlier)
    parser.feed(text)
    parser.close()
    return parser
