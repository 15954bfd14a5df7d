"""The bars of long commands (import, reindex, bench locomo): the time left at the rate
since the first report, drawn on a terminal only."""

from __future__ import annotations

import re
import sys
import textwrap

import pytest

from memorist.cli.app import time_left
from terminal_helpers import run_in_terminal

# Three seconds of work before the first report (a benchmark loading its conversations),
# then 50 steps of 20 ms: about 0.7 s left when the first estimate shows. An estimate
# from the bar's own start would read about 6 s.
LEAD_IN = textwrap.dedent(
    """
    import time
    from memorist.cli.app import progress
    with progress("questions") as update:
        time.sleep(3.0)
        for i in range(1, 51):
            update(i, 50)
            time.sleep(0.02)
    print("done")
    """
)


def frames_of(code: str) -> list[str]:
    frames, out, code_ = run_in_terminal([sys.executable, "-c", code], timeout=60)
    assert code_ == 0 and out == "done\n", frames
    return frames


def test_work_before_the_first_report_does_not_count_in_the_rate() -> None:
    frames = frames_of(LEAD_IN)
    estimates = [float(m.group(1)) for f in frames if (m := re.search(r"(\d+\.\d) s left", f))]
    assert estimates, frames
    assert estimates[0] < 3.0, frames  # the rate of the steps, not of the lead-in
    assert "50/50" in frames[-1] and "left" not in frames[-1]


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(0.04, "0.0 s"), (0.74, "0.7 s"), (9.9, "9.9 s"), (9.96, "10 s"), (42.4, "42 s"), (59.6, "1 min 00 s"),
     (185, "3 min 05 s"), (3725, "1 h 02 min"), (-1, ""), (float("inf"), ""), (float("nan"), "")],
)
def test_a_bar_shows_tenths_under_ten_seconds_then_seconds_minutes_hours(seconds: float, shown: str) -> None:
    assert time_left(seconds) == shown
