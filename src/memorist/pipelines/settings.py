"""The configuration a store records about itself, so every process agrees.

The policy changes what is stored (under the energy policy new memories get a start
energy, and maintenance decays, expires and promotes them), so it belongs to the
store, not to whoever opens it: a command that opened an ordinary store under the
energy policy would expire memories the store's own configuration keeps. It is an
event of the log (``store_config``, in the store-wide space), like every other
change, so its history is the log's: who changed it, when, and from what.

A store records its policy when it is first opened (a new store: the one asked
for, else ``default``). A store written before policies were recorded gets the one
its history shows: ``energy`` if energy tiers were ever configured or run there.
Opening a store under another policy is a :class:`ConfigurationError` that says how
to change it; :func:`change_policy` is that change, logged.
"""

from __future__ import annotations

import logging

from ..config import POLICIES
from ..errors import ConfigurationError, StoreError
from ..model import Scope
from ..store.base import ScopeFilter, Store

logger = logging.getLogger("memorist")

#: The event that records the store's configuration.
CONFIG_OP = "store_config"
#: The energy tiers' own events: a store that has any was used under the energy policy
#: (a store of release 0.1.0 took a boost only under it, and maintenance logs each
#: memory's decay and promotion; "expire" is not one: the trajectories' retention logs it).
ENERGY_OPS = ("tiers_config", "maintenance", "boost", "decay", "promote")
_STORE_WIDE = ScopeFilter("", "", "")


def recorded_policy(store: Store) -> str | None:
    """The policy the store recorded, or None (a new store, or one older than the record)."""
    events = store.events(_STORE_WIDE, ops=(CONFIG_OP,), limit=1, newest_first=True)
    if not events:
        return None
    policy = events[0].payload.get("policy")
    return policy if policy in POLICIES else None


def _record(store: Store, policy: str, *, previous: str | None, reason: str) -> None:
    with store.transaction() as batch:
        batch.event(CONFIG_OP, Scope(), actor="config", payload={"policy": policy, "previous": previous, "reason": reason})


def _history_policy(store: Store) -> str | None:
    """For a store with no record: ``energy`` if its log has energy-tier events,
    ``default`` if it holds anything else, None if it is empty."""
    if store.events(None, ops=ENERGY_OPS, limit=1):
        return "energy"
    return "default" if store.events(None, limit=1) else None


def settle_policy(store: Store, requested: str | None) -> str:
    """The policy to open ``store`` under: its recorded one (``requested``, if given,
    must agree), recording it first if the store has none yet."""
    recorded = recorded_policy(store)
    if recorded is not None:
        if requested is not None and requested != recorded:
            raise ConfigurationError(
                f"this store is under the {recorded!r} policy, not {requested!r}; open it without a policy "
                f"(it keeps its own), or change it for every process with `memorist config set policy {requested}` "
                f"(Memory.set_policy({requested!r}))"
            )
        return recorded
    history = _history_policy(store)
    policy = requested or history or "default"
    reason = "created" if history is None else "recorded from the store's history" if requested is None else "recorded when opened"
    try:
        _record(store, policy, previous=None, reason=reason)
    except StoreError as exc:
        # A store that cannot take a write (damaged, read-only) is still opened to be
        # read or checked; the record is made by the next open that can write.
        logger.warning("memorist: could not record the store's policy %r: %s", policy, exc)
    return policy


def change_policy(store: Store, policy: str, *, actor: str = "") -> dict[str, str | None]:
    """Record ``policy`` as the store's; returns ``{"policy", "previous"}``."""
    if policy not in POLICIES:
        raise ConfigurationError(f"policy must be one of {', '.join(POLICIES)}, got {policy!r}")
    previous = recorded_policy(store)
    if previous != policy:
        _record(store, policy, previous=previous, reason=f"{actor or 'a call'}")
        if previous is not None:
            logger.warning("memorist: the store's policy changed from %r to %r", previous, policy)
    return {"policy": policy, "previous": previous}


__all__ = ["CONFIG_OP", "change_policy", "recorded_policy", "settle_policy"]
