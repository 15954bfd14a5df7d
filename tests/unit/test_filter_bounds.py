"""What one filter may cost: its conditions are counted while it compiles, its
checks while it runs, and both are bounded with an error naming ``filters``."""

from __future__ import annotations

import pytest

from memorist.errors import CancelledCallError, ValidationError
from memorist.policies import filters
from memorist.policies.filters import CONDITION, MAX_NODES, compile_filters
from memorist.work import Meter, charge, metered

#: A smaller budget than the real one (filters.MAX_CHECKS), so the tests stay fast.
MAX_CHECKS = 100_000


@pytest.fixture(autouse=True)
def small_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(filters, "MAX_CHECKS", MAX_CHECKS)


def test_a_filter_of_max_nodes_conditions_compiles_and_one_more_is_refused() -> None:
    ok = compile_filters({"OR": [{"cat": f"x{i}"} for i in range(MAX_NODES - 1)]})
    assert ok is not None and ok.nodes == MAX_NODES
    with pytest.raises(ValidationError) as err:
        compile_filters({"OR": [{"cat": f"x{i}"} for i in range(40_000)]})
    assert err.value.field == "filters" and f"{MAX_NODES:,} conditions" in str(err.value)


def test_list_values_count_as_conditions() -> None:
    with pytest.raises(ValidationError, match="more than 1,000 conditions"):
        compile_filters({"cat": {"in": [f"x{i}" for i in range(MAX_NODES + 1)]}})
    with pytest.raises(ValidationError, match="more than 1,000 conditions"):
        compile_filters({"AND": [{"NOT": {"cat": {"nin": list(range(100))}}} for _ in range(10)]})


def test_values_nested_in_a_filter_value_count_as_conditions() -> None:
    """Comparing a stored list of lists (or a mapping) with the filter's value walks as
    far as the value goes, so every value nested in it counts. Before, only the
    top-level items did: ``{"k": [[0.5] * 15000]}`` counted two, and 16 such
    conditions over 400 memories holding a like list cost 1.7 s of CPU charged as
    about 14,000 checks."""
    nested = [[0.5] * (MAX_NODES + 1)]
    for flt in (
        {"k": nested},
        {"k": {"eq": nested}},
        {"k": {"ne": {"a": [0.5] * (MAX_NODES + 1)}}},
        {"k": {"in": [[0.5] * 600, [0.5] * 600]}},
        {"k": {"contains": nested}},
        {"metadata.k": {"nin": [{"a": list(range(600))}, {"b": list(range(600))}]}},
    ):
        with pytest.raises(ValidationError, match="more than 1,000 conditions") as err:
            compile_filters(flt)
        assert err.value.field == "filters"
    small = compile_filters({"k": {"in": [[1, 2], {"a": [3, 4]}]}})
    assert small is not None and small.nodes == 1 + 2 + 2 + 1 + 2  # the condition, its two values, and what they hold


def test_the_checks_of_one_call_are_bounded() -> None:
    flt = compile_filters({"OR": [{f"cat{i}": "x"} for i in range(999)]})
    assert flt is not None
    # Each of 999 comparisons, the OR, and the memory itself.
    assert flt.cost == 999 * CONDITION + 1 + 2

    class Record:
        metadata = {"cat1": "y"}

    record = Record()
    for _ in range(MAX_CHECKS // flt.cost):
        assert flt(record) is False  # type: ignore[arg-type]
    with pytest.raises(ValidationError) as err:
        flt(record)  # type: ignore[arg-type]
    assert err.value.field == "filters" and f"{MAX_CHECKS:,} units, about a second of work" in str(err.value)


def test_what_a_condition_costs_follows_its_work() -> None:
    """Plain values of an 'in' are looked up at once; an OR of one key's plain
    values is checked as one 'in'; lists and mappings compared one by one cost what
    they hold. (The units were measured: ``bench/filter_cost.py``.)"""
    cost = {name: compile_filters(flt).cost for name, flt in {  # type: ignore[union-attr]
        "eq": {"k": 1},
        "in 900": {"k": {"in": list(range(900))}},
        "OR of 900 values of k": {"OR": [{"k": i} for i in range(900)]},
        "OR of eq and in of k": {"OR": [{"k": 1}, {"k": {"in": ["a", "b"]}}, {"k": {"eq": None}}]},
        "OR of two keys": {"OR": [{"k": 1}, {"j": 1}]},
        "in of two lists": {"k": {"in": [[1, 2], [3]]}},
        "eq of a list": {"k": [1, 2, 3]},
        "NOT": {"NOT": {"k": 1}},
    }.items()}
    one = CONDITION + 2
    assert cost["eq"] == cost["in 900"] == one
    assert cost["OR of 900 values of k"] == cost["OR of eq and in of k"] == one + 1
    assert cost["OR of two keys"] == 2 * CONDITION + 1 + 2
    assert cost["in of two lists"] == one + 2 * CONDITION + 3
    assert cost["eq of a list"] == one + 3
    assert cost["NOT"] == one + 1


def test_the_work_meter_counts_and_cancels() -> None:
    charge(5)  # no meter: nothing happens
    with metered() as meter:
        charge(3)
        charge(4)
        assert meter.units == 7
        meter.cancel()
        with pytest.raises(CancelledCallError):
            charge(1)
    outside = Meter()
    assert not outside.cancelled


class _Record:
    def __init__(self, **metadata: object) -> None:
        self.metadata = metadata


def _calls_until_refused(flt: object, record: object) -> int:
    calls = 0
    with pytest.raises(ValidationError, match="a long text or list more"):
        for _ in range(MAX_CHECKS + 1):
            flt(record)  # type: ignore[operator]
            calls += 1
    return calls


def test_long_values_count_as_several_checks() -> None:
    """Comparing with a long text or list is as much work as many short checks: a
    filter over memories whose values are long runs out of budget sooner."""
    within = {"OR": [{"big": {"contains": f"zz{i}"}} for i in range(99)]}  # 99 comparisons and an OR
    needles = sum(len(f"zz{i}") for i in range(99))  # 386 characters looked for
    short, long_text = _Record(big="x" * 255), _Record(big="x" * 256_000)
    per_memory = 99 * CONDITION + 1 + 2
    # and each text looked for in 255 characters: 255 x 386 steps, a unit per 1,024
    assert _calls_until_refused(compile_filters(within), short) == MAX_CHECKS // (per_memory + 255 * needles // 1024)
    # and 99 x 1,000 more (a unit per 256 characters, for each condition reading them)
    assert _calls_until_refused(compile_filters(within), long_text) == MAX_CHECKS // (
        per_memory + 99 * 1000 + 256_000 * needles // 1024)
    # an 'in' of 500 plain options over a list of 1,000 items: each item is looked up once
    by_tag = compile_filters({"big": {"in": list(range(500))}})
    assert _calls_until_refused(by_tag, _Record(big=list(range(1000)))) == MAX_CHECKS // (CONDITION + 2 + 1000)
    assert _calls_until_refused(compile_filters({"big": {"in": list(range(500))}}), _Record(big=7)) == MAX_CHECKS // (CONDITION + 2)
    # options that are lists are compared with each item one by one
    by_pairs = compile_filters({"big": {"in": [[i, i] for i in range(10)]}})
    per_pairs = CONDITION + 10 * (CONDITION + 2) + 2
    assert _calls_until_refused(by_pairs, _Record(big=list(range(1000)))) == MAX_CHECKS // (per_pairs + 11 * 1000)


def test_looking_for_a_long_text_counts_its_length() -> None:
    """Looking for a text of m characters in one of n costs up to n x m steps (Python's
    search, below 2,500 characters): "a" x 1,200 + "ba" in "a" x 2,499 took 0.2 ms a
    memory and was counted 15 units, so a call's budget bought 75 s of CPU. Among a
    list's texts, each is casefolded and compared whole: their length counts."""
    needle = "a" * 1200 + "ba"
    flt = compile_filters({"big": {"contains": needle}})
    assert _calls_until_refused(flt, _Record(big="a" * 2499)) == MAX_CHECKS // (CONDITION + 2 + 9 + 2499 * 1202 // 1024)
    # Above 2,500 characters the search is linear: at most 100 characters a step counted.
    flt = compile_filters({"big": {"contains": needle}})  # (a call's budget afresh)
    assert _calls_until_refused(flt, _Record(big="a" * 60_000)) == MAX_CHECKS // (CONDITION + 2 + 234 + 60_000 * 100 // 1024)
    words = compile_filters({"big": {"contains": "ß"}})
    listed = _Record(big=["ß" * 600] * 100)  # 100 items of 600 characters
    assert _calls_until_refused(words, listed) == MAX_CHECKS // (CONDITION + 2 + 100 + 60_000 // 256)


def test_the_budget_is_checked_before_the_check_that_would_exceed_it() -> None:
    flt = compile_filters({"big": {"contains": "needle"}})
    assert flt is not None
    huge = _Record(big="x" * (256 * (MAX_CHECKS + 1)))  # one check would cost more than the whole budget
    with pytest.raises(ValidationError):
        flt(huge)  # type: ignore[arg-type]
