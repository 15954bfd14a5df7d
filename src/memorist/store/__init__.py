"""Storage backends behind one contract (:mod:`memorist.store.base`).

:func:`open_store` turns what a user wrote — ``Memory(path)``, ``memorist --db``,
``MEMORIST_DB``, ``memorist serve --db`` — into a store:

- a file path, ``":memory:"`` or ``sqlite:///path`` (``sqlite:///:memory:``): the
  embedded SQLite store (the default, nothing to set up);
- ``postgresql://…`` or ``postgres://…``: PostgreSQL with pgvector (the ``postgres``
  extra).

Any other URL is an error, never a local folder named after it.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from ..errors import ConfigurationError, ValidationError

if TYPE_CHECKING:
    from .base import Store

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_POSTGRES_SCHEMES = {"postgresql", "postgres", "postgresql+psycopg"}


def store_kind(target: str | os.PathLike[str]) -> str:
    """``"sqlite"`` or ``"postgresql"`` for what :func:`open_store` would open."""
    if not isinstance(target, str):
        return "sqlite"
    match = _URL.match(target)
    if match is None:
        return "sqlite"
    scheme = match.group(1).lower()
    if scheme == "sqlite":
        return "sqlite"
    if scheme in _POSTGRES_SCHEMES:
        return "postgresql"
    raise ConfigurationError(
        f"unsupported store URL scheme {scheme!r} in {redact(target)!r}: use a file path, "
        "sqlite:///path/to/file.db or postgresql://user@host/db"
    )


def sqlite_path(target: str | os.PathLike[str]) -> str | os.PathLike[str]:
    """The file path of a SQLite target (``sqlite:///x.db`` → ``x.db``,
    ``sqlite:////abs/x.db`` → ``/abs/x.db``)."""
    if isinstance(target, str) and target.lower().startswith("sqlite://"):
        rest = target[len("sqlite://") :]
        if not rest.startswith("/") or rest == "/":
            raise ConfigurationError(f"a SQLite URL is sqlite:///relative.db or sqlite:////absolute.db, got {target!r}")
        return rest[1:]
    return target


def redact(url: str) -> str:
    """``url`` with any password replaced, for messages and logs."""
    return re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", url)


def open_store(target: str | os.PathLike[str], *, busy_timeout: float = 30.0, **options: object) -> Store:
    """Open the store ``target`` names (see the module docstring).

    ``busy_timeout``: how long a SQLite writer waits for another process's lock.
    ``options`` go to the PostgreSQL store (``pool_size`` …).
    """
    if not isinstance(target, str | bytes) and not hasattr(target, "__fspath__"):
        raise ValidationError("path", f"must be a file path or a store URL, got {type(target).__name__}")
    if isinstance(target, bytes):
        target = os.fsdecode(target)
    nul = os.fsdecode(target).find("\x00")
    if nul >= 0:  # no file system or database takes one: named here, not left to a bare ValueError
        raise ValidationError("path", f"holds a NUL character (U+0000) at position {nul}; a file path or store URL cannot hold one")
    kind = store_kind(target)
    if kind == "postgresql":
        from .postgres import PostgresStore

        if "lock_timeout" not in options and "lock_timeout=" not in str(target):
            options["lock_timeout"] = busy_timeout  # how long a writer waits for another
        return PostgresStore(str(target), **options)  # type: ignore[arg-type]
    if options:
        raise ConfigurationError(f"options {sorted(options)} apply to PostgreSQL stores only")
    from .sqlite import SQLiteStore

    return SQLiteStore(sqlite_path(target), busy_timeout=busy_timeout)


__all__ = ["open_store", "redact", "sqlite_path", "store_kind"]
