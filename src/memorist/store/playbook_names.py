"""The per-learner playbooks' rename: release 0.2.0 stored them under
:data:`~memorist.reserved.PREVIOUS_PER_LEARNER_PLAYBOOK`. Planned here once for both
stores' migrations (:func:`memorist.store.sqlite.schema.per_learner_name`,
:func:`memorist.store.postgres.schema.per_learner_name`), which read the rows and
write the plan in their own SQL.

What is renamed: a header's ``name``, label text and content address; a version's
``playbook`` and label text; the ``playbook`` of every strategy and trajectory; the
marks a reflection keeps of the playbooks it was curated into; and the relations
naming the playbook. The versions' snapshots keep the strategies as they were
(a rollback files them under the playbook it restores), and the event log keeps the
history as it was written.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..policies.playbook import curation_key
from ..policies.relations import PlaybookPath, playbook_key
from ..reserved import (
    PER_LEARNER_PLAYBOOK,
    PREVIOUS_PER_LEARNER_PLAYBOOK,
    RENAMED_APART_PLAYBOOK,
    RUN_PLAYBOOK_VERSIONS,
    RUN_PLAYBOOKS,
    header_digest,
)
from .codec import speaker_name

OLD = PREVIOUS_PER_LEARNER_PLAYBOOK

#: The rows to read are those whose metadata holds one of these.
NAMES = (OLD, PER_LEARNER_PLAYBOOK)

#: ``(rowid, space_id, run_id, kind, text, search_text, metadata, status)``
Row = tuple[int, int, str, str, str, str, str, str]


@dataclass(frozen=True, slots=True)
class Renamed:
    """One row's new ``text``, ``search_text``, ``metadata``, and ``content_hash`` and
    ``speaker`` (a header's: its name; None: unchanged); ``search_changed``: its
    full-text terms change."""

    rowid: int
    text: str
    search_text: str
    metadata: str
    content_hash: str | None
    speaker: str | None
    search_changed: bool


@dataclass(slots=True)
class Plan:
    rows: list[Renamed] = field(default_factory=list)
    #: Per tenant, the relation keys of the former playbooks renamed apart.
    apart_keys: dict[str, set[str]] = field(default_factory=dict)

    def relation_key(self, tenant: str, object_id: str) -> str:
        """A relation's playbook object id after the rename (keys end ``/<name>``)."""
        suffix = "/" + OLD
        if not object_id.endswith(suffix):
            return object_id
        new = RENAMED_APART_PLAYBOOK if object_id in self.apart_keys.get(tenant, ()) else PER_LEARNER_PLAYBOOK
        return object_id[: -len(suffix)] + "/" + new


def _metadata(text: str) -> dict[str, Any] | None:
    try:
        meta = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return meta if isinstance(meta, dict) else None


def _dumps(meta: dict[str, Any]) -> str:
    text = json.dumps(meta, ensure_ascii=False, separators=(",", ":"))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: written escaped, it reads back the same
        text = json.dumps(meta, ensure_ascii=True, separators=(",", ":"))
    return text


def _header_name(run_id: str, kind: str, meta: Mapping[str, Any]) -> str | None:
    name = meta.get("name") if run_id == RUN_PLAYBOOKS and kind == "playbook" else None
    return name if isinstance(name, str) else None


def _relabel(text: str, old: str, new: str) -> str:
    return new if text == old else text


def plan(rows: Iterable[Row], spaces: Mapping[int, tuple[str, str, str]]) -> Plan:
    """What to rewrite: ``rows`` are the memories whose metadata holds one of
    :data:`NAMES`, ``spaces`` each space's ``(tenant, user, agent)``.

    A space whose playbook of the current name exists already (an active header)
    keeps it; its former per-learner playbook is named
    :data:`~memorist.reserved.RENAMED_APART_PLAYBOOK` instead, and what names it
    follows."""
    read = [(row, meta) for row in rows if (meta := _metadata(row[6])) is not None]
    taken = {row[1] for row, meta in read if row[7] == "active" and _header_name(row[2], row[3], meta) == PER_LEARNER_PLAYBOOK}
    out = Plan()
    marks: dict[str, str] = {}  # a former playbook's curation mark -> its new name
    for (_, space, run_id, kind, *_), meta in read:
        label = meta.get("scope")
        if _header_name(run_id, kind, meta) == OLD and isinstance(label, str) and space in spaces:
            tenant, user, agent = spaces[space]
            new = RENAMED_APART_PLAYBOOK if space in taken else PER_LEARNER_PLAYBOOK
            marks[curation_key(label, tenant, user, agent, OLD)] = new
            if space in taken:
                # The key as written then (playbook_key spells the former name as the current one).
                out.apart_keys.setdefault(tenant, set()).add(playbook_key(PlaybookPath(label, user, agent, "_"))[:-1] + OLD)
    for (rowid, space, run_id, kind, text, search_text, _, _), meta in read:
        new = RENAMED_APART_PLAYBOOK if space in taken else PER_LEARNER_PLAYBOOK
        new_text, new_search, digest, speaker, changed = text, search_text, None, None, False
        if _header_name(run_id, kind, meta) == OLD:
            meta["name"], digest, speaker, changed = new, header_digest(new), speaker_name(new), True
            new_text, new_search = (_relabel(t, f"Playbook {OLD}", f"Playbook {new}") for t in (text, search_text))
        elif meta.get("playbook") == OLD:
            meta["playbook"], changed = new, True
            if run_id == RUN_PLAYBOOK_VERSIONS and kind == "playbook_version":
                new_text, new_search = (_relabel(t, f"Playbook {OLD} version", f"Playbook {new} version") for t in (text, search_text))
        curated = meta.get("curated_into")
        if isinstance(curated, list) and any(isinstance(m, str) and m.endswith(":" + OLD) for m in curated):
            meta["curated_into"] = [_remark(m, marks) for m in curated]
            changed = True
        if changed:
            out.rows.append(Renamed(rowid, new_text, new_search, _dumps(meta), digest, speaker, new_search != search_text))
    return out


def _remark(mark: Any, marks: Mapping[str, str]) -> Any:
    """A reflection's curation mark of a former playbook, with its new name."""
    if not isinstance(mark, str) or not mark.endswith(":" + OLD):
        return mark
    return mark[: -len(OLD)] + marks.get(mark, PER_LEARNER_PLAYBOOK)
