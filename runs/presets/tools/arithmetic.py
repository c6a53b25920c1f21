"""Arithmetic tools. `evaluate` parses with `ast` and walks the tree itself: never `eval`.

Only numbers, + - * / // % ** (binary and unary +/-) and parentheses are understood, with limits
on the expression's length, its depth and the size of powers, so no input can hang the server.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable

Number = int | float

MAX_EXPRESSION_CHARS = 500
MAX_NODES = 200
MAX_EXPONENT = 1000
MAX_INT_DIGITS = 400  # results beyond this many digits are refused rather than printed

_BINARY: dict[type[ast.operator], Callable[[Number, Number], Number]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Number], Number]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}


class ExpressionError(ValueError):
    """An expression outside what `evaluate` accepts, or a result too large to give."""


def _tidy(value: Number) -> Number:
    """Integral floats as ints (5.0 -> 5), so answers read naturally."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def _checked(value: Number) -> Number:
    if isinstance(value, float) and not math.isfinite(value):
        raise ExpressionError("the result is not a finite number")
    if isinstance(value, int) and abs(value) >= 10**MAX_INT_DIGITS:
        raise ExpressionError(f"the result has more than {MAX_INT_DIGITS} digits")
    return value


def _power(base: Number, exponent: Number) -> Number:
    if abs(exponent) > MAX_EXPONENT:
        raise ExpressionError(f"exponents are limited to ±{MAX_EXPONENT}")
    if isinstance(base, int) and isinstance(exponent, int) and exponent > 0:
        # digits of base**exponent ≈ exponent * log10(|base|): refuse before computing a giant
        if (
            base not in (0, 1, -1)
            and exponent * math.log10(abs(base)) >= MAX_INT_DIGITS
        ):
            raise ExpressionError(f"the result has more than {MAX_INT_DIGITS} digits")
    try:
        result = base**exponent
    except ZeroDivisionError:  # 0 ** -1
        raise ExpressionError("zero cannot be raised to a negative power") from None
    except OverflowError:
        raise ExpressionError("the result is too large") from None
    if isinstance(result, complex):
        raise ExpressionError("the result is not a real number")
    return result


def _eval(node: ast.AST) -> Number:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, (int, float))
        and not isinstance(node.value, bool)
    ):
        return _checked(node.value)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow):
            return _checked(_power(left, right))
        try:
            return _checked(_BINARY[type(node.op)](left, right))
        except ZeroDivisionError:
            raise ExpressionError("division by zero") from None
        except OverflowError:
            raise ExpressionError("the result is too large") from None
    raise ExpressionError(
        f"only numbers, + - * / // % ** and parentheses are allowed (found {type(node).__name__})"
    )


def evaluate(expression: str) -> Number:
    """Evaluate an arithmetic expression, e.g. "(121 * 3) + 42 / 7" or "2 ** 10 % 7"."""
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ExpressionError(
            f"expressions are limited to {MAX_EXPRESSION_CHARS} characters"
        )
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except (SyntaxError, ValueError) as exc:
        raise ExpressionError(
            f"not an arithmetic expression: {exc.msg if isinstance(exc, SyntaxError) else exc}"
        ) from None
    except RecursionError:
        raise ExpressionError("the expression is nested too deeply") from None
    if sum(1 for _ in ast.walk(tree)) > MAX_NODES:
        raise ExpressionError(f"expressions are limited to {MAX_NODES} parts")
    try:
        return _tidy(_eval(tree))
    except RecursionError:
        raise ExpressionError("the expression is nested too deeply") from None


def add(a: float, b: float) -> Number:
    """Add two numbers: a + b."""
    return _tidy(_checked(a + b))


def subtract(a: float, b: float) -> Number:
    """Subtract b from a: a - b."""
    return _tidy(_checked(a - b))


def multiply(a: float, b: float) -> Number:
    """Multiply two numbers: a * b."""
    return _tidy(_checked(a * b))


def divide(a: float, b: float) -> Number:
    """Divide a by b: a / b."""
    if b == 0:
        raise ExpressionError("division by zero")
    return _tidy(_checked(a / b))
