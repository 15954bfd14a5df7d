"""The role seams of the ingest pipeline.

An :class:`Extractor` turns a conversation into short, self-contained facts; a
:class:`Reconciler` decides, for each fact, what happens to the memories that
already exist in the same scope (spec 004's ADD / UPDATE / DELETE / NONE).

Both are pure: they receive plain values and return plain values. The ingest
pipeline does the I/O (finding similar memories, applying the decisions in one
transaction). The deterministic heuristic implementations are the default; LLM
implementations plug into the same seams. The values they exchange
(:class:`~engram.model.Message`, :class:`~engram.model.Fact`,
:class:`~engram.model.Existing`, :class:`~engram.model.Decision`) are in
:mod:`engram.model`.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from datetime import datetime

from ..model import Decision, Existing, Fact, Message


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


__all__ = ["Extractor", "Reconciler"]
