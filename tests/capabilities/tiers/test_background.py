"""Maintenance and writers at once: no write is lost; the end of a conversation runs
maintenance in the background, one run at a time, coalescing requests; close waits."""

from __future__ import annotations

import threading
import time

from tiers_helpers import at, remember

from memorist.pipelines.tiers import RUN_OP, store_run_lock
from memorist.store.base import ScopeFilter


def _runs(m) -> list[dict]:
    return [e.payload for e in m.store.events(ScopeFilter("", "", ""), ops=(RUN_OP,))]


def test_writes_racing_with_maintenance_all_survive(opened):
    maintainer = opened()
    writer = opened()  # another connection to the same file, like another process
    editor = opened()
    originals = [remember(writer, f"Original insight number {i}", metadata={"type": "insight"}) for i in range(20)]
    errors: list[BaseException] = []
    added: list[tuple[str, str]] = []
    stop = threading.Event()

    def maintain() -> None:
        try:
            k = 0
            while not stop.is_set():
                k += 1
                maintainer.tiers.maintain(now=at(min(k, 50) * 0.01))  # up to half an hour: nothing expires
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    def add() -> None:
        try:
            for i in range(30):
                text = f"New note number {i} about the project"
                added.append((writer.add(text, user_id="alex", infer=False, timestamp=at(0))["results"][0]["id"], text))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    def edit() -> None:
        try:
            for i, mid in enumerate(originals):
                editor.update(mid, f"Edited insight number {i}", user_id="alex")
                editor.tiers.boost(mid, now=at(0.5))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=f) for f in (maintain, add, edit)]
    for t in threads[:1]:
        t.start()
    time.sleep(0.05)
    for t in threads[1:]:
        t.start()
    for t in threads[1:]:
        t.join()
    stop.set()
    threads[0].join()
    assert not errors, errors
    assert len(_runs(maintainer)) > 1  # maintenance really ran meanwhile
    final = maintainer.tiers.maintain(now=at(1))
    assert final["skipped"] == 0
    live = {r["memory"]: r for r in maintainer.get_all(user_id="alex", limit=1000)["results"]}
    # Every added memory is there with its content; every edit survived a promotion.
    for mid, text in added:
        assert text in live and maintainer.get(mid, user_id="alex")["memory"] == text
    for i, mid in enumerate(originals):
        assert maintainer.get(mid, user_id="alex")["memory"] == f"Edited insight number {i}"
    # One live copy per memory: a promotion never leaves the original active too.
    assert len(live) == len(maintainer.get_all(user_id="alex", limit=1000)["results"]) == 50
    # Each boost was applied once: every edited insight holds boost + start energy.
    boosted = [e for mid in originals for e in maintainer.history(mid, user_id="alex") if e["event"] == "BOOST"]
    assert len(boosted) == 20


def test_end_conversation_returns_at_once_and_coalesces(mem):
    remember(mem, "Had pasta for lunch")
    lock = store_run_lock(mem.store)
    lock.acquire()  # a run of another Memory of this store is in progress
    try:
        started = time.perf_counter()
        first = mem.tiers.end_conversation(user_id="alex", run_id="conv-1", now=at(1))
        assert time.perf_counter() - started < 0.5
        assert first["scheduled"] and not first["coalesced"]
        deadline = time.monotonic() + 5
        while not mem.tiers.engine.background.info()["running"] and time.monotonic() < deadline:
            time.sleep(0.01)
        second = mem.tiers.end_conversation(user_id="alex", now=at(2))  # waits behind the running one
        third = mem.tiers.end_conversation(user_id="alex", now=at(3))  # merged into the second
        assert second["running"] and not second["coalesced"]
        assert third["coalesced"]
        assert not mem.tiers.wait(timeout=0.2)  # still blocked
        assert mem.get_all(user_id="alex")["results"][0]["energy_at_last_decay"] == 1.0  # the caller was never blocked
    finally:
        lock.release()
    assert mem.tiers.wait(timeout=10)
    runs = [r for r in _runs(mem) if r["operation"] == "end_conversation"]
    assert len(runs) == 2  # three requests, two runs, none lost
    assert runs[0]["trigger"] == {"user_id": "alex", "run_id": "conv-1"}
    assert runs[-1]["now"].startswith("2026-01-01T03:00")  # the latest request's time
    assert mem.tiers.engine.background.info()["coalesced"] == 1


def test_close_waits_for_background_maintenance(opened):
    mem = opened()
    remember(mem, "Renew the TLS certificate", metadata={"type": "reminder"})
    lock = store_run_lock(mem.store)
    lock.acquire()
    releaser = threading.Timer(0.3, lock.release)
    releaser.start()
    mem.tiers.end_conversation(user_id="alex", now=at(1))
    mem.close()  # waits for the run, then closes the store
    releaser.join()
    again = opened()
    assert [r["operation"] for r in _runs(again)] == ["end_conversation"]
    assert again.get_all(user_id="alex")["results"][0]["energy"] < 2.5


def test_a_failed_background_run_is_reported_not_raised(mem, monkeypatch):
    remember(mem, "x")

    def broken(*args, **kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(mem.tiers.engine, "run", broken)
    mem.tiers.end_conversation(user_id="alex", now=at(1))
    assert mem.tiers.wait(timeout=10)
    assert "disk on fire" in mem.tiers.engine.background.info()["last_error"]
    checks = {c["check"]: c for c in mem.tiers.health(now=at(1))["checks"]}
    assert checks["last_run"]["status"] == "fail"
    monkeypatch.undo()
    mem.tiers.end_conversation(user_id="alex", now=at(1))  # the worker lives on
    assert mem.tiers.wait(timeout=10) and mem.tiers.engine.background.info()["runs"] == 1
