"""HeuristicReconciler: spec 004's ADD / UPDATE / DELETE / NONE decision logic."""

from __future__ import annotations

import pytest

from memorist.model import Action, Decision, Existing, Fact, Message
from memorist.roles.extractor import HeuristicExtractor
from memorist.roles.reconciler import HeuristicReconciler


def reconcile(facts: list[str], existing: list[list[tuple[str, str, float]]]) -> list[Decision]:
    return HeuristicReconciler().reconcile(
        [Fact(text) for text in facts],
        [[Existing(mid, text, score) for mid, text, score in group] for group in existing],
    )


def events(decisions: list[Decision]) -> list[tuple[str, str, str | None]]:
    return [(d.action.value, d.text, d.target_id) for d in decisions]


# --- spec 004's four examples --------------------------------------------------------------------------


def test_spec_add_novel_information():
    decisions = reconcile(["Started learning Spanish"], [[("m1", "Works as engineer", 0.2)]])
    assert events(decisions) == [("ADD", "Started learning Spanish", None)]


def test_spec_update_same_slot_new_value():
    (decision,) = reconcile(["Lives in San Francisco"], [[("m1", "Lives in California", 0.8)]])
    assert (decision.action, decision.text, decision.target_id) == (Action.UPDATE, "Lives in San Francisco", "m1")
    assert decision.old_text == "Lives in California"
    assert "lives in" in decision.reason


def test_spec_delete_on_contradiction_and_add_the_new_fact():
    decisions = reconcile(["Became vegan, no longer eats pizza"], [[("m1", "Loves pizza", 0.5)]])
    assert events(decisions) == [
        ("DELETE", "Loves pizza", "m1"),
        ("ADD", "Became vegan, no longer eats pizza", None),
    ]
    assert decisions[0].old_text == "Loves pizza"


def test_spec_none_when_already_stored():
    (decision,) = reconcile(["Name is John"], [[("m1", "Name is John", 1.0)]])
    assert (decision.action, decision.target_id) == (Action.NONE, "m1")


# --- NONE --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("new", "old"),
    [
        ("name is john.", "Name is John"),
        ("Is a vegetarian", "Is vegetarian"),  # articles ignored
        ("Lives  in Berlin!", "Lives in Berlin"),
        ("Name is John", "Name is John Smith"),  # contained in a more specific memory
        ("Lives in California", "Lives in San Francisco, California"),
    ],
)
def test_none_when_the_fact_is_already_captured(new, old):
    (decision,) = reconcile([new], [[("m1", old, 0.5)]])
    assert (decision.action, decision.target_id) == (Action.NONE, "m1")


def test_near_identical_needs_equal_words_and_a_high_score():
    (same,) = reconcile(["Every morning drinks coffee"], [[("m1", "Drinks coffee every morning", 0.99)]])
    assert (same.action, same.target_id) == (Action.NONE, "m1")  # equal word sets, score >= 0.97
    (low,) = reconcile(["Every morning drinks coffee"], [[("m1", "Drinks coffee every morning", 0.5)]])
    assert low.action is Action.ADD
    (other,) = reconcile(["Lives in Berlin"], [[("m1", "Sister lives in Berlin", 0.9)]])
    assert other.action is Action.ADD  # the sister's home is not the user's


def test_a_negated_fact_is_not_captured_by_its_positive_form():
    decisions = reconcile(["Is no longer vegetarian"], [[("m1", "Is vegetarian", 0.9)]])
    assert events(decisions) == [("DELETE", "Is vegetarian", "m1"), ("ADD", "Is no longer vegetarian", None)]


# --- UPDATE ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("new", "old"),
    [
        ("Name is Jon", "Name is John"),
        ("Works as a nurse", "Works as engineer"),
        ("Favorite color is green", "Favorite color is blue"),
        ("Is 31 years old", "Is 30 years old"),
        ("Dog's name is Max", "Dog's name is Rex"),
        ("Appointment is on Tuesday", "Appointment is on Monday"),
        ("Wohnt in München", "Wohnt in Berlin"),
        ("Name ist Anna", "Name ist Johanna"),
        ("Lieblingsessen ist Sushi", "Lieblingsessen ist Pizza"),
        ("Arbeitet als Ärztin", "Arbeitet als Lehrerin"),
    ],
)
def test_update_single_valued_slot(new, old):
    (decision,) = reconcile([new], [[("m1", old, 0.6)]])
    assert (decision.action, decision.text, decision.old_text, decision.target_id) == (Action.UPDATE, new, old, "m1")
    assert decision.reason.startswith("same slot")


def test_update_when_the_new_fact_refines_the_old_one():
    (decision,) = reconcile(["Drinks coffee with oat milk"], [[("m1", "Drinks coffee", 0.8)]])
    assert (decision.action, decision.target_id, decision.old_text) == (Action.UPDATE, "m1", "Drinks coffee")
    (more,) = reconcile(["Likes apples and pears"], [[("m1", "Likes apples", 0.8)]])
    assert more.action is Action.UPDATE


@pytest.mark.parametrize(
    ("new", "old"),
    [("Allergic to shellfish", "Allergic to nuts"), ("Likes tea", "Likes coffee"), ("Has a cat", "Has a dog"),
     ("Sister is married", "Sister is a doctor")],
)
def test_multi_valued_predicates_accumulate(new, old):
    assert events(reconcile([new], [[("m1", old, 0.7)]])) == [("ADD", new, None)]


# --- DELETE ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("new", "old"),
    [
        ("Does not like coffee", "Likes coffee"),
        ("Doesn't drink coffee anymore", "Likes coffee"),
        ("No longer has a dog", "Has a dog"),
        ("Stopped eating pizzas", "Eats pizza"),
        ("Not allergic to nuts anymore", "Allergic to nuts"),
        ("Mag keinen Kaffee mehr", "Mag Kaffee"),
        ("Likes coffee again", "Does not like coffee"),
    ],
)
def test_delete_on_clear_contradiction(new, old):
    assert events(reconcile([new], [[("m1", old, 0.6)]])) == [("DELETE", old, "m1"), ("ADD", new, None)]


@pytest.mark.parametrize(
    ("new", "old"),
    [
        ("Does not like tea", "Likes coffee"),  # no shared object
        ("Does not like Berlin weather", "Lives in Berlin"),  # unrelated predicate
        ("Loves vegetarian food", "Is not vegetarian"),  # positive vs negative needs the same predicate
        ("No longer eats meat", "Does not eat fish"),  # both negative
    ],
)
def test_delete_is_conservative(new, old):
    assert events(reconcile([new], [[("m1", old, 0.6)]])) == [("ADD", new, None)]


def test_contradiction_when_the_new_fact_is_already_stored_deletes_but_does_not_add_again():
    decisions = reconcile(["No longer eats pizza"], [[("m1", "Loves pizza", 0.6), ("m2", "No longer eats pizza", 1.0)]])
    assert events(decisions) == [("DELETE", "Loves pizza", "m1"), ("NONE", "No longer eats pizza", "m2")]


# --- within one call ----------------------------------------------------------------------------------------


def test_identical_facts_in_one_call_are_added_once():
    decisions = reconcile(["Lives in Berlin", "lives in Berlin."], [[], []])
    assert [d.action for d in decisions] == [Action.ADD, Action.NONE]
    assert decisions[1].target_id is None


def test_identical_facts_already_stored_target_the_memory_once():
    stored = [("m1", "Name is John", 1.0)]
    decisions = reconcile(["Name is John", "Name is John"], [stored, stored])
    assert events(decisions) == [("NONE", "Name is John", "m1"), ("NONE", "Name is John", None)]


def test_a_memory_is_targeted_by_one_decision_only():
    stored = [("m1", "Name is John", 0.9)]
    decisions = reconcile(["Name is Jon", "Name is Johnny"], [stored, stored])
    assert events(decisions) == [("UPDATE", "Name is Jon", "m1"), ("ADD", "Name is Johnny", None)]


def test_decisions_follow_fact_order_and_may_use_memories_listed_for_other_facts():
    decisions = reconcile(
        ["Started learning Spanish", "Lives in Munich", "Loves hiking"],
        [[("m1", "Lives in Berlin", 0.3)], [], [("m2", "Loves hiking", 1.0)]],
    )
    assert events(decisions) == [
        ("ADD", "Started learning Spanish", None),
        ("UPDATE", "Lives in Munich", "m1"),
        ("NONE", "Loves hiking", "m2"),
    ]
    assert [d.fact.text for d in decisions] == ["Started learning Spanish", "Lives in Munich", "Loves hiking"]
    assert all(d.reason for d in decisions)


def test_ids_are_never_invented_and_never_reused():
    facts = ["Name is Jon", "Lives in Munich", "No longer eats pizza", "Does not like coffee", "Has a cat",
             "Lives in Munich", "Name is Jon", "Likes coffee with oat milk", "Loves hiking"]
    stored = [("m1", "Name is John", 0.9), ("m2", "Lives in Berlin", 0.8), ("m3", "Loves pizza", 0.5),
              ("m4", "Likes coffee", 0.7), ("m5", "Loves hiking", 1.0)]
    decisions = reconcile(facts, [stored] * len(facts))
    targets = [d.target_id for d in decisions if d.target_id is not None]
    assert set(targets) <= {"m1", "m2", "m3", "m4", "m5"}
    assert len(targets) == len(set(targets))
    assert all(d.target_id is None for d in decisions if d.action is Action.ADD)
    assert all(d.target_id is not None for d in decisions if d.action in (Action.UPDATE, Action.DELETE))


def test_pure_and_deterministic():
    facts = [Fact("Lives in Munich"), Fact("Does not like coffee")]
    existing = ((Existing("m1", "Lives in Berlin", 0.8),), (Existing("m2", "Likes coffee", 0.7),))
    reconciler = HeuristicReconciler()
    assert reconciler.reconcile(facts, existing) == reconciler.reconcile(facts, existing)
    assert reconciler.reconcile([], []) == []


def test_extracted_spec_example_is_added_to_an_empty_store():
    facts = HeuristicExtractor().extract([
        Message("user", "Hi, I'm Alex. I'm a vegetarian and allergic to nuts."),
        Message("assistant", "Hello Alex! I'll remember your dietary preferences."),
    ])
    decisions = HeuristicReconciler().reconcile(facts, [[] for _ in facts])
    assert events(decisions) == [("ADD", "Name is Alex", None), ("ADD", "Is vegetarian", None),
                                 ("ADD", "Allergic to nuts", None)]
