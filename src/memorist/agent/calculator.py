"""Exact arithmetic for the tutor's ReAct calculator: integers, decimals and fractions.

An expression is parsed with :mod:`ast` and only numbers, ``+ - * / // % **``,
parentheses and unary signs are evaluated, over :class:`fractions.Fraction`, so
``0.1 + 0.2`` is exactly ``3/10`` and ``1/2 + 1/3`` is ``5/6``. Nothing is ever
passed to ``eval``. The work is bounded: the expression's length, its depth, the
size of an exponent and of every intermediate number are capped, so no input can
cost unbounded time or memory.

>>> calculate("1/2 + 1/3").text
'5/6'
>>> calculate("12 * 5").text
'60'
>>> calculate("0.1 + 0.2").text
'3/10 (= 0.3)'
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from fractions import Fraction

from ..errors import ValidationError

#: The longest expression the calculator reads.
MAX_CHARS = 200
#: The largest exponent ``**`` takes (in absolute value).
MAX_EXPONENT = 64
#: The most digits a numerator or denominator may have, at any step.
MAX_DIGITS = 200
_MAX_DEPTH = 32

_WORDS = (
    (r"\bmultiplied\s+by\b|\btimes\b|\bx\b|×", "*"),
    (r"\bdivided\s+by\b|\bover\b|÷", "/"),
    (r"\bplus\b|\badded\s+to\b", "+"),
    (r"\bminus\b", "-"),
    (r"\bto\s+the\s+power\s+of\b|\^", "**"),
)


@dataclass(frozen=True)
class Calculation:
    """One exact result: the expression as evaluated and the value."""

    expression: str
    value: Fraction

    @property
    def text(self) -> str:
        """``60``, ``5/6``, or ``3/10 (= 0.3)`` when the fraction has a short decimal form."""
        v = self.value
        if v.denominator == 1:
            return str(v.numerator)
        decimal = _finite_decimal(v)
        return f"{v.numerator}/{v.denominator}" + (f" (= {decimal})" if decimal else "")


def _finite_decimal(v: Fraction) -> str | None:
    d = v.denominator
    for p in (2, 5):
        while d % p == 0:
            d //= p
    if d != 1:
        return None
    scaled, places = abs(v), 0
    while scaled.denominator != 1 and places < 20:
        scaled *= 10
        places += 1
    if scaled.denominator != 1:
        return None
    digits = str(scaled.numerator).rjust(places + 1, "0")
    text = digits[:-places] + "." + digits[-places:] if places else digits
    return ("-" if v < 0 else "") + text


def normalise(expression: str) -> str:
    """Words (``times``, ``divided by``, ``plus``...) and signs (``×``, ``÷``, ``^``) as Python operators."""
    text = expression.strip().rstrip("?.!= ")
    for pattern, op in _WORDS:
        text = re.sub(pattern, f" {op} ", text, flags=re.IGNORECASE)
    return re.sub(r"\s+", " ", text).strip()


def calculate(expression: str) -> Calculation:
    """Evaluate ``expression`` exactly. A :class:`~memorist.errors.ValidationError`
    names what is wrong (an unknown name, a division by zero, a number too large)."""
    if not isinstance(expression, str) or not expression.strip():
        raise ValidationError("expression", "must be a non-empty arithmetic expression")
    if len(expression) > MAX_CHARS:
        raise ValidationError("expression", f"is longer than {MAX_CHARS} characters")
    text = normalise(expression)
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        raise ValidationError("expression", f"is not arithmetic: {expression!r}") from None
    return Calculation(text, _eval(tree.body, 0))


def _check_size(v: Fraction) -> Fraction:
    if len(str(abs(v.numerator))) > MAX_DIGITS or len(str(v.denominator)) > MAX_DIGITS:
        raise ValidationError("expression", f"a number grows past {MAX_DIGITS} digits")
    return v


def _eval(node: ast.AST, depth: int) -> Fraction:
    if depth > _MAX_DEPTH:
        raise ValidationError("expression", f"nests deeper than {_MAX_DEPTH} levels")
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        # A float literal is read from its decimal text, so 0.1 is exactly 1/10.
        return Fraction(repr(node.value)) if isinstance(node.value, float) else Fraction(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.UAdd | ast.USub):
        v = _eval(node.operand, depth + 1)
        return v if isinstance(node.op, ast.UAdd) else -v
    if isinstance(node, ast.BinOp):
        a, b = _eval(node.left, depth + 1), _eval(node.right, depth + 1)
        op = node.op
        if isinstance(op, ast.Add):
            return _check_size(a + b)
        if isinstance(op, ast.Sub):
            return _check_size(a - b)
        if isinstance(op, ast.Mult):
            return _check_size(a * b)
        if isinstance(op, ast.Div | ast.FloorDiv | ast.Mod):
            if b == 0:
                raise ValidationError("expression", "divides by zero")
            if isinstance(op, ast.Div):
                return _check_size(a / b)
            return Fraction(a // b) if isinstance(op, ast.FloorDiv) else _check_size(a % b)
        if isinstance(op, ast.Pow):
            if b.denominator != 1:
                raise ValidationError("expression", "takes whole-number exponents only")
            if abs(b.numerator) > MAX_EXPONENT:
                raise ValidationError("expression", f"has an exponent above {MAX_EXPONENT}")
            if a == 0 and b < 0:
                raise ValidationError("expression", "divides by zero")
            return _check_size(a ** int(b))
    if isinstance(node, ast.Name):
        raise ValidationError("expression", f"names {node.id!r}; only numbers and + - * / ** ( ) are allowed")
    raise ValidationError("expression", f"has {type(node).__name__}; only numbers and + - * / ** ( ) are allowed")


_NUMBER = r"\d+(?:\.\d+)?"
_OP = r"(?:\*\*|[-+*/×÷^x]|times|multiplied by|divided by|plus|minus|over|by)"
# Each space and parenthesis can be matched one way only, and runs of signs and
# parentheses are bounded, so a failed match costs linear time (the message is also
# cut at MAX_CHARS * 5 and its spaces collapsed).
_EXPRESSION = re.compile(
    rf"(?:[-(] ?){{0,8}}{_NUMBER}(?: ?(?:\) ?){{0,8}}{_OP} ?(?:[-(] ?){{0,8}}{_NUMBER})+(?: ?\)){{0,8}}",
    re.IGNORECASE,
)
_VERB = re.compile(r"\b(multiply|add|subtract|divide|sum of|product of)\b\s+(-?\d+(?:\.\d+)?(?:/\d+)?)\s+(?:by|and|to|from|with)\s+(-?\d+(?:\.\d+)?(?:/\d+)?)", re.IGNORECASE)
_VERB_OP = {"multiply": "*", "product of": "*", "add": "+", "sum of": "+", "divide": "/", "subtract": "-"}


def _wrapped(number: str) -> str:
    return f"({number})" if "/" in number else number


def find_expression(text: str) -> str | None:
    """The arithmetic a message asks for, as an expression, or None: ``"Help me
    multiply 12 by 5"`` → ``"12 * 5"``, ``"I keep messing up 1/2 + 1/3."`` → ``"1/2 + 1/3"``."""
    if not isinstance(text, str):
        return None
    text = re.sub(r"\s+", " ", text[: MAX_CHARS * 5])
    verb = _VERB.search(text)
    if verb:
        op = _VERB_OP[verb.group(1).lower()]
        a, b = verb.group(2), verb.group(3)
        if op == "-" and re.search(r"\bfrom\b", verb.group(0), re.IGNORECASE):
            a, b = b, a  # "subtract 3 from 10" is 10 - 3
        return f"{_wrapped(a)} {op} {_wrapped(b)}"
    best = max((m.group(0).strip() for m in _EXPRESSION.finditer(text)), key=len, default=None)
    if best is None:
        return None
    # "1/2 + 1/3": a fraction's slash binds tighter than the + around it, as written.
    return best


__all__ = ["MAX_CHARS", "MAX_DIGITS", "MAX_EXPONENT", "Calculation", "calculate", "find_expression", "normalise"]
