"""What the pipelines write to the event log about their LLM calls.

- one ``llm_call`` event per attempt (:class:`~memorist.llm.base.LLMCall`: provider,
  model, role, prompt version, tokens, cost estimate, latency, error), in the
  transaction of the turn it served, with ``payload["turn_event"]`` naming the turn;
- flags on the turn itself: ``fallback`` lists the roles that fell back to their
  heuristic, and a failed extraction marks the turn ``pending`` with its ``reason``.
"""

from __future__ import annotations

from typing import Any

from ..llm.base import Recording
from ..model import Scope
from ..store.base import Batch


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


def write_llm_calls(batch: Batch, scope: Scope, rec: Recording, **payload: Any) -> int:
    """Append one ``llm_call`` event per recorded call; returns how many."""
    for call in rec.calls:
        batch.event("llm_call", scope, payload=call.to_payload() | payload)
    return len(rec.calls)


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


__all__ = ["turn_flags", "usage_summary", "write_llm_calls"]
