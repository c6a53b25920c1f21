"""Conditions on a tool call's arguments: `path=value` clauses joined by ` and `. Nothing is evaluated.

A path names an argument (`database`) or a value inside one (`filters.region`, `items.0`: a
number indexes a list). `path=value` holds when the argument at `path` is the string `value`, or,
for a number, true/false or null, when its JSON spelling is `value` (`limit=10`, `dry_run=true`).
`path!=value` holds when the argument exists and is not that. A path the arguments do not have
matches no clause, so a rule never applies to a call on the strength of an argument it lacks.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

MAX_CONDITION_CHARS = 500
MAX_CLAUSES = 8
MAX_PATH_PARTS = 8
_PATH = re.compile(r"^[A-Za-z0-9_\-]+(\.[A-Za-z0-9_\-]+)*$")
_MISSING = object()


class ConditionError(ValueError):
    """A condition that cannot be read; the message says what is wrong with it."""


@dataclass(frozen=True)
class Clause:
    path: tuple[str, ...]
    value: str
    negated: bool = False

    def __str__(self) -> str:
        return f"{'.'.join(self.path)}{'!=' if self.negated else '='}{self.value}"


def parse_condition(text: str) -> tuple[Clause, ...]:
    """The clauses of `text` (empty text: none, the rule matches every call)."""
    text = text.strip()
    if not text:
        return ()
    if len(text) > MAX_CONDITION_CHARS:
        raise ConditionError(
            f"a condition may be at most {MAX_CONDITION_CHARS} characters"
        )
    parts = re.split(r"\s+and\s+", text)
    if len(parts) > MAX_CLAUSES:
        raise ConditionError(f"a condition may have at most {MAX_CLAUSES} clauses")
    return tuple(_clause(part.strip()) for part in parts)


def _clause(text: str) -> Clause:
    negated = "!=" in text
    path, sep, value = text.partition("!=" if negated else "=")
    path = path.strip()
    if not sep or not path:
        raise ConditionError(
            f"{text!r} is not a clause: write path=value or path!=value (e.g. database=sample)"
        )
    if not _PATH.match(path):
        raise ConditionError(
            f"{path!r} is not a path: names of letters, digits, _ or - joined by dots"
        )
    parts = tuple(path.split("."))
    if len(parts) > MAX_PATH_PARTS:
        raise ConditionError(f"a path may have at most {MAX_PATH_PARTS} parts")
    return Clause(parts, value.strip(), negated)


def _lookup(value: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return _MISSING
    return value


def _spelled(value: Any) -> str | None:
    """How a clause's value spells an argument (None: a list or object, which no value spells)."""
    if isinstance(value, str):
        return value
    if value is None or isinstance(value, bool | int | float):
        return json.dumps(value)
    return None


def matches(clauses: tuple[Clause, ...], arguments: dict[str, Any]) -> bool:
    """Whether a call with `arguments` satisfies every clause."""
    for clause in clauses:
        found = _lookup(arguments, clause.path)
        if found is _MISSING:
            return False
        equal = _spelled(found) == clause.value
        if equal == clause.negated:
            return False
    return True
