"""Exact arithmetic for the tutor's ReAct calculator: integers, decimals and fractions.

An expression is parsed with :mod:`ast` and only numbers, ``+ - * / // % **``,
parentheses and unary signs are evaluated, over :class:`fractions.Fraction`, so
``0.1 + 0.2`` is exactly ``3/10`` and ``1/2 + 1/3`` is ``5/6``. A number is read from
its text (``1,000``, ``2.5e3``, ``.5``), never through a float, so nothing is rounded
and ``1e400`` is not infinity. Nothing is ever passed to ``eval``. The work is
bounded: the expression's length, its depth, the size of an exponent and of every
number, written or computed, are capped, so no input can cost unbounded time or memory.

>>> calculate("1/2 + 1/3").text
'5/6'
>>> calculate("1,000 * 12").text
'12000'
>>> calculate("0.1 + 0.2").text
'3/10 (= 0.3)'

:func:`find_expression` finds the arithmetic a message asks about; see its docstring
for how it tells ``12/5`` the division from ``12/5`` the date.
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
    """Words (``times``, ``divided by``, ``plus``...) and signs (``×``, ``÷``, ``^``) as
    Python operators; numbers without their thousands separators and leading zeros
    (``1,000`` → ``1000``, ``05`` → ``5``)."""
    text = expression.strip().rstrip("?.!= ")
    for pattern, op in _WORDS:
        text = re.sub(pattern, f" {op} ", text, flags=re.IGNORECASE)
    text = _GROUPED.sub(lambda m: m.group(0).replace(",", ""), text)
    text = _LEADING_ZEROS.sub("", text)
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
    return Calculation(text, _eval(tree.body, 0, text))


def _too_long(n: int) -> bool:
    # Past 700 bits a number has more than 200 digits; below, str() is cheap and exact
    # (and never meets Python's limit on converting long integers to text).
    n = abs(n)
    return n.bit_length() > 700 or len(str(n)) > MAX_DIGITS


def _check_size(v: Fraction) -> Fraction:
    if _too_long(v.numerator) or _too_long(v.denominator):
        raise ValidationError("expression", f"makes a number of more than {MAX_DIGITS} digits")
    return v


_EXPONENT = re.compile(r"[eE]([-+]?[\d_]+)$")


def _literal(node: ast.Constant, source: str) -> Fraction:
    """A number as written: ``2.5e3`` is 2500 and ``1e400`` is 10**400 (refused as too
    long), never the float Python would make of them."""
    value = node.value
    if isinstance(value, int):
        return _check_size(Fraction(value))
    written = ast.get_source_segment(source, node) or repr(value)
    exponent = _EXPONENT.search(written)
    # Checked before Fraction reads it: Fraction("1e999999999") would build a billion digits.
    if exponent and abs(int(exponent.group(1).replace("_", ""))) > MAX_DIGITS:
        raise ValidationError("expression", f"has a number of more than {MAX_DIGITS} digits ({written})")
    try:
        value = Fraction(written)
    except ValueError:
        raise ValidationError("expression", f"has a number that is not plain decimal ({written})") from None
    return _check_size(value)  # its own error (a ValidationError is a ValueError too)


_ALLOWED = "only numbers and + - * / // % ** ( ) are allowed"


def _eval(node: ast.AST, depth: int, source: str) -> Fraction:
    if depth > _MAX_DEPTH:
        raise ValidationError("expression", f"nests deeper than {_MAX_DEPTH} levels")
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return _literal(node, source)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.UAdd | ast.USub):
        v = _eval(node.operand, depth + 1, source)
        return v if isinstance(node.op, ast.UAdd) else -v
    if isinstance(node, ast.BinOp):
        a, b = _eval(node.left, depth + 1, source), _eval(node.right, depth + 1, source)
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
            return _check_size(Fraction(a // b) if isinstance(op, ast.FloorDiv) else a % b)
        if isinstance(op, ast.Pow):
            if b.denominator != 1:
                raise ValidationError("expression", "takes whole-number exponents only")
            if abs(b.numerator) > MAX_EXPONENT:
                raise ValidationError("expression", f"has an exponent above {MAX_EXPONENT}")
            if a == 0 and b < 0:
                raise ValidationError("expression", "divides by zero")
            return _check_size(a ** int(b))
    if isinstance(node, ast.Name):
        raise ValidationError("expression", f"names {node.id!r}; {_ALLOWED}")
    raise ValidationError("expression", f"has {type(node).__name__}; {_ALLOWED}")


# Finding the arithmetic in a message -------------------------------------------------------
#: A number as people write it: ``12``, ``1,000,000``, ``3.14``, ``.5``, ``2.5e3``.
_NUM = r"(?:\d{1,3}(?:,\d{3})+(?!\d|,\d)(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?"
#: ... standing alone: not part of a word, a version (1.2.3) or a list (1,2).
_NUMBER = rf"(?<![\w.,]){_NUM}(?!\w|[.,]\d)"
_GROUPED = re.compile(r"(?<![\w.,])\d{1,3}(?:,\d{3})+(?!\d|,\d)")
_LEADING_ZEROS = re.compile(r"(?<![\w.])0+(?=\d)")
_OP = (r"(?:\*\*|//|[-+*/%×÷^]"
       r"|(?:x|times|multiplied by|divided by|plus|minus|over|to the power of)\b)")
_SIGNS = r"(?:[-+(] ?){0,8}"
_CLOSE = r"(?: ?\)){0,8}"
# Each space and parenthesis can be matched one way only, a number cannot start inside
# another, and runs of signs and parentheses are bounded, so a failed match costs
# linear time (the message is also cut at MAX_CHARS * 5 and its spaces collapsed).
_EXPRESSION = re.compile(rf"{_SIGNS}{_NUMBER}(?:{_CLOSE} ?{_OP} ?{_SIGNS}{_NUMBER})+{_CLOSE}", re.IGNORECASE)
#: The words that ask for a result, just before the expression.
_CUE = re.compile(
    r"(?:\bwhat(?:'s|’s|s| is| are)|\bcalculate|\bcompute|\bevaluate|\bsolve|\bwork out|\bhow much is|\bsimplify)\s*:?\s*$",
    re.IGNORECASE,
)
#: One kind of "/" or "-" between numbers, with no space: a date (12/5, 2024-01-05), a
#: phone number (555-1234), a range (10-20) as often as a division or a subtraction.
_COMPACT = re.compile(rf"{_NUM}(?:/{_NUM})+|{_NUM}(?:-{_NUM})+")
_OPERAND = rf"-?{_NUM}(?:/{_NUM})?"
_VERB = re.compile(
    rf"\b(multiply|add|subtract|divide|sum of|product of)\s+({_OPERAND})(?!\w|[.,]\d)\s+(?:by|and|to|from|with)\s+"
    rf"({_OPERAND})(?!\w|[.,]\d)",
    re.IGNORECASE,
)
_VERB_OP = {"multiply": "*", "product of": "*", "add": "+", "sum of": "+", "divide": "/", "subtract": "-"}


def _wrapped(number: str) -> str:
    return f"({number})" if "/" in number else number


def _balanced(expression: str) -> str:
    """Without the parentheses the match took from the sentence around it."""
    while expression.endswith(")") and expression.count(")") > expression.count("("):
        expression = expression[:-1].rstrip()
    while expression.startswith("(") and expression.count("(") > expression.count(")"):
        expression = expression[1:].lstrip()
    return expression


def _asked(text: str, start: int, end: int) -> bool:
    """Whether the expression at ``text[start:end]`` is asked about: after "what is",
    "calculate", ...; before "="; or alone in the message."""
    if _CUE.search(text[max(0, start - 40):start]) or re.match(r"\s*=", text[end:]):
        return True
    return not text[:start].strip() and not text[end:].strip(" ?.!=")


def find_expression(text: str) -> str | None:
    """The arithmetic a message asks about, as an expression, or None: ``"Help me
    multiply 12 by 5"`` → ``"12 * 5"``, ``"I keep messing up 1/2 + 1/3."`` → ``"1/2 + 1/3"``.

    Numbers are read whole (``1,000``, ``2.5e3``; not the ``3`` of ``x3`` or of
    ``1.2.3``). With several expressions in the message, the last one asked about
    wins ("what is", "calculate", "=", ...), else the last. A single kind of ``/`` or
    ``-`` written without spaces (``12/5``, ``555-1234``, ``2024-01-05``) is a date, a
    phone number or a range as often as arithmetic, so it counts only when asked about:
    ``"What is 12/5?"`` is a division, ``"my test on 12/5"`` is not.
    """
    if not isinstance(text, str):
        return None
    text = re.sub(r"\s+", " ", text[: MAX_CHARS * 5])
    found: list[tuple[int, str, bool]] = []  # (where, expression, asked about)
    for verb in _VERB.finditer(text):
        op = _VERB_OP[verb.group(1).lower()]
        a, b = verb.group(2), verb.group(3)
        if op == "-" and re.search(r"\bfrom\b", verb.group(0), re.IGNORECASE):
            a, b = b, a  # "subtract 3 from 10" is 10 - 3
        found.append((verb.start(), f"{_wrapped(a)} {op} {_wrapped(b)}", True))
    for match in _EXPRESSION.finditer(text):
        expression = _balanced(match.group(0).strip())
        start = match.start() + match.group(0).index(expression)
        asked = _asked(text, start, start + len(expression))
        if asked or not _COMPACT.fullmatch(expression):
            found.append((start, expression, asked))
    if not found:
        return None
    found.sort(key=lambda f: f[0])
    asked_about = [f for f in found if f[2]]
    return (asked_about or found)[-1][1]


__all__ = ["MAX_CHARS", "MAX_DIGITS", "MAX_EXPONENT", "Calculation", "calculate", "find_expression", "normalise"]
