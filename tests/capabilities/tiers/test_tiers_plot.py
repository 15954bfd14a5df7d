"""memorist.tiers_plot: the picture, and the message when matplotlib is missing."""

from __future__ import annotations

import builtins

import pytest

from memorist import MissingDependencyError
from memorist.policies.energy import EnergyConfig
from memorist.tiers_plot import life, plot_tiers


def test_the_png_shows_samples_and_the_life_of_a_memory(tmp_path):
    path = tmp_path / "t.png"
    result = plot_tiers(str(path), EnergyConfig(), {"working": [("Renew the TLS certificate", 2.2)]})
    assert result["panels"] == 4 and result["curves"] == 1 + 3 + 2 + 1
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and result["bytes"] == path.stat().st_size


def test_the_life_of_a_memory_follows_the_engine_s_rules():
    times, energies, events = life(EnergyConfig())
    assert [tier for _, tier in events] == ["short_term", "long_term"]
    assert energies[0] == 2.5 and len(times) == len(energies)
    assert life(EnergyConfig(), boosts=())[2] == []  # unused, it never rises


def test_a_missing_matplotlib_names_the_extra(tmp_path, monkeypatch):
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    with pytest.raises(MissingDependencyError, match=r"memorist\[plot\]"):
        plot_tiers(str(tmp_path / "x.png"), EnergyConfig())
    assert not (tmp_path / "x.png").exists()
