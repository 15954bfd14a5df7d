"""The per-learner playbooks' rename: release 0.2.0 stored them under
:data:`~memorist.reserved.PREVIOUS_PER_LEARNER_PLAYBOOK`. Planned here once for both
stores' migrations (:func:`memorist.store.sqlite.schema.per_learner_name`,
:func:`memorist.store.postgres.schema.per_learner_name`), which read the rows and
write the plan in their own SQL.

Each row is renamed by :func:`memorist.reserved.renamed_playbook_fields` (headers,
versions, strategies, trajectories, reflections' curation marks; never facts), and
the relations naming the playbooks follow. In a space whose owner had named a
playbook :data:`~memorist.reserved.PER_LEARNER_PLAYBOOK` by hand (a header of any
status, a strategy, or a grant naming it), the learner's playbook still takes that
name, so that the tutor goes on with its history and never writes into the owner's
one, and the owner's playbook is named :data:`~memorist.reserved.OWN_PLAYBOOK`
(``-2``... while that is taken). The versions' snapshots keep the strategies as they
were taken (a rollback or an undo files them under the current name), and the event
log keeps the history as it was written.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..policies.playbook import curation_key
from ..policies.relations import PlaybookPath, playbook_key
from ..reserved import (
    OWN_PLAYBOOK,
    PER_LEARNER_PLAYBOOK,
    PREVIOUS_PER_LEARNER_PLAYBOOK,
    RUN_PLAYBOOKS,
    RUN_PREFIX,
    RUN_TRAJECTORIES,
    renamed_playbook_fields,
)
from .codec import dumps, speaker_name

OLD = PREVIOUS_PER_LEARNER_PLAYBOOK

#: The rows to read are those whose metadata holds one of these.
NAMES = (OLD, PER_LEARNER_PLAYBOOK)

#: ``(rowid, space_id, run_id, kind, section, text, search_text, metadata, status)``
Row = tuple[int, int, str, str, str, str, str, str, str]


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
    """What a migration rewrites: rows, and the playbook relations' object ids."""

    rows: list[Renamed] = field(default_factory=list)
    #: ``(tenant, object id)`` of a playbook relation to its new object id; a global
    #: playbook's under the tenant None (every tenant's grants of it).
    keys: dict[tuple[str | None, str], str] = field(default_factory=dict)

    def relation_key(self, tenant: str, object_id: str) -> str:
        """A relation's playbook object id after the rename."""
        new = self.keys.get((tenant, object_id)) or self.keys.get((None, object_id))
        if new is not None:
            return new
        if object_id.endswith("/" + OLD):  # a grant of a playbook never written: as it would be named now
            return object_id[: -len(OLD)] + PER_LEARNER_PLAYBOOK
        return object_id


def _metadata(text: str) -> dict[str, Any] | None:
    try:
        meta = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return meta if isinstance(meta, dict) else None


def _labels(tenant: str, user: str, agent: str) -> tuple[str, ...]:
    """The scope labels a playbook of this space can have (the default tenant's own
    space holds the global playbooks too)."""
    if agent or user:
        return ("agent",) if agent else ("user",)
    return ("tenant", "global") if not tenant else ("tenant",)


def _playbooks(run_id: str, kind: str, section: str, meta: Mapping[str, Any]) -> set[str]:
    """The playbooks of its own space a row is the header, a version or a strategy
    of (a trajectory names a playbook it ran with, which may be another space's)."""
    if not (section or run_id.startswith(RUN_PREFIX)) or run_id == RUN_TRAJECTORIES:
        return set()
    found = {meta.get("playbook")}
    if run_id == RUN_PLAYBOOKS and kind == "playbook":
        found.add(meta.get("name"))
    return {name for name in found if isinstance(name, str)}


def plan(rows: Iterable[Row], spaces: Mapping[int, tuple[str, str, str]], relations: Iterable[tuple[str, str]]) -> Plan:
    """What to rewrite: ``rows`` are the memories whose metadata holds one of
    :data:`NAMES`, ``spaces`` each space's ``(tenant, user, agent)``, ``relations``
    the ``(tenant, object id)`` of every playbook relation."""
    read = [(row, meta) for row in rows if (meta := _metadata(row[7])) is not None]
    granted = set(relations)
    named: dict[int, set[str]] = {}
    headers: dict[int, set[str]] = {}
    for (_, space, run_id, kind, section, *_), meta in read:
        names = _playbooks(run_id, kind, section, meta)
        named.setdefault(space, set()).update(names)
        if run_id == RUN_PLAYBOOKS and kind == "playbook":
            headers.setdefault(space, set()).update(names)
    out = Plan()
    renames: dict[int, dict[str, str]] = {}
    marks: dict[str, str] = {}
    for space, names in named.items():
        if OLD not in names or space not in spaces:
            continue
        tenant, user, agent = spaces[space]

        def key(label: str, name: str, user: str = user, agent: str = agent) -> str:
            return playbook_key(PlaybookPath(label, user, agent, name))

        labels = _labels(tenant, user, agent)
        owned = {key(label, PER_LEARNER_PLAYBOOK): label for label in labels}
        own = PER_LEARNER_PLAYBOOK in names or any(
            ident in owned and (owner == tenant or owned[ident] == "global") for owner, ident in granted)
        renames[space] = {OLD: PER_LEARNER_PLAYBOOK}
        if own:
            taken = headers.get(space, set()) | named[space]
            apart, n = OWN_PLAYBOOK, 2
            while apart in taken:
                apart, n = f"{OWN_PLAYBOOK}-{n}", n + 1
            renames[space][PER_LEARNER_PLAYBOOK] = apart
        for label in labels:
            for old, new in renames[space].items():
                out.keys[(None if label == "global" else tenant, key(label, old))] = key(label, new)
                marks[curation_key(label, tenant, user, agent, old)] = curation_key(label, tenant, user, agent, new)
    for (rowid, space, run_id, kind, section, text, search_text, _, _), meta in read:
        # A trajectory's playbook may be another space's: only the former name is
        # renamed there, as the learner's playbook takes the current one in any space.
        names = {OLD: PER_LEARNER_PLAYBOOK} if run_id == RUN_TRAJECTORIES else renames.get(space, {OLD: PER_LEARNER_PLAYBOOK})
        header = meta.get("name") if run_id == RUN_PLAYBOOKS and kind == "playbook" else None
        renamed = renamed_playbook_fields(run_id, kind, section, text, search_text, meta, names, marks)
        if renamed is not None:
            new_text, new_search, digest = renamed
            speaker = speaker_name(meta["name"]) if header is not None and header != meta.get("name") else None
            out.rows.append(Renamed(rowid, new_text, new_search, dumps(meta), digest, speaker, new_search != search_text))
    return out
