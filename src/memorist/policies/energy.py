"""The energy tiers: the rules, pure. Configuration is data.

A memory under the energy policy has an *energy* and a *tier*: ``working``,
``short_term`` or ``long_term`` (then, when maintenance is done with it,
``expired``; a promoted original is archived). Energy decays exponentially with
the hours since its last decay, at the rate of its tier::

    E(t) = E0 * exp(-lambda * t)      lambda = 0.5 / 0.05 / 0.001 per hour

A maintenance run promotes a working memory whose energy is *strictly above* 2.0 to
short-term, a short-term one strictly above 5.0 to long-term, and expires a memory
whose energy fell *strictly below* 0.1.

Where a new memory's energy comes from (:func:`start_energy`):

1. ``metadata["energy"]``: an explicit start energy (a number > 0);
2. else ``metadata["type"]``, a kind of memory by name, case-insensitive:
   ``insight`` or ``crystallization`` 3.0, ``reminder`` 2.5, ``learning`` 2.0
   (:attr:`EnergyConfig.start_energy` holds the table; add names to it);
3. else :attr:`EnergyConfig.default_energy` (1.0).

``metadata["tier"]`` may start a memory in another tier (``short_term``,
``long_term``; test memories are often made so).

An explicit boost adds :attr:`EnergyConfig.boost` (1.0). Use boosts too: every
time search returns a memory, it earns :attr:`EnergyConfig.use_boost` (0.5; 0 turns
use boosts off). Searches never write energy: the store already counts each
memory's retrievals (its access count), and the next boost or maintenance run adds
``use_boost`` per retrieval since the last one, after the decay.

>>> round(decay(2.0, 1, 0.5), 3)          # case 1: an hour at rate 0.5
1.213
>>> decay(0.05, 20, 0.5) < 0.001          # case 2: near expiry
True
>>> config = EnergyConfig()
>>> start_energy({"type": "Reminder"}, config)
(2.5, <Tier.WORKING: 'working'>)
>>> config.promotes(Tier.WORKING, 2.0), config.promotes(Tier.WORKING, 2.0001)
(False, True)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import ValidationError
from ..model import Tier

HOUR = 3600.0

#: The tiers a live memory can be in, bottom up.
LIVE_TIERS = (Tier.WORKING, Tier.SHORT_TERM, Tier.LONG_TERM)
_NEXT = {Tier.WORKING: Tier.SHORT_TERM, Tier.SHORT_TERM: Tier.LONG_TERM}
_TIER_NAMES = {
    "working": Tier.WORKING,
    "short_term": Tier.SHORT_TERM, "short-term": Tier.SHORT_TERM, "shortterm": Tier.SHORT_TERM, "short": Tier.SHORT_TERM,
    "long_term": Tier.LONG_TERM, "long-term": Tier.LONG_TERM, "longterm": Tier.LONG_TERM, "long": Tier.LONG_TERM,
}
#: The start energies by kind of memory (``metadata["type"]``).
DEFAULT_START_ENERGY: Mapping[str, float] = {
    "insight": 3.0,
    "crystallization": 3.0,
    "reminder": 2.5,
    "learning": 2.0,
}
#: The largest energy a setting, a start energy or a boost may hold.
MAX_ENERGY = 1e9
_MAX_ENERGY = MAX_ENERGY
_CAP = f"{MAX_ENERGY:,.0f}"


def _number(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)


@dataclass(frozen=True)
class EnergyConfig:
    """The energy policy's settings: decay rates, thresholds, start energies, boosts
    and how much one maintenance run may do.

    It is persisted in the store (``memorist tiers config``), so every process that
    maintains the store uses the same one.
    """

    #: Decay rate (lambda, per hour) of each tier.
    rate_working: float = 0.5
    rate_short_term: float = 0.05
    rate_long_term: float = 0.001
    #: Promotion thresholds: energy strictly above them moves a memory up a tier.
    working_to_short_term: float = 2.0
    short_term_to_long_term: float = 5.0
    #: Energy strictly below this expires a memory.
    expire_below: float = 0.1
    #: Start energy by ``metadata["type"]`` (lower-case names), and otherwise.
    start_energy: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_START_ENERGY))
    default_energy: float = 1.0
    #: What an explicit boost adds, and what each retrieval by search adds (0: off).
    boost: float = 1.0
    use_boost: float = 0.5
    #: At most this many promotions and this many decays per maintenance run.
    promotion_batch: int = 10
    decay_batch: int = 100
    #: The health check calls a memory's decay stale after this many hours.
    stale_after_hours: float = 24.0

    # ------------------------------------------------------------------------------
    def rate(self, tier: Tier) -> float:
        """The decay rate of ``tier`` (per hour)."""
        if tier is Tier.SHORT_TERM:
            return self.rate_short_term
        if tier is Tier.LONG_TERM:
            return self.rate_long_term
        return self.rate_working

    def threshold(self, tier: Tier) -> float | None:
        """The energy ``tier`` must exceed to be promoted (None: the top tier)."""
        if tier is Tier.WORKING:
            return self.working_to_short_term
        if tier is Tier.SHORT_TERM:
            return self.short_term_to_long_term
        return None

    def promotes(self, tier: Tier, energy: float) -> bool:
        """Whether a memory of ``tier`` with ``energy`` is promoted (strictly above)."""
        limit = self.threshold(tier)
        return limit is not None and energy > limit

    def expires(self, energy: float) -> bool:
        """Whether ``energy`` expires a memory (strictly below)."""
        return energy < self.expire_below

    # ------------------------------------------------------------------------------
    def checked(self) -> EnergyConfig:
        """This configuration, or a :class:`~memorist.ValidationError` naming the
        setting that cannot work (the field is ``tiers.<name>``)."""
        for name in ("rate_working", "rate_short_term", "rate_long_term"):
            value = getattr(self, name)
            if not _number(value) or not 0 <= value <= 1000:
                raise ValidationError(f"tiers.{name}", f"must be a decay rate per hour from 0 to 1000, got {value!r}")
        for name in ("working_to_short_term", "short_term_to_long_term", "expire_below", "default_energy", "boost"):
            value = getattr(self, name)
            if not _number(value) or not 0 < value <= _MAX_ENERGY:
                raise ValidationError(f"tiers.{name}", f"must be a number > 0 and ≤ {_CAP}, got {value!r}")
        if not _number(self.use_boost) or not 0 <= self.use_boost <= _MAX_ENERGY:
            raise ValidationError("tiers.use_boost", f"must be a number >= 0 and ≤ {_CAP} (0: use does not boost), got {self.use_boost!r}")
        if not self.expire_below < self.working_to_short_term < self.short_term_to_long_term:
            raise ValidationError(
                "tiers.working_to_short_term",
                "the thresholds must rise: expire_below < working_to_short_term < short_term_to_long_term, got "
                f"{self.expire_below!r} < {self.working_to_short_term!r} < {self.short_term_to_long_term!r}",
            )
        if not isinstance(self.start_energy, Mapping):
            raise ValidationError("tiers.start_energy", f"must map kinds of memory to energies, got {type(self.start_energy).__name__}")
        for kind, value in self.start_energy.items():
            if not isinstance(kind, str) or not kind.strip() or kind != kind.strip().lower():
                raise ValidationError("tiers.start_energy", f"kinds are lower-case names, got {kind!r}")
            if not _number(value) or not 0 < value <= _MAX_ENERGY:
                raise ValidationError(f"tiers.start_energy.{kind}", f"must be a number > 0 and ≤ {_CAP}, got {value!r}")
        if isinstance(self.decay_batch, bool) or not isinstance(self.decay_batch, int) or not 1 <= self.decay_batch <= 1_000_000:
            raise ValidationError("tiers.decay_batch", f"must be a whole number from 1 to 1000000, got {self.decay_batch!r}")
        if isinstance(self.promotion_batch, bool) or not isinstance(self.promotion_batch, int) or not 0 <= self.promotion_batch <= 1_000_000:
            raise ValidationError("tiers.promotion_batch", f"must be a whole number from 0 to 1000000, got {self.promotion_batch!r}")
        if not _number(self.stale_after_hours) or self.stale_after_hours <= 0:
            raise ValidationError("tiers.stale_after_hours", f"must be a number of hours > 0, got {self.stale_after_hours!r}")
        return self

    def warnings(self) -> list[str]:
        """Settings that work but are probably not meant (the health check shows them)."""
        notes = []
        if not self.rate_working >= self.rate_short_term >= self.rate_long_term:
            notes.append(
                f"decay rates do not fall with the tier (working {self.rate_working}, short_term {self.rate_short_term}, "
                f"long_term {self.rate_long_term}): a promotion would make a memory forget faster"
            )
        if self.default_energy < self.expire_below:
            notes.append(f"default_energy {self.default_energy} is below expire_below {self.expire_below}: new memories expire at once")
        if self.promotion_batch > self.decay_batch:
            notes.append(f"promotion_batch {self.promotion_batch} exceeds decay_batch {self.decay_batch}: a run writes at most decay_batch memories")
        return notes

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["start_energy"] = dict(sorted(self.start_energy.items()))
        return data

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> EnergyConfig:
        """From plain data (what :meth:`to_dict` wrote), checked. Unknown keys are an error."""
        if not isinstance(data, Mapping):
            raise ValidationError("tiers", f"must be a mapping of settings, got {type(data).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValidationError(f"tiers.{unknown[0]}", f"is not a setting; known: {', '.join(sorted(known))}")
        values = dict(data)
        if "start_energy" in values and isinstance(values["start_energy"], Mapping):
            values["start_energy"] = dict(values["start_energy"])
        return cls(**values).checked()

    def with_changes(self, changes: Mapping[str, Any]) -> EnergyConfig:
        """A checked copy with ``changes`` applied: ``{"decay_batch": 50}``, or a
        start energy by its dotted name ``{"start_energy.reminder": 3.0}``. Text
        values (``"50"``, from a command line) are read as numbers."""
        data = self.to_dict()
        for key, raw in changes.items():
            if not isinstance(key, str):
                raise ValidationError("tiers", f"setting names are strings, got {key!r}")
            name, _, sub = key.strip().partition(".")
            if name == "start_energy" and sub:
                data["start_energy"] = {**data["start_energy"], sub.strip().lower(): _parse(f"tiers.{key}", raw)}
            elif name == "start_energy" and isinstance(raw, Mapping):
                data["start_energy"] = {str(k).strip().lower(): _parse(f"tiers.start_energy.{k}", v) for k, v in raw.items()}
            elif name in data and name != "start_energy":
                value = _parse(f"tiers.{name}", raw)
                if name in ("decay_batch", "promotion_batch") and isinstance(value, float) and value.is_integer():
                    value = int(value)
                data[name] = value
            else:
                known = sorted({*data, "start_energy.<type>"})
                raise ValidationError(f"tiers.{key}", f"is not a setting; known: {', '.join(known)}")
        return EnergyConfig.from_mapping(data)


def _parse(name: str, raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            number = float(raw.strip())
        except ValueError:
            raise ValidationError(name, f"must be a number, got {raw!r}") from None
        return int(number) if number.is_integer() and "." not in raw and "e" not in raw.lower() else number
    return raw


# the arithmetic --------------------------------------------------------------------------
def decay(energy: float, hours: float, rate: float) -> float:
    """E(t) = E0 * e^(-lambda * t): ``energy`` after ``hours`` at ``rate`` (per hour)."""
    if hours < 0:
        raise ValidationError("hours", f"must be >= 0, got {hours!r}")
    if rate < 0:
        raise ValidationError("rate", f"must be >= 0, got {rate!r}")
    return energy * math.exp(-rate * hours)


def current_energy(energy: float, hours: float, tier: Tier, config: EnergyConfig, *, uses: int = 0) -> float:
    """A memory's energy now: decayed over ``hours`` (negative: none) at its tier's
    rate, plus ``use_boost`` for each of the ``uses`` (retrievals) since."""
    decayed = decay(energy, max(0.0, hours), config.rate(tier))
    return decayed + config.use_boost * max(0, uses)


def curve(energy: float, rate: float, hours: float, points: int = 200) -> tuple[list[float], list[float]]:
    """``(times, energies)`` of a memory of ``energy`` decaying at ``rate`` for ``hours``."""
    points = max(2, int(points))
    times = [hours * i / (points - 1) for i in range(points)]
    return times, [decay(energy, t, rate) for t in times]


def hours_to(energy: float, target: float, rate: float) -> float | None:
    """Hours until ``energy`` decays to ``target`` at ``rate`` (None: never)."""
    if energy <= target:
        return 0.0
    if rate <= 0 or target <= 0:
        return None
    return math.log(energy / target) / rate


def parse_tier(value: Any, *, field: str = "tier") -> Tier:
    """A live tier from its name (``working``, ``short_term``/``short-term``/
    ``shortTerm``, ``long_term``...)."""
    if isinstance(value, Tier) and value in LIVE_TIERS:
        return value
    if isinstance(value, str):
        tier = _TIER_NAMES.get(value.strip().lower())
        if tier is not None:
            return tier
    raise ValidationError(field, f"must be one of working, short_term, long_term; got {value!r}")


def next_tier(tier: Tier) -> Tier | None:
    return _NEXT.get(tier)


def start_energy(metadata: Mapping[str, Any], config: EnergyConfig) -> tuple[float, Tier]:
    """A new memory's energy and tier, from its metadata (see the module's text)."""
    tier = Tier.WORKING
    if metadata.get("tier") is not None:
        tier = parse_tier(metadata["tier"], field="metadata.tier")
    explicit = metadata.get("energy")
    if explicit is not None:
        if not _number(explicit) or not 0 < explicit <= _MAX_ENERGY:
            raise ValidationError("metadata.energy", f"a start energy must be a number > 0 and ≤ {_CAP}, got {explicit!r}")
        return float(explicit), tier
    kind = metadata.get("type")
    if isinstance(kind, str):
        value = config.start_energy.get(kind.strip().lower())
        if value is not None:
            return float(value), tier
    return float(config.default_energy), tier


__all__ = [
    "DEFAULT_START_ENERGY",
    "HOUR",
    "LIVE_TIERS",
    "MAX_ENERGY",
    "EnergyConfig",
    "current_energy",
    "curve",
    "decay",
    "hours_to",
    "next_tier",
    "parse_tier",
    "start_energy",
]
