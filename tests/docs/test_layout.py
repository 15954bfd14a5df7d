"""The layout ARCHITECTURE.md describes, where a test can hold it: only
``memorist/config.py`` reads the environment (every other module asks it, when an
object is built, never at import)."""

from __future__ import annotations

import ast
from pathlib import Path

import memorist

PACKAGE = Path(memorist.__file__).resolve().parent
_READERS = {"environ", "environb", "getenv", "getenvb"}


def environment_reads(path: Path) -> list[str]:
    """Where ``path`` touches ``os.environ`` or ``os.getenv`` (also through ``import os
    as ...`` or ``from os import environ``), as ``"line: code"``."""
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source, filename=str(path))
    os_names = {"os"}
    found: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            os_names |= {alias.asname or alias.name for alias in node.names if alias.name == "os"}
        elif isinstance(node, ast.ImportFrom) and node.module == "os":
            found += [node for alias in node.names if alias.name in _READERS]
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in _READERS
            and isinstance(node.value, ast.Name)
            and node.value.id in os_names
        ):
            found.append(node)
    lines = source.splitlines()
    return [f"{n.lineno}: {lines[n.lineno - 1].strip()}" for n in sorted(found, key=lambda n: n.lineno)]


def test_only_config_reads_the_environment() -> None:
    readers = {
        str(path.relative_to(PACKAGE.parent)): reads
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != PACKAGE / "config.py" and (reads := environment_reads(path))
    }
    assert readers == {}, "read the environment through memorist.config instead"


def test_the_scan_sees_configs_reads() -> None:
    # The scan above proves nothing if it cannot see a read: config.py has several.
    assert len(environment_reads(PACKAGE / "config.py")) >= 5


def test_the_scan_sees_every_spelling(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "import os\nimport os as system\nfrom os import getenv\n"
        "a = os.environ.get('A')\nb = system.getenv('B')\nc = getenv('C')\nd = os.path.join('x')\n",
        encoding="utf-8",
    )
    assert [line.split(":")[0] for line in environment_reads(module)] == ["3", "4", "5"]
