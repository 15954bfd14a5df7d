"""The filter language: every operator, nesting, dates, fields, and malformed input."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memorist import ValidationError
from memorist.model import Kind, MemoryClass, MemoryRecord, Scope
from memorist.policies.filters import compile_filters

JAN_2024 = datetime(2024, 1, 1, tzinfo=UTC).timestamp()
JUN_2024 = datetime(2024, 6, 1, tzinfo=UTC).timestamp()


def rec(**kw) -> MemoryRecord:
    scope = Scope(user_id="alex", run_id=kw.pop("run_id", ""))
    return MemoryRecord(id=kw.pop("id", "m"), scope=scope, text=kw.pop("text", "t"), **kw)


FOOD = rec(id="food", metadata={"category": "food", "priority": 3, "labels": ["a", "b"], "note": "Likes Spicy food"},
           kind=Kind.PREFERENCE, tags=["diet", "health"], run_id="r1", created_at=JAN_2024, importance=0.9)
WORK = rec(id="work", metadata={"category": "work", "priority": 1, "note": None},
           kind=Kind.FACT, tags=[], created_at=JUN_2024, updated_at=JUN_2024 + 10, importance=0.2)
BARE = rec(id="bare", metadata={}, kind=Kind.STRATEGY, memory_class=MemoryClass.PROCEDURAL, created_at=JUN_2024)
ALL = [FOOD, WORK, BARE]


def matching(filters) -> set[str]:
    pred = compile_filters(filters)
    assert pred is not None
    return {r.id for r in ALL if pred(r)}


def test_none_and_empty_mean_no_filter():
    assert compile_filters(None) is None
    assert compile_filters({}) is None


@pytest.mark.parametrize(
    "filters, expected",
    [
        ({"category": "food"}, {"food"}),
        ({"category": {"eq": "work"}}, {"work"}),
        ({"category": {"ne": "food"}}, {"work", "bare"}),  # missing key counts as "not equal"
        ({"category": {"in": ["food", "work"]}}, {"food", "work"}),
        ({"category": {"nin": ["food"]}}, {"work", "bare"}),
        ({"priority": {"gt": 1}}, {"food"}),
        ({"priority": {"gte": 1}}, {"food", "work"}),
        ({"priority": {"lt": 3}}, {"work"}),
        ({"priority": {"lte": 3}}, {"food", "work"}),
        ({"priority": {"gte": 1, "lt": 3}}, {"work"}),
        ({"note": {"contains": "spicy"}}, {"food"}),  # case-insensitive substring
        ({"labels": {"contains": "b"}}, {"food"}),  # element of a list
        ({"priority": {"exists": True}}, {"food", "work"}),
        ({"priority": {"exists": False}}, {"bare"}),
        ({"note": {"exists": True}}, {"food"}),  # a null value does not "exist"
    ],
)
def test_operators(filters, expected):
    assert matching(filters) == expected


def test_comparison_of_mismatched_types_does_not_match_or_raise():
    assert matching({"category": {"gt": 5}}) == set()
    assert matching({"priority": {"gt": "a"}}) == set()


def test_and_or_not_nesting():
    assert matching({"AND": [{"category": {"in": ["food", "work"]}}, {"priority": {"gte": 2}}]}) == {"food"}
    assert matching({"OR": [{"category": "work"}, {"kind": "strategy"}]}) == {"work", "bare"}
    assert matching({"NOT": {"category": "food"}}) == {"work", "bare"}
    nested = {"OR": [{"AND": [{"category": "food"}, {"NOT": {"priority": {"lt": 2}}}]}, {"kind": "strategy"}]}
    assert matching(nested) == {"food", "bare"}
    assert matching({"or": [{"category": "food"}, {"category": "work"}]}) == {"food", "work"}  # case-insensitive


def test_keys_at_one_level_are_anded():
    assert matching({"category": "food", "priority": 1}) == set()
    assert matching({"category": "work", "priority": 1}) == {"work"}


def test_record_fields():
    assert matching({"kind": "preference"}) == {"food"}
    assert matching({"memory_class": "procedural"}) == {"bare"}
    assert matching({"run_id": "r1"}) == {"food"}
    assert matching({"tags": "diet"}) == {"food"}  # eq on a list field means membership
    assert matching({"tags": {"in": ["health", "x"]}}) == {"food"}
    assert matching({"tags": {"contains": "health"}}) == {"food"}
    assert matching({"importance": {"gt": 0.5}}) == {"food"}


def test_metadata_prefix_reaches_a_key_shadowed_by_a_field():
    shadow = rec(id="shadow", metadata={"kind": "custom"}, kind=Kind.FACT)
    assert compile_filters({"metadata.kind": "custom"})(shadow)
    assert not compile_filters({"kind": "custom"})(shadow)
    assert compile_filters({"metadata.category": "food"})(FOOD)


def test_dates_accept_iso_strings_and_datetimes():
    assert matching({"created_at": {"gte": "2024-03-01T00:00:00Z"}}) == {"work", "bare"}
    assert matching({"created_at": {"lt": "2024-03-01T00:00:00+00:00"}}) == {"food"}
    assert matching({"created_at": {"lt": datetime(2024, 3, 1, tzinfo=UTC)}}) == {"food"}
    assert matching({"created_at": {"gte": JUN_2024}}) == {"work", "bare"}
    assert matching({"updated_at": {"gt": "2024-06-01T00:00:05Z"}}) == {"work"}
    # A memory never updated has its created_at as updated_at, as results report it.
    assert matching({"updated_at": {"exists": False}}) == set()
    assert matching({"updated_at": {"lt": "2024-03-01T00:00:00Z"}}) == {"food"}
    assert matching({"created_at": {"in": ["2024-01-01T00:00:00Z"]}}) == {"food"}


@pytest.mark.parametrize(
    "filters, path",
    [
        ({"priority": {"gtx": 1}}, "filters.priority.gtx"),
        ({"priority": {"in": "food"}}, "filters.priority.in"),
        ({"priority": {"nin": 3}}, "filters.priority.nin"),
        ({"priority": {"exists": "yes"}}, "filters.priority.exists"),
        ({"priority": {"gt": None}}, "filters.priority.gt"),
        ({"priority": {"lte": [1, 2]}}, "filters.priority.lte"),
        ({"priority": {}}, "filters.priority"),
        ({"created_at": {"gte": "last tuesday"}}, "filters.created_at.gte"),
        ({"created_at": {"gte": [2024]}}, "filters.created_at.gte"),
        ({"AND": []}, "filters.AND"),
        ({"OR": {"category": "food"}}, "filters.OR"),
        ({"AND": [{"category": "food"}, "oops"]}, "filters.AND[1]"),
        ({"OR": [{"AND": [{"x": {"bogus": 1}}]}]}, "filters.OR[0].AND[0].x.bogus"),
        ({"NOT": "food"}, "filters.NOT"),
        ({"NOT": {}}, "filters.NOT"),
        ({"": 1}, "filters"),
        ({3: 1}, "filters"),
    ],
)
def test_malformed_filters_name_the_path(filters, path):
    with pytest.raises(ValidationError) as info:
        compile_filters(filters)
    assert info.value.field == path
    assert str(info.value).startswith(path + ":")


@pytest.mark.parametrize("filters", [["category", "food"], "category=food", 3])
def test_filters_must_be_a_mapping(filters):
    with pytest.raises(ValidationError) as info:
        compile_filters(filters)
    assert info.value.field == "filters"
    assert "filters" in str(info.value)


def test_validation_happens_before_any_record_is_seen():
    # A bad operator deep in an OR branch that would never be evaluated still fails.
    with pytest.raises(ValidationError):
        compile_filters({"OR": [{"category": "food"}, {"priority": {"between": [1, 2]}}]})


# What the operators mean (docs/concepts/scopes.md): ne is NOT eq, nin is NOT in, a
# boolean is not a number, contains ignores case on a string and on a list's elements.
TYPED = [
    rec(id="list", metadata={"l": ["x", "y"], "n": [1, 3]}, tags=["diet", "Health"]),
    rec(id="one", metadata={"n": 1, "l": "x"}),
    rec(id="true", metadata={"n": True, "l": ["X"]}),
    rec(id="zero", metadata={"n": 0}),
    rec(id="false", metadata={"n": False}),
    rec(id="float", metadata={"n": 1.0, "l": [True]}),
    rec(id="none", metadata={"n": None}),
    rec(id="nested", metadata={"n": [[1, True]], "l": {"a": 1}}),
    rec(id="missing", metadata={}),
]


def typed(filters) -> set[str]:
    pred = compile_filters(filters)
    assert pred is not None
    return {r.id for r in TYPED if pred(r)}


@pytest.mark.parametrize(
    "key, value",
    [("l", "x"), ("l", "X"), ("l", ["x", "y"]), ("n", 3), ("n", 1), ("n", True), ("n", 0), ("n", False),
     ("n", None), ("n", [1, True]), ("l", {"a": 1}), ("l", True), ("tags", "diet"), ("tags", "health")],
)
def test_ne_matches_exactly_what_eq_does_not(key, value):
    """Before, ne compared a stored list whole while eq looked for an element:
    {"l": "x"} and {"l": {"ne": "x"}} both matched ["x", "y"]."""
    equal, unequal = typed({key: {"eq": value}}), typed({key: {"ne": value}})
    assert equal.isdisjoint(unequal)
    assert equal | unequal == {r.id for r in TYPED}
    assert unequal == typed({"NOT": {key: {"eq": value}}})
    if not isinstance(value, list | dict):  # in/nin look for a stored list's elements
        assert typed({key: {"in": [value]}}) == equal
        assert typed({key: {"nin": [value]}}) == unequal


def test_a_list_holding_the_value_is_not_unequal_to_it():
    assert "list" not in typed({"l": {"ne": "x"}})
    assert "list" not in typed({"n": {"ne": 3}})
    assert "list" in typed({"l": {"ne": "z"}})
    assert typed({"tags": {"ne": "diet"}}) == {r.id for r in TYPED} - {"list"}


@pytest.mark.parametrize(
    "filters, expected",
    [
        ({"n": True}, {"true"}),
        ({"n": 1}, {"list", "one", "float"}),  # 1 == 1.0, and the list [1, 3]
        ({"n": False}, {"false"}),
        ({"n": 0}, {"zero"}),
        ({"n": {"in": [0]}}, {"zero"}),
        ({"n": {"in": [True]}}, {"true"}),
        ({"n": {"in": [1]}}, {"list", "one", "float"}),
        ({"n": {"nin": [0, 1]}}, {"true", "false", "none", "nested", "missing"}),
        ({"n": {"ne": True}}, {"list", "one", "zero", "false", "float", "none", "nested", "missing"}),
        ({"n": [[1, True]]}, {"nested"}),
        ({"n": [[True, 1]]}, set()),
        ({"n": [[1, 1]]}, set()),  # true is not 1 inside a list either
        ({"n": {"gte": 1}}, {"one", "float"}),  # comparisons never matched a boolean
        ({"l": {"contains": True}}, {"float"}),
        ({"l": {"contains": 1}}, set()),
    ],
)
def test_booleans_are_not_numbers_in_any_operator(filters, expected):
    """Before, {"n": True} matched n=1 and {"n": 0} matched n=false (Python's
    True == 1), while {"n": {"gte": 1}} left true out."""
    assert typed(filters) == expected


@pytest.mark.parametrize(
    "filters, expected",
    [
        ({"l": {"contains": "x"}}, {"list", "one", "true"}),  # a list element is matched as a string is
        ({"l": {"contains": "X"}}, {"list", "one", "true"}),
        ({"tags": {"contains": "HEALTH"}}, {"list"}),
        ({"tags": {"contains": "heal"}}, set()),  # an element, not a part of one
        ({"l": {"eq": "X"}}, {"true"}),  # eq stays exact
    ],
)
def test_contains_ignores_case_on_a_list_element_as_on_a_string(filters, expected):
    """Before, {"l": {"contains": "x"}} matched the string "X" but not the list ["X"]."""
    assert typed(filters) == expected


def test_the_scope_ids_are_fields_and_metadata_dot_reaches_a_key_of_a_field_s_name():
    """``user_id`` was read as a metadata key (``{"user_id": "alex"}`` kept nothing,
    ``{"user_id": {"ne": "alex"}}`` kept Alex's), while ``agent_id`` and ``run_id``
    were fields; a metadata key named like a field is reached as ``metadata.KEY``."""
    bea = MemoryRecord(id="bea", scope=Scope(user_id="bea", agent_id="coach"), text="t", metadata={"tags": ["diet"], "user_id": "x"})
    records = [*ALL, bea]

    def kept(filters) -> set[str]:
        pred = compile_filters(filters)
        return {r.id for r in records if pred(r)}

    assert kept({"user_id": "alex"}) == {"food", "work", "bare"}
    assert kept({"user_id": {"ne": "alex"}}) == kept({"NOT": {"user_id": "alex"}}) == {"bea"}
    assert kept({"agent_id": "coach"}) == {"bea"}
    assert kept({"metadata.user_id": "x"}) == {"bea"}
    assert kept({"tags": "diet"}) == {"food"}  # the memory's own tags
    assert kept({"metadata.tags": "diet"}) == {"bea"}  # the metadata key of that name
