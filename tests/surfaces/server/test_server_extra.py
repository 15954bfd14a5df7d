"""Importing the memory service without its extra names the extra to install, as the
PostgreSQL store and the client do (it was a bare ModuleNotFoundError of a module
the user never asked for)."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize("missing", ["fastapi", "uvicorn"])
def test_the_service_without_its_extra_names_the_extra(missing: str) -> None:
    code = (f"import sys; sys.modules[{missing!r}] = None\n"
            "from memorist.errors import MissingDependencyError\n"
            "try:\n    import memorist.server\nexcept MissingDependencyError as exc:\n    print(exc)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert 'pip install "memorist[server]"' in done.stdout and missing in done.stdout
