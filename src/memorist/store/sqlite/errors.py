"""What a failure of SQLite means, and how long to wait for another writer.

SQLite reports a damaged file as ``SQLITE_CORRUPT`` ("database disk image is
malformed") or ``SQLITE_NOTADB`` ("file is not a database"), and another process
holding the write lock as ``SQLITE_BUSY`` / ``SQLITE_LOCKED`` ("database is
locked"). The primary code is the low byte of the extended code Python 3.11 gives
as ``sqlite_errorcode``; the messages are the fallback for errors raised without
one. The store turns the first kind into :class:`~memorist.errors.CorruptStoreError`,
everything else into :class:`~memorist.errors.StoreError`; callers that retry ask
:func:`is_busy` about a ``StoreError`` (it looks at the error's causes).
"""

from __future__ import annotations

import random
import sqlite3
import time
from collections.abc import Callable
from typing import TypeVar

_BUSY = {5, 6}  # SQLITE_BUSY, SQLITE_LOCKED
_CORRUPT = {11, 26}  # SQLITE_CORRUPT, SQLITE_NOTADB
_BUSY_WORDS = ("database is locked", "database table is locked", "database schema is locked")
_CORRUPT_WORDS = ("malformed", "file is not a database", "not a database")

T = TypeVar("T")


def _causes(exc: BaseException | None) -> list[BaseException]:
    """``exc`` and what it was raised from (or during), nearest first."""
    seen: list[BaseException] = []
    while exc is not None and exc not in seen and len(seen) < 16:
        seen.append(exc)
        exc = exc.__cause__ or exc.__context__
    return seen


def _primary(exc: BaseException) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


def is_corrupt(exc: BaseException | None) -> bool:
    """SQLite said the file is damaged or is not a database (here or in a cause)."""
    for e in _causes(exc):
        if isinstance(e, sqlite3.Error):
            code = _primary(e)
            if code in _CORRUPT:
                return True
            if code is None and any(w in str(e).lower() for w in _CORRUPT_WORDS):
                return True
    return False


def is_busy(exc: BaseException | None) -> bool:
    """Another connection held a lock SQLite needed (here or in a cause)."""
    for e in _causes(exc):
        if isinstance(e, sqlite3.Error):
            code = _primary(e)
            if code in _BUSY:
                return True
            if code is None and any(w in str(e).lower() for w in _BUSY_WORDS):
                return True
    return False


def backoff(attempt: int, *, first: float, cap: float) -> float:
    """The sleep before retry number ``attempt`` (from 0): exponential, capped, with
    jitter (half fixed, half random), so waiting processes do not retry in step."""
    # The exponent is bounded first: a wait of many short polls (a long busy_timeout)
    # reaches attempts whose 2**attempt is no float.
    delay = min(cap, first * 2.0 ** min(attempt, 64))
    return delay / 2 + random.uniform(0, delay / 2)


def retry_busy(call: Callable[[], T], *, attempts: int, first: float = 0.25, cap: float = 4.0) -> T:
    """``call()``, called again after a jittered exponential backoff while it fails
    because the store is locked, at most ``attempts`` times in all.

    Only for calls that are all-or-nothing (one transaction): a failed attempt left
    nothing behind, so running it again cannot write anything twice.
    """
    for attempt in range(attempts):
        try:
            return call()
        except Exception as exc:
            if attempt == attempts - 1 or not is_busy(exc):
                raise
        time.sleep(backoff(attempt, first=first, cap=cap))
    raise AssertionError("unreachable")  # pragma: no cover


__all__ = ["backoff", "is_busy", "is_corrupt", "retry_busy"]
