"""query_trajectories' status: every status it accepts is named when it refuses one."""

from __future__ import annotations

import pytest

from memorist import Memory, ValidationError


def test_query_trajectories_names_every_status_it_takes(tmp_path) -> None:
    with Memory(str(tmp_path / "t.db"), embedder="hashing") as memory:
        running = memory.learning.start_trajectory("deploy", user_id="u")
        with pytest.raises(ValidationError) as info:
            memory.learning.query_trajectories(status="bogus", user_id="u")
        assert info.value.field == "status"
        assert str(info.value) == "status: must be one of success, failure, partial, running, got 'bogus'"
        for status in ("running", " Running "):  # read as the other statuses are
            assert [t["trajectory_id"] for t in memory.learning.query_trajectories(status=status, user_id="u")] == [running]
        with pytest.raises(ValidationError, match="must be one of success, failure, partial, got 'running'"):
            memory.learning.complete_trajectory(running, "running", user_id="u")  # a completion's outcome is not running
