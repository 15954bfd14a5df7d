"""The names the store reserves, and those of stores written before the rename.

Release 0.1.0 was published under an earlier name, and a store it wrote carries that
name in a few places: the reserved run ids of playbooks, trajectories and reflections
(``<name>:playbook`` and so on), the content address of a playbook's header (derived
from that run id), and, in PostgreSQL, the default schema and the names of the
store's trigger functions. The migrations (:mod:`memorist.store.sqlite.schema`,
:mod:`memorist.store.postgres.schema`) rewrite them; this module is the one place that
still spells the old name, so that nothing else has to.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

#: The name release 0.1.0 was published under.
PREVIOUS_NAME = "engram"

#: The prefix of the run ids the engine reserves for itself (``memorist:playbook``, ...).
RUN_PREFIX = "memorist:"
PREVIOUS_RUN_PREFIX = f"{PREVIOUS_NAME}:"

#: The PostgreSQL schema a store lived in when its URL named none.
PREVIOUS_PG_SCHEMA = PREVIOUS_NAME

#: The PostgreSQL trigger functions, without the name prefix they carry.
PG_FUNCTIONS = ("docs_counted", "vectors_added", "vectors_removed", "vectors_moved", "events_append_only")

#: The name the per-learner preset's playbooks are stored under (a learner's bullets
#: carry it in their metadata).
PER_LEARNER_PLAYBOOK = "per-learner"

#: The name they were stored under up to release 0.2.0, still accepted where a
#: playbook is named (:func:`playbook_name`) and rewritten by the migrations
#: (:mod:`memorist.store.playbook_names`).
PREVIOUS_PER_LEARNER_PLAYBOOK = "ltmbse"

#: What the migrations name a playbook its owner had named :data:`PER_LEARNER_PLAYBOOK`
#: by hand in a space whose learner's playbook takes that name (``-2``, ``-3``... added
#: while the name is taken).
OWN_PLAYBOOK = f"{PER_LEARNER_PLAYBOOK}-own"

#: The run of playbook headers (:mod:`memorist.pipelines.playbooks`), and the run of
#: their versions.
RUN_PLAYBOOKS = f"{RUN_PREFIX}playbook"
RUN_PLAYBOOK_VERSIONS = f"{RUN_PREFIX}playbook-versions"

#: The run of trajectories (:mod:`memorist.pipelines.trajectories`).
RUN_TRAJECTORIES = f"{RUN_PREFIX}trajectories"

#: The metadata key naming the key of a LangGraph store's item
#: (:mod:`memorist.integrations.langgraph`): such a memory is the store's value,
#: which only the store changes (a reconciler is never shown it).
STORE_ITEM_KEY = "lg_key"


def header_digest(name: str, *, run: str = RUN_PLAYBOOKS) -> str:
    """The content address of the header of the playbook ``name`` in its space."""
    return hashlib.sha256(f"{run}\x00{name}".encode("utf-8", "surrogatepass")).hexdigest()


def playbook_name(name: str) -> str:
    """``name`` as playbooks are stored now: the per-learner playbook's former name
    reads as its current one."""
    return PER_LEARNER_PLAYBOOK if name == PREVIOUS_PER_LEARNER_PLAYBOOK else name


def renamed_playbook_fields(
    run_id: str, kind: str, section: str, text: str, search_text: str, metadata: dict[str, Any],
    names: Mapping[str, str], marks: Mapping[str, str] | None = None,
) -> tuple[str, str, str | None] | None:
    """Rename the playbooks a stored row belongs to, as ``names`` maps them (old name
    to new), in ``metadata`` itself: a header's ``name`` (with its label text and its
    content address), a version's, strategy's or trajectory's ``playbook`` (a
    version's label text too), and a reflection's marks of the playbooks it was
    curated into (``marks``: each mark to its new one; a mark not there that names
    the per-learner playbook's former name takes ``names`` of it). Facts are never
    touched: only the rows of the reserved runs and strategies (rows with a
    ``section``) are.

    Returns the new ``(text, search_text, content_hash)``, the hash None where it
    does not change; None when nothing changed (``metadata`` is then as it was)."""
    if not (section or run_id.startswith(RUN_PREFIX)):
        return None
    changed, digest = False, None
    name = metadata.get("name")
    if run_id == RUN_PLAYBOOKS and kind == "playbook" and isinstance(name, str) and name in names:
        new = metadata["name"] = names[name]
        old_label, new_label = f"Playbook {name}", f"Playbook {new}"
        text, search_text = (new_label if t == old_label else t for t in (text, search_text))
        changed, digest = True, header_digest(new)
    owner = metadata.get("playbook")
    if isinstance(owner, str) and owner in names:
        new = metadata["playbook"] = names[owner]
        if run_id == RUN_PLAYBOOK_VERSIONS and kind == "playbook_version":
            old_label, new_label = f"Playbook {owner} version", f"Playbook {new} version"
            text, search_text = (new_label if t == old_label else t for t in (text, search_text))
        changed = True
    curated = metadata.get("curated_into")
    if isinstance(curated, list):
        renamed = [_remark(mark, names, marks or {}) for mark in curated]
        if renamed != curated:
            metadata["curated_into"], changed = renamed, True
    return (text, search_text, digest) if changed else None


def _remark(mark: Any, names: Mapping[str, str], marks: Mapping[str, str]) -> Any:
    if not isinstance(mark, str):
        return mark
    if mark in marks:
        return marks[mark]
    old = PREVIOUS_PER_LEARNER_PLAYBOOK
    if old in names and mark.endswith(":" + old):
        return mark[: -len(old)] + names[old]
    return mark


def renamed_run(run_id: str) -> str:
    """``run_id`` with the previous reserved prefix replaced by the current one."""
    if run_id.startswith(PREVIOUS_RUN_PREFIX):
        return RUN_PREFIX + run_id[len(PREVIOUS_RUN_PREFIX):]
    return run_id


def renamed_header_hash(run_id: str, content_hash: str, metadata: str) -> str:
    """The content hash a playbook header written by the previous release has now
    (its hash was derived from the old run id); any other row's hash is unchanged."""
    if run_id != PREVIOUS_RUN_PREFIX + RUN_PLAYBOOKS[len(RUN_PREFIX):]:
        return content_hash
    try:
        name = json.loads(metadata).get("name")
    except (ValueError, AttributeError):
        return content_hash
    if not isinstance(name, str) or content_hash != header_digest(name, run=run_id):
        return content_hash
    return header_digest(name)


def previous_runs_clause(column: str = "run_id") -> tuple[str, Any]:
    """A SQL condition (and its one parameter) true for run ids with the old prefix."""
    return f"substr({column}, 1, {len(PREVIOUS_RUN_PREFIX)}) = ?", PREVIOUS_RUN_PREFIX
