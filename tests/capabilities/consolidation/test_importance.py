"""Importance on memories: given, derived, refused when it is no number from 0 to 1,
and carried by export and import, on both backends."""

from __future__ import annotations

import json
import math

import pytest

from memorist.errors import ImportLineError, ValidationError
from memorist.policies.consolidation import DEFAULT_IMPORTANCE


def importance(mem, user="u"):
    return {r["memory"]: mem.store.get(r["id"]).importance for r in mem.get_all(user_id=user)["results"]}


def test_a_given_importance_is_stored_and_a_verbatim_memory_without_one_has_the_default(mem) -> None:
    mem.add("Keeps the spare key under the blue pot", user_id="u", infer=False, importance=0.95)
    mem.add("Had pasta for lunch", user_id="u", infer=False)
    assert importance(mem) == {"Keeps the spare key under the blue pot": 0.95, "Had pasta for lunch": DEFAULT_IMPORTANCE}


def test_the_heuristic_extractor_weighs_health_above_preferences_above_passing_details(mem) -> None:
    mem.add("I'm allergic to penicillin. I like jazz. I am tired.", user_id="u")
    found = importance(mem)
    assert found["Allergic to penicillin"] >= 0.9
    assert found["Likes jazz"] < 0.5 and found["Is tired"] < found["Likes jazz"]


def test_the_caller_s_importance_wins_over_the_extractor_s(mem) -> None:
    mem.add("I like jazz.", user_id="u", importance=0.85)
    assert importance(mem) == {"Likes jazz": 0.85}


@pytest.mark.parametrize("bad", [1.5, -0.1, math.nan, math.inf, -math.inf, True, "0.5", [0.5]])
def test_an_importance_that_is_no_number_from_0_to_1_is_refused_and_nothing_is_stored(mem, bad) -> None:
    mem.add("Keeps bees", user_id="u", infer=False)
    before = list(mem.export(user_id="u", events=True))
    with pytest.raises(ValidationError) as info:
        mem.add("Plays chess on Fridays", user_id="u", infer=False, importance=bad)
    assert info.value.field == "importance" and "from 0 to 1" in str(info.value)
    assert list(mem.export(user_id="u", events=True)) == before


def test_export_carries_importance_and_import_restores_it_or_refuses_it_out_of_range(mem, backend) -> None:
    from memorist import Memory

    mem.add("Speaks Portuguese", user_id="u", infer=False, importance=0.7)
    lines = list(mem.export(user_id="u"))
    assert lines[0]["importance"] == 0.7
    with Memory(backend.fresh(), embedder="hashing") as other:
        assert other.import_(lines)["added"] == 1
        assert importance(other) == {"Speaks Portuguese": 0.7}
        bad = {**lines[0], "id": "another-id", "importance": 2}
        with pytest.raises(ImportLineError) as info:
            other.import_([json.dumps(bad)])
        assert "importance" in str(info.value) and "from 0 to 1" in str(info.value)
        other.import_([{"text": "Collects stamps", "user_id": "t", "infer": False, "importance": 0.2}])
        assert importance(other, "t") == {"Collects stamps": 0.2}
        legacy = {k: v for k, v in lines[0].items() if k != "importance"} | {"id": "old-line"}
        other.import_([legacy], user_id="w")
        assert other.store.get("old-line").importance == DEFAULT_IMPORTANCE
