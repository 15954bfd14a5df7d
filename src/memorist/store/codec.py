"""How a memory row is written and read, the same for every SQL backend.

The column list, the JSON codec of tags/metadata/lineage (with its rule for stored
text that no longer decodes), the scope key that keeps full-text queries inside a
scope, and the speaker rule (metadata ``name``, casefolded): a backend stores and
reads rows through these, so no backend re-invents them.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from pydantic_core import from_json

from ..model import UNREADABLE_KEY, Kind, MemoryClass, MemoryRecord, Scope, Status, Tier
from ..policies.text import stable_token

CLASS_NAMES = tuple(c.value for c in MemoryClass)
FIELDS = (
    "m.id", "m.run_id", "m.text", "m.search_text", "m.kind", "m.memory_class", "m.topic",
    "m.concept", "m.section", "m.tags", "m.helpful", "m.harmful",
    *(f"m.strength_{c}" for c in CLASS_NAMES), *(f"m.last_access_{c}" for c in CLASS_NAMES),
    "m.access_count", "m.importance", "m.energy", "m.tier", "m.created_at", "m.updated_at",
    "m.valid_to", "m.content_hash", "m.metadata", "m.lineage", "m.status",
    "s.tenant_id", "s.user_id", "s.agent_id",
)
COLUMNS = ", ".join(FIELDS)
AT = {field.split(".", 1)[1]: i for i, field in enumerate(FIELDS)}  # column -> position in a row
_INTEGER = {"helpful", "harmful", "access_count", *(f"last_access_{c}" for c in CLASS_NAMES)}
_REAL = {"importance", "energy", "created_at", "updated_at", "valid_to", *(f"strength_{c}" for c in CLASS_NAMES)}
FROM_MEMORIES = "FROM memories m JOIN spaces s ON s.id = m.space_id"


@functools.lru_cache(maxsize=4096)
def scope_key(scope: Scope) -> str:
    """The full-text tokens that let BM25 queries stay inside a scope."""
    return " ".join(
        stable_token(prefix, value)
        for prefix, value in (
            ("t", scope.tenant_id),
            ("u", scope.user_id),
            ("a", scope.agent_id),
            ("r", scope.run_id),
        )
    )


_KINDS = {k.value: k for k in Kind}
_CLASSES = {c.value: c for c in MemoryClass}
_TIERS = {t.value: t for t in Tier}
_STATUSES = {s.value: s for s in Status}


def loads(text: str) -> Any:
    # Most rows carry empty tags and metadata: skip the decoder for them.
    if text == "{}":
        return {}
    if text == "[]":
        return []
    # pydantic-core's parser: several times faster than json.loads on the small
    # objects every search result decodes.
    try:
        return from_json(text)
    except ValueError:
        pass
    # A row no check refused when it was written (older versions stored metadata of
    # any depth; pydantic-core stops at 200 levels): json.loads reads up to Python's
    # recursion limit, which is deeper than any json.dumps could have written.
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        # Still unreadable: the stored text itself, whole, under one key, so the
        # memory stays readable, exportable and deletable and nothing is lost.
        return {UNREADABLE_KEY: text}


# Scopes are immutable and few: rows of one user share one Scope object.
_scope = functools.lru_cache(maxsize=4096)(Scope)


def row_to_record(row: tuple[Any, ...]) -> MemoryRecord:
    (mid, run_id, text, search_text, kind, cls, topic, concept, section, tags, helpful, harmful,
     s_sem, s_epi, s_pro, a_sem, a_epi, a_pro, access_count, importance, energy, tier,
     created_at, updated_at, valid_to, digest, metadata, lineage, status,
     tenant_id, user_id, agent_id) = row  # fmt: skip
    # Positional, in MemoryRecord's field order (several times faster than keywords
    # on the search path; the store contract's round-trip test guards the order).
    return MemoryRecord(
        mid,
        _scope(tenant_id, user_id, agent_id, run_id),
        text,
        _KINDS[kind],
        _CLASSES[cls],
        topic,
        concept,
        section,
        loads(tags),
        helpful,
        harmful,
        {"semantic": s_sem, "episodic": s_epi, "procedural": s_pro},
        {"semantic": a_sem, "episodic": a_epi, "procedural": a_pro},
        access_count,
        importance,
        energy,
        _TIERS[tier],
        created_at,
        updated_at,
        valid_to,
        digest,
        loads(metadata),
        loads(lineage),
        _STATUSES[status],
        search_text,
    )


def dumps(value: Any) -> str:
    if not value:  # the common empty tags / metadata / payload
        return "[]" if isinstance(value, list) else "{}"
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            # A lone surrogate got past the checks: written as a JSON \ud800 escape
            # it is valid UTF-8 and reads back the same, instead of failing the write.
            text = json.dumps(value, ensure_ascii=True, separators=(",", ":"), default=str)
    return text


def record_values(record: MemoryRecord) -> dict[str, Any]:
    return {
        "id": record.id,
        "run_id": record.scope.run_id,
        "scope_key": scope_key(record.scope),
        "text": record.text,
        "search_text": record.search_text or record.text,
        "kind": record.kind.value,
        "memory_class": record.memory_class.value,
        "topic": record.topic,
        "concept": record.concept,
        "section": record.section,
        "tags": dumps(record.tags),
        "helpful": record.helpful,
        "harmful": record.harmful,
        **{f"strength_{c}": float(record.strengths.get(c, 1.0)) for c in CLASS_NAMES},
        **{f"last_access_{c}": int(record.last_access.get(c, 0)) for c in CLASS_NAMES},
        "access_count": record.access_count,
        "importance": record.importance,
        "energy": record.energy,
        "tier": record.tier.value,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "valid_to": record.valid_to,
        "content_hash": record.content_hash,
        "metadata": dumps(record.metadata),
        "lineage": dumps(record.lineage),
        "status": record.status.value,
    }


def stored_row(record: MemoryRecord, values: dict[str, Any] | None = None) -> tuple[Any, ...]:
    """``record`` as a read of ``COLUMNS`` returns it once written (column affinity
    included). ``values``: its :func:`record_values`, when the write already made them."""
    values = {**(values if values is not None else record_values(record))}
    values.update(tenant_id=record.scope.tenant_id, user_id=record.scope.user_id, agent_id=record.scope.agent_id)
    row = []
    for column in AT:
        value = values[column]
        if value is not None and column in _REAL:
            value = float(value)
        elif column in _INTEGER and isinstance(value, float) and value.is_integer():
            value = int(value)
        row.append(value)
    return tuple(row)


def speaker_of(metadata: dict[str, Any]) -> str:
    return speaker_name(metadata.get("name"))


def speaker_name(name: Any) -> str:
    """The casefolded speaker of a memory whose ``metadata.name`` is ``name`` (none: empty)."""
    return name.casefold() if isinstance(name, str) else ""
