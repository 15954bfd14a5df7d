"""What one filter may cost: its conditions are counted while it compiles, its
checks while it runs, and both are bounded with an error naming ``filters``."""

from __future__ import annotations

import pytest

from memorist.errors import CancelledCallError, ValidationError
from memorist.policies.filters import MAX_CHECKS, MAX_NODES, compile_filters
from memorist.work import Meter, charge, metered


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


def test_the_checks_of_one_call_are_bounded() -> None:
    from memorist.model import MemoryRecord  # noqa: F401 (records are only passed through)

    flt = compile_filters({"OR": [{"cat": f"x{i}"} for i in range(999)]})
    assert flt is not None

    class Record:
        metadata = {"cat": "y"}

    record = Record()
    for _ in range(MAX_CHECKS // flt.nodes):
        assert flt(record) is False  # type: ignore[arg-type]
    with pytest.raises(ValidationError) as err:
        flt(record)  # type: ignore[arg-type]
    assert err.value.field == "filters" and "condition checks per call" in str(err.value)


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
