"""The built wheel installs `memorist` (the module and the command) and nothing under
the project's previous name; that name is read only by the module that migrates the
stores written under it (the docs site's origins page, not the package, says what the
project was called)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from memorist.reserved import PREVIOUS_NAME

ROOT = Path(__file__).resolve().parents[2]


def test_the_wheel_holds_memorist_and_nothing_under_the_previous_name(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(ROOT), "-w", str(tmp_path)],
                   check=True, capture_output=True, text=True, timeout=600)
    (wheel,) = tmp_path.glob("memorist-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        assert {n.split("/")[0] for n in names} == {"memorist", wheel.name.split("-py3")[0] + ".dist-info"}
        assert not [n for n in names if PREVIOUS_NAME in n.lower()]
        entry_points = archive.read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
        assert "[console_scripts]\nmemorist = memorist.cli:main" in entry_points
        assert PREVIOUS_NAME not in entry_points
        mentions = [n for n in names if PREVIOUS_NAME.encode() in archive.read(n).lower()]
        assert mentions == ["memorist/reserved.py"]
