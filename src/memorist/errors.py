"""Memorist's exception tree.

Every error Memorist raises on purpose derives from :class:`MemoristError`::

    MemoristError
    ├── ValidationError        bad input; ``field`` names what was wrong
    │   └── ImportLineError         a line of an import; the lines before it are imported
    ├── NotFoundError          an id that does not exist (or is deleted)
    ├── PermissionDeniedError  a write a subject may read but not make (a viewer's)
    ├── ConflictError          the store changed in a way the call cannot undo around
    ├── ConfigurationError     a setting that cannot work
    │   ├── EmbedderMismatchError   the store was built with another embedder
    │   └── MissingDependencyError  an optional extra is not installed
    ├── CancelledCallError     the call was given up: its caller left (memorist.work)
    ├── StoreError             the store cannot be read or written
    │   └── CorruptStoreError       the file is not a Memorist store, or is damaged
    └── ProviderError          an embedding or LLM provider failed
        ├── TransientProviderError  worth retrying: timeout, lost connection, 429, 5xx
        └── InvalidOutputError      the model's output was unusable, even after a repair retry

Interfaces (CLI, REST server) translate these in one place each.
"""

from __future__ import annotations


class MemoristError(Exception):
    """Base class of every error Memorist raises on purpose."""


class ValidationError(MemoristError, ValueError):
    """Bad input. ``field`` names the argument (or field) that was wrong."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


class ImportLineError(ValidationError):
    """A line of an import that cannot be imported. ``line`` is its number (from 1);
    ``summary`` counts what the lines before it imported (they stay in the store).

    ``later``: None, or the last line after it that was imported too. Lines of several
    scopes wait in batches of their own, and a line can fail only when its batch is
    written (a model or the store failing on it): by then another scope's batch,
    with lines after it, may have been written. Those stay."""

    def __init__(self, line: int, message: str, summary: dict[str, int], *, later: int | None = None) -> None:
        self.line = line
        self.summary = summary
        self.later = later
        if later is not None:
            message += f" (lines of other scopes after it, up to line {later}, were imported before it failed)"
        super().__init__(f"line {line}", message)


#: How the memory service begins the message of a 404 for a path it has no route for
#: (the client tells it from a missing memory by it).
NO_ROUTE = "no such route:"


class NotFoundError(MemoristError, KeyError):
    """An id that does not exist, or names a deleted memory."""

    def __init__(self, what: str, ident: str) -> None:
        self.what = what
        self.ident = ident
        super().__init__(f"{what} not found: {ident!r}")

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


class PermissionDeniedError(MemoristError, PermissionError):
    """A subject may see what it tried to change, but holds no relation that lets it
    write (a viewer of a playbook updating it). What a subject may not see at all
    answers :class:`NotFoundError`, exactly as a missing one would."""
class ConflictError(MemoristError):
    """The call conflicts with what the store holds now: an operation already rolled
    back, or one whose memories changed again since (the message names the event)."""
class CancelledCallError(MemoristError):
    """The call was given up before its end because its caller left (a service's client
    closed the connection): see :mod:`memorist.work`. Nothing it would have written
    was half-written; reads simply stop."""


class ConfigurationError(MemoristError):
    """A setting or combination of settings that cannot work."""


class EmbedderMismatchError(ConfigurationError):
    """The store holds vectors of another embedder than the one configured."""


class MissingDependencyError(ConfigurationError, ImportError):
    """An optional extra is needed; the message names the pip command."""


class StoreError(MemoristError):
    """The store could not be read or written."""


class CorruptStoreError(StoreError):
    """The file is not a Memorist store, is damaged, or is from a newer Memorist."""


class ProviderError(MemoristError):
    """An embedding or LLM provider failed."""


class TransientProviderError(ProviderError):
    """A provider failure that may pass: a timeout, a lost connection, 429, 5xx.

    ``retry_after`` is the wait in seconds the provider asked for (``Retry-After``),
    when it said; ``status`` is the HTTP status, when there was one."""

    def __init__(self, message: str, *, retry_after: float | None = None, status: int | None = None) -> None:
        self.retry_after = retry_after
        self.status = status
        super().__init__(message)


class InvalidOutputError(ProviderError):
    """The model answered, but not with what was asked (no JSON, or JSON that does not
    fit the response schema), even after one repair retry. ``raw`` is its last reply."""

    def __init__(self, message: str, *, raw: str = "") -> None:
        self.raw = raw
        super().__init__(message)


__all__ = [
    "CancelledCallError",
    "ConfigurationError",
    "ConflictError",
    "CorruptStoreError",
    "EmbedderMismatchError",
    "MemoristError",
    "ImportLineError",
    "InvalidOutputError",
    "MissingDependencyError",
    "NotFoundError",
    "ProviderError",
    "StoreError",
    "TransientProviderError",
    "ValidationError",
]
