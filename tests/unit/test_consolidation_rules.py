"""The pure rules of importance and consolidation (memorist.policies.consolidation)."""

from __future__ import annotations

import math

import pytest

from memorist import validate
from memorist.errors import ValidationError
from memorist.policies.consolidation import derive_importance, key_terms, merge_texts, missing_terms
from memorist.prompts.extraction import ExtractionResult


@pytest.mark.parametrize(("text", "low", "high"), [
    ("Is tired", 0.3, 0.3),
    ("Likes green tea", 0.45, 0.45),
    ("Name is Alex", 0.45, 0.45),
    ("Has 3 cats", 0.4, 0.4),
    ("Started at Siemens in March 2023", 0.6, 0.6),
    ("Never eats before a run", 0.6, 0.6),
    ("Is allergic to peanuts", 0.9, 0.9),
    ("Must always carry an EpiPen for a peanut allergy", 1.0, 1.0),
    ("Takes insulin twice a day", 0.9, 1.0),
])
def test_derived_importance_follows_the_documented_rules(text, low, high) -> None:
    assert low <= derive_importance(text) <= high


def test_importance_is_capped_at_one() -> None:
    assert derive_importance("Always remember: loves Paris, important, must visit on 2025-01-01 with 3 friends") == 1.0


def test_key_terms_are_numbers_dates_and_names_not_sentence_starts() -> None:
    terms = key_terms("Flew to Paris with Air France on May 3, 2024. Paid $1,250 and 2 bags. Then slept")
    assert {"paris", "air", "france", "may 3, 2024", "1250", "2"} <= terms
    assert "flew" not in terms and "paid" not in terms and "then" not in terms and "2024" not in terms


def test_missing_terms_name_what_a_merge_dropped() -> None:
    sources = ["Paid 1,200 euros in Lisbon", "Paid 1,200 euros in Lisbon on 2024-05-03"]
    assert missing_terms(sources, "Paid 1200 euros in Lisbon on 2024-05-03") == []
    assert missing_terms(sources, "Paid a deposit in Lisbon") == ["1200", "2024-05-03"]
    assert missing_terms(sources, "paid 1200 in LISBON on 2024-05-03") == []  # case and separators do not matter


def test_the_heuristic_merge_keeps_every_clause_once_and_loses_no_term() -> None:
    texts = ["Lives in Berlin", "Lives in Berlin since 2019. Works at SAP", "Works at SAP as a tester"]
    merged = merge_texts(texts)
    assert merged == "Lives in Berlin since 2019; Works at SAP as a tester"
    assert missing_terms(texts, merged) == []


@pytest.mark.parametrize("bad", [1.01, -0.5, math.nan, math.inf, True, "1", None])
def test_importance_argument_check(bad) -> None:
    if bad is None:
        assert validate.importance(None) is None
        return
    with pytest.raises(ValidationError, match="importance: must be a number from 0 to 1"):
        validate.importance(bad)


def test_the_extraction_schema_reads_a_model_s_importance_leniently() -> None:
    result = ExtractionResult.model_validate({"facts": [
        {"text": "a", "importance": 0.7}, {"text": "b", "importance": "0.3"}, {"text": "c", "importance": "very"},
        {"text": "d", "importance": -2}, {"text": "e"}, {"text": "f", "importance": float("nan")}, "g",
    ]})
    assert [f.importance for f in result.facts] == [0.7, 0.3, None, 0.0, None, None, None]
