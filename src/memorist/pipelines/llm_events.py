"""What the pipelines write to the event log about their LLM calls.

- one ``llm_call`` event per attempt (:class:`~memorist.llm.base.LLMCall`: provider,
  model, role, prompt version, tokens, cost estimate, latency, error), in the
  transaction of the turn it served, with ``payload["turn_event"]`` naming the turn;
- flags on the turn itself: ``fallback`` lists the roles that fell back to their
  heuristic, and a failed extraction marks the turn ``pending`` with its ``reason``;
- every other call a Memory's models make (consolidation, reflection, curation,
  evaluation, answers) one ``llm_call`` event too, under the tenant, written as it
  happens by the Memory's :class:`CallLog`.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Sequence
from typing import Any

from ..llm.base import LLMCall, Recording
from ..model import Scope
from ..store.base import Batch, Store

logger = logging.getLogger("memorist")

#: Calls a CallLog keeps while its store refuses them (they are written with the next).
_MAX_BUFFERED = 10_000


def turn_flags(rec: Recording) -> dict[str, Any]:
    """The keys a turn event gets from what happened to its LLM roles."""
    flags: dict[str, Any] = {}
    if rec.fallbacks:
        flags["fallback"] = [{"role": f.role, "reason": f.reason} for f in rec.fallbacks]
    failed = rec.failed("extractor")
    if failed is not None:
        flags["pending"] = True
        flags["reason"] = f"extraction failed: {failed.reason}"
    return flags


def write_llm_calls(batch: Batch, scope: Scope, calls: Sequence[LLMCall], **payload: Any) -> int:
    """Append one ``llm_call`` event per call (a turn's recording's, or a CallLog's);
    returns how many."""
    for call in calls:
        batch.event("llm_call", scope, payload=call.to_payload() | payload)
    return len(calls)


class CallLog:
    """The ``llm_call`` events of the calls a Memory's models make outside a turn.

    :meth:`watch` makes it a sink of a model (:meth:`memorist.llm.LLM.add_sink`):
    every call of that model that no turn writes itself (``add`` and ``reprocess``
    write theirs in the turn's transaction) is appended to the log in a transaction
    of its own, under ``scope`` (the tenant). A call the store refuses is kept and
    written with the next one, or by :meth:`flush`; :meth:`close` writes what is
    left and lets go of the models.
    """

    def __init__(self, store: Store, scope: Scope) -> None:
        # Weakly: a model outliving a Memory that was never closed must not keep its store.
        self._store = weakref.ref(store)
        self.scope = scope
        self._pending: list[LLMCall] = []
        self._lock = threading.Lock()
        self._models: weakref.WeakSet[Any] = weakref.WeakSet()

    def watch(self, llm: Any) -> Any:
        """Log ``llm``'s calls from now on (None, or a model with no sinks: nothing);
        returns ``llm``."""
        if llm is not None and callable(getattr(llm, "add_sink", None)) and llm not in self._models:
            llm.add_sink(self)
            self._models.add(llm)
        return llm

    def __call__(self, call: LLMCall) -> None:
        with self._lock:
            self._pending.append(call)
            del self._pending[:-_MAX_BUFFERED]
        self.flush()

    def flush(self) -> None:
        """Write the calls not written yet (quietly kept when the store refuses)."""
        with self._lock:
            calls, self._pending = self._pending, []
        if not calls:
            return
        store = self._store()
        if store is None:  # the Memory is gone: nothing to log into any more
            self.close()
            return
        try:
            with store.transaction() as batch:
                write_llm_calls(batch, self.scope, calls)
        except Exception as exc:
            with self._lock:
                self._pending[:0] = calls
                del self._pending[:-_MAX_BUFFERED]
            logger.debug("memorist: %d llm_call event(s) not written yet: %s", len(calls), exc)

    def close(self) -> None:
        if self._store() is not None:
            self.flush()
        for llm in list(self._models):
            llm.remove_sink(self)
        self._models = weakref.WeakSet()


def watched(memory: Any, llm: Any) -> Any:
    """``llm``, its calls logged by ``memory``'s :class:`CallLog` (when it has one):
    for the models a Memory's learning and maintenance resolve beside its own."""
    log = getattr(memory, "_call_log", None)
    return log.watch(llm) if isinstance(log, CallLog) else llm


def usage_summary(events: list[Any]) -> dict[str, Any]:
    """Totals over ``llm_call`` events (:class:`~memorist.model.EventRecord`): calls,
    failed calls, tokens and estimated cost, overall and per role."""
    total: dict[str, Any] = {"calls": 0, "failed_calls": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0}
    by_role: dict[str, dict[str, Any]] = {}
    for event in events:
        if event.op != "llm_call":
            continue
        p = event.payload
        for bucket in (total, by_role.setdefault(p.get("role") or "", {k: 0 for k in total} | {"cost_usd": 0.0})):
            bucket["calls"] += 1
            bucket["failed_calls"] += 0 if p.get("ok") else 1
            bucket["input_tokens"] += p.get("input_tokens") or 0
            bucket["output_tokens"] += p.get("output_tokens") or 0
            bucket["cost_usd"] += p.get("cost_usd") or 0.0
    for bucket in (total, *by_role.values()):
        bucket["cost_usd"] = round(bucket["cost_usd"], 6)
    return total | {"by_role": by_role}


__all__ = ["CallLog", "turn_flags", "usage_summary", "watched", "write_llm_calls"]
