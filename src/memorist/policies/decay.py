"""Access-count decay: the playbooks' memory score. Pure, no I/O.

A playbook bullet (any memory, really) has a strength per memory class and, per
class, the value of its space's *access clock* when that component was last
touched. Its score is::

    S (1 - r_semantic)^t_semantic + E (1 - r_episodic)^t_episodic + P (1 - r_procedural)^t_procedural

where ``t`` is the number of access events (retrievals, reinforcements) the space
has seen since that component was last touched. Decay follows event order, not
wall-clock time: a learner who is away for a month forgets nothing; one who works
through fifty other problems lets an unused episodic note fade.

>>> round(score({"semantic": 1.0}, {"semantic": 0}, clock=10), 4)  # 0.99 ** 10
0.9044
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from ..errors import ConfigurationError
from ..model import MemoryClass, MemoryRecord

#: The default decay per access event: semantic 1 %, episodic 5 %, procedural 0.2 %.
DEFAULT_DECAY_RATES: Mapping[str, float] = {
    MemoryClass.SEMANTIC.value: 0.01,
    MemoryClass.EPISODIC.value: 0.05,
    MemoryClass.PROCEDURAL.value: 0.002,
}

CLASSES: tuple[str, ...] = tuple(c.value for c in MemoryClass)


def decay_rates(overrides: Mapping[str, float] | None = None) -> dict[str, float]:
    """The default rates with ``overrides`` applied, each clamped to [0, 1].

    An unknown class name or a value that is not a number is a
    :class:`~memorist.errors.ConfigurationError` (a typo must not silently keep the default).
    """
    rates = dict(DEFAULT_DECAY_RATES)
    for name, value in (overrides or {}).items():
        if name not in rates:
            raise ConfigurationError(f"decay_rates: unknown memory class {name!r}; known: {', '.join(CLASSES)}")
        if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
            raise ConfigurationError(f"decay_rates[{name!r}] must be a number, got {value!r}")
        rates[name] = max(0.0, min(1.0, float(value)))
    return rates


def component_score(strength: float, last_access: int | None, clock: int, rate: float) -> float:
    """One term of the score: ``strength * (1 - rate) ** t``, ``t = clock - last_access``.

    A component with no strength contributes nothing. ``last_access`` None means
    "touched now" (``t = 0``); a last access after ``clock`` (a clock read before a
    concurrent touch) also counts as ``t = 0``.
    """
    if strength <= 0:
        return 0.0
    base = max(0.0, min(1.0, 1.0 - rate))
    t = 0 if last_access is None else max(clock - last_access, 0)
    return strength * base**t


def score(
    strengths: Mapping[str, float],
    last_access: Mapping[str, int | None],
    clock: int,
    rates: Mapping[str, float] = DEFAULT_DECAY_RATES,
) -> float:
    """The decay score: the sum of :func:`component_score` over the three classes."""
    return sum(
        component_score(float(strengths.get(c, 0.0)), last_access.get(c), clock, rates.get(c, 0.0))
        for c in CLASSES
    )


def record_score(record: MemoryRecord, clock: int, rates: Mapping[str, float] = DEFAULT_DECAY_RATES) -> float:
    """:func:`score` of a stored memory at its space's access clock ``clock``."""
    return score(record.strengths, record.last_access, clock, rates)


__all__ = ["CLASSES", "DEFAULT_DECAY_RATES", "component_score", "decay_rates", "record_score", "score"]
