"""The quicker ways some filters are checked keep exactly the memories the general
way keeps: an ``eq``/``ne`` of a plain value is looked up as an ``in`` of it is, and
an OR whose branches compare one key with plain values is checked as one ``in``."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from memorist.policies import filters
from memorist.policies.filters import compile_filters

#: Values JSON and Python disagree on, or that meet in sets: 1 and 1.0 and True,
#: 0 and False and -0.0, None, text that casefolds, lists holding them, objects.
PLAIN = ["a", "A", "ß", "", "1", 0, 1, -1, 1.0, -0.0, 0.5, 2**63 - 1, 9.3e18, True, False, None]
STORED = [*PLAIN, [], ["a", 1], [True], [1.0, None], [["a"]], {"x": 1}, {}, [0, False]]
MISSING = object()


class _Record:
    def __init__(self, value: Any) -> None:
        self.metadata = {} if value is MISSING else {"k": value}


RECORDS = [_Record(v) for v in [*STORED, MISSING]]


def _general(op: str, value: Any):
    return filters._comparison(filters._getter("k"), op, value)


@given(st.sampled_from(["eq", "ne"]), st.sampled_from(PLAIN))
def test_eq_and_ne_of_a_plain_value_keep_what_the_general_comparison_keeps(op: str, value: Any) -> None:
    quick = compile_filters({"k": {op: value}})
    general = _general(op, value)
    assert [quick(r) for r in RECORDS] == [general(r) for r in RECORDS]  # type: ignore[misc,arg-type]


branch = st.one_of(
    st.sampled_from(PLAIN).map(lambda v: {"k": v}),
    st.sampled_from(PLAIN).map(lambda v: {"k": {"eq": v}}),
    st.lists(st.sampled_from(PLAIN), max_size=3).map(lambda vs: {"k": {"in": vs}}),
)


@settings(max_examples=300)
@given(st.lists(branch, min_size=1, max_size=6))
def test_an_or_of_one_keys_values_keeps_what_its_branches_keep(branches: list[dict[str, Any]]) -> None:
    quick = compile_filters({"OR": branches})
    assert quick is not None and quick.cost == filters.CONDITION + 1 + 2  # checked as one 'in'
    each = [compile_filters(b) for b in branches]
    assert [quick(r) for r in RECORDS] == [any(f(r) for f in each) for r in RECORDS]  # type: ignore[misc,arg-type]


def test_ors_that_are_not_one_keys_plain_values_are_checked_branch_by_branch() -> None:
    """An eq of a list compares the whole list (an 'in' of it would not), two
    operators in a branch must both hold, and other keys or operators stay theirs."""
    for flt in (
        {"OR": [{"k": ["a", 1]}, {"k": 1}]},
        {"OR": [{"k": {"eq": 1, "in": [1, 2]}}, {"k": 3}]},
        {"OR": [{"k": 1}, {"j": 1}]},
        {"OR": [{"k": 1}, {"k": {"ne": 2}}]},
        {"OR": [{"k": 1}, {"NOT": {"k": 2}}]},
    ):
        compiled = compile_filters(flt)
        assert compiled is not None and compiled.cost > filters.CONDITION + 1 + 2, flt
    whole = compile_filters({"OR": [{"k": ["a", 1]}, {"k": 7}]})
    assert whole is not None
    assert [r.metadata.get("k") for r in RECORDS if whole(r)] == [["a", 1]]  # type: ignore[arg-type]


def test_an_or_of_one_keys_values_is_narrowed_as_one_in() -> None:
    """40 branches weighed 81 as an OR of 40 (past the 64 a store checks) and were
    checked memory by memory; as one 'in' they are narrowed by the store. Values
    equal as JSON meet once; True is not 1."""
    found = filters.narrowing({"OR": [{"k": i} for i in range(40)]})
    assert found is not None and found.op == "in" and found.key == "k" and len(found.values) == 40
    mixed = filters.narrowing({"OR": [{"k": 1}, {"k": True}, {"k": 1.0}, {"k": {"in": ["1", False, 0]}}]})
    assert mixed is not None and mixed.op == "in"
    assert sorted((type(v) is bool, str(float(v)) if type(v) in (int, float) else v) for v in mixed.values) == [
        (False, "0.0"), (False, "1"), (False, "1.0"), (True, False), (True, True)]
    two_keys = filters.narrowing({"OR": [{"k": 1}, {"j": 1}]})
    assert two_keys is not None and two_keys.op == "any"
