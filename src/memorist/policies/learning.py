"""The learning loop's rules: evidence-based confidence, version retention,
trace sampling and the loop's configuration. Pure; configuration is data.

A strategy's confidence comes from the trajectories that support it: the
share of them whose outcome agrees with its category (a ✓ helpful strategy: the
successes; a ✗ harmful one: the failures; a partial outcome counts half; a ○
neutral observation is context-dependent and counts half whatever happened), plus
a boost for more evidence, times a decay for evidence that has grown old.

>>> confidence(9, 10, last_evidence_at=0.0, now=0.0)
1.0
>>> confidence(1, 2, last_evidence_at=0.0, now=90 * DAY, half_life_days=90)
0.26
>>> sorted(versions_to_keep([(1, True, 0.0), (2, False, 0.0), (3, False, 0.0)], now=100 * DAY, rule=VersionRetention(keep_latest=1)))
[1, 3]
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .. import config
from ..errors import ConfigurationError
from ..validate import finite_number

DAY = 86_400.0

HELPFUL = "helpful"
HARMFUL = "harmful"
NEUTRAL = "neutral"
CATEGORIES = (HELPFUL, HARMFUL, NEUTRAL)
#: How each category is drawn.
SYMBOLS: Mapping[str, str] = {HELPFUL: "✓", HARMFUL: "✗", NEUTRAL: "○"}
_CATEGORY_NAMES = {
    "helpful": HELPFUL, "✓": HELPFUL, "strategy": HELPFUL, "success": HELPFUL, "successful": HELPFUL,
    "harmful": HARMFUL, "✗": HARMFUL, "anti_pattern": HARMFUL, "anti-pattern": HARMFUL, "failure": HARMFUL,
    "neutral": NEUTRAL, "○": NEUTRAL, "observation": NEUTRAL,
}
STATUSES = ("success", "failure", "partial")


def category_of(value: Any) -> str | None:
    """``"helpful"``, ``"harmful"`` or ``"neutral"`` for any of their names or
    symbols (✓ ✗ ○, ``strategy``, ``anti_pattern``, ``observation``); None otherwise."""
    if not isinstance(value, str):
        return None
    return _CATEGORY_NAMES.get(value.strip().lower())


def support(category: str, status: str) -> float:
    """How far one trajectory that ended ``status`` supports a strategy of ``category``."""
    if category == NEUTRAL or status == "partial":
        return 0.5
    if category == HELPFUL:
        return 1.0 if status == "success" else 0.0
    return 1.0 if status == "failure" else 0.0


def recency_factor(last_evidence_at: float | None, now: float, half_life_days: float | None) -> float:
    """``0.5 ** (age in days / half life)`` of the newest evidence (1.0 without a half life)."""
    if not half_life_days or last_evidence_at is None:
        return 1.0
    age = max(0.0, now - last_evidence_at) / DAY
    return 0.5 ** (age / half_life_days)


def confidence(
    supporting: float, total: float, *, last_evidence_at: float | None, now: float, half_life_days: float | None = 90.0
) -> float:
    """The confidence: ``min(1, success rate + min(0.2, 0.01 * evidence)) * recency``,
    rounded to four places. ``supporting`` is the summed :func:`support` of the
    ``total`` pieces of evidence."""
    if total <= 0:
        return 0.0
    base = max(0.0, min(1.0, supporting / total))
    boost = min(0.2, total * 0.01)
    return round(min(1.0, base + boost) * recency_factor(last_evidence_at, now, half_life_days), 4)


@dataclass(frozen=True, slots=True)
class VersionRetention:
    """Which playbook versions survive: the latest ``keep_latest`` (at least 1),
    every major version (``keep_all_major``), and those made in the last
    ``keep_days`` days (None: no age rule; 0: none kept for its age). The current
    version always survives."""

    keep_latest: int = 5
    keep_all_major: bool = True
    keep_days: float | None = 90.0


# credit by association ---------------------------------------------------------------------
#: Association credit (:func:`credit`): the fewest successes and failures to compare;
#: how far apart a decision's presence in successes and in failures must be (a share),
#: and in standard errors; how many earlier reflections of a task type are read.
CREDIT_MIN_RUNS = 2
CREDIT_MARGIN = 0.15
CREDIT_Z = 2.0
CREDIT_HISTORY = 200


def credit(
    runs: Sequence[tuple[bool, Sequence[str]]],
    *,
    min_runs: int = CREDIT_MIN_RUNS,
    margin: float = CREDIT_MARGIN,
    z: float = CREDIT_Z,
) -> dict[str, str]:
    """Each decision's category from its association with outcomes across ``runs``
    (``(succeeded, decisions)``, decisions compared casefolded): how often it is
    present in the successes against how often in the failures.

    Present in failures and absent from successes: ✗ harmful; present in successes
    and absent from failures: ✓ helpful: the difference of the two shares (smoothed by
    Laplace's rule of succession) is at least ``margin`` and ``z`` standard errors. Present about
    equally in both (a habit, or a step every run takes): ○ neutral, when the
    difference is within ``margin`` by ``z`` standard errors too. Anything in between
    is left out (the runs do not say yet), as are decisions seen fewer than
    ``min_runs`` times and every decision while there are fewer than ``min_runs``
    successes or failures: a handful of runs decides nothing.

    >>> runs = [(True, ["Back off", "Log"]), (True, ["Back off"]), (False, ["Hammer", "Log"]), (False, ["Hammer"])]
    >>> sorted(credit(runs * 2).items())  # "Log" is in half of each: not decided yet
    [('back off', 'helpful'), ('hammer', 'harmful')]
    >>> credit(runs * 60)["log"]
    'neutral'
    >>> credit(runs[:3])
    {}
    """
    wins = sum(1 for ok, _ in runs if ok)
    losses = len(runs) - wins
    if wins < min_runs or losses < min_runs:
        return {}
    present: dict[str, list[int]] = {}
    for ok, decisions in runs:
        for key in {d.casefold() for d in decisions if d}:
            present.setdefault(key, [0, 0])[0 if ok else 1] += 1
    out = {}
    for key, (in_wins, in_losses) in present.items():
        if in_wins + in_losses < min_runs:
            continue
        fs = (in_wins + 1) / (wins + 2)  # Laplace's rule of succession: no share is 0 or 1 on a few runs
        ff = (in_losses + 1) / (losses + 2)
        diff = fs - ff
        spread = (fs * (1 - fs) / (wins + 2) + ff * (1 - ff) / (losses + 2)) ** 0.5
        if abs(diff) >= margin and abs(diff) >= z * spread:
            out[key] = HELPFUL if diff > 0 else HARMFUL
        elif abs(diff) + z * spread < margin:
            out[key] = NEUTRAL
    return out


def versions_to_keep(versions: Sequence[tuple[int, bool, float]], *, now: float, rule: VersionRetention) -> set[int]:
    """The version numbers to keep of ``versions`` — ``(number, major, created_at)``."""
    if not versions:
        return set()
    ordered = sorted(versions, key=lambda v: v[0])
    keep = {v[0] for v in ordered[-max(1, rule.keep_latest):]}
    for number, major, created_at in ordered:
        if rule.keep_all_major and major:
            keep.add(number)
        if rule.keep_days is not None and now - created_at <= rule.keep_days * DAY:
            keep.add(number)
    return keep


def version_label(previous: str | None, *, major: bool) -> str:
    """The semantic label of the next version: ``"1.0"`` first, then the minor part
    grows, and a major change starts the next ``"N.0"``."""
    if not previous:
        return "1.0"
    head, _, tail = previous.partition(".")
    try:
        a, b = int(head), int(tail or 0)
    except ValueError:
        a, b = 1, 0
    return f"{a + 1}.0" if major else f"{a}.{b + 1}"


def keep_trace(status: str, *, sample_rate: float, always_store_failures: bool, draw: float) -> bool:
    """Whether a completed trajectory's detailed trace is stored (the sampling rule):
    failures and partial runs always (when so configured), successes when the
    random ``draw`` in [0, 1) falls under ``sample_rate``."""
    if status != "success" and always_store_failures:
        return True
    return draw < sample_rate


def canonical_steps(steps: Sequence[Mapping[str, Any]]) -> str:
    """The canonical JSON of a step sequence: each step's type, description and
    metadata, in order (times left out, so the same steps taken twice are the same
    trace)."""
    plain = [
        {"type": str(s.get("type", "")), "description": str(s.get("description", "")), "metadata": s.get("metadata") or {}}
        for s in steps
    ]
    return json.dumps(plain, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def trace_digest(steps: Sequence[Mapping[str, Any]]) -> str:
    """SHA-256 (hex) of :func:`canonical_steps`: a trace's content address."""
    return hashlib.sha256(canonical_steps(steps).encode("utf-8", "surrogatepass")).hexdigest()


def improvement(first: Sequence[float], recent: Sequence[float]) -> float:
    """A playbook's average improvement: the mean score of its latest uses minus
    that of its first uses (0.0 until both exist)."""
    if not first or not recent:
        return 0.0
    return round(sum(recent) / len(recent) - sum(first) / len(first), 4)


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
#: What ``TRAJECTORY_RETENTION_DAYS`` also takes for "keep forever", and
#: ``PLAYBOOK_VERSION_KEEP_DAYS`` for "no age rule" (not "forever" there: a version is
#: then kept for its age not at all, the opposite of what the word says).
_KEEP_FOREVER = ("none", "never", "forever")
_NO_AGE_RULE = ("none", "never")
_WHOLE = re.compile(r"[+-]?[0-9]+")


@dataclass(frozen=True, slots=True)
class _Rule:
    """What a numeric setting holds: a whole number or not, and its range."""

    what: str  # the message's description, e.g. "a number of days >= 0"
    low: float
    above: bool = False  # True: ``low`` itself is refused
    high: float | None = None
    whole: bool = False

    def holds(self, value: Any) -> bool:
        try:
            if not finite_number(value) or (self.whole and not isinstance(value, int)):
                return False
        except OverflowError:  # an int beyond any float
            return False
        return (value > self.low if self.above else value >= self.low) and (self.high is None or value <= self.high)


_DAYS = _Rule("a number of days >= 0", 0.0)
_RATE = _Rule("a number from 0 to 1", 0.0, high=1.0)
_LATEST = _Rule("a whole number >= 1 (a playbook keeps at least its latest version)", 1, whole=True)
_COSINE = _Rule("a cosine above 0 and at most 1", 0.0, above=True, high=1.0)
_HALF_LIFE = _Rule("a number of days above 0 (None: evidence never grows old)", 0.0, above=True)
_COUNT = _Rule("a whole number >= 1", 1, whole=True)


def _check(value: Any, source: str, rule: _Rule) -> Any:
    """``value`` when it is a number ``rule`` allows; else a ConfigurationError naming ``source``."""
    if not rule.holds(value):
        raise ConfigurationError(f"{source} must be {rule.what}, got {value!r}")
    return value


def _from_environment(env: Mapping[str, str], variable: str, rule: _Rule, default: Any, *, none_words: tuple[str, ...] = ()) -> Any:
    """The number ``variable`` holds, checked by ``rule`` with a message that names the
    variable and quotes its text; ``default`` when it is unset or empty; None for one of
    ``none_words``."""
    raw = env.get(variable, "")
    text = raw.strip()
    if not text:
        return default
    if text.lower() in none_words:
        return None
    value: Any = None
    if rule.whole:
        # Digits only: "2.9" is refused rather than cut to 2.
        value = int(text) if _WHOLE.fullmatch(text) else None
    else:
        with contextlib.suppress(ValueError):
            value = float(text)
    if not rule.holds(value):
        also = " or 'none'" if none_words else ""
        raise ConfigurationError(f"{variable} must be {rule.what}{also}, got {raw!r}")
    return value


def _flag(env: Mapping[str, str], variable: str, source: str, value: Any, default: bool) -> bool:
    if value is not None:
        if not isinstance(value, bool):
            raise ConfigurationError(f"{source} must be True or False, got {value!r}")
        return value
    raw = env.get(variable, "").strip().lower()
    if not raw:
        return default
    if raw not in _TRUE | _FALSE:
        raise ConfigurationError(f"{variable} must be true or false, got {raw!r}")
    return raw in _TRUE


@dataclass(frozen=True, slots=True)
class LearningConfig:
    """How the learning loop keeps trajectories, curates strategies and versions playbooks.

    The defaults: traces of 10 % of successes and of every failure are
    stored, trajectories are deleted 30 days after they complete
    (``trajectory_retention_days``; 0: never), strategies merge at cosine ≥ 0.85,
    and playbook versions follow :class:`VersionRetention`.
    ``max_strategies`` bounds a playbook (the lowest-confidence entries go first);
    ``confidence_half_life_days`` is the half life of old evidence (None: it never
    grows old); ``evidence_kept``
    is how many evidence entries (trajectory, outcome, time) a strategy lists (its
    counts cover all). Learning calls that name neither a user nor an agent act for
    ``default_agent_id``.

    :meth:`resolved` fills what is None from the environment (
    ``TRAJECTORY_RETENTION_DAYS``, ``TRAJECTORY_SAMPLE_RATE``,
    ``TRAJECTORY_ALWAYS_STORE_FAILURES``, ``PLAYBOOK_VERSION_KEEP_LATEST``,
    ``PLAYBOOK_VERSION_KEEP_ALL_MAJOR``, ``PLAYBOOK_VERSION_KEEP_DAYS``), when the
    engine is built, never at import. The two ``..._DAYS`` variables also take
    ``none`` (or ``never``): no age rule (for trajectories, as 0 does: kept forever).
    """

    trajectory_retention_days: float | None = None  # 30; 0 (the variable: also "none"): keep forever
    trajectory_sample_rate: float | None = None  # 0.1
    always_store_failures: bool | None = None  # True
    versions: VersionRetention | None = None
    merge_threshold: float = 0.85
    max_strategies: int = 100
    confidence_half_life_days: float | None = 90.0
    evidence_kept: int = 20
    default_agent_id: str = "default"
    #: Trajectory retention runs after every this many completions in a process
    #: (and whenever :meth:`memorist.Memory.prune_trajectories` is called).
    retention_every: int = 16

    def resolved(self, environ: Mapping[str, str] | None = None) -> LearningConfig:
        """A checked copy with the environment's values where this one has None.

        A value that is not a number of the setting's kind and range (NaN, an
        infinity, a string, a bool, 2.9 for a whole number, a negative number of
        days) is a :class:`~memorist.ConfigurationError` naming the setting, or the
        variable when the value came from the environment."""
        env = config.learning_environment() if environ is None else environ
        days = self.trajectory_retention_days
        if days is None:
            days = _from_environment(env, "TRAJECTORY_RETENTION_DAYS", _DAYS, 30.0, none_words=_KEEP_FOREVER)
        else:
            _check(days, "trajectory_retention_days", _DAYS)
        if days == 0:
            days = None  # 0: never delete by age
        rate = self.trajectory_sample_rate
        if rate is None:
            rate = _from_environment(env, "TRAJECTORY_SAMPLE_RATE", _RATE, 0.1)
        else:
            _check(rate, "trajectory_sample_rate", _RATE)
        failures = _flag(env, "TRAJECTORY_ALWAYS_STORE_FAILURES", "always_store_failures", self.always_store_failures, True)
        versions = self.versions
        if versions is None:
            versions = VersionRetention(
                keep_latest=_from_environment(env, "PLAYBOOK_VERSION_KEEP_LATEST", _LATEST, 5),
                keep_all_major=_flag(env, "PLAYBOOK_VERSION_KEEP_ALL_MAJOR", "versions.keep_all_major", None, True),
                keep_days=_from_environment(env, "PLAYBOOK_VERSION_KEEP_DAYS", _DAYS, 90.0, none_words=_NO_AGE_RULE),
            )
        if not isinstance(versions, VersionRetention):
            raise ConfigurationError(f"versions must be a VersionRetention or a mapping of its fields, got {type(versions).__name__}")
        _check(versions.keep_latest, "versions.keep_latest", _LATEST)
        if not isinstance(versions.keep_all_major, bool):
            raise ConfigurationError(f"versions.keep_all_major must be True or False, got {versions.keep_all_major!r}")
        if versions.keep_days is not None:
            _check(versions.keep_days, "versions.keep_days", _DAYS)
        _check(self.merge_threshold, "merge_threshold", _COSINE)
        if self.confidence_half_life_days is not None:
            _check(self.confidence_half_life_days, "confidence_half_life_days", _HALF_LIFE)
        for name in ("max_strategies", "evidence_kept", "retention_every"):
            _check(getattr(self, name), name, _COUNT)
        if not isinstance(self.default_agent_id, str) or not self.default_agent_id.strip():
            raise ConfigurationError("default_agent_id must be a non-empty string")
        return dataclasses.replace(
            self, trajectory_retention_days=days, trajectory_sample_rate=rate, always_store_failures=failures, versions=versions
        )

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> LearningConfig:
        """From plain data, e.g. ``{"trajectory_sample_rate": 1.0, "versions": {"keep_latest": 3}}``."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigurationError(f"unknown learning setting {unknown[0]!r}; known: {', '.join(sorted(known))}")
        values = dict(data)
        versions = values.get("versions")
        if isinstance(versions, Mapping):
            fields = {f.name for f in dataclasses.fields(VersionRetention)}
            wrong = sorted(str(k) for k in set(versions) - fields)
            if wrong:
                raise ConfigurationError(f"unknown versions setting {wrong[0]!r}; known: {', '.join(sorted(fields))}")
            values["versions"] = VersionRetention(**versions)
        return cls(**values)


__all__ = [
    "CATEGORIES",
    "CREDIT_HISTORY",
    "CREDIT_MARGIN",
    "CREDIT_MIN_RUNS",
    "CREDIT_Z",
    "DAY",
    "HARMFUL",
    "HELPFUL",
    "NEUTRAL",
    "STATUSES",
    "SYMBOLS",
    "LearningConfig",
    "VersionRetention",
    "canonical_steps",
    "category_of",
    "confidence",
    "credit",
    "improvement",
    "keep_trace",
    "recency_factor",
    "support",
    "trace_digest",
    "version_label",
    "versions_to_keep",
]
