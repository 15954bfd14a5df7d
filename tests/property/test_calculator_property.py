"""The tutor's calculator under generated input: exact on what it accepts, and a
ValidationError (never another exception) on anything else."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from memorist import ValidationError
from memorist.agent.calculator import calculate, find_expression

small = st.integers(min_value=-10**6, max_value=10**6)
nonzero = small.filter(bool)


@given(small, nonzero, small, nonzero, st.sampled_from(["+", "-", "*", "/"]))
def test_fraction_arithmetic_is_exact(a, b, c, d, op):
    left, right = Fraction(a, b), Fraction(c, d)
    expected = {"+": left + right, "-": left - right, "*": left * right, "/": left / right if right else None}[op]
    expression = f"(({a})/({b})) {op} (({c})/({d}))"
    if expected is None:
        try:
            calculate(expression)
        except ValidationError as exc:
            assert "divides by zero" in str(exc)
        else:
            raise AssertionError("a division by zero was not refused")
    else:
        assert calculate(expression).value == expected


@given(st.decimals(min_value=-1000, max_value=1000, places=3, allow_nan=False, allow_infinity=False),
       st.decimals(min_value=-1000, max_value=1000, places=3, allow_nan=False, allow_infinity=False))
def test_decimals_are_exact(x, y):
    assert calculate(f"{x} + ({y})").value == Fraction(x) + Fraction(y)


@settings(max_examples=300)
@given(st.text(max_size=300))
def test_any_text_is_a_result_or_a_named_refusal(text):
    expression = find_expression(text)
    for candidate in (text, expression):
        if candidate is None:
            continue
        try:
            calculate(candidate)
        except ValidationError as exc:
            assert exc.field == "expression"
