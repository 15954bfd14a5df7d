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


@pytest.mark.parametrize(("a", "b"), [
    ("The cellar was -5 degrees", "The cellar was 5 degrees"),  # a sign is part of the number
    ("Alice owes Bob 100 dollars", "Bob owes Alice 100 dollars"),  # the same words in another order
    ("Likes coffee but not tea", "Likes tea but not coffee"),
    ("Meeting moved from Monday to Friday", "Meeting moved from Friday to Monday"),
    ("Does not like tea", "Does like tea"),  # the shorter one's words, but not in a row
])
def test_the_heuristic_merge_keeps_a_clause_another_holds_only_in_other_order(a, b) -> None:
    for texts in ([a, b], [b, a]):
        assert merge_texts(texts) == "; ".join(texts)


def test_the_heuristic_merge_leaves_out_a_clause_held_word_for_word() -> None:
    assert merge_texts(["Lives in Berlin since 2019", "lives in Berlin"]) == "Lives in Berlin since 2019"
    assert merge_texts(["Owes 5 dollars", "Owes 5 dollars to Sam"]) == "Owes 5 dollars to Sam"


@pytest.mark.parametrize(("short", "longer"), [
    ("Does not eat meat", "Does not eat meat on Fridays"),  # a denial narrowed is another denial
    ("Wants to move abroad", "Wants to move abroad no longer"),  # turned around at its end
    ("Eats meat", "Eats meat only on Fridays"),  # narrowed
    ("Drinks coffee", "Drinks coffee when it is cold"),
    ("Isn't vegetarian", "Isn't vegetarian at home"),
])
def test_the_heuristic_merge_keeps_a_clause_another_turns_around_or_narrows(short, longer) -> None:
    """Held word for word is not enough when the longer clause says something else:
    merged into it alone, "never eats meat" became "not on Fridays"."""
    for texts in ([short, longer], [longer, short]):
        assert set(merge_texts(texts).split("; ")) == {short, longer}


def test_a_title_s_or_initials_full_stop_ends_no_clause() -> None:
    assert merge_texts(["Saw Dr. Smith about the knee on Monday", "Saw Dr. Smith about the knee"]) == (
        "Saw Dr. Smith about the knee on Monday"
    )
    assert merge_texts(["Standup is at 9 a.m. every weekday in Room 4", "Lives in St. Louis. Works at J. P. Morgan."]) == (
        "Standup is at 9 a.m. every weekday in Room 4; Lives in St. Louis; Works at J. P. Morgan"
    )


@pytest.mark.parametrize(("source", "merged", "missing"), [
    ("Maria lives in Lisbon", "Lives in Lisbon", ["maria"]),  # a name starting the sentence, subject of its verb
    ("James is a nurse in Porto", "Is a nurse in Porto", ["james"]),
    ("Maria Lopez works at a bakery", "Works at a bakery", ["lopez", "maria"]),
    ("Maria's sister lives in Porto", "Has a sister in Porto", ["maria"]),
    ("王伟 lives in Lisbon", "Lives in Lisbon", ["王伟"]),  # a script without capitals
    ("Uses an iPhone every day", "Uses a phone every day", ["iphone"]),  # a name starting lowercase
    ("Has three children", "Has children", ["3"]),  # a number written as a word
    ("Has twenty-five students", "Has students", ["25"]),
    ("Saw Dr. Smith on Monday", "Saw a doctor on Monday", ["smith"]),  # "Dr." ends no sentence
    ("Weighs 72,5 kg", "Weighs 725 kg", ["72,5"]),  # a decimal comma is not a thousands separator
    ("The cellar was -5 degrees", "The cellar was 5 degrees", ["-5"]),
    ("The cellar was 5 degrees", "The cellar was -5 degrees", ["5"]),  # 5 is not found inside -5
])
def test_missing_terms_catch_names_and_numbers_of_every_form(source, merged, missing) -> None:
    assert missing_terms([source], merged) == missing


@pytest.mark.parametrize(("source", "merged"), [
    ("Has three children", "Has 3 children"),  # a number's word and digits are one
    ("Has 3 children", "Has three children"),
    ("Weighs 1,500 kg", "Weighs 1500 kg"),
    ("Maria's sister lives in Porto", "Maria has a sister in Porto"),  # the possessive is not part of the name
    ("Likes green tea", "Enjoys green tea"),  # a sentence's verb is no name
    ("Bought a car in May", "Purchased a car in May"),
    ("Has 5, maybe 6 cats", "Has 5 or 6 cats"),
    ("There is a gym near her office", "A gym is near her office"),  # pronouns and quantifiers are no names
    ("Everyone loved the cake she baked", "Guests loved the cake she baked"),
    ("Nothing has changed in her diet", "Her diet has not changed"),
    ("אוהבת קפה שחור בבוקר עם iPhone ביד", "שותה קפה שחור כל בוקר, עם iPhone ביד"),  # a text in a script without capitals
])
def test_missing_terms_accept_a_rewording_that_keeps_every_detail(source, merged) -> None:
    assert missing_terms([source], merged) == []
