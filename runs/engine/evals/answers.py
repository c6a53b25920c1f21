"""Answer match: the rerun's final answer against the example's expected one.

exact (surrounding whitespace aside, case optionally), contains, regex (a pattern of the
evaluator's, else the expected answer as one) and numeric (the numbers in the text, within a
tolerance). Answers are model output of any size: one over `MAX_ANSWER_CHARS` is not judged
(its score is None and says so) rather than judged on a part, and a regex is run by RE2 (`google-re2`, as runs/engine/schema_check.py does), whose time grows
with the text times the pattern's program, never by backtracking: Python's `re` takes 12 s for
`a*b` on 100,000 characters of `a`, and for ever on `(a+)+b`. A pattern RE2 cannot run (a
backreference, a lookaround) or whose program is over `MAX_PROGRAM_SIZE` is refused, and the
score says why.
"""

from __future__ import annotations

import re
from typing import Any, Literal

import re2  # type: ignore[import-untyped]

from runs.engine.evals.score import Score

AnswerMode = Literal["exact", "contains", "regex", "numeric"]
ANSWER_MODES: tuple[AnswerMode, ...] = ("exact", "contains", "regex", "numeric")
MAX_ANSWER_CHARS = 200_000
MAX_PATTERN_CHARS = 1_000
MAX_NUMBERS = 1_000
MAX_PROGRAM_SIZE = 2_000
SHOWN_CHARS = 80
# 1,234.5 or 1234.5 or -3e-2; a thousands separator only in groups of three
NUMBER = re.compile(
    r"(?<![\w.])[-−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?(?!\.?\d)(?!\w)"
)

_OPTIONS: dict[bool, Any] = {}


class UnsafePattern(ValueError):
    """A pattern that is not run: too long, not RE2's syntax, or too big a program."""


def _shown(text: str) -> str:
    one = " ".join(text.split())
    return repr(one if len(one) <= SHOWN_CHARS else one[: SHOWN_CHARS - 1] + "…")


def _options(ignore_case: bool) -> Any:
    if ignore_case not in _OPTIONS:
        options = re2.Options()
        options.log_errors = False
        options.never_capture = True
        options.case_sensitive = not ignore_case
        _OPTIONS[ignore_case] = options
    return _OPTIONS[ignore_case]


def _search(pattern: str, text: str, ignore_case: bool) -> bool:
    """Whether `pattern` is found in `text`, by RE2; UnsafePattern if it is not run."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise UnsafePattern(f"longer than {MAX_PATTERN_CHARS:,} characters")
    try:
        compiled = re2.compile(pattern, options=_options(ignore_case))
    except re2.error as error:
        reason = error.args[0] if error.args else type(error).__name__
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise UnsafePattern(
            f"not a regular expression RE2 runs ({reason}; backreferences and lookarounds "
            "are not supported)"
        ) from None
    if compiled.programsize > MAX_PROGRAM_SIZE:
        raise UnsafePattern(
            f"it compiles to {compiled.programsize:,} steps, over {MAX_PROGRAM_SIZE:,}"
        )
    return compiled.search(text) is not None


def numbers_in(text: str) -> list[float]:
    """The numbers written in `text`, in order (thousands separators and a minus sign read)."""
    found = []
    for match in NUMBER.finditer(text[:MAX_ANSWER_CHARS]):
        written = match.group().replace(",", "").replace("−", "-")
        try:
            found.append(float(written))
        except ValueError:  # pragma: no cover - the pattern reads only numbers
            continue
        if len(found) >= MAX_NUMBERS:
            break
    return found


def _numeric(got: str, expected: str, tolerance: float) -> Score:
    key = "answer_numeric"
    wanted, offered = numbers_in(expected), numbers_in(got)
    if not wanted:
        return Score.verdict(
            key, False, f"the expected answer {_shown(expected)} has no number"
        )
    taken: set[int] = set()
    missing = []
    for number in wanted:
        hit = next(
            (
                i
                for i, other in enumerate(offered)
                if i not in taken and abs(other - number) <= tolerance
            ),
            None,
        )
        if hit is None:
            missing.append(number)
        else:
            taken.add(hit)
    within = f" within {tolerance:g}" if tolerance else ""
    if missing:
        return Score.verdict(
            key,
            False,
            f"{', '.join(f'{n:g}' for n in missing)} not in the answer{within} "
            f"(its numbers: {', '.join(f'{n:g}' for n in offered[:10]) or 'none'})",
        )
    return Score.verdict(
        key, True, f"{', '.join(f'{n:g}' for n in wanted)} in the answer{within}"
    )


def answer_match(
    got: str | None,
    expected: str | None,
    mode: AnswerMode = "exact",
    *,
    pattern: str | None = None,
    ignore_case: bool = False,
    tolerance: float = 0.0,
) -> Score:
    """Whether the answer `got` matches `expected` in `mode`.

    exact: equal, surrounding whitespace aside; contains: `expected` appears in it; regex:
    `pattern` (else `expected`) is found in it; numeric: every number of `expected` is among
    its numbers, within `tolerance`. `ignore_case` applies to the first three."""
    if mode not in ANSWER_MODES:
        raise ValueError(
            f"mode: expected one of {', '.join(ANSWER_MODES)}, got {mode!r}"
        )
    key = f"answer_{mode}"
    wanted = pattern if mode == "regex" and pattern is not None else expected
    if wanted is None:
        return Score(key, None, "the example expects no answer")
    if got is None:
        return Score.verdict(key, False, "the run gave no answer")
    if len(got) > MAX_ANSWER_CHARS or len(wanted) > MAX_ANSWER_CHARS:
        return Score(
            key, None, f"not judged: over the {MAX_ANSWER_CHARS:,} characters it reads"
        )
    text = got
    if mode == "numeric":
        return _numeric(text, wanted, tolerance)
    if mode == "regex":
        try:
            found = _search(wanted, text, ignore_case)
        except UnsafePattern as problem:
            return Score(key, None, f"pattern {_shown(wanted)}: {problem}")
        return Score.verdict(
            key,
            found,
            f"pattern {_shown(wanted)} {'found' if found else 'not found'} in {_shown(text)}",
        )
    fold = str.casefold if ignore_case else str
    a, b = fold(text.strip()), fold(wanted.strip())
    passed = a == b if mode == "exact" else b in a
    verb = {"exact": ("equals", "differs from"), "contains": ("contains", "lacks")}[
        mode
    ]
    return Score.verdict(
        key,
        passed,
        f"the answer {_shown(text)} {verb[0 if passed else 1]} {_shown(wanted)}",
    )
