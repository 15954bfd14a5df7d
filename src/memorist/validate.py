"""Checks of public-call arguments. Each failure names the argument.

This module sits at the bottom with :mod:`memorist.model` and :mod:`memorist.errors`
and imports nothing else of Memorist: the policies use its checks (the filter
language reads dates with :func:`timestamp`), and policies depend on nothing above
the model.

What no argument may hold, whatever the call (each is a :class:`ValidationError`
naming the argument, and nothing is stored):

- text with a lone surrogate (``"\\ud800"``): it cannot be stored as UTF-8; text
  (memory text, messages, metadata keys and values at any depth) with a NUL
  character;
- text, a query or an id that is empty or only whitespace and control/format
  characters; ids may hold no control character at all;
- metadata that is not JSON (objects, lists, strings, finite numbers, booleans,
  null; tuples are taken as lists), has a non-string key at any level, nests
  deeper than ``max_metadata_depth`` or is larger than ``max_metadata_bytes`` as
  JSON (both settings of :class:`~memorist.config.MemoryConfig`);
- a date before 1970 or after 9999; a ``limit`` above :data:`MAX_LIMIT`; an
  event ``since`` above :data:`MAX_SEQ`.

Every check here is iterative or bounded: no input can raise ``RecursionError``
or ``OverflowError`` instead of a ValidationError.
"""

from __future__ import annotations

import json
import math
import re
import time
import unicodedata
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from .errors import ValidationError
from .model import Message, to_epoch

ROLES = frozenset({"user", "assistant", "system", "tool"})
MAX_ID_CHARS = 256
#: The largest ``limit`` any call accepts (the defaults are far below it).
MAX_LIMIT = 1_000_000
#: The largest event sequence number (SQLite's INTEGER).
MAX_SEQ = 2**63 - 1
#: Dates are epoch seconds from 1970-01-01 to 9999-12-31T23:59:59Z.
MAX_EPOCH = 253_402_300_799.0
#: Defaults of ``MemoryConfig.max_metadata_depth`` / ``max_metadata_bytes``.
METADATA_DEPTH = 16
METADATA_BYTES = 65_536
#: Whole numbers in metadata fit in 64 bits, as every JSON reader and SQLite take them.
_INT_RANGE = (-(2**63), 2**63 - 1)
_INVISIBLE = frozenset({"Cc", "Cf"})  # control and format characters (NUL, ESC, ZWSP, ...)


def show(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut short: error messages must stay readable whatever the input."""
    try:
        text = repr(value)
    except Exception:  # a hostile __repr__ must not replace the ValidationError
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def unicode(name: str, value: str) -> str:
    """``value`` if it can be stored as text: no lone surrogate (``"\\ud800"``), which
    UTF-8 cannot hold, and no NUL (U+0000), which PostgreSQL's text cannot hold and
    C strings end at, so it would be cut or altered on its way through another tool."""
    nul = value.find("\x00")
    if nul >= 0:
        raise ValidationError(name, f"holds a NUL character (U+0000) at position {nul}; text must not hold NUL")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValidationError(
                name, f"holds a lone surrogate (U+{ord(value[exc.start]):04X}) at position {exc.start}; text must be valid Unicode"
            ) from None
    return value


def _blank(value: str) -> bool:
    """Nothing visible: empty, or only whitespace and control/format characters."""
    if not value.strip():
        return True
    if value.isprintable():
        return False
    return all(c.isspace() or unicodedata.category(c) in _INVISIBLE for c in value)


def _identifier(name: str, value: str) -> str:
    if len(value) > MAX_ID_CHARS:
        raise ValidationError(name, f"is {len(value):,} characters; the limit is {MAX_ID_CHARS}")
    unicode(name, value)
    if _blank(value):  # empty, or only spaces and invisible characters (a zero-width space)
        raise ValidationError(name, "must not be empty (it has no visible character)")
    if not value.isprintable():
        for i, c in enumerate(value):
            if unicodedata.category(c) == "Cc":
                raise ValidationError(name, f"must not hold control characters (U+{ord(c):04X} at position {i})")
    return value


def scope_id(name: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValidationError(name, f"must be a string, got {type(value).__name__}")
    return _identifier(name, value)


def require_scope(user_id: Any, agent_id: Any, run_id: Any) -> tuple[str | None, str | None, str | None]:
    ids = scope_id("user_id", user_id), scope_id("agent_id", agent_id), scope_id("run_id", run_id)
    if not any(ids):
        raise ValidationError("user_id", "one of user_id, agent_id or run_id is required")
    return ids


def text(name: str, value: Any, *, max_chars: int) -> str:
    if not isinstance(value, str):
        raise ValidationError(name, f"must be a string, got {type(value).__name__}")
    if len(value) > max_chars:
        raise ValidationError(name, f"is {len(value):,} characters; the limit is {max_chars:,}")
    unicode(name, value)
    if _blank(value):
        raise ValidationError(name, "must not be empty (it has no visible character)")
    return value


def memory_id(value: Any) -> str:
    if not isinstance(value, str):
        raise ValidationError("memory_id", f"must be a non-empty string, got {show(value)}")
    return _identifier("memory_id", value)


def limit(value: Any, *, name: str = "limit") -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(name, f"must be a whole number, got {show(value)}")
    if value <= 0:
        raise ValidationError(name, f"must be > 0, got {show(value)}")
    if value > MAX_LIMIT:
        raise ValidationError(name, f"must be at most {MAX_LIMIT:,}, got {show(value)}")
    return value


def line_number(value: Any, *, name: str = "from_line") -> int:
    """A line of a file, counted from 1."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SEQ:
        raise ValidationError(name, f"must be a whole number from 1 (a line of the source), got {show(value)}")
    return value


def since(value: Any, *, name: str = "since") -> int:
    """An event sequence number to read after: a whole number from 0."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SEQ:
        raise ValidationError(name, f"must be a whole number from 0 to 2**63-1 (an event seq), got {show(value)}")
    return value


def finite_number(value: Any) -> bool:
    """Whether ``value`` is a real number a setting can hold: an int or a float that is
    neither NaN nor infinite (a NaN compares false with everything, so a range check
    alone lets it through: a NaN decay window hides every memory)."""
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)


def importance(value: Any, field: str = "importance") -> float | None:
    """A memory's importance, a number from 0 to 1; None stays None (the default applies)."""
    if value is None:
        return None
    # Comparisons, not float(): NaN fails them, and an infinity is out of range.
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ValidationError(field, f"must be a number from 0 to 1, got {show(value)}")
    return float(value)


def threshold(value: Any) -> float | None:
    """A minimum cosine similarity, in [-1, 1]; None stays None."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError("threshold", f"must be a number from -1 to 1, got {show(value)}")
    # Comparisons, not float(): an int of any size compares exactly, and NaN fails both.
    if not -1.0 <= value <= 1.0:
        raise ValidationError("threshold", f"must be from -1 to 1 (a cosine similarity), got {show(value)}")
    return float(value)


def json_value(name: str, value: Any, *, max_depth: int = METADATA_DEPTH, max_bytes: int = METADATA_BYTES) -> Any:
    """``value`` as plain JSON data (dicts, lists, str, int, float, bool, None).

    Walked without recursion, so no nesting can raise ``RecursionError``; a cycle
    ends at ``max_depth``. Tuples become lists, other mappings dicts. The walk
    stops as soon as a lower bound of the JSON size passes ``max_bytes``, so a huge
    or shared-reference structure costs no more than ``max_bytes`` steps.
    """
    root: list[Any] = [None]
    # (container or scalar to convert, where its copy goes, key there, depth, path)
    stack: list[tuple[Any, Any, Any, int, str]] = [(value, root, 0, 1, name)]
    size = 0
    while stack:
        item, parent, slot, depth, path = stack.pop()
        size += 1
        if size > max_bytes:
            raise ValidationError(name, f"is larger than {max_bytes:,} bytes as JSON")
        if item is None or isinstance(item, bool):
            copy = item
        elif isinstance(item, str):
            _unicode_at(name, path, item)
            size += len(item) + 1
            copy = str(item)
        elif isinstance(item, int):
            if not _INT_RANGE[0] <= item <= _INT_RANGE[1]:
                raise ValidationError(name, f"{_where(name, path)}whole numbers must fit in 64 bits, got {show(item)}")
            size += 1
            copy = int(item)
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise ValidationError(name, f"{_where(name, path)}numbers must be finite, got {item!r}")
            size += 1
            copy = float(item)
        elif isinstance(item, Mapping | list | tuple):
            if depth > max_depth:
                raise ValidationError(name, f"{_where(name, path)}nests deeper than {max_depth} levels")
            if isinstance(item, Mapping):
                copy = {}
                for key in item:
                    if not isinstance(key, str):
                        raise ValidationError(name, f"{_where(name, path)}keys must be strings, got {show(key)}")
                    _unicode_at(name, path, key, what="a key ")
                    size += len(key) + 3
                    copy[key] = None
                    stack.append((item[key], copy, key, depth + 1, f"{path}[{key!r}]"))
            else:
                copy = [None] * len(item)
                stack.extend((element, copy, i, depth + 1, f"{path}[{i}]") for i, element in enumerate(item))
        else:
            raise ValidationError(
                name, f"{_where(name, path)}must be JSON data (dict, list, str, number, bool, None), got {type(item).__name__}"
            )
        parent[slot] = copy
    # The walk's count is a lower bound; the size that counts is the stored JSON's.
    try:
        encoded = len(json.dumps(root[0], ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
    except RecursionError:  # only with a max_depth configured near Python's own limit
        raise ValidationError(name, "nests too deep to be stored") from None
    if encoded > max_bytes:
        raise ValidationError(name, f"is {encoded:,} bytes as JSON; the limit is {max_bytes:,}")
    return root[0]


def _where(name: str, path: str) -> str:
    return "" if path == name else f"at {show(path, 120)}: "


def _unicode_at(name: str, path: str, value: str, *, what: str = "") -> None:
    try:
        unicode(name, value)
    except ValidationError as exc:
        raise ValidationError(name, f"{_where(name, path)}{what}{str(exc).split(': ', 1)[1]}") from None


def metadata(value: Any, *, field: str = "metadata", max_depth: int = METADATA_DEPTH, max_bytes: int = METADATA_BYTES) -> dict[str, Any]:
    """A JSON object within the limits (``max_depth`` counts the object itself as 1)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValidationError(field, f"must be a mapping, got {type(value).__name__}")
    return json_value(field, value, max_depth=max_depth, max_bytes=max_bytes)


#: Epoch seconds written as text: ASCII digits, with a fraction or not, and no sign
#: (``"+10"`` is an offset without its unit, not 1970-01-01T00:00:10).
_EPOCH_TEXT = re.compile(r"^[0-9]{1,12}(?:\.[0-9]{1,9})?$")


def time_text(value: str | None) -> float | str | None:
    """A time typed as text (a command-line option, a query-string parameter) for
    :func:`timestamp`: digits are epoch seconds, anything else stays text (an offset or
    ISO-8601), read by :func:`timestamp` as every surface reads it."""
    if value is None:
        return None
    return float(value) if _EPOCH_TEXT.match(value) else value


_OFFSET = re.compile(r"^\s*([+-])\s*(\d{1,9}(?:\.\d{1,6})?)\s*(s|sec|secs|m|min|mins|h|hr|hrs|d|day|days|w|wk|wks)\s*$", re.I)
_OFFSET_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86_400.0, "w": 604_800.0}


def offset_seconds(value: str) -> float | None:
    """The seconds of a relative time (``"+10h"``, ``"-2d"``, ``"+30m"``, ``"-90s"``,
    ``"+1w"``: a sign, a number, a unit), or None when ``value`` is not one."""
    found = _OFFSET.match(value)
    if found is None:
        return None
    sign, amount, unit = found.groups()
    seconds = float(amount) * _OFFSET_UNITS[unit[0].lower()]
    return -seconds if sign == "-" else seconds


#: How far ahead of this machine's clock a time that must have come (a minute's, a
#: tiers run's) may be: clocks of the machines that write drift apart by seconds,
#: rarely by minutes.
CLOCK_SKEW = 300.0


def not_ahead(field: str, given: Any, at: float, reason: str, *, clock: float | None = None) -> None:
    """Refuse ``at`` (``given``, as the caller gave it) when it is more than
    :data:`CLOCK_SKEW` ahead of ``clock`` (default: this machine's): ``reason`` says
    what a time to come would falsify."""
    if at > (time.time() if clock is None else clock) + CLOCK_SKEW:
        raise ValidationError(
            field, f"{show(given)} is in the future; {reason} (up to {CLOCK_SKEW / 60:g} minutes "
            "ahead of this machine's clock are taken, for clock skew)",
        )


def timestamp(value: Any, *, field: str = "timestamp") -> float | None:
    """A datetime, an ISO-8601 string, epoch seconds (a number, or a string of digits),
    or a time relative to now (``"+10h"``, ``"-2d"``, ``"+30m"``, ``"-45s"``, ``"+1w"``),
    as epoch seconds; None stays None.

    Dates before 1970 or after 9999 are rejected however they are given."""
    if value is None:
        return None
    if isinstance(value, datetime):
        try:
            seconds: Any = to_epoch(value)
        except (ValueError, OverflowError, OSError) as exc:
            raise ValidationError(field, f"not a usable date: {show(value)}") from exc
    elif isinstance(value, str):
        offset = offset_seconds(value)
        if offset is not None:
            seconds = time.time() + offset
        elif _EPOCH_TEXT.match(value):
            # Digits are epoch seconds on every surface (a flag, a query parameter, a
            # JSON string, the library): "20240101" must not be 2024 in one and 1970
            # in another.
            seconds = float(value)
        else:
            try:
                seconds = to_epoch(datetime.fromisoformat(value.replace("Z", "+00:00")))
            except (ValueError, OverflowError, OSError) as exc:
                raise ValidationError(field, f"not an ISO-8601 date: {show(value)}") from exc
    elif isinstance(value, int | float) and not isinstance(value, bool):
        seconds = value
    else:
        raise ValidationError(field, f"must be a datetime, ISO-8601 string or epoch seconds, got {type(value).__name__}")
    # Comparisons, not math.isfinite(): an int of any size compares exactly, NaN fails.
    if not 0 <= seconds <= MAX_EPOCH:
        raise ValidationError(field, f"must be a time from 1970 to 9999, got {show(value)}")
    return float(seconds)


def messages(
    value: Any, *, max_chars: int, max_metadata_depth: int = METADATA_DEPTH, max_metadata_bytes: int = METADATA_BYTES
) -> tuple[list[Message], bool]:
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
        if not isinstance(role, str) or role not in ROLES:
            raise ValidationError(f"{where}.role", f"must be one of {', '.join(sorted(ROLES))}, got {show(role)}")
        content = item.get("content")
        if not isinstance(content, str):
            raise ValidationError(f"{where}.content", f"must be a string, got {type(content).__name__}")
        if len(content) > max_chars:
            raise ValidationError(f"{where}.content", f"is {len(content):,} characters; the limit is {max_chars:,}")
        unicode(f"{where}.content", content)
        if content.strip() and _blank(content):
            # Whitespace alone is a message without text (skipped, as ""); control
            # characters alone are not text either, and are refused rather than stored.
            raise ValidationError(f"{where}.content", "has no visible character (only control or format characters)")
        name = item.get("name")
        if name is not None:
            if not isinstance(name, str):
                raise ValidationError(f"{where}.name", f"must be a string, got {type(name).__name__}")
            if name:
                _identifier(f"{where}.name", name)
        extra = item.get("metadata")
        if extra is not None:
            extra = metadata(extra, field=f"{where}.metadata", max_depth=max_metadata_depth, max_bytes=max_metadata_bytes)
        when = timestamp(item.get("timestamp"), field=f"{where}.timestamp")
        out.append(Message(role, content, name, extra or None, when))
    if not any(m.content.strip() for m in out if m.role != "system"):
        raise ValidationError("messages", "has no user or assistant text")
    return out, False
