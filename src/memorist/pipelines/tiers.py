"""Maintain: the energy tiers over the store (decay, expire, promote), their
persisted configuration, test memories, the maintenance log and background runs.

The rules are :mod:`memorist.policies.energy`'s; this module applies them through the
store contract, every change with its event:

- **decay** (event ``decay``): a memory's energy becomes E0·e^(-λt), t the hours
  since its last decay, plus the use boosts it earned since (retrievals by search);
  the time of the decay is kept in its lineage (``last_decay``);
- **expire** (``expire``): energy strictly below ``expire_below``: the memory is
  archived with tier ``expired`` and a ``valid_to``: gone from retrieval, kept in the
  log (``history``);
- **promote** (``promote`` on the original, ``add`` of the new memory): energy
  strictly above its tier's threshold: a new memory of the next tier, linked
  (lineage ``promoted_from``), and the original archived with ``valid_to`` and
  ``promoted_to``. By-id calls on the original reach the promoted memory.

One run does all three together, decay first, not as three separate queries, in
transactions of at most :data:`RUN_CHUNK` memories (the last logs the run). It
re-reads every memory it changes inside its transaction and computes from what it
reads there, so a write that raced with it (an update, a boost, a delete) is never
overwritten, and two runs (two processes) never decay the same hours twice. At most
``decay_batch`` memories are decayed and ``promotion_batch`` promoted per run:
promotion candidates first, then the memories whose last decay is oldest.

**Time**: a run at ``now`` maintains the memories made at or before ``now``
(:func:`live_at`), and ``status`` and ``health`` count those. A boost, run or new
memory dated more than :data:`~memorist.validate.CLOCK_SKEW` ahead of this
machine's clock is refused (:func:`memorist.validate.not_ahead`); a last decay left that far ahead
before is counted as decayed up to the next run's or boost's ``now``
(:func:`decayed_ahead`).

**Test memories** (``add(..., test=True)`` or ``metadata={"is_test": True}``) live
in the tenant's *test space*: the tenant id followed by :data:`TEST_MARK`, a
control character no id may hold. Every read of the engine filters by tenant, so
no search, listing, count or normal run can see them, and a ``test_only`` run sees
nothing else.

The configuration (:class:`~memorist.policies.energy.EnergyConfig`) is the latest
``tiers_config`` event of the tenant's space (``""`` user and agent) in the log: it
works on every backend, and its changes have a history.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import validate
from ..embed.base import Embedder
from ..errors import ConfigurationError, NotFoundError, StoreError, ValidationError
from ..model import EventRecord, MemoryRecord, Scope, Status, Tier, from_epoch, is_fact, new_id
from ..policies.energy import HOUR, LIVE_TIERS, EnergyConfig, current_energy, next_tier, start_energy
from ..store.base import ScopeFilter, Store
from ..validate import CLOCK_SKEW
from ..work import charge

logger = logging.getLogger("memorist.tiers")

#: What follows a tenant id to name its test space (a control character: no
#: tenant id, user id or API key's tenant can hold it).
TEST_MARK = "\x1ftest"
CONFIG_OP = "tiers_config"
RUN_OP = "maintenance"
#: How many of the latest runs one owner's status looks through for one that reached it.
OWNER_RUNS = 1000
#: How many results a run's log line and event carry.
LOGGED_RESULTS = 3
#: The most memories one transaction of a run changes (see the module's docstring).
RUN_CHUNK = 1_000
#: How far by-id calls follow ``promoted_to`` links.
MAX_HOPS = 16


def test_tenant(tenant_id: str) -> str:
    """The tenant id of ``tenant_id``'s test space."""
    return tenant_id + TEST_MARK


def is_test_scope(scope: Scope) -> bool:
    return scope.tenant_id.endswith(TEST_MARK)


def real_tenant(tenant_id: str) -> str:
    return tenant_id[: -len(TEST_MARK)] if tenant_id.endswith(TEST_MARK) else tenant_id


def last_decay(record: MemoryRecord) -> float:
    """When the memory's energy was last decayed (at first: when it was created)."""
    value = record.lineage.get("last_decay")
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return record.created_at


def decayed_ahead(record: MemoryRecord, now: float, clock: float | None = None) -> bool:
    """Whether the memory's last decay lies after ``now`` and more than
    :data:`CLOCK_SKEW` ahead of ``clock`` (this machine's): a time that has not come,
    left by a boost or run dated in the future before those were refused. A run or
    boost at ``now`` counts such a memory as decayed up to ``now`` (its energy as
    stored, its later decays from ``now``), where one dated before the last decay
    otherwise leaves it alone: else it would not decay until that time came."""
    last = last_decay(record)
    return last > now and last > (time.time() if clock is None else clock) + CLOCK_SKEW


def decayed_to(record: MemoryRecord, now: float, clock: float | None = None) -> float:
    """The last decay a run or boost at ``now`` leaves the memory: ``now``, or its
    last decay if later (a run dated before it does not undo it), unless that one
    has not come yet (:func:`decayed_ahead`)."""
    return now if decayed_ahead(record, now, clock) else max(now, last_decay(record))


def pending_uses(record: MemoryRecord) -> int:
    """Retrievals since the last decay or boost counted them (memories older than the
    energy policy count from their first maintenance run)."""
    counted = record.lineage.get("uses_counted")
    if not isinstance(counted, int) or isinstance(counted, bool):
        return 0
    return max(0, record.access_count - counted)


def energy_now(record: MemoryRecord, now: float, config: EnergyConfig) -> tuple[float, float, int]:
    """``(energy, hours, uses)``: the memory's energy at ``now``, the hours decayed
    (0 when ``now`` is before its last decay) and the use boosts added."""
    hours = max(0.0, (now - last_decay(record)) / HOUR)
    uses = pending_uses(record)
    return current_energy(record.energy, hours, record.tier, config, uses=uses), hours, uses


def live_at(records: Iterable[MemoryRecord], now: float) -> list[MemoryRecord]:
    """The memories live at ``now``: made at or before it and not yet ended
    (``valid_to``). What a run at ``now`` maintains, and ``status`` and ``health``
    count: a memory made later did not exist yet."""
    return [r for r in records if r.created_at <= now and (r.valid_to is None or r.valid_to > now)]


def _made_by(records: Iterable[MemoryRecord], now: float) -> list[MemoryRecord]:
    return [r for r in records if r.created_at <= now]


def _bookkept(record: MemoryRecord, now: float, **lineage: Any) -> dict[str, Any]:
    return {**record.lineage, "last_decay": decayed_to(record, now), "uses_counted": record.access_count, **lineage}


def tier_item(record: MemoryRecord, score: float | None = None, *, now: float | None = None,
              config: EnergyConfig | None = None) -> dict[str, Any]:
    """The public item of a memory under the energy policy: Memory's item with its
    ``energy`` and ``tier`` (and ``is_test`` for a test memory). With ``now`` and
    ``config``, ``energy`` is the memory's at ``now`` (decayed since its last decay,
    with the use boosts earned since), as ``status`` reports it; else the stored one.
    ``energy_at_last_decay`` and ``last_decay`` are what the last run or boost left."""
    item = record.to_item(score)
    energy = record.energy
    if now is not None and config is not None and record.tier in LIVE_TIERS and record.status is Status.ACTIVE:
        energy = energy_now(record, now, config)[0]
    item["energy"] = round(float(energy), 6)
    # What the last decay (a run or a boost) left, and when: the energy above follows from them.
    item["energy_at_last_decay"] = round(float(record.energy), 6)
    item["last_decay"] = _iso(last_decay(record))
    item["tier"] = record.tier.value
    if is_test_scope(record.scope):
        tenant = real_tenant(record.scope.tenant_id)
        if tenant:
            item["tenant_id"] = tenant
        else:
            item.pop("tenant_id", None)
        item["is_test"] = True
    if "promoted_from" in record.lineage:
        item["promoted_from"] = record.lineage["promoted_from"]
    return item


def _iso(epoch: float) -> str:
    return from_epoch(epoch).isoformat()


def _not_ahead(created_at: float) -> None:
    validate.not_ahead("timestamp", _iso(created_at), created_at,
                       "under the energy policy a memory decays from when it was made, and runs dated before then leave it alone")


def append_log(path: str | None, entry: dict[str, Any]) -> bool:
    """Append ``entry`` as one JSON line to ``path``. Never raises: a log that cannot
    be written is reported (a warning, and False), the run it describes stands."""
    if not path:
        return False
    try:
        folder = os.path.dirname(os.path.abspath(path))
        os.makedirs(folder, exist_ok=True)
        line = json.dumps(entry, ensure_ascii=False, default=str, separators=(",", ":")) + "\n"
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(line)
        return True
    except Exception as exc:  # noqa: BLE001 - whatever the cause, the run is not failed
        logger.warning("memorist: could not write the maintenance log %s: %s", path, exc)
        return False


# the plan of a run -------------------------------------------------------------------------
@dataclass(slots=True)
class Plan:
    """Which memories a run changes: ids to promote, ids to decay (promotions
    included), and how many due memories are left for later runs."""

    promote: list[str] = field(default_factory=list)
    decay: list[str] = field(default_factory=list)
    pending: int = 0


def plan_run(records: Sequence[MemoryRecord], now: float, config: EnergyConfig, *, clock: float | None = None) -> Plan:
    """Choose what one run may change, within the batch sizes.

    Promotion candidates (energy now strictly above their tier's threshold) come
    first, highest energy first, at most ``promotion_batch``; then the memories
    that need a decay (time passed or retrievals since, or a last decay that has
    not come yet: :func:`decayed_ahead`, ``clock`` this machine's time) or an
    expiry, oldest last decay first, until ``decay_batch`` memories are chosen in all.
    """
    clock = time.time() if clock is None else clock
    current: dict[str, tuple[float, float, int]] = {}
    candidates = []
    due = []
    for r in records:
        if r.tier not in LIVE_TIERS:
            continue
        energy, hours, uses = current[r.id] = energy_now(r, now, config)
        if config.promotes(r.tier, energy):
            candidates.append(r)
        elif hours > 0 or uses > 0 or config.expires(energy) or decayed_ahead(r, now, clock):
            due.append(r)
    candidates.sort(key=lambda r: (-current[r.id][0], r.created_at, r.id))
    promote = candidates[: min(config.promotion_batch, config.decay_batch)]
    # Candidates left over wait for the next run's promotion (decayed meanwhile if they need it).
    left_over = candidates[len(promote):]
    due.extend(r for r in left_over if current[r.id][1] > 0 or current[r.id][2] > 0 or decayed_ahead(r, now, clock))
    # A last decay that has not come yet counts as ``now`` (not last, behind every other).
    due.sort(key=lambda r: (now if decayed_ahead(r, now, clock) else last_decay(r), r.created_at, r.id))
    room = config.decay_batch - len(promote)
    chosen = due[:room]
    waiting = {r.id for r in left_over} | {r.id for r in due[room:]}
    return Plan(
        promote=[r.id for r in promote],
        decay=[r.id for r in promote] + [r.id for r in chosen],
        pending=len(waiting),
    )


# background runs ----------------------------------------------------------------------------
_STORE_LOCKS: dict[Any, threading.Lock] = {}
_STORE_LOCKS_GUARD = threading.Lock()


def store_run_lock(store: Store) -> threading.Lock:
    """The lock that keeps runs on one store one at a time in this process (every
    Memory of the same file or database shares it)."""
    path = getattr(store, "path", None)
    key: Any = path if isinstance(path, str) and path != ":memory:" else ("object", id(store))
    with _STORE_LOCKS_GUARD:
        lock = _STORE_LOCKS.get(key)
        if lock is None:
            lock = _STORE_LOCKS[key] = threading.Lock()
        return lock


class BackgroundRuns:
    """Maintenance requested by the end of conversations, run in one worker thread.

    A request returns at once. At most one run at a time; a request for a scope
    that already waits is merged into it (coalesced), one for a scope being run
    waits for that run to end and runs after it, so none is lost. :meth:`close`
    takes no new request and waits until every accepted one has run.
    """

    def __init__(self, run: Callable[[ScopeFilter, float | None, dict[str, Any]], dict[str, Any]]) -> None:
        self._run = run
        self._cond = threading.Condition()
        self._pending: dict[tuple[Any, ...], tuple[ScopeFilter, float | None, dict[str, Any]]] = {}
        self._running: tuple[Any, ...] | None = None
        self._thread: threading.Thread | None = None
        self._closed = False
        self.runs = 0
        self.failures = 0
        self.coalesced = 0
        self.last: dict[str, Any] | None = None
        self.last_error: str | None = None

    def request(self, scope: ScopeFilter, now: float | None, trigger: dict[str, Any]) -> dict[str, Any]:
        key = (scope.tenant_id, scope.user_id, scope.agent_id, scope.run_id)
        with self._cond:
            if self._closed:
                raise StoreError("this Memory is closed: no maintenance can be scheduled")
            coalesced = key in self._pending
            if coalesced:
                self.coalesced += 1
                _, earlier, _ = self._pending[key]
                if now is not None and earlier is not None:
                    now = max(now, earlier)
            self._pending[key] = (scope, now, trigger)
            running = self._running is not None
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="memorist-maintenance", daemon=True)
                self._thread.start()
            return {"scheduled": True, "coalesced": coalesced, "running": running, "waiting": len(self._pending)}

    def _work(self) -> None:
        while True:
            with self._cond:
                if not self._pending:
                    self._thread = None
                    self._cond.notify_all()
                    return
                key = next(iter(self._pending))
                scope, now, trigger = self._pending.pop(key)
                self._running = key
            try:
                result = self._run(scope, now, trigger)
                with self._cond:
                    self.runs += 1
                    self.last = result
            except Exception as exc:  # noqa: BLE001 - a failed run must not kill the worker
                logger.warning("memorist: background maintenance failed: %s", exc, exc_info=exc)
                with self._cond:
                    self.failures += 1
                    self.last_error = f"{type(exc).__name__}: {exc}"
            finally:
                with self._cond:
                    self._running = None
                    self._cond.notify_all()

    def busy(self) -> bool:
        with self._cond:
            return self._thread is not None

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until no run is running or waiting; False if ``timeout`` ran out."""
        with self._cond:
            if self._thread is threading.current_thread():
                return False
            return self._cond.wait_for(lambda: self._thread is None and not self._pending, timeout)

    def close(self, timeout: float | None = None) -> bool:
        with self._cond:
            self._closed = True
        return self.wait(timeout)

    def info(self) -> dict[str, Any]:
        with self._cond:
            return {
                "running": self._running is not None,
                "waiting": len(self._pending),
                "runs": self.runs,
                "failures": self.failures,
                "coalesced": self.coalesced,
                "last_error": self.last_error,
            }


# the engine ---------------------------------------------------------------------------------
class EnergyTiers:
    """The energy tiers over one store, for one tenant (and its test space)."""

    def __init__(self, store: Store, tenant_id: str, embedder: Callable[[], Embedder], *, log_path: str | None = None) -> None:
        self.store = store
        self.tenant_id = tenant_id
        self.test_tenant = test_tenant(tenant_id)
        self._embedder = embedder
        self.log_path = log_path
        self._lock = threading.Lock()
        self._config = EnergyConfig()
        self._config_event: EventRecord | None = None
        self._config_error: str | None = None
        self._config_seq = 0
        self._run_seq = 0
        self._last_run: dict[Any, EventRecord] = {}
        self.background = BackgroundRuns(self._background_run)

    # configuration ----------------------------------------------------------------------
    def _config_scope(self) -> ScopeFilter:
        return ScopeFilter(self.tenant_id, "", "")

    def _refresh_config(self) -> None:
        """Read configuration events written since the last look (any process's)."""
        with self._lock:
            # Only the latest counts: read from the end of the log, not every change since.
            events = self.store.events(self._config_scope(), since=self._config_seq, ops=(CONFIG_OP,), limit=1, newest_first=True)
            for event in events:
                self._config_seq = max(self._config_seq, event.seq)
                try:
                    self._config = EnergyConfig.from_mapping(event.payload.get("config") or {})
                    self._config_error = None
                except ValidationError as exc:
                    self._config_error = f"the persisted configuration (event {event.seq}) cannot work: {exc}"
                self._config_event = event

    def config(self) -> EnergyConfig:
        """The configuration in force: the store's latest, else the defaults.
        A persisted configuration that cannot work is a :class:`ConfigurationError`."""
        self._refresh_config()
        if self._config_error is not None:
            raise ConfigurationError(self._config_error + "; fix it with `memorist tiers config --set`")
        return self._config

    def config_info(self) -> dict[str, Any]:
        self._refresh_config()
        event = self._config_event
        return {
            "config": self._config.to_dict(),
            "persisted": event is not None,
            "seq": event.seq if event is not None else None,
            "changed_at": _iso(event.ts) if event is not None else None,
            "problem": self._config_error,
        }

    def set_config(self, changes: dict[str, Any] | None, *, reset: bool = False, actor: str = "") -> dict[str, Any]:
        """Apply ``changes`` (``reset``: from the defaults), check and persist."""
        self._refresh_config()
        base = EnergyConfig() if reset or self._config_error is not None else self._config
        config = base.with_changes(changes or {})
        with self.store.transaction() as batch:
            batch.event(CONFIG_OP, Scope(self.tenant_id), actor=actor, payload={"config": config.to_dict(), "changes": dict(changes or {}), "reset": reset})
        return self.config_info()

    def _persist_if_missing(self, batch: Any, config: EnergyConfig) -> None:
        if self._config_event is None:
            batch.event(CONFIG_OP, Scope(self.tenant_id), payload={"config": config.to_dict(), "changes": {}, "reason": "first maintenance run"})

    # new memories -----------------------------------------------------------------------
    def prepare(self, record: MemoryRecord, *, sources: Sequence[MemoryRecord] = (), now: float | None = None) -> None:
        """Give a new memory its start energy and tier (the ingest hook). Uses the
        configuration as last read (:meth:`check_start`, called by every add, reads
        the store's latest): one read per add, not one per memory.

        A memory merged from ``sources`` (a consolidation, at ``now``) is no new
        memory: it keeps their state. Its energy is the highest any source has at
        ``now`` (decayed since its last decay, with the use boosts it earned), its
        tier the highest of theirs, and it is decayed to ``now`` (``last_decay``, its
        retrievals counted): never weaker, nor decaying faster, than its strongest
        source, and not decayed again over the hours its sources already were.

        A new memory dated more than :data:`CLOCK_SKEW` ahead of this machine's clock
        (``timestamp``) is refused: it would decay only from then on."""
        if sources:
            at = time.time() if now is None else now
            config = self.shown_config() or self._config  # a configuration that cannot work: as last read
            record.energy = max(energy_now(s, at, config)[0] for s in sources)
            live = [s.tier for s in sources if s.tier in LIVE_TIERS]
            record.tier = max(live, key=LIVE_TIERS.index) if live else Tier.WORKING
            record.lineage["last_decay"] = max(at, *(last_decay(s) for s in sources))
            record.lineage["uses_counted"] = record.access_count
            return
        _not_ahead(record.created_at)
        energy, tier = start_energy(record.metadata, self._config)
        record.energy = energy
        record.tier = tier
        record.lineage.setdefault("uses_counted", record.access_count)

    def shown_config(self) -> EnergyConfig | None:
        """The configuration items show energies with (None: a persisted one that
        cannot work, then items show the stored energy rather than fail a read)."""
        try:
            return self.config()
        except ConfigurationError:
            return None

    def check_start(self, metadata: dict[str, Any], at: float | None = None) -> None:
        """Refuse, before anything is extracted or written, a new memory :meth:`prepare`
        would refuse: a start energy or tier that cannot work, or one dated ``at``
        too far ahead."""
        start_energy(metadata, self.config())
        if at is not None:
            _not_ahead(at)

    # by id ------------------------------------------------------------------------------
    def _owned(self, record: MemoryRecord | None, owner: ScopeFilter) -> bool:
        if record is None or record.scope.tenant_id not in (self.tenant_id, self.test_tenant):
            return False
        return ScopeFilter(record.scope.tenant_id, owner.user_id, owner.agent_id, owner.run_id).matches(record.scope)

    def boost(self, memory_id: str, amount: float, now: float, owner: ScopeFilter, *, actor: str = "") -> MemoryRecord:
        """Add ``amount`` to a memory's energy at ``now`` (after decaying it to
        ``now``). An id promoted since reaches its promoted memory. Read and written
        in one transaction: a concurrent run or boost is never undone. A ``now``
        before the memory existed is refused (a run dated then leaves it alone)."""
        config = self.config()
        with self.store.transaction() as batch:
            record = batch.get_many([memory_id]).get(memory_id)
            for _ in range(MAX_HOPS):
                target = record.lineage.get("promoted_to") if record is not None and record.status is Status.ARCHIVED else None
                if not isinstance(target, str):
                    break
                record = batch.get_many([target]).get(target)
            if not self._owned(record, owner) or record is None or not is_fact(record):
                raise NotFoundError("memory", memory_id)
            if record.status is not Status.ACTIVE or record.tier not in LIVE_TIERS:
                raise NotFoundError("memory", memory_id)  # expired (or deleted): as get answers
            if now < record.created_at:  # as a run dated then leaves it alone
                raise ValidationError(
                    "now", f"{_iso(now)} is before memory {memory_id} existed ({_iso(record.created_at)}); "
                    "a boost is dated at or after the memory's creation",
                )
            energy, hours, uses = energy_now(record, now, config)
            boosted = record.copy(energy=energy + amount, lineage=_bookkept(record, now))
            batch.update(
                boosted, None, old_text=record.text, op="boost", actor=actor,
                payload={"amount": amount, "energy_before": record.energy, "decayed": round(energy, 9), "energy": boosted.energy,
                         "hours": round(hours, 6), "uses": uses, "now": _iso(now)},
            )
        return boosted

    # runs -------------------------------------------------------------------------------
    def scope_for(self, *, test_only: bool, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None) -> ScopeFilter:
        return ScopeFilter(self.test_tenant if test_only else self.tenant_id, user_id, agent_id, run_id)

    def _background_run(self, scope: ScopeFilter, now: float | None, trigger: dict[str, Any]) -> dict[str, Any]:
        return self.run(scope, now=time.time() if now is None else now, operation="end_conversation", trigger=trigger)

    def run(self, scope: ScopeFilter, *, now: float, operation: str = "maintain", trigger: dict[str, Any] | None = None,
            actor: str = "") -> dict[str, Any]:
        """One maintenance run over ``scope`` at ``now``: decay, expire, promote.

        Returns the counts (``memories``, ``decayed``, ``expired``, ``promoted``,
        ``promoted_to_short_term``, ``promoted_to_long_term``, ``use_boosted``,
        ``pending``, ``skipped``) with the run's id, time, scope and ``results``
        (one per changed memory).
        """
        config = self.config()
        test_only = scope.tenant_id == self.test_tenant
        with store_run_lock(self.store):
            started = time.perf_counter()
            run_id = uuid.uuid4().hex[:12]
            self.store.flush()  # buffered retrievals count as uses in the plan too
            # A run dated before a memory existed leaves it alone: no decay, expiry or
            # promotion of what did not exist yet at ``now``.
            records = live_at(self._records(scope.tenant_id, scope=scope), now)
            plan = plan_run(records, now, config)
            by_id = {r.id: r for r in records}
            vectors = self._vectors([by_id[i] for i in plan.promote])
            counts = {"memories": len(records), "decayed": 0, "expired": 0, "promoted": 0, "promoted_to_short_term": 0,
                      "promoted_to_long_term": 0, "use_boosted": 0, "pending": plan.pending, "skipped": 0}
            results: list[dict[str, Any]] = []
            promote = set(plan.promote)
            # Spaces in a fixed order: a backend that locks per space locks in that order.
            order = sorted(plan.decay, key=lambda i: (by_id[i].scope.space, i))
            # RUN_CHUNK memories a transaction: one for a run of a million decays held
            # every other write of the store (every tenant's, on SQLite) for 13 s.
            chunks = [order[i : i + RUN_CHUNK] for i in range(0, len(order), RUN_CHUNK)] or [[]]
            for n, chunk in enumerate(chunks):
                with self.store.transaction() as batch:
                    if n == 0:
                        self._persist_if_missing(batch, config)
                    self._apply_chunk(batch, chunk, now, config, run_id, actor, vectors, promote, counts, results)
                    if n == len(chunks) - 1:
                        summary = self._log_run(batch, scope, run_id, operation, now, test_only, counts, results, trigger, actor)
            seconds = round(time.perf_counter() - started, 6)
        logged = append_log(self.log_path, {"timestamp": _iso(time.time()), **summary, "seconds": seconds})
        return {
            "run": run_id,
            "operation": operation,
            "now": _iso(now),
            "test_only": test_only,
            "scopes": summary["scopes"],
            **counts,
            "results": results,
            "seconds": seconds,
            "log": self.log_path if logged else None,
        }

    def _apply_chunk(self, batch: Any, chunk: list[str], now: float, config: EnergyConfig, run_id: str, actor: str,
                     vectors: dict[str, tuple[str, np.ndarray]], promote: set[str], counts: dict[str, int],
                     results: list[dict[str, Any]]) -> None:
        """Decay, expire and promote the memories of ``chunk``, each as read inside
        the transaction (a write that raced with the run is never overwritten)."""
        fresh = batch.get_many(chunk) if chunk else {}
        for mid in chunk:
            record = fresh.get(mid)
            if record is None or record.status is not Status.ACTIVE or not is_fact(record) or record.tier not in LIVE_TIERS:
                counts["skipped"] += 1  # deleted, archived or promoted meanwhile
                continue
            result = self._apply(batch, record, now, config, run_id, actor, vectors.get(mid) if mid in promote else None)
            if result is None:
                continue
            results.append(result)
            action = result["action"]
            counts["decayed"] += 1 if result["hours"] > 0 or result["uses"] > 0 or "last_decay_was" in result else 0
            counts["use_boosted"] += 1 if result["uses"] > 0 else 0
            if action == "expire":
                counts["expired"] += 1
            elif action == "promote":
                counts["promoted"] += 1
                counts[f"promoted_to_{result['to_tier']}"] += 1

    def _log_run(self, batch: Any, scope: ScopeFilter, run_id: str, operation: str, now: float, test_only: bool,
                 counts: dict[str, int], results: list[dict[str, Any]], trigger: dict[str, Any] | None,
                 actor: str) -> dict[str, Any]:
        """Log the run's summary (in its last transaction) and return it."""
        scopes = {
            "tenant_id": real_tenant(scope.tenant_id) or None,
            "user_id": scope.user_id,
            "agent_id": scope.agent_id,
            "run_id": scope.run_id,
        }
        summary = {
            "run": run_id,
            "operation": operation,
            "now": _iso(now),
            "test_only": test_only,
            "scopes": scopes,
            "counts": counts,
            "results": results[:LOGGED_RESULTS],
            **({"trigger": trigger} if trigger else {}),
        }
        batch.event(RUN_OP, Scope(scope.tenant_id), actor=actor, payload=summary)
        return summary

    def _vectors(self, records: Sequence[MemoryRecord]) -> dict[str, tuple[str, np.ndarray]]:
        """Embeddings for the memories to promote (the new memory needs its own):
        of the text their stored vector was made from."""
        if not records:
            return {}
        keys = [r.search_text or r.text for r in records]
        vectors = self._embedder().embed(keys)
        return {r.id: (keys[i], vectors[i]) for i, r in enumerate(records)}

    def _apply(self, batch: Any, record: MemoryRecord, now: float, config: EnergyConfig, run_id: str, actor: str,
               vector: tuple[str, np.ndarray] | None) -> dict[str, Any] | None:
        energy, hours, uses = energy_now(record, now, config)
        base = {"id": record.id, "tier": record.tier.value, "energy_before": round(record.energy, 6), "energy": round(energy, 6),
                "hours": round(hours, 6), "uses": uses}
        ahead = decayed_ahead(record, now)
        if ahead:  # counted as decayed up to now: its next decays count from now, not from then
            base["last_decay_was"] = _iso(last_decay(record))
        payload = {**base, "run": run_id, "now": _iso(now)}
        key_matches = vector is not None and vector[0] == (record.search_text or record.text)
        target = next_tier(record.tier)
        if vector is not None and key_matches and target is not None and config.promotes(record.tier, energy):
            promoted = record.copy(
                id=new_id(),
                tier=target,
                energy=energy,
                valid_to=None,
                metadata=dict(record.metadata),
                tags=list(record.tags),
                strengths=dict(record.strengths),
                last_access=dict(record.last_access),
                lineage={
                    **{k: v for k, v in record.lineage.items() if k not in ("promoted_to", "archived_at")},
                    "promoted_from": record.id,
                    "promoted_at": now,
                    "last_decay": decayed_to(record, now),
                    "uses_counted": record.access_count,
                },
            )
            archived = record.copy(status=Status.ARCHIVED, valid_to=now, energy=energy,
                                   lineage=_bookkept(record, now, promoted_to=promoted.id, archived_at=now))
            batch.update(archived, None, old_text=record.text, op="promote", actor=actor,
                         payload={**payload, "promoted_to": promoted.id, "to_tier": target.value})
            batch.add(promoted, vector[1], actor=actor,
                      payload={"reason": "promoted", "promoted_from": record.id, "from_tier": record.tier.value, "to_tier": target.value,
                               "run": run_id})
            return {**base, "action": "promote", "to_tier": target.value, "promoted_to": promoted.id}
        if config.expires(energy):
            expired = record.copy(status=Status.ARCHIVED, tier=Tier.EXPIRED, valid_to=now, energy=energy,
                                  lineage=_bookkept(record, now, expired_at=now, expired_from=record.tier.value))
            batch.update(expired, None, old_text=record.text, op="expire", actor=actor, payload=payload)
            return {**base, "action": "expire"}
        if hours <= 0 and uses <= 0 and not ahead:
            return None
        decayed = record.copy(energy=energy, lineage=_bookkept(record, now))
        batch.update(decayed, None, old_text=record.text, op="decay", actor=actor, payload=payload)
        return {**base, "action": "decay"}

    # reads ------------------------------------------------------------------------------
    def last_run(self, *, test_only: bool = False, owner: ScopeFilter | None = None) -> EventRecord | None:
        """The latest maintenance run of the tenant (or its test space) in the log;
        with ``owner``, the latest that could reach its memories (a run of the whole
        tenant, or of scopes sharing its ids), among the last :data:`OWNER_RUNS`: one
        user is not told of another's runs."""
        tenant = self.test_tenant if test_only else self.tenant_id
        if owner is not None:
            runs = self.store.events(ScopeFilter(tenant, "", ""), ops=(RUN_OP,), limit=OWNER_RUNS, newest_first=True)
            return next((e for e in runs if _reaches(e.payload.get("scopes"), owner)), None)
        with self._lock:
            events = self.store.events(ScopeFilter(tenant, "", ""), since=self._run_seq_for(tenant), ops=(RUN_OP,),
                                       limit=1, newest_first=True)
            if events:
                self._last_run[tenant] = events[0]
            return self._last_run.get(tenant)

    def _run_seq_for(self, tenant: str) -> int:
        event = self._last_run.get(tenant)
        return event.seq if event is not None else 0

    def _records(self, tenant: str, status: Status = Status.ACTIVE, scope: ScopeFilter | None = None) -> list[MemoryRecord]:
        where = scope if scope is not None else ScopeFilter(tenant)
        records = self.store.list(where, status=status)
        # Each memory read counts on the call's meter: a service charges a status or
        # health of a large tenant as what it costs (over a second at 100,000).
        charge(len(records))
        return [r for r in records if is_fact(r)]

    def _within(self, tenant: str, owner: ScopeFilter | None) -> ScopeFilter:
        """The tenant's (or test space's) memories, narrowed to ``owner``'s ids if given."""
        if owner is None:
            return ScopeFilter(tenant)
        return ScopeFilter(tenant, owner.user_id, owner.agent_id, owner.run_id)

    def status(self, *, now: float, test_only: bool = False, owner: ScopeFilter | None = None) -> dict[str, Any]:
        """The distribution of memories over the tiers (counts and energies): the
        tenant's, or only ``owner``'s (its user/agent/run ids). With ``owner``, the
        last run is told without its counts and the background runs without their
        figures (both are of the whole tenant), as :meth:`health` tells them."""
        tenant = self.test_tenant if test_only else self.tenant_id
        config = self.config()
        self.store.flush()  # buffered retrievals count in the energies, as a run counts them
        # As of ``now``: a memory made later is not counted, as a run then leaves it alone.
        active = live_at(self._records(tenant, scope=self._within(tenant, owner)), now)
        archived = _made_by(self._records(tenant, Status.ARCHIVED, scope=self._within(tenant, owner)), now)
        tiers: dict[str, dict[str, Any]] = {}
        for tier in LIVE_TIERS:
            energies = [energy_now(r, now, config)[0] for r in active if r.tier is tier]
            tiers[tier.value] = {
                "count": len(energies),
                "energy_mean": round(sum(energies) / len(energies), 6) if energies else None,
                "energy_min": round(min(energies), 6) if energies else None,
                "energy_max": round(max(energies), 6) if energies else None,
            }
        expired = sum(1 for r in archived if r.tier is Tier.EXPIRED)
        out: dict[str, Any] = {
            "now": _iso(now),
            "test_only": test_only,
            "tiers": tiers,
            "total": len(active),
            "archived": len(archived) - expired,
            "expired": expired,
        }
        if not test_only:
            out["test_memories"] = len(_made_by(self._records(self.test_tenant, scope=self._within(self.test_tenant, owner)), now))
        run = _run_summary(self.last_run(test_only=test_only, owner=owner))
        background = self.background.info()
        if owner is not None:
            if run is not None:
                del run["counts"]
            background = {"running": background["running"], "waiting": background["waiting"]}
        out["last_run"] = run
        out["background"] = background
        out["config"] = config.to_dict()
        return out

    def health(self, *, now: float, owner: ScopeFilter | None = None) -> dict[str, Any]:
        """Checks: the configuration (present, sane), the counts, stale decays,
        memories waiting for promotion or expiry, promotion links, the last run, the
        log file. Each is ``{"check", "status": ok|warn|fail, "detail"}``. With
        ``owner``, every figure is of its memories only, and the last run is told
        without the counts of memories outside it."""
        checks: list[dict[str, Any]] = []

        def add(name: str, status: str, detail: str, **extra: Any) -> None:
            checks.append({"check": name, "status": status, "detail": detail, **extra})

        info = self.config_info()
        config = EnergyConfig.from_mapping(info["config"])
        if info["problem"]:
            add("config", "fail", info["problem"])
        elif info["persisted"]:
            add("config", "ok", f"persisted in the store (event {info['seq']}, {info['changed_at']})")
        else:
            add("config", "warn", "not persisted yet: the defaults are in use (the first maintenance run or "
                "`memorist tiers config --set` writes it)")
        notes = config.warnings()
        add("config_sanity", "warn" if notes else "ok", "; ".join(notes) if notes else
            f"thresholds {config.expire_below} < {config.working_to_short_term} < {config.short_term_to_long_term}, "
            f"rates {config.rate_working}/{config.rate_short_term}/{config.rate_long_term} per hour, "
            f"batches {config.promotion_batch} promotions / {config.decay_batch} decays")
        within = self._within(self.tenant_id, owner)
        self.store.flush()  # buffered retrievals count in the energies, as a run counts them
        # As of ``now``: a memory made later is not counted, as a run then leaves it alone.
        active = live_at(self._records(self.tenant_id, scope=within), now)
        archived = _made_by(self._records(self.tenant_id, Status.ARCHIVED, scope=within), now)
        by_tier = {t.value: sum(1 for r in active if r.tier is t) for t in LIVE_TIERS}
        add("counts", "ok", f"{len(active)} live memories ({', '.join(f'{k} {v}' for k, v in by_tier.items())}), "
            f"{sum(1 for r in archived if r.tier is not Tier.EXPIRED)} archived, {sum(1 for r in archived if r.tier is Tier.EXPIRED)} expired",
            counts={**by_tier, "archived": sum(1 for r in archived if r.tier is not Tier.EXPIRED),
                    "expired": sum(1 for r in archived if r.tier is Tier.EXPIRED)})
        stale_after = config.stale_after_hours
        stale = [r for r in active if (now - last_decay(r)) / HOUR > stale_after]
        ahead = [r for r in active if decayed_ahead(r, now)]
        if stale or ahead:
            found = []
            if stale:
                oldest = max((now - last_decay(r)) / HOUR for r in stale)
                found.append(f"{len(stale)} memories not decayed for over {stale_after:g} hours (the oldest {oldest:.1f} h)")
            if ahead:
                found.append(f"{len(ahead)} memories last decayed at a time that has not come (the latest "
                             f"{_iso(max(last_decay(r) for r in ahead))}): the next run counts them as decayed up to its time")
            add("stale_decays", "warn", "; ".join(found) + ": run `memorist maintain` (end_conversation runs it too)",
                count=len(stale) + len(ahead))
        else:
            add("stale_decays", "ok", f"every live memory decayed within {stale_after:g} hours", count=0)
        currents = {r.id: energy_now(r, now, config)[0] for r in active}
        waiting = sum(1 for r in active if config.promotes(r.tier, currents[r.id]))
        dying = sum(1 for r in active if config.expires(currents[r.id]))
        add("due", "warn" if waiting or dying else "ok",
            f"{waiting} memories wait for promotion, {dying} for expiry" + (" (the next run handles them)" if waiting or dying else ""),
            promotions=waiting, expiries=dying)
        ids = {r.id for r in active} | {r.id for r in archived}
        broken = [r.id for r in archived if isinstance(r.lineage.get("promoted_to"), str) and r.lineage["promoted_to"] not in ids]
        broken += [r.id for r in active if isinstance(r.lineage.get("promoted_from"), str) and r.lineage["promoted_from"] not in ids]
        missing = self._missing(broken)
        add("lineage", "fail" if missing else "ok",
            f"{len(missing)} promotion links lead nowhere: {', '.join(missing[:5])}" if missing else "every promotion links both ways",
            count=len(missing))
        run = self.last_run(owner=owner)
        background = self.background.info()
        if background["last_error"]:
            add("last_run", "fail", f"the last background run failed: {background['last_error']}")
        elif run is None:
            add("last_run", "warn", "no maintenance run yet")
        else:
            ago = (time.time() - run.ts) / HOUR
            if owner is None:
                counts = run.payload.get("counts") or {}
                shown = ": " + ", ".join(f"{counts.get(k, 0)} {k}" for k in ("decayed", "expired", "promoted", "pending"))
            else:
                shown = ""  # its counts are of the whole run's scope, not only the owner's memories
            add("last_run", "ok", f"run {run.payload.get('run')} at {_iso(run.ts)} ({ago:.1f} h ago){shown}")
        add("log", *self._log_check())
        tests = len(_made_by(self._records(self.test_tenant, scope=self._within(self.test_tenant, owner)), now))
        add("test_memories", "ok", f"{tests} test memories, apart from the real ones", count=tests)
        worst = "fail" if any(c["status"] == "fail" for c in checks) else "warn" if any(c["status"] == "warn" for c in checks) else "ok"
        return {"now": _iso(now), "status": worst, "healthy": worst != "fail", "checks": checks}

    def _missing(self, ids: Iterable[str]) -> list[str]:
        """Of memories whose link target was not among the listed ones, those whose
        target does not exist at all (a target may be in another scope or deleted)."""
        out = []
        for mid in ids:
            record = self.store.get(mid)
            if record is None:
                continue
            target = record.lineage.get("promoted_to") or record.lineage.get("promoted_from")
            if not isinstance(target, str) or self.store.get(target) is None:
                out.append(mid)
        return out

    def _log_check(self) -> tuple[str, str]:
        path = self.log_path
        if not path:
            return "ok", "no log file (set maintenance_log or MEMORIST_MAINTENANCE_LOG for one); the event log records every run"
        if os.path.isdir(path):
            return "warn", f"{path} is a folder, not a log file: runs go on, unlogged"
        if os.path.exists(path):
            writable = os.access(path, os.W_OK)
        else:
            folder = os.path.dirname(os.path.abspath(path))
            while not os.path.exists(folder) and os.path.dirname(folder) != folder:
                folder = os.path.dirname(folder)
            writable = os.path.isdir(folder) and os.access(folder, os.W_OK)
        if not writable:
            return "warn", f"{path} cannot be written: runs go on, unlogged"
        return "ok", f"runs are appended to {path}"

    def samples(self, *, now: float, per_tier: int = 4, test_only: bool = False) -> dict[str, list[tuple[str, float]]]:
        """Up to ``per_tier`` live memories of each tier (the highest energies at
        ``now``) as ``(text, energy)``: what ``memorist tiers plot`` draws."""
        config = self.config()
        tenant = self.test_tenant if test_only else self.tenant_id
        active = live_at(self._records(tenant), now)
        out: dict[str, list[tuple[str, float]]] = {}
        for tier in LIVE_TIERS:
            ranked = sorted(((energy_now(r, now, config)[0], r.text) for r in active if r.tier is tier), reverse=True)
            out[tier.value] = [(text, energy) for energy, text in ranked[:per_tier]]
        return out

    # test memories ----------------------------------------------------------------------
    def test_memories(self, scope: ScopeFilter, *, limit: int) -> list[MemoryRecord]:
        return self._records(self.test_tenant, scope=scope)[:limit]

    def delete_test_memories(self, scope: ScopeFilter) -> int:
        records = self._records(self.test_tenant, scope=scope) + self._records(self.test_tenant, Status.ARCHIVED, scope=scope)
        if not records:
            return 0
        with self.store.transaction() as batch:
            for record in records:
                batch.delete(record, payload={"reason": "test memories removed"})
        return len(records)

    def forget(self) -> None:
        """Forget what was read of the log (after the store was reset)."""
        with self._lock:
            self._config = EnergyConfig()
            self._config_event = None
            self._config_error = None
            self._config_seq = 0
            self._last_run = {}

    def resolve_test_id(self, prefix: str, *, user_id: str | None = None, agent_id: str | None = None,
                        run_id: str | None = None) -> str | None:
        """The full id of the test memory whose id starts with ``prefix`` (one match);
        with ids, among that scope's test memories only."""
        matches = self.store.ids_with_prefix(self.test_tenant, prefix, limit=2, user_id=user_id, agent_id=agent_id, run_id=run_id)
        if prefix in matches:
            return prefix
        return matches[0] if len(matches) == 1 else None

    def close(self, timeout: float | None = None) -> bool:
        return self.background.close(timeout)


def _reaches(scopes: Any, owner: ScopeFilter) -> bool:
    """Whether a run of ``scopes`` (its logged user, agent and run ids, None where it
    spanned all) could have maintained memories of ``owner``: no id both name that
    differs."""
    if not isinstance(scopes, dict):
        return False
    mine = {"user_id": owner.user_id, "agent_id": owner.agent_id, "run_id": owner.run_id}
    return all(scopes.get(key) is None or value is None or scopes.get(key) == value for key, value in mine.items())


def _run_summary(event: EventRecord | None) -> dict[str, Any] | None:
    if event is None:
        return None
    payload = event.payload
    return {"seq": event.seq, "at": _iso(event.ts), "run": payload.get("run"), "operation": payload.get("operation"),
            "now": payload.get("now"), "counts": payload.get("counts")}


__all__ = [
    "CONFIG_OP",
    "RUN_OP",
    "TEST_MARK",
    "BackgroundRuns",
    "EnergyTiers",
    "Plan",
    "append_log",
    "decayed_ahead",
    "decayed_to",
    "energy_now",
    "is_test_scope",
    "last_decay",
    "live_at",
    "pending_uses",
    "plan_run",
    "real_tenant",
    "store_run_lock",
    "test_tenant",
    "tier_item",
]
