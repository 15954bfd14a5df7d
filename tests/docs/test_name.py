"""The project has one name. The previous one survives in two places only: the module
that migrates stores written under it (memorist.reserved) and the docs' origins page,
whose sentence says what the project was called. The stores made by that release (tests/fixtures)
are kept as they were made."""

from __future__ import annotations

import subprocess
from pathlib import Path

from memorist.reserved import PREVIOUS_NAME

ROOT = Path(__file__).resolve().parents[2]
ALLOWED = {"src/memorist/reserved.py"}


def _tracked() -> list[str]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [p for p in out.splitlines() if not p.startswith("tests/fixtures/")]


def test_the_previous_name_appears_nowhere_else() -> None:
    found = []
    for rel in _tracked():
        if rel in ALLOWED:
            continue
        try:
            text = (ROOT / rel).read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError):
            continue
        lines = [i for i, line in enumerate(text.splitlines(), 1) if PREVIOUS_NAME in line.lower()]
        if rel == "docs/origins.md":
            assert len(lines) == 1, f"docs/origins.md names the previous name on lines {lines}; once is enough"
            continue
        found += [f"{rel}:{i}" for i in lines]
    assert not found, f"the previous name is still used: {found}"
    origins = (ROOT / "docs" / "origins.md").read_text(encoding="utf-8").lower()
    assert PREVIOUS_NAME in origins, "the origins page no longer says what the project was called"
    assert not list(ROOT.glob(f"src/{PREVIOUS_NAME}*")), "a package under the previous name"
