"""The unit tier: pure code, the whole folder in seconds (tests/README.md).

A test here opens no store file and no database, starts no server and no process, and
loads no model; one that tries fails, and belongs in another tier. An in-memory store
(``Memory(":memory:")``, as the docstring examples use) is allowed.
"""

from __future__ import annotations

import socket
import sqlite3
import subprocess
import sys

import pytest

_MODELS = ("torch", "sentence_transformers", "transformers", "onnxruntime")


def _refuse(what: str):
    def refuse(*args, **kwargs):
        raise AssertionError(f"a unit test may not {what}: move it to another tier (tests/README.md)")

    return refuse


@pytest.fixture(autouse=True)
def _unit_only(monkeypatch: pytest.MonkeyPatch):
    real_connect = sqlite3.connect

    def connect(database, *args, **kwargs):
        if database == ":memory:" or (kwargs.get("uri") and "mode=memory" in str(database)):
            return real_connect(database, *args, **kwargs)
        raise AssertionError(f"a unit test may not open a store file ({database!r}): move it to another tier")

    monkeypatch.setattr(sqlite3, "connect", connect)
    monkeypatch.setattr(socket.socket, "bind", _refuse("start a server"))
    monkeypatch.setattr(socket.socket, "connect", _refuse("open a connection"))
    monkeypatch.setattr(subprocess.Popen, "__init__", _refuse("start a process"))
    before = set(sys.modules)
    yield
    loaded = [name for name in _MODELS if name in sys.modules and name not in before]
    if loaded:
        pytest.fail(f"a unit test may not load a model ({', '.join(loaded)}): move it to another tier")


@pytest.fixture
def pg_url():
    pytest.fail("a unit test may not open a database: move it to tests/store or tests/capabilities")
