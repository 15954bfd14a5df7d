"""The role seams of the ingest pipeline.

An :class:`Extractor` turns a conversation into short, self-contained facts; a
:class:`Reconciler` decides, for each fact, what happens to the memories that
already exist in the same scope (spec 004's ADD / UPDATE / DELETE / NONE).

Both are pure: they receive plain values and return plain values. The ingest
pipeline does the I/O (finding similar memories, applying the decisions in one
transaction). The deterministic heuristic implementations are the default; LLM
implementations plug into the same seams.
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True, slots=True)
class Message:
    """One conversation message. ``role`` is ``"user"``, ``"assistant"`` or ``"system"``."""

    role: str
    content: str
    name: str | None = None
    # Optional per-message extras (``add(..., infer=False)`` stores them on the
    # message's memory): metadata merged over the call's, and when it was said.
    metadata: dict[str, Any] | None = None
    timestamp: float | None = None


@dataclass(frozen=True, slots=True)
class Fact:
    """A fact extracted from a conversation.

    ``text`` is concise and self-contained, in the language of the input, starting
    directly with the fact ("Is vegetarian", not "The user is vegetarian").
    ``kind`` is one of the memory kinds (``"fact"``, ``"preference"``, ...).
    ``source_role`` is the role of the message the fact came from.
    """

    text: str
    kind: str = "fact"
    source_role: str = "user"


class Event(enum.StrEnum):
    """What the reconciler decided for a fact (spec 004's memory-update events)."""

    ADD = "ADD"
    UPDATE = "UPDATE"
    DELETE = "DELETE"
    NONE = "NONE"


@dataclass(frozen=True, slots=True)
class Existing:
    """A memory already stored in the fact's scope, shown to the reconciler.

    ``score`` is its similarity to the fact being reconciled, in [0, 1] (cosine for
    the semantic embedder); higher is more similar.
    """

    id: str
    text: str
    score: float = 0.0


@dataclass(frozen=True, slots=True)
class Decision:
    """One reconciliation decision.

    - ``ADD``: store ``text`` as a new memory (``target_id`` is None).
    - ``UPDATE``: replace the text of memory ``target_id`` with ``text``;
      ``old_text`` is its text before.
    - ``DELETE``: delete memory ``target_id`` (its text is ``old_text``).
    - ``NONE``: nothing changes; ``target_id`` names the memory that already holds
      the fact, when there is one.
    """

    event: Event
    text: str
    target_id: str | None = None
    old_text: str | None = None
    fact: Fact | None = None
    reason: str = ""


class Extractor(abc.ABC):
    """Turns conversation messages into facts worth remembering."""

    @abc.abstractmethod
    def extract(
        self, messages: Sequence[Message], *, timestamp: datetime | None = None
    ) -> list[Fact]:
        """Return the facts in ``messages`` (system messages are ignored).

        ``timestamp`` is when the conversation happened; implementations use it to
        resolve relative times ("yesterday") into dates. Returns an empty list when
        nothing is worth remembering.
        """


class Reconciler(abc.ABC):
    """Decides how new facts change the memories already stored in a scope."""

    @abc.abstractmethod
    def reconcile(
        self, facts: Sequence[Fact], existing: Sequence[Sequence[Existing]]
    ) -> list[Decision]:
        """Decide what to do with each fact.

        ``existing[i]`` lists the stored memories most similar to ``facts[i]``,
        best first (possibly empty). Decisions may also reference memories listed for
        other facts. A fact may yield more than one decision (a contradiction deletes
        the old memory and adds the new fact). Two facts of one call that are the
        same must not both be added. Decisions only ever target ids that were listed
        in ``existing``.
        """


__all__ = ["Decision", "Event", "Existing", "Extractor", "Fact", "Message", "Reconciler"]
