"""The role seams of the ingest pipeline.

An :class:`Extractor` turns a conversation into short, self-contained facts; a
:class:`Reconciler` decides, for each fact, what happens to the memories that
already exist in the same scope (ADD / UPDATE / DELETE / NONE).

Both are pure: they receive plain values and return plain values. The ingest
pipeline does the I/O (finding similar memories, applying the decisions in one
transaction). The deterministic heuristic implementations are the default; LLM
implementations plug into the same seams; :class:`FallbackRole` is how every role
that can fail (the LLM roles, the learning roles) falls back to its heuristic. The
values they exchange
(:class:`~memorist.model.Message`, :class:`~memorist.model.Fact`,
:class:`~memorist.model.Existing`, :class:`~memorist.model.Decision`) are in
:mod:`memorist.model`.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, ClassVar, TypeVar

from ..llm.base import note_fallback
from ..model import Decision, Existing, Fact, Message

T = TypeVar("T")
_RAISE: Any = object()


class FallbackRole(abc.ABC):
    """Fallback-to-heuristic, written once for every role that has a fallback.

    A role's own answer can fail: a model unreachable, rate limited or still unusable
    after its repair retry, or a bug in a custom role. :meth:`_or_fallback` then
    notes the failure in the open :func:`~memorist.llm.base.recording` under
    :attr:`role` (a failed ``"extractor"`` leaves the turn pending for
    :meth:`memorist.Memory.reprocess`; any other role's failure is only listed on the
    turn), logs it (:meth:`_log_fallback`, in the role family's format) and lets
    :attr:`fallback` answer. A failing model never costs the user a memory or a lesson.
    """

    #: The role's name in recordings and logs: ``"extractor"``, ``"curator"``, ...
    role: ClassVar[str] = ""
    #: Answers when the role's own attempt fails (the heuristic, usually); None, or
    #: the role itself, means there is none.
    fallback: Any = None

    def _or_fallback(self, attempt: Callable[[], T], ask: Callable[[Any], T], *, without: T = _RAISE) -> T:
        """``attempt()``; when it raises, ``ask(self.fallback)``.

        With no fallback the failure propagates, unless ``without`` is given: then
        the failure is noted and logged all the same and ``without`` is the answer.
        """
        try:
            return attempt()
        except Exception as exc:
            backup = None if self.fallback is self else self.fallback
            if backup is None and without is _RAISE:
                raise
            note_fallback(self.role, exc)
            self._log_fallback(exc)
            return ask(backup) if backup is not None else without

    @abc.abstractmethod
    def _log_fallback(self, exc: Exception) -> None:
        """Log that the fallback answers instead (called while ``exc`` is handled)."""


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

    def note(self, text: str) -> list[Fact]:
        """The fact a note (``add("Allergic to penicillin")``: one text, not a
        conversation) states when :meth:`extract` found none in it. By default none:
        an extractor that read the note judged it."""
        return []

    #: Said when a turn gave no fact, after "No fact found to remember".
    nothing_found_hint = ""


class Reconciler(abc.ABC):
    """Decides how new facts change the memories already stored in a scope."""

    #: True when :meth:`reconcile` is quick and local (no model call), so that the
    #: ingest pipeline may run it while it holds the store's write lock, when a
    #: concurrent writer changed the candidates. False (the safe default for a
    #: reconciler Memorist does not know) makes it decide again outside the lock.
    local: bool = False

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


__all__ = ["Extractor", "FallbackRole", "Reconciler"]
