"""``memorist tiers plot``: the energy tiers' forgetting, drawn (matplotlib, the ``plot`` extra).

One panel per tier: sample memories decaying at the tier's rate, the tier's
promotion threshold and the expiry line. A last panel follows one memory through a
life of boosts and hourly maintenance runs, from working to long-term, with the
same rules the engine applies (:mod:`memorist.policies.energy`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from .errors import MissingDependencyError
from .policies.energy import LIVE_TIERS, EnergyConfig, curve, decay, hours_to, next_tier

#: The default start energies, drawn in a tier the store has no memory of.
_THEORY: dict[str, list[tuple[str, float]]] = {
    "working": [("default 1.0", 1.0), ("learning 2.0", 2.0), ("reminder 2.5", 2.5), ("insight 3.0", 3.0)],
    "short_term": [("just promoted 2.5", 2.5), ("boosted 4.0", 4.0), ("boosted 5.5", 5.5)],
    "long_term": [("just promoted 5.5", 5.5), ("boosted 8.0", 8.0)],
}


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only: no display needed
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise MissingDependencyError(
            "memorist tiers plot needs matplotlib: pip install 'memorist[plot]'"
        ) from exc
    return plt


def _horizon(config: EnergyConfig, tier: str, energies: Sequence[float]) -> float:
    """Hours to draw: until the strongest sample would expire (within bounds)."""
    rate = config.rate(next(t for t in LIVE_TIERS if t.value == tier))
    longest = max((hours_to(e, config.expire_below, rate) or 0.0) for e in energies) if energies else 0.0
    floor, cap = {"working": (6, 48), "short_term": (48, 24 * 60), "long_term": (24 * 30, 24 * 365 * 5)}[tier]
    return float(min(max(longest * 1.05, floor), cap))


def life(config: EnergyConfig, *, start: float = 2.5, boosts: Sequence[tuple[float, float]] = ((1, 2.0), (3, 1.0), (24, 2.0), (25, 2.0)),
         hours: float = 48.0, step: float = 0.25) -> tuple[list[float], list[float], list[tuple[float, str]]]:
    """One memory's energy over ``hours`` with ``boosts`` (hour, amount) and a
    maintenance run every hour: ``(times, energies, [(hour, promoted to tier)])``."""
    times: list[float] = []
    energies: list[float] = []
    events: list[tuple[float, str]] = []
    tier = LIVE_TIERS[0]
    energy = start
    pending = sorted(boosts)
    t = 0.0
    while t <= hours + 1e-9:
        times.append(t)
        energies.append(energy)
        t_next = t + step
        energy = decay(energy, step, config.rate(tier))
        while pending and pending[0][0] <= t_next + 1e-9:
            energy += pending.pop(0)[1]
        if abs(t_next - round(t_next)) < 1e-9:  # the hourly maintenance run
            target = next_tier(tier)
            if target is not None and config.promotes(tier, energy):
                tier = target
                events.append((t_next, tier.value))
        t = t_next
    return times, energies, events


def plot_tiers(path: str, config: EnergyConfig, samples: Mapping[str, Sequence[tuple[str, float]]] | None = None) -> dict[str, Any]:
    """Write the PNG to ``path``; returns ``{"path", "bytes", "curves", "panels"}``.

    ``samples``: per tier name, ``(label, energy)`` of memories to draw (the
    store's); a tier without any gets the default start energies."""
    plt = _pyplot()
    samples = samples or {}
    fig, axes = plt.subplots(2, 2, figsize=(12, 8.5))
    curves = 0
    for ax, tier in zip(axes.flat, LIVE_TIERS, strict=False):
        name = tier.value
        drawn = [(label[:38] + ("…" if len(label) > 38 else ""), e) for label, e in samples.get(name, ())] or _THEORY[name]
        source = "memories of the store" if samples.get(name) else "the default start energies"
        rate = config.rate(tier)
        span = _horizon(config, name, [e for _, e in drawn])
        unit, scale = ("days", 24.0) if span > 72 else ("hours", 1.0)
        for label, energy in drawn:
            xs, ys = curve(energy, rate, span)
            ax.plot([x / scale for x in xs], ys, label=f"{label} ({energy:.2f})")
            curves += 1
        threshold = config.threshold(tier)
        if threshold is not None:
            ax.axhline(threshold, color="tab:green", linestyle="--", linewidth=1.2, label=f"promotion > {threshold:g}")
        ax.axhline(config.expire_below, color="tab:red", linestyle=":", linewidth=1.2, label=f"expiry < {config.expire_below:g}")
        ax.set_title(f"{name}: λ = {rate:g} per hour ({source})", fontsize=10)
        ax.set_xlabel(unit)
        ax.set_ylabel("energy")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper right")
    ax = axes.flat[3]
    times, energies, events = life(config)
    ax.plot(times, energies, color="tab:purple", label="a reminder (2.5), boosted at hours 1, 3, 24, 25")
    curves += 1
    for hour, tier_name in events:
        ax.axvline(hour, color="tab:gray", linestyle="--", linewidth=0.8)
        ax.annotate(f"→ {tier_name}", (hour, max(energies) * 0.92), fontsize=8, rotation=90, ha="right")
    ax.axhline(config.working_to_short_term, color="tab:green", linestyle="--", linewidth=1, label=f"working → short_term > {config.working_to_short_term:g}")
    ax.axhline(config.short_term_to_long_term, color="tab:olive", linestyle="--", linewidth=1,
               label=f"short_term → long_term > {config.short_term_to_long_term:g}")
    ax.axhline(config.expire_below, color="tab:red", linestyle=":", linewidth=1, label=f"expiry < {config.expire_below:g}")
    ax.set_title("one memory's life: boosts, hourly maintenance, promotions", fontsize=10)
    ax.set_xlabel("hours")
    ax.set_ylabel("energy")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper right")
    fig.suptitle("Memorist energy tiers: E(t) = E0·e^(−λt)", fontsize=13)
    fig.tight_layout()
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fig.savefig(path, format="png", dpi=100)
    plt.close(fig)
    return {"path": path, "bytes": os.path.getsize(path), "curves": curves, "panels": 4}


__all__ = ["life", "plot_tiers"]
