"""References between planned calls: finding ``$N`` / ``${N}`` in arguments and substituting results.

A planned call's arguments are plain JSON values in which a reference is kept as text, so a plan
can be stored, shown to a person, edited and approved like any other tool call:

- a whole argument ``"$2"`` (or ``"${2}"``) becomes call 2's result *with its type* (a number stays
  a number, a list a list);
- a reference inside a longer string (``"population of $2"``) is formatted into the string as
  call 2's text;
- ``$1`` never matches the start of ``$10``.

Inside a longer string a bare ``$N`` only counts when call N is an earlier call of the plan:
``"$100-$200"`` in a shopping query is a price, not a reference to call 100. The braced form
``${N}`` always counts, so a planner can be explicit.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Container, Mapping
from dataclasses import dataclass, field
from typing import Any

from ...tools import ToolOutput

# ``(?!\d)`` keeps $1 from matching the first digit of $10.
_EMBEDDED = re.compile(r"\$\{(\d+)\}|\$(\d+)(?!\d)")
_WHOLE = re.compile(r"\s*\$(?:\{(\d+)\}|(\d+))\s*")


def whole_reference(text: str) -> int | None:
    """The call index when ``text`` is exactly one reference (``"$3"``, ``"${3}"``), else None."""
    match = _WHOLE.fullmatch(text)
    if match is None:
        return None
    return int(match.group(1) or match.group(2))


@dataclass
class References:
    """What a call's arguments refer to: valid dependencies, and references that cannot be met."""

    depends_on: set[int] = field(default_factory=set)
    later: set[int] = field(default_factory=set)  # to the call itself or one after it
    missing: set[int] = field(default_factory=set)  # to an earlier number no call has

    def problem(self, own_index: int) -> str | None:
        """A sentence describing the bad references, or None when every reference is valid."""
        parts = []
        if self.later:
            refs = ", ".join(f"${n}" for n in sorted(self.later))
            parts.append(
                f"call {own_index} refers to {refs}, which is not an earlier call "
                "(a call can only use results of calls before it)"
            )
        if self.missing:
            refs = ", ".join(f"${n}" for n in sorted(self.missing))
            parts.append(
                f"call {own_index} refers to {refs}, but the plan has no such call"
            )
        return "; ".join(parts) or None


def find_references(value: Any, own_index: int, known: Container[int]) -> References:
    """Collect the references in ``value`` (any JSON value) of call ``own_index``.

    ``known`` holds the indices of the calls planned so far (this round's earlier lines and
    earlier rounds' calls).
    """
    refs = References()

    def note(index: int, explicit: bool) -> None:
        if index < own_index and index in known:
            refs.depends_on.add(index)
        elif (
            explicit
        ):  # a bare $N inside text that is not an earlier call is literal text
            (refs.later if index >= own_index else refs.missing).add(index)

    def visit(item: Any) -> None:
        if isinstance(item, str):
            whole = whole_reference(item)
            if whole is not None:
                note(whole, explicit=True)
                return
            for match in _EMBEDDED.finditer(item):
                braced = match.group(1)
                note(int(braced or match.group(2)), explicit=braced is not None)
        elif isinstance(item, list | tuple):
            for element in item:
                visit(element)
        elif isinstance(item, dict):
            for element in item.values():
                visit(element)

    visit(value)
    return refs


def result_value(output: ToolOutput) -> Any:
    """A result as a whole argument: the tool's own value when it has one, else its text."""
    if output.raw_output is not None and not output.is_error:
        return output.raw_output
    return output.content


def substitute(
    value: Any, results: Mapping[int, ToolOutput], depends_on: Container[int]
) -> Any:
    """``value`` with each reference to a call in ``depends_on`` replaced by that call's result."""

    def text_of(match: re.Match[str]) -> str:
        index = int(match.group(1) or match.group(2))
        if index in depends_on and index in results:
            return results[index].content
        return match.group(0)

    return _map_strings(
        value, lambda text: _substitute_text(text, results, depends_on, text_of)
    )


def _substitute_text(
    text: str,
    results: Mapping[int, ToolOutput],
    depends_on: Container[int],
    text_of: Callable[[re.Match[str]], str],
) -> Any:
    whole = whole_reference(text)
    if whole is not None and whole in depends_on and whole in results:
        return result_value(results[whole])
    return _EMBEDDED.sub(text_of, text)


def _map_strings(value: Any, fn: Callable[[str], Any]) -> Any:
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, list | tuple):
        return [_map_strings(item, fn) for item in value]
    if isinstance(value, dict):
        return {key: _map_strings(item, fn) for key, item in value.items()}
    return value


def shift_references(
    value: Any, offset: int, own_index: int, known: Container[int]
) -> Any:
    """``value`` with this round's references renumbered by ``offset``.

    For a replanner that numbered its calls from 1 again: its ``$2`` means its own second call,
    which the task numbers ``2 + offset``. A bare ``$N`` inside text is shifted only when that
    lands on an earlier call, the same rule ``find_references`` applies.
    """

    def shifted(match: re.Match[str]) -> str:
        braced = match.group(1)
        index = int(braced or match.group(2)) + offset
        if braced is not None:
            return f"${{{index}}}"
        return f"${index}" if index < own_index and index in known else match.group(0)

    def shift_text(text: str) -> str:
        whole = whole_reference(text)
        if whole is not None:
            return f"${whole + offset}"
        return _EMBEDDED.sub(shifted, text)

    return _map_strings(value, shift_text)
