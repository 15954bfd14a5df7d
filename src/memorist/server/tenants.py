"""One :class:`~memorist.Memory` per tenant, opened on first use and shared by requests.

Every tenant's Memory opens the same SQLite file with its own ``tenant_id``:
the engine keeps tenants apart (a memory of another tenant is not found). The
embedder is resolved once, by the first Memory, and handed to the others, so a
model is loaded once whatever the number of tenants.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from ..config import MemoryConfig
from ..embed import Embedder
from ..errors import StoreError
from ..memory import Memory
from ..policies.validity import validity_cutoff


class Tenants:
    """The Memory of each tenant (``""``: the default one of a development server)."""

    def __init__(
        self,
        path: str,
        *,
        embedder: str | Embedder | None = None,
        decay_days: float | None = None,
        max_text_chars: int = 100_000,
        policy: str | None = None,
    ) -> None:
        self.path = path
        self._embedder = embedder
        self._decay_days = decay_days
        # policy: "energy" for the energy tiers (None: MEMORIST_POLICY, else the default).
        self._config = MemoryConfig(max_message_chars=max_text_chars, policy=policy)
        self._memories: dict[str, Memory] = {}
        self._lock = threading.Lock()
        self._closed = False
        #: Why the store is known to be damaged (None: it is not): every Memory,
        #: open or opened later, then refuses writes.
        self.damage: str | None = None

    def get(self, tenant_id: str) -> Memory:
        memory = self._memories.get(tenant_id)
        if memory is not None:
            return memory
        with self._lock:
            memory = self._memories.get(tenant_id)
            if memory is None:
                if self._closed:
                    raise StoreError("the service is shutting down")
                memory = Memory(
                    self.path,
                    embedder=self._embedder,
                    decay_days=self._decay_days,
                    # The keyless tenant "" is the Memory default: MEMORIST_TENANT if set.
                    tenant_id=tenant_id or None,
                    config=self._config,
                )
                # The store is bound to one embedder: every tenant shares its instance.
                self._embedder = memory.embedder
                if self.damage is not None:
                    _refuse_writes(memory, self.damage)
                self._memories[tenant_id] = memory
            return memory

    def mark_damaged(self, reason: str) -> None:
        """The store is damaged: from now on no tenant's Memory writes into it."""
        with self._lock:
            if self.damage is None:
                self.damage = reason
            for memory in self._memories.values():
                _refuse_writes(memory, self.damage)

    def unreachable(self) -> str | None:
        """Why the store cannot answer now (its database server down), or None."""
        memory = next(iter(self._memories.values()), None)
        try:
            return (memory or self.get("")).store.unreachable()
        except StoreError as exc:  # the store could not even be opened
            return str(exc)

    def open(self) -> list[str]:
        """The tenants whose Memory is open."""
        return list(self._memories)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            memories, self._memories = list(self._memories.values()), {}
        for memory in memories:
            memory.close()


def _refuse_writes(memory: Memory, reason: str) -> None:
    refuse = getattr(memory.store, "refuse_writes", None)  # SQLite files; a database server checks its own pages
    if refuse is not None:
        refuse(reason)


def users_of(memory: Memory, *, only: str | None = None, limit: int = 1000, agent: str | None = None) -> list[dict[str, Any]]:
    """The users of the Memory's tenant, by id, each with its number of memories
    (those a read would return: active and within the decay window); with ``only``,
    just that user (listed even before its first memory); with ``agent``, counting
    that agent's memories only, and the users it has memories of."""
    now = time.time()
    counts = memory.store.user_counts(
        memory.config.tenant_id, now=now, cutoff=validity_cutoff(now, memory.config.decay_days), only=only, limit=limit,
        agent=agent,
    )
    if only is not None and only not in counts:
        counts[only] = 0
    return [{"user_id": user, "memories": n} for user, n in counts.items()]


__all__ = ["Tenants", "users_of"]
