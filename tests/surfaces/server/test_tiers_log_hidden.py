"""A maintenance run over the service says whether the server's maintenance log took it,
never where that file is (the health route words it the same way)."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("fastapi")

from memorist import Memory  # noqa: E402
from service_helpers import keyed_service  # noqa: E402

LOG = "the server's maintenance log"


@pytest.fixture
def energy_store(tmp_path) -> str:
    db = str(tmp_path / "tiers.db")
    Memory(db, embedder="hashing", policy="energy").close()
    return db


@pytest.mark.parametrize("test_only", [False, True])
def test_a_maintenance_run_does_not_show_the_server_s_path(energy_store: str, test_only: bool) -> None:
    folder = os.path.dirname(energy_store)
    with keyed_service(energy_store, {"tenant": ("t1", None), "alex": ("t1", "alex")}) as (client, headers):
        added = client.post("/api/memories/", json={"messages": "I like tea", "infer": False}, headers=headers["alex"])
        assert added.status_code == 200, added.text
        for key in ("tenant", "alex"):
            run = client.post("/api/tiers/maintain/", json={"test_only": test_only}, headers=headers[key])
            assert run.status_code == 200, run.text
            assert folder not in run.text
            assert run.json()["log"] == LOG
            health = client.get("/api/tiers/health/", headers=headers[key]).json()
            assert [c["detail"] for c in health["checks"] if c["check"] == "log"] == [f"runs are appended to {LOG}"]
    assert os.path.exists(f"{os.path.splitext(energy_store)[0]}.maintenance.log")  # the runs were logged there


def test_a_run_no_log_took_says_so(energy_store: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORIST_MAINTENANCE_LOG", "off")
    with keyed_service(energy_store, {"tenant": ("t1", None)}) as (client, headers):
        run = client.post("/api/tiers/maintain/", json={}, headers=headers["tenant"])
        assert run.status_code == 200, run.text
        assert run.json()["log"] is None
