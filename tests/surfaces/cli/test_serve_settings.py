"""`memorist serve`'s limits: flags, their MEMORIST_ variables (read through
memorist.config, listed in docs/configuration.md) and the errors that name whichever
was wrong, before anything starts."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from memorist.cli import cli
from memorist.config import SERVE_ENVIRONMENT

CONFIGURATION = Path(__file__).resolve().parents[3] / "docs" / "configuration.md"


def documented() -> dict[str, str]:
    """The service's settings as docs/configuration.md lists them: flag -> variable."""
    section = CONFIGURATION.read_text(encoding="utf-8").split("## The service's settings", 1)[1].split("\n## ", 1)[0]
    return dict(re.findall(r"^\| `(--[a-z-]+)`[^|]*\| `(MEMORIST_[A-Z_]+)` \|", section, re.MULTILINE))


@pytest.fixture(autouse=True)
def _no_serve_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in SERVE_ENVIRONMENT.values():
        monkeypatch.delenv(variable, raising=False)
    import uvicorn

    # A setting that should have been refused ends the command at once, not in a server.
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: None)


def serve(tmp_path: Path, *args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(cli, ["--db", str(tmp_path / "s.db"), "--embedder", "hashing", "serve", "--create", *args], env=env)


def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *args: str, env: dict[str, str] | None = None) -> tuple[Any, str]:
    """The limits `memorist serve` gave its app (uvicorn is not started), and its output."""
    import uvicorn

    apps: list[Any] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: apps.append(app))
    result = serve(tmp_path, *args, env=env)
    assert result.exit_code == 0 and len(apps) == 1, result.output
    return apps[0].state.service.limits, result.output


#: For each documented flag: a value other than its default, the ServerLimits field it
#: sets, and what that field then holds.
SAMPLES = {
    "--rate-limit": ("90/min", "rate_per_minute", 90.0),
    "--burst": ("7", "burst", 7),
    "--max-body-bytes": ("2048", "max_body_bytes", 2048),
    "--max-messages": ("5", "max_messages", 5),
    "--max-text-chars": ("321", "max_text_chars", 321),
    "--max-connections": ("200", "max_connections", 200),
    "--max-concurrency": ("9", "max_concurrency", 9),
    "--max-concurrency-per-caller": ("3", "max_concurrency_per_caller", 3),
    "--timeout-keep-alive": ("2.5", "timeout_keep_alive", 2.5),
    "--timeout-head": ("4", "timeout_head", 4.0),
    "--timeout-body": ("6", "timeout_body", 6.0),
    "--auth-failures": ("3", "auth_failures_per_minute", 3.0),
    "--erasures": ("5", "erasures_per_minute", 5.0),
}


def test_the_documented_variables_are_the_ones_serve_reads() -> None:
    assert documented() == {"--" + option.replace("_", "-"): variable for option, variable in SERVE_ENVIRONMENT.items()}
    assert set(SAMPLES) == set(documented())  # a setting documented later needs a sample here


@pytest.mark.parametrize(("flag", "variable"), sorted(documented().items()))
def test_every_documented_variable_sets_its_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flag: str, variable: str) -> None:
    value, field, expected = SAMPLES[flag]
    default, _ = served(tmp_path, monkeypatch)
    assert getattr(default, field) != expected
    limits, _ = served(tmp_path, monkeypatch, env={variable: value})
    assert getattr(limits, field) == expected
    # The flag wins over the variable.
    limits, _ = served(tmp_path, monkeypatch, flag, value, env={variable: "1"})
    assert getattr(limits, field) == expected


@pytest.mark.parametrize("variable", sorted(documented().values()))
@pytest.mark.parametrize("raw", ["nan", "inf", "-1", "1e400", "twelve"])
def test_a_documented_variable_refuses_what_its_flag_refuses(tmp_path: Path, variable: str, raw: str) -> None:
    flag = next(f for f, v in documented().items() if v == variable)
    by_flag = serve(tmp_path, flag, raw)
    assert by_flag.exit_code == 2 and flag in by_flag.output, by_flag.output
    by_variable = serve(tmp_path, env={variable: raw})
    assert by_variable.exit_code == 2, by_variable.output
    assert variable in by_variable.output
    assert not (tmp_path / "s.db").exists()  # refused before the store was made


def test_the_banner_shows_the_limits_read_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = {"MEMORIST_RATE_LIMIT": "2/min", "MEMORIST_BURST": "3", "MEMORIST_MAX_CONCURRENCY_PER_CALLER": "5"}
    _, output = served(tmp_path, monkeypatch, env=env)
    assert "2 requests/min per key (bursts of 3)" in output
    assert "64 requests at work (5 per client)" in output


@pytest.mark.parametrize("option", sorted(SERVE_ENVIRONMENT))
def test_every_limit_has_a_flag_and_a_documented_variable(option: str) -> None:
    out = CliRunner().invoke(cli, ["serve", "--help"], terminal_width=200).output
    flag = "--" + option.replace("_", "-")
    assert flag in out
    assert SERVE_ENVIRONMENT[option] in out


@pytest.mark.parametrize(("variable", "raw"), [
    ("MEMORIST_TIMEOUT_HEAD", "nan"), ("MEMORIST_TIMEOUT_BODY", "0"), ("MEMORIST_TIMEOUT_KEEP_ALIVE", "inf"),
    ("MEMORIST_MAX_CONCURRENCY", "many"), ("MEMORIST_MAX_CONNECTIONS", "0"), ("MEMORIST_AUTH_FAILURES", "-1"),
    ("MEMORIST_RATE_LIMIT", "600/fortnight"), ("MEMORIST_RATE_LIMIT", "9" * 400), ("MEMORIST_BURST", "0"),
    ("MEMORIST_MAX_BODY_BYTES", "99999999999"), ("MEMORIST_MAX_MESSAGES", "2.5"), ("MEMORIST_MAX_TEXT_CHARS", "12x"),
    ("MEMORIST_MAX_CONCURRENCY_PER_CALLER", "0"),
])
def test_a_bad_variable_is_an_error_naming_it(tmp_path: Path, variable: str, raw: str) -> None:
    result = serve(tmp_path, env={variable: raw})
    assert result.exit_code == 2, result.output
    assert variable in result.output
    assert not (tmp_path / "s.db").exists()  # refused before the store was made


def test_a_flag_wins_over_its_variable(tmp_path: Path) -> None:
    # A flag that is wrong is named as the flag, even when the variable is fine...
    result = serve(tmp_path, "--timeout-head", "nan", env={"MEMORIST_TIMEOUT_HEAD": "3"})
    assert result.exit_code == 2 and "--timeout-head" in result.output and "MEMORIST_" not in result.output
    # ...and a good flag hides a bad variable.
    result = serve(tmp_path, "--max-connections", "10000000", env={"MEMORIST_MAX_CONNECTIONS": "zero"})
    assert result.exit_code == 2 and "--max-connections" in result.output and "descriptors" in result.output


def test_more_connections_than_descriptors_is_refused(tmp_path: Path) -> None:
    result = serve(tmp_path, env={"MEMORIST_MAX_CONNECTIONS": "10000000"})
    assert result.exit_code == 2
    assert "MEMORIST_MAX_CONNECTIONS" in result.output and "ulimit -n" in result.output
