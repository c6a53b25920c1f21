"""JSON schemas written elsewhere (an MCP server's tool inputs), checked without Python's `re`.

A schema's `pattern` values and `patternProperties` keys are regular expressions its author
chose, and the text matched against them is what a model wrote. Python's `re` backtracks:
`^(a+)+$` against `"a" * 28 + "!"` takes seconds, and it holds the event loop (and so every
user's requests) all that time. Here those expressions are matched by RE2 (`google-re2`), whose
time grows with the text's length times the expression's compiled size, never exponentially:

* every expression in the schema is compiled when the schema is taken; one RE2 cannot compile
  (a backreference, a lookaround) or whose program is over `MAX_PROGRAM_SIZE` refuses the
  schema (`SchemaRefused`, naming the expression), so the tool is left out, not half-checked;
* one check of arguments may spend at most `CHECK_BUDGET` (text bytes × program size, ~35 ms
  in the worst case measured): past it, the arguments are refused with a message saying so;
* `unevaluatedProperties` next to `patternProperties` is refused: jsonschema evaluates it with
  `re` and there is no hook to change that.

JSON Schema's patterns are ECMA-262 expressions: `\\uXXXX` escapes are translated to RE2's
`\\x{XXXX}`; the rest of the common syntax (classes, `\\d`, `\\w`, `\\p{L}`, counted repeats,
anchors) is the same in both.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from typing import Any

import re2  # type: ignore[import-untyped]
from jsonschema import FormatChecker, SchemaError, ValidationError
from jsonschema.validators import extend, validator_for

MAX_PATTERN_CHARS = 2000
MAX_PROGRAM_SIZE = 20_000
CHECK_BUDGET = 20_000_000
MAX_SHOWN_CHARS = 80
# values that are data, not schemas: a "pattern" key inside them is not a keyword
DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples"})


class SchemaRefused(ValueError):
    """A schema that is not taken; the message completes "its input schema ..."."""


def _options() -> Any:
    options = re2.Options()
    options.log_errors = False  # RE2 would print each refused expression to stderr
    options.never_capture = True  # a yes/no answer needs no groups, and is faster
    return options


_OPTIONS = _options()


def _shown(text: str) -> str:
    if len(text) <= MAX_SHOWN_CHARS:
        return repr(text)
    return repr(text[:MAX_SHOWN_CHARS]) + f" (and {len(text) - MAX_SHOWN_CHARS:,} more)"


def _hex4(text: str, at: int) -> int | None:
    digits = text[at : at + 4]
    if len(digits) == 4 and all(c in "0123456789abcdefABCDEF" for c in digits):
        return int(digits, 16)
    return None


def as_re2(pattern: str) -> str:
    """An ECMA-262 expression in RE2's syntax: its `\\uXXXX` escapes (surrogate pairs too)
    as `\\x{...}`; everything else as written."""
    out: list[str] = []
    at = 0
    while at < len(pattern):
        if pattern[at] != "\\" or at + 1 == len(pattern):
            out.append(pattern[at])
            at += 1
            continue
        code = _hex4(pattern, at + 2) if pattern[at + 1] == "u" else None
        if code is None:
            out.append(pattern[at : at + 2])  # any other escape, kept whole
            at += 2
            continue
        at += 6
        low = _hex4(pattern, at + 2) if pattern[at : at + 2] == "\\u" else None
        if 0xD800 <= code < 0xDC00 and low is not None and 0xDC00 <= low < 0xE000:
            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
            at += 6
        out.append(f"\\x{{{code:X}}}")
    return "".join(out)


def compile_pattern(pattern: str) -> Any:
    """`pattern` compiled by RE2; SchemaRefused saying why it cannot be checked safely."""
    if len(pattern) > MAX_PATTERN_CHARS:
        why = f"over {MAX_PATTERN_CHARS:,} characters"
    else:
        try:
            compiled = re2.compile(as_re2(pattern), options=_OPTIONS)
        except re2.error as exc:
            reason = exc.args[0] if exc.args else type(exc).__name__
            if isinstance(reason, bytes):
                reason = reason.decode("utf-8", "replace")
            why = str(reason)
            if "perl operator" in why or (
                why.startswith("invalid escape") and why[-1].isdigit()
            ):
                why += ": backreferences and lookarounds are not supported"
        else:
            if compiled.programsize <= MAX_PROGRAM_SIZE:
                return compiled
            why = f"it compiles to {compiled.programsize:,} steps, over {MAX_PROGRAM_SIZE:,}"
    raise SchemaRefused(
        f"has the pattern {_shown(pattern)}, which cannot be checked safely ({why})"
    )


class _NotChecked(Exception):
    """A text not matched: the schema's expression refused, or the check's budget spent."""


class _Check:
    """One check of arguments: the schema's compiled expressions, and the budget left."""

    def __init__(self, compiled: dict[str, Any]) -> None:
        self.compiled = compiled
        self.left = CHECK_BUDGET

    def matches(self, pattern: str, text: str) -> bool:
        """Whether `pattern` is found in `text`; _NotChecked when that cannot be told."""
        compiled = self.compiled.get(pattern)
        if compiled is None:  # an expression the schema walk did not see: compiled now
            try:
                compiled = self.compiled[pattern] = compile_pattern(pattern)
            except SchemaRefused as exc:
                raise _NotChecked(f"the schema {exc}") from None
        size = len(text) if text.isascii() else len(text.encode("utf-8", "replace"))
        cost = (size + 1) * compiled.programsize
        if cost > self.left:
            raise _NotChecked(
                f"{_shown(text)} is too long to check against {_shown(pattern)} (one check "
                f"may cost {CHECK_BUDGET:,} text bytes × pattern steps)"
            )
        self.left -= cost
        return compiled.search(text) is not None


_CHECK: contextvars.ContextVar[_Check | None] = contextvars.ContextVar(
    "schema_check", default=None
)


def _current() -> _Check:
    # outside `SafeSchema.errors` (not done here) each match would have a budget of its own
    return _CHECK.get() or _Check({})


def _pattern(validator: Any, pattern: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "string") or not isinstance(pattern, str):
        return
    try:
        if not _current().matches(pattern, instance):
            yield ValidationError(
                f"{_shown(instance)} does not match {_shown(pattern)}"
            )
    except _NotChecked as exc:
        yield ValidationError(str(exc))


def _matching(patterns: dict[str, Any], key: str) -> list[str]:
    """The `patterns` (patternProperties' keys) that the property name `key` matches."""
    check = _current()
    return [pattern for pattern in patterns if check.matches(pattern, key)]


def _pattern_properties(
    validator: Any, patterns: Any, instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object") or not isinstance(patterns, dict):
        return
    for key, value in instance.items():
        try:
            matched = _matching(patterns, key)
        except _NotChecked as exc:
            yield ValidationError(str(exc))
            continue
        for pattern in matched:
            yield from validator.descend(
                value, patterns[pattern], path=key, schema_path=pattern
            )


def _additional_properties(
    validator: Any, additional: Any, instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    named = schema.get("properties", {})
    patterns = schema.get("patternProperties", {})
    extras: list[str] = []
    for key in instance:
        if key in named:
            continue
        try:
            if patterns and _matching(patterns, key):
                continue
        except _NotChecked as exc:
            yield ValidationError(str(exc))
            continue
        extras.append(key)
    if validator.is_type(additional, "object"):
        for key in extras:
            yield from validator.descend(instance[key], additional, path=key)
    elif additional is False and extras:
        listed = ", ".join(_shown(key) for key in sorted(extras)[:10])
        more = f" and {len(extras) - 10} more" if len(extras) > 10 else ""
        verb = "was" if len(extras) == 1 else "were"
        yield ValidationError(
            f"Additional properties are not allowed ({listed}{more} {verb} unexpected)"
        )


_KEYWORDS = {
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
}
_SAFE_CLASSES: dict[type, Any] = {}


def _safe_class(base: Any) -> Any:
    """`base` (a jsonschema draft's validator) with RE2 behind the keywords that match."""
    safe = _SAFE_CLASSES.get(base)
    if safe is None:
        mine = {k: fn for k, fn in _KEYWORDS.items() if k in base.VALIDATORS}
        safe = _SAFE_CLASSES[base] = extend(base, mine)
    return safe


def _is_regex(instance: object) -> bool:
    if isinstance(instance, str):
        compile_pattern(instance)
    return True


# metaschemas say `"format": "regex"` for patterns: judged by the engine that will match them
_FORMATS = FormatChecker()
_FORMATS.checks("regex", raises=SchemaRefused)(_is_regex)


class _Found:
    def __init__(self) -> None:
        self.patterns: set[str] = set()
        self.pattern_properties = False
        self.unevaluated_properties = False

    def walk(self, node: Any) -> None:
        if isinstance(node, list):
            for item in node:
                self.walk(item)
            return
        if not isinstance(node, dict):
            return
        for key, value in node.items():
            if key in DATA_KEYWORDS:
                continue
            if key == "pattern" and isinstance(value, str):
                self.patterns.add(value)
            elif key == "patternProperties" and isinstance(value, dict):
                self.pattern_properties = True
                self.patterns.update(k for k in value if isinstance(k, str))
            elif key == "unevaluatedProperties":
                self.unevaluated_properties = True
            self.walk(value)


class SafeSchema:
    """A JSON schema whose checks of untrusted values run in bounded time."""

    def __init__(self, schema: Any) -> None:
        """SchemaRefused when `schema` is invalid or has an expression that is not safe."""
        found = _Found()
        found.walk(schema)
        if found.pattern_properties and found.unevaluated_properties:
            raise SchemaRefused(
                "combines unevaluatedProperties with patternProperties, which cannot be "
                "checked safely"
            )
        self._compiled = {p: compile_pattern(p) for p in sorted(found.patterns)}
        base = validator_for(schema)
        try:
            base.check_schema(schema, format_checker=_FORMATS)
        except SchemaError as exc:
            raise SchemaRefused(f"is invalid ({exc.message[:200]})") from None
        self._validator = _safe_class(base)(schema)

    def errors(self, instance: Any) -> list[Any]:
        """Every jsonschema ValidationError of `instance`, within one check's budget."""
        token = _CHECK.set(_Check(self._compiled))
        try:
            return list(self._validator.iter_errors(instance))
        finally:
            _CHECK.reset(token)
