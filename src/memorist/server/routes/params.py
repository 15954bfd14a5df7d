"""The path and query parameters several routes share."""

from __future__ import annotations

import json
from typing import Any

from fastapi import Path, Query

from ...errors import ValidationError
from ...validate import offset_seconds, time_text
from .. import schemas as s


def query_id(what: str) -> Any:
    """An optional id in the query. Such parameters are typed ``str`` (or ``int``)
    with a None default, not ``str | None``: a query string holds no null, and the
    schema should not say it may."""
    return Query(None, **s.id_schema(f"The {what} id."))


def path_id(description: str, *, alias: str | None = None) -> Any:
    """An id in the path."""
    if alias is not None:
        return Path(alias=alias, **s.id_schema(description))
    return Path(**s.id_schema(description))


def json_query(name: str, raw: str | None) -> Any:
    """A JSON value given in the query string (None when absent)."""
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise ValidationError(name, f"must be JSON, e.g. {{\"source\": \"chat\"}} ({exc})") from None


def query_time(raw: str | None) -> float | str | None:
    """A time given in the query string, read as every surface reads one
    (:func:`memorist.validate.time_text`). An offset typed as documented,
    ``?now=+10h``, arrives as ``" 10h"`` (an unencoded ``+`` in a query string is a
    space): a leading space before an offset is read as its ``+``."""
    if raw is not None and raw[:1] == " " and raw[1:2].isdigit() and offset_seconds("+" + raw[1:]) is not None:
        raw = "+" + raw[1:]
    return time_text(raw)


__all__ = ["json_query", "path_id", "query_id", "query_time"]
