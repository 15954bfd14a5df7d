"""The tutor's calculator: exact arithmetic over a safe parser, bounded work."""

from __future__ import annotations

from fractions import Fraction

import pytest

from memorist import ValidationError
from memorist.agent.calculator import MAX_CHARS, calculate, find_expression


@pytest.mark.parametrize(("expression", "value", "text"), [
    ("12 * 5", Fraction(60), "60"),
    ("1/2 + 1/3", Fraction(5, 6), "5/6"),
    ("0.1 + 0.2", Fraction(3, 10), "3/10 (= 0.3)"),
    ("3/4 - 5/4", Fraction(-1, 2), "-1/2 (= -0.5)"),
    ("(2 + 3) * 4", Fraction(20), "20"),
    ("2 ^ 10", Fraction(1024), "1024"),
    ("7 divided by 2", Fraction(7, 2), "7/2 (= 3.5)"),
    ("3.5 times 2", Fraction(7), "7"),
    ("2 / 3 * 3", Fraction(2), "2"),
    ("1/3 + 1/3 + 1/3", Fraction(1), "1"),
    ("-(1/6) ** 2", Fraction(-1, 36), "-1/36"),
    ("10 // 3 + 10 % 3", Fraction(4), "4"),
])
def test_exact_results(expression, value, text):
    result = calculate(expression)
    assert result.value == value and result.text == text


@pytest.mark.parametrize(("expression", "says"), [
    ("1/0", "divides by zero"),
    ("__import__('os').system('true')", "only numbers"),
    ("y + 1", "names 'y'"),
    ("2 ** 1000", "exponent above"),
    ("9 ** 64 * 9 ** 64 * 9 ** 64 * 9 ** 64", "digits"),
    ("2 ** 0.5", "whole-number exponents"),
    ("[1, 2]", "only numbers"),
    ("1 +", "not arithmetic"),
    ("True + 1", "only numbers"),
    ("1" * (MAX_CHARS + 1), "longer than"),
    ("-" * 60 + "1", "nests deeper"),
])
def test_what_is_refused_is_named(expression, says):
    with pytest.raises(ValidationError) as info:
        calculate(expression)
    assert info.value.field == "expression" and says in str(info.value)


@pytest.mark.parametrize(("message", "expression"), [
    ("Help me multiply 12 by 5.", "12 * 5"),
    ("I keep messing up 1/2 + 1/3.", "1/2 + 1/3"),
    ("subtract 3 from 10 please", "10 - 3"),
    ("Can you add 1/4 and 2/3?", "(1/4) + (2/3)"),
    ("what is 2.5 * 4?", "2.5 * 4"),
    ("I have 3 apples", None),
    ("Tell me about fractions", None),
])
def test_the_arithmetic_a_message_asks_for(message, expression):
    assert find_expression(message) == expression
    if expression:
        calculate(expression)
