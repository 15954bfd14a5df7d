"""memorist.Client's importance and rollback against a live development server: a
reconciler UPDATE undone over HTTP, a second rollback a ConflictError."""

from __future__ import annotations

import pytest

from memorist import Client, ConflictError, NotFoundError, ValidationError


def test_importance_and_rollback_over_http(fresh) -> None:
    with Client(fresh.url) as client:
        added = client.add("I live in Berlin.", user_id="u", importance=0.4)["results"][0]
        changed = client.add("I live in Munich now.", user_id="u")["results"]
        assert [c["event"] for c in changed] == ["UPDATE"]
        seq = [e for e in client.events(user_id="u") if e["event"] == "UPDATE"][-1]["seq"]
        result = client.rollback(seq, user_id="u")
        assert result["restored"] == [added["id"]]
        assert client.get(added["id"], user_id="u")["memory"] == "Lives in Berlin"
        with pytest.raises(ConflictError, match="already rolled back"):
            client.rollback(str(seq), user_id="u")
        with pytest.raises(NotFoundError):
            client.rollback("consolidation-unknown", user_id="u")
        with pytest.raises(ValidationError) as info:
            client.add("Has a cat", user_id="u", importance=float("nan"))
        assert info.value.field == "importance"
        with pytest.raises(ValidationError):
            client.rollback(True, user_id="u")
