"""The package as the index would carry it: ``python -m build`` makes the sdist and the
wheel from the files a fresh clone has, ``twine check --strict`` accepts both, their
metadata says what a user looks for (the license, the version, where the project lives),
the description makes sense away from the repository, and the wheel installed in a
fresh virtual environment runs ``memorist demo``.

CI runs these (they are in the README's test command); ``-m "not packaging"`` leaves the
slow ones out of a local run.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from email.message import Message
from email.parser import Parser
from pathlib import Path

import pytest

import memorist
from memorist.reserved import PREVIOUS_NAME

ROOT = Path(__file__).resolve().parents[2]
URL = "https://github.com/memorist-dev/memorist"
CHANGELOG = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")


def _clone_files() -> list[str]:
    """The files a clone of this tree has: those tracked and those new but not ignored
    (so a local run sees a file not yet committed, and never a build/ or .venv/)."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.decode()
    return [p for p in out.split("\0") if p and (ROOT / p).is_file()]


def _clean_env() -> dict[str, str]:
    """This process's environment without what points Python at this checkout."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if sys.prefix not in p)
    return env


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The sdist and the wheel, built by ``python -m build`` (the wheel from the sdist,
    as the index's users would build it) from a copy of the tree: building in place
    would race the other tests that build this tree."""
    clone = tmp_path_factory.mktemp("clone")
    for rel in _clone_files():
        (clone / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, clone / rel)
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(clone)],
                          capture_output=True, text=True, timeout=900, env=_clean_env())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (sdist,) = out.glob("memorist-*.tar.gz")
    (wheel,) = out.glob("memorist-*.whl")
    # The model's distribution, which the package depends on (published beside it).
    models = tmp_path_factory.mktemp("model")
    done = subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(models), str(clone / "packages/memorist-minilm")],
                          capture_output=True, text=True, timeout=900, env=_clean_env())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (model,) = models.glob("memorist_model_minilm_l6_v2-*.whl")
    return {"sdist": sdist, "wheel": wheel, "model": model}


def _metadata(wheel: Path) -> Message:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        return Parser().parsestr(archive.read(name).decode("utf-8"))


@pytest.mark.packaging
def test_twine_check_strict_accepts_the_distributions(dists: dict[str, Path]) -> None:
    done = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", str(dists["sdist"]), str(dists["wheel"]), str(dists["model"])],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("PASSED") == 3, done.stdout  # the sdist, the wheel, the model's wheel


@pytest.mark.packaging
def test_the_metadata_says_what_a_user_looks_for(dists: dict[str, Path]) -> None:
    meta = _metadata(dists["wheel"])
    assert meta["Name"] == "memorist"
    assert meta["Version"] == memorist.__version__
    assert dists["wheel"].name.startswith(f"memorist-{memorist.__version__}-")
    assert dists["sdist"].name == f"memorist-{memorist.__version__}.tar.gz"
    # The license as an SPDX expression with its file, and no license classifier beside
    # it (the index refuses both at once).
    assert meta["License-Expression"] == "MIT"
    assert meta.get_all("License-File") == ["LICENSE"]
    assert not [c for c in meta.get_all("Classifier") if c.startswith("License ::")]
    assert meta["Author"]
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL"))
    assert urls == {
        "Homepage": URL,
        "Documentation": "https://memorist-dev.github.io/memorist/",
        "Repository": URL,
        "Changelog": f"{URL}/blob/main/CHANGELOG.md",
        "Issues": f"{URL}/issues",
    }
    classifiers = set(meta.get_all("Classifier"))
    assert {"Programming Language :: Python :: 3.11", "Typing :: Typed", "Intended Audience :: Developers"} <= classifiers
    assert meta["Requires-Python"] == ">=3.11"
    assert "llm" in meta["Keywords"].split(",")
    assert meta["Description-Content-Type"] == "text/markdown"


@pytest.mark.packaging
def test_both_distributions_carry_the_license(dists: dict[str, Path]) -> None:
    license_text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert license_text.startswith("MIT License") and "Copyright (c) 2026 The Memorist authors" in license_text
    with zipfile.ZipFile(dists["wheel"]) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/licenses/LICENSE"))
        assert archive.read(name).decode("utf-8") == license_text
    with tarfile.open(dists["sdist"]) as archive:
        member = archive.extractfile(f"memorist-{memorist.__version__}/LICENSE")
        assert member is not None and member.read().decode("utf-8") == license_text


# A link on the index's page resolves against the index, not the repository: every
# link of the description must be absolute (or an anchor of the page itself).
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)|^\s*\[[^\]]+\]:\s*<?(\S+?)>?\s*$|(?:href|src)=[\"']([^\"']+)", re.M)


def relative_links(markdown: str) -> list[str]:
    """The links of ``markdown`` that only resolve inside the repository (its fenced
    code is left out: a link there is text)."""
    prose = re.sub(r"^(```|~~~).*?^\1", "", markdown, flags=re.S | re.M)
    targets = [next(g for g in m.groups() if g) for m in _LINK.finditer(prose)]
    return [t for t in targets if not re.match(r"(https?://|mailto:|#)", t)]


def test_relative_links_are_found() -> None:
    text = (
        "See [the docs](docs/x.md), ![a picture](img/a.png) and [home](https://a.example/).\n"
        "[ref]: bench/RESULTS.md\n<a href=\"tests/README.md\">t</a> [top](#install)\n"
        "```bash\necho [not](a/link)\n```\n"
    )
    assert relative_links(text) == ["docs/x.md", "img/a.png", "bench/RESULTS.md", "tests/README.md"]


@pytest.mark.packaging
def test_the_description_makes_sense_away_from_the_repository(dists: dict[str, Path]) -> None:
    description = _metadata(dists["wheel"]).get_payload()
    assert description.strip(), "the wheel has no description"
    assert relative_links(description) == [], "links of the package's description that only resolve in the repository"


@pytest.mark.packaging
def test_the_wheel_installs_in_a_fresh_venv_and_runs_the_demo(dists: dict[str, Path], tmp_path: Path) -> None:
    """What a user of the index gets: ``pip install memorist`` in a new environment
    (dependencies from the package index or pip's cache), then ``memorist demo``.

    The model's wheel is found beside it (``--find-links``: it is published beside the
    package); the demo runs on it, and nothing installed is torch."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    bin_dir = venv / ("Scripts" if os.name == "nt" else "bin")
    env = _clean_env()
    done = subprocess.run([str(bin_dir / "python"), "-m", "pip", "install", "-q", "--find-links", str(dists["model"].parent),
                           str(dists["wheel"])], capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    installed = subprocess.run([str(bin_dir / "python"), "-m", "pip", "list", "--format", "freeze"],
                               capture_output=True, text=True, timeout=120, env=env, check=True).stdout.lower()
    assert "memorist-model-minilm-l6-v2==" in installed and "torch==" not in installed, installed

    work, temp = tmp_path / "work", tmp_path / "temp"
    work.mkdir()
    temp.mkdir()
    env = {**env, "HOME": str(work), "XDG_DATA_HOME": str(work / "data"), "XDG_CACHE_HOME": str(work / "cache"),
           "TMPDIR": str(temp)}
    for name in [n for n in env if n.startswith("MEMORIST_")]:
        del env[name]
    where = subprocess.run([str(bin_dir / "python"), "-c", "import memorist; print(memorist.__file__)"],
                           capture_output=True, text=True, timeout=120, env=env, cwd=work, check=True).stdout
    assert Path(where.strip()).is_relative_to(venv), f"memorist was imported from {where}, not the installed wheel"

    version = subprocess.run([str(bin_dir / "memorist"), "--version"], capture_output=True, text=True,
                             timeout=120, env=env, cwd=work)
    assert version.stdout.strip() == f"memorist, version {memorist.__version__}", version.stdout + version.stderr

    demo = subprocess.run([str(bin_dir / "memorist"), "demo"], capture_output=True, text=True, timeout=600, env=env, cwd=work)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert "Added 2 memories successfully" in demo.stdout, demo.stdout
    assert "embedder: sentence-transformers/all-MiniLM-L6-v2" in demo.stdout, "the demo did not run on the bundled model"
    # The second conversation finds what the first one taught, in a reopened store.
    second = demo.stdout.split("Conversation 2", 1)[1]
    assert "Wants to be reminded that 1/2 becomes 3/6" in second, demo.stdout
    assert "The temporary store is removed." in demo.stdout
    assert not list(temp.glob("memorist-demo-*")), "the demo left its temporary store behind"


# The changelog ----------------------------------------------------------------------------
_RELEASE = re.compile(r"^## \[(\d+)\.(\d+)\.(\d+)\] - (\d{4}-\d{2}-\d{2})$", re.M)
_KINDS = {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}


def test_the_changelogs_latest_release_is_the_packages_version() -> None:
    releases = _RELEASE.findall(CHANGELOG)
    assert releases, "CHANGELOG.md names no release as '## [X.Y.Z] - YYYY-MM-DD'"
    assert ".".join(releases[0][:3]) == memorist.__version__
    # Newest first, by version and by date.
    versions = [tuple(int(n) for n in r[:3]) for r in releases]
    assert versions == sorted(versions, reverse=True) and len(set(versions)) == len(versions)
    dates = [r[3] for r in releases]
    assert dates == sorted(dates, reverse=True)


def test_the_changelog_keeps_its_form() -> None:
    headings = re.findall(r"^(#{2,3}) (.*)$", CHANGELOG, re.M)
    for level, title in headings:
        if level == "##":
            assert title == "[Unreleased]" or _RELEASE.match(f"## {title}"), f"release heading {title!r}"
        else:
            assert title in _KINDS, f"section {title!r}: use one of {sorted(_KINDS)}"
    for version in re.findall(r"^## \[([^\]]+)\]", CHANGELOG, re.M):
        assert re.search(rf"^\[{re.escape(version)}\]: {re.escape(URL)}/\S+$", CHANGELOG, re.M), f"no link for {version}"


def test_the_changelog_speaks_a_users_words() -> None:
    banned = [r"\bspec\s*0\d\d", r"ltmbse", r"etienne", re.escape(PREVIOUS_NAME)]
    found = [word for word in banned if re.search(word, CHANGELOG, re.I)]
    assert not found, f"CHANGELOG.md names what users never saw: {found}"
