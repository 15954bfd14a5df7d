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

#: What the migrations name it instead in a space that already holds a playbook
#: named :data:`PER_LEARNER_PLAYBOOK` (its owner named one so by hand): both stay.
RENAMED_APART_PLAYBOOK = f"{PER_LEARNER_PLAYBOOK}-previous"

#: The run of playbook headers (:mod:`memorist.pipelines.playbooks`), and the run of
#: their versions.
RUN_PLAYBOOKS = f"{RUN_PREFIX}playbook"
RUN_PLAYBOOK_VERSIONS = f"{RUN_PREFIX}playbook-versions"


def header_digest(name: str, *, run: str = RUN_PLAYBOOKS) -> str:
    """The content address of the header of the playbook ``name`` in its space."""
    return hashlib.sha256(f"{run}\x00{name}".encode("utf-8", "surrogatepass")).hexdigest()


def playbook_name(name: str) -> str:
    """``name`` as playbooks are stored now: the per-learner playbook's former name
    reads as its current one."""
    return PER_LEARNER_PLAYBOOK if name == PREVIOUS_PER_LEARNER_PLAYBOOK else name


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
