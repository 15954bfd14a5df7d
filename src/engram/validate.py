"""Checks of public-call arguments. Each failure names the argument.

This module sits at the bottom with :mod:`engram.model` and :mod:`engram.errors`
and imports nothing else of Engram: the policies use its checks (the filter
language reads dates with :func:`timestamp`), and policies depend on nothing above
the model.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from .errors import ValidationError
from .model import Message, to_epoch

ROLES = frozenset({"user", "assistant", "system", "tool"})
MAX_ID_CHARS = 256


def scope_id(name: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValidationError(name, f"must be a string, got {type(value).__name__}")
    if not value.strip():
        raise ValidationError(name, "must not be empty")
    if len(value) > MAX_ID_CHARS:
        raise ValidationError(name, f"is longer than {MAX_ID_CHARS} characters")
    return value


def require_scope(user_id: Any, agent_id: Any, run_id: Any) -> tuple[str | None, str | None, str | None]:
    ids = scope_id("user_id", user_id), scope_id("agent_id", agent_id), scope_id("run_id", run_id)
    if not any(ids):
        raise ValidationError("user_id", "one of user_id, agent_id or run_id is required")
    return ids


def text(name: str, value: Any, *, max_chars: int) -> str:
    if not isinstance(value, str):
        raise ValidationError(name, f"must be a string, got {type(value).__name__}")
    if not value.strip():
        raise ValidationError(name, "must not be empty")
    if len(value) > max_chars:
        raise ValidationError(name, f"is {len(value):,} characters; the limit is {max_chars:,}")
    return value


def memory_id(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValidationError("memory_id", f"must be a non-empty string, got {value!r}")
    return value


def limit(value: Any, *, name: str = "limit") -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(name, f"must be a whole number, got {value!r}")
    if value <= 0:
        raise ValidationError(name, f"must be > 0, got {value}")
    return value


def threshold(value: Any) -> float | None:
    """A minimum cosine similarity, in [-1, 1]; None stays None."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValidationError("threshold", f"must be a number from -1 to 1, got {value!r}")
    if not -1.0 <= value <= 1.0:
        raise ValidationError("threshold", f"must be from -1 to 1 (a cosine similarity), got {value}")
    return float(value)


def metadata(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValidationError("metadata", f"must be a mapping, got {type(value).__name__}")
    for key in value:
        if not isinstance(key, str):
            raise ValidationError("metadata", f"keys must be strings, got {key!r}")
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValidationError("metadata", f"must be JSON-serialisable: {exc}") from exc
    return dict(value)


def timestamp(value: Any, *, field: str = "timestamp") -> float | None:
    """A datetime, an ISO-8601 string or epoch seconds, as epoch seconds; None stays None."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return to_epoch(value)
    if isinstance(value, str):
        try:
            return to_epoch(datetime.fromisoformat(value.replace("Z", "+00:00")))
        except ValueError as exc:
            raise ValidationError(field, f"not an ISO-8601 date: {value!r}") from exc
    if isinstance(value, int | float) and not isinstance(value, bool):
        if not math.isfinite(value) or value < 0:
            raise ValidationError(field, f"must be a finite time after 1970, got {value!r}")
        return float(value)
    raise ValidationError(field, f"must be a datetime, ISO-8601 string or epoch seconds, got {type(value).__name__}")


def messages(value: Any, *, max_chars: int) -> tuple[list[Message], bool]:
    """Normalise ``add``'s first argument; returns the messages and whether it was plain text."""
    if isinstance(value, str):
        return [Message("user", text("messages", value, max_chars=max_chars))], True
    if isinstance(value, Mapping):
        value = [value]
    if not isinstance(value, Sequence) or isinstance(value, bytes | bytearray):
        raise ValidationError("messages", f"must be a string or a list of {{role, content}} messages, got {type(value).__name__}")
    if not value:
        raise ValidationError("messages", "must not be empty")
    out: list[Message] = []
    for i, item in enumerate(value):
        where = f"messages[{i}]"
        if not isinstance(item, Mapping):
            raise ValidationError(where, f"must be a mapping with role and content, got {type(item).__name__}")
        role = item.get("role")
        if role not in ROLES:
            raise ValidationError(f"{where}.role", f"must be one of {', '.join(sorted(ROLES))}, got {role!r}")
        content = item.get("content")
        if not isinstance(content, str):
            raise ValidationError(f"{where}.content", f"must be a string, got {type(content).__name__}")
        if len(content) > max_chars:
            raise ValidationError(f"{where}.content", f"is {len(content):,} characters; the limit is {max_chars:,}")
        name = item.get("name")
        if name is not None and not isinstance(name, str):
            raise ValidationError(f"{where}.name", f"must be a string, got {type(name).__name__}")
        extra = item.get("metadata")
        if extra is not None:
            try:
                extra = metadata(extra)
            except ValidationError as exc:
                raise ValidationError(f"{where}.metadata", str(exc).split(": ", 1)[-1]) from exc
        try:
            when = timestamp(item.get("timestamp"))
        except ValidationError as exc:
            raise ValidationError(f"{where}.timestamp", str(exc).split(": ", 1)[-1]) from exc
        out.append(Message(role, content, name, extra or None, when))
    if not any(m.content.strip() for m in out if m.role != "system"):
        raise ValidationError("messages", "has no user or assistant text")
    return out, False
