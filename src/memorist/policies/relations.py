"""Relation tuples (Zanzibar-style sharing): their grammar and the pure rules that decide.

A tuple says that a *subject* has a *relation* on an *object*, inside one tenant:

- subjects: ``("user", id)``, ``("agent", id)``, ``("group", id)``; a group's members
  (``(member, "member", ("group", id))``, themselves users, agents or groups) hold
  whatever the group holds;
- relations: ``owner`` ⊃ ``editor`` ⊃ ``viewer`` (an owner may also write and read, an
  editor read), and ``member`` (of a group only);
- objects: ``("playbook", path)``, ``("scope", space)`` (the memories of a space, its
  trajectories and its playbooks too), ``("group", id)`` (who may manage the group).

Object ids name what they share, so a tuple can be written before the thing exists:

- a space: ``user:<user>``, ``agent:<agent>`` or ``user:<user>/agent:<agent>``; a
  space covers every memory whose ids include it (``agent:a`` covers agent ``a``'s
  memories of any user);
- a playbook: ``<agent>/<name>`` (an agent's playbook, as in ``agent_a/default``),
  ``user:<user>/<name>``, ``user:<user>/agent:<agent>/<name>``, ``tenant/<name>``,
  ``global/<name>``; ``agent:<agent>/<name>`` and the playbook's id are accepted and
  stored in the canonical form above.

Each id and name inside an object id is one *component*: in the stored (canonical)
form ``%``, ``/`` and ``:`` inside a component are written ``%25``, ``%2F`` and ``%3A``
(:func:`component`), so every object id names exactly one owner (agent ``team/ops``'s
playbook is ``team%2Fops/default``, never agent ``team``'s ``ops/default``). An id
without those characters is written as it is. Reading, ``%25``, ``%2F`` and ``%3A``
are decoded and anything else kept, so a ``:`` inside a component may also be written
plainly (``scope:user:user:123``); a ``/`` inside one must be ``%2F``. An agent whose
id is ``tenant`` or ``global`` is written ``agent:tenant/<name>``.

Everything here is pure: the store reads the tuples, :mod:`memorist.relations` decides
with these rules.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

from ..errors import ValidationError
from ..reserved import playbook_name

OWNER, EDITOR, VIEWER, MEMBER = "owner", "editor", "viewer", "member"
#: The access relations, strongest first.
ACCESS = (OWNER, EDITOR, VIEWER)
RELATIONS = (*ACCESS, MEMBER)
SUBJECT_TYPES = ("user", "agent", "group")
OBJECT_TYPES = ("playbook", "scope", "group")
#: How deep group membership is followed, and how many groups a subject may reach:
#: a check costs a bounded number of reads whatever the tuples say.
MAX_GROUP_DEPTH = 8
MAX_GROUPS = 1000
MAX_ID_CHARS = 1024
#: An object's id: a space or a playbook path holds up to three ids or names, each up to
#: three times longer once its ``%``, ``/`` and ``:`` are escaped (a stored id read back
#: by an import must pass).
MAX_OBJECT_CHARS = 3 * 3 * MAX_ID_CHARS + 32


def satisfying(relation: str) -> tuple[str, ...]:
    """The relations that grant ``relation``: ``viewer`` is granted by viewer, editor and owner."""
    if relation == MEMBER:
        return (MEMBER,)
    return ACCESS[: ACCESS.index(relation) + 1]


def is_write(relation: str) -> bool:
    return relation in (OWNER, EDITOR)


# parsing ---------------------------------------------------------------------------------
def _pair(field: str, value: Any, types: tuple[str, ...], max_chars: int = MAX_ID_CHARS) -> tuple[str, str]:
    """``("agent", "b")``, ``["agent", "b"]`` or ``"agent:b"``."""
    if isinstance(value, str):
        kind, sep, ident = value.partition(":")
        if not sep:
            raise ValidationError(field, f"must be (type, id) or 'type:id' with type one of {', '.join(types)}, got {value!r}")
        value = (kind, ident)
    if not isinstance(value, list | tuple) or len(value) != 2 or not all(isinstance(v, str) for v in value):
        raise ValidationError(field, f"must be (type, id) or 'type:id' with type one of {', '.join(types)}")
    kind, ident = value
    if kind not in types:
        raise ValidationError(field, f"type must be one of {', '.join(types)}, got {kind!r}")
    if not ident.strip():
        raise ValidationError(field, "id must not be empty")
    if len(ident) > max_chars:
        raise ValidationError(field, f"id is {len(ident):,} characters; the limit is {max_chars:,}")
    if not ident.isprintable():
        raise ValidationError(field, "id must not hold control characters")
    return kind, ident


def subject_of(value: Any, field: str = "subject") -> tuple[str, str]:
    return _pair(field, value, SUBJECT_TYPES)


def object_of(value: Any, field: str = "object") -> tuple[str, str]:
    """An object in its canonical form (a space or a playbook path re-encoded, see the
    module; a playbook id and a group as given)."""
    kind, ident = _pair(field, value, OBJECT_TYPES, MAX_OBJECT_CHARS)
    if kind == "scope":
        space = parse_space(ident)
        if space is None:
            raise ValidationError(field, f"a scope is 'user:<user>', 'agent:<agent>' or 'user:<user>/agent:<agent>' "
                                         f"(a '/' inside an id written %2F), got {ident!r}")
        return kind, space_key(*space)
    if kind == "playbook":
        path = parse_playbook(ident)
        if path is not None:  # the per-learner playbook's former name names it as the current one
            return kind, playbook_key(dataclasses.replace(path, name=playbook_name(path.name)))
        if "/" in ident:
            raise ValidationError(field, "a playbook is '<agent>/<name>', 'user:<user>/<name>', 'user:<user>/agent:<agent>/<name>', "
                                         f"'tenant/<name>', 'global/<name>' or its id (a '/' inside an id or a name written %2F), got {ident!r}")
    if len(ident) > MAX_ID_CHARS:  # a group's id, or a playbook's
        raise ValidationError(field, f"id is {len(ident):,} characters; the limit is {MAX_ID_CHARS:,}")
    return kind, ident


def relation_of(value: Any, field: str = "relation") -> str:
    if value not in RELATIONS:
        raise ValidationError(field, f"must be one of {', '.join(RELATIONS)}, got {value!r}")
    return str(value)


def check_tuple(subject: tuple[str, str], relation: str, obj: tuple[str, str]) -> None:
    """A tuple's parts agree: ``member`` is of a group and only of a group."""
    if relation == MEMBER and obj[0] != "group":
        raise ValidationError("object", "'member' is a relation to a group: object must be ('group', id)")
    if obj[0] == "group" and relation not in (MEMBER, OWNER):
        raise ValidationError("relation", "a group takes 'member' (who is in it) and 'owner' (who manages its members)")
    if subject == obj:
        raise ValidationError("object", "a group cannot be a member of itself")


# spaces and playbooks -------------------------------------------------------------------
_ENCODE = str.maketrans({"%": "%25", "/": "%2F", ":": "%3A"})
_DECODE = re.compile(r"%(25|2[Ff]|3[Aa])")
#: The heads of the playbook paths that are not an agent's id.
_LABELS = ("tenant", "global")


def component(text: str) -> str:
    """``text`` (an id or a name) as one component of an object id: ``%``, ``/`` and
    ``:`` written ``%25``, ``%2F``, ``%3A``; any other text unchanged."""
    return text.translate(_ENCODE)


def decoded(text: str) -> str:
    """The id or name a component writes (:func:`component` undone; a ``%`` that begins
    none of its three escapes is kept as it is)."""
    return _DECODE.sub(lambda m: chr(int(m.group(1), 16)), text)


def space_key(user: str, agent: str) -> str:
    """The canonical id of the space of ``user`` and ``agent`` (either may be empty)."""
    if user and agent:
        return f"user:{component(user)}/agent:{component(agent)}"
    return f"user:{component(user)}" if user else f"agent:{component(agent)}"


def _labelled(part: str, label: str) -> str | None:
    """The id of a ``label:<id>`` component, or None when it is not one (or is empty)."""
    prefix = label + ":"
    if not part.startswith(prefix):
        return None
    return decoded(part[len(prefix):]) or None


def parse_space(ident: str) -> tuple[str, str] | None:
    """``(user, agent)`` of a space id, or None when it is not one."""
    parts = ident.split("/")
    if len(parts) == 1:
        user = _labelled(parts[0], "user")
        if user is not None:
            return user, ""
        agent = _labelled(parts[0], "agent")
        return ("", agent) if agent is not None else None
    if len(parts) == 2:
        user, agent = _labelled(parts[0], "user"), _labelled(parts[1], "agent")
        return (user, agent) if user is not None and agent is not None else None
    return None


@dataclass(frozen=True, slots=True)
class PlaybookPath:
    """A playbook named by its owner's ids: ``label`` is ``agent``, ``user``, ``tenant`` or ``global``."""

    label: str
    user: str
    agent: str
    name: str


def playbook_key(path: PlaybookPath) -> str:
    """The canonical id of a playbook (see the module)."""
    name = component(path.name)
    if path.label in _LABELS:
        return f"{path.label}/{name}"
    if path.user and path.agent:
        return f"user:{component(path.user)}/agent:{component(path.agent)}/{name}"
    if path.user:
        return f"user:{component(path.user)}/{name}"
    # An agent named like a label is written with its own label, so it is not that label's.
    head = f"agent:{path.agent}" if path.agent in _LABELS else component(path.agent)
    return f"{head}/{name}"


def parse_playbook(ident: str) -> PlaybookPath | None:
    """The playbook a path names, or None (an id, or not a path)."""
    parts = ident.split("/")
    name = decoded(parts[-1])
    if len(parts) not in (2, 3) or not name:
        return None
    if len(parts) == 3:
        user, agent = _labelled(parts[0], "user"), _labelled(parts[1], "agent")
        return PlaybookPath("agent", user, agent, name) if user is not None and agent is not None else None
    head = parts[0]
    if head in _LABELS:
        return PlaybookPath(head, "", "", name)
    if head.startswith("user:"):
        user = _labelled(head, "user")
        # ``user:<u>/agent:<a>`` names a space, not a playbook: a user's playbook named
        # like that is written ``user:<u>/agent%3A<a>``.
        if user is None or parts[1].startswith("agent:"):
            return None
        return PlaybookPath("user", user, "", name)
    agent = _labelled(head, "agent") if head.startswith("agent:") else decoded(head)
    return PlaybookPath("agent", "", agent, name) if agent else None


def rekeyed(object_type: str, object_id: str) -> str:
    """A relation's object id as stored before ids were percent-encoded in keys (release
    0.2.0), written as keys are now: read by the rules it was written under (an id or
    a name as it was, the first ``/agent:`` or ``/`` splitting), then encoded. A
    playbook id, a group, or an id those rules did not read is returned as it is."""
    if object_type == "scope":
        if object_id.startswith("user:"):
            user, sep, agent = object_id[len("user:"):].partition("/agent:")
            return object_id if not user or (sep and not agent) else space_key(user, agent)
        if object_id.startswith("agent:") and len(object_id) > len("agent:"):
            return space_key("", object_id[len("agent:"):])
        return object_id
    if object_type != "playbook":
        return object_id
    head, sep, rest = object_id.partition("/")
    if not sep or not rest:
        return object_id
    if head in ("tenant", "global"):
        return playbook_key(PlaybookPath(head, "", "", rest))
    if head.startswith("user:"):
        user = head[len("user:"):]
        if not user:
            return object_id
        if rest.startswith("agent:"):
            agent, sep, name = rest[len("agent:"):].partition("/")
            return playbook_key(PlaybookPath("agent", user, agent, name)) if agent and sep and name else object_id
        return playbook_key(PlaybookPath("user", user, "", rest))
    agent = head[len("agent:"):] if head.startswith("agent:") else head
    return playbook_key(PlaybookPath("agent", "", agent, rest)) if agent else object_id


def covering_scopes(user: str, agent: str) -> list[str]:
    """The space ids whose grant covers the memories of ``user`` and ``agent``
    (empty: any): the exact space and each of its ids alone. Memories of a user across
    agents are covered only by a grant on the user (and likewise for an agent)."""
    out = []
    if user and agent:
        out.append(space_key(user, agent))
    if user:
        out.append(space_key(user, ""))
    if agent:
        out.append(space_key("", agent))
    return out


def owners_of(user: str, agent: str) -> list[tuple[str, str]]:
    """The subjects a space belongs to: its user and its agent."""
    return [s for s in (("user", user), ("agent", agent)) if s[1]]


def owns(subjects: frozenset[tuple[str, str]] | set[tuple[str, str]], user: str, agent: str) -> bool:
    """Whether acting ``subjects`` (a handle's user and/or agent) own the space of
    ``user`` and ``agent``: each id the handle has is that space's (a user owns its
    memories with any agent; a handle of a user and an agent owns their space only)."""
    mine = dict(subjects)
    if not mine:
        return False
    return all({"user": user, "agent": agent}.get(kind) == ident for kind, ident in mine.items())


# erasure: the tuples that speak of an owner ----------------------------------------------
def _like(text: str) -> str:
    """``text`` as a literal inside a LIKE pattern (backslash escapes)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def owner_subjects(user: str, agent: str) -> list[tuple[str, str]]:
    """The subjects an erasure of ``user`` and/or ``agent`` removes: a lone user or a
    lone agent is itself a subject; a user-and-agent space is neither of them alone."""
    if user and agent:
        return []
    return owners_of(user, agent)


def owner_object_patterns(user: str, agent: str) -> list[tuple[str, str]]:
    """``(object_type, LIKE pattern)`` pairs that find every scope and playbook tuple of
    what ``user`` and/or ``agent`` own (a superset: :func:`names_owned` decides)."""
    if user and agent:
        base = _like(space_key(user, agent))
        return [("scope", base), ("scope", base + "/%"), ("playbook", base + "/%")]
    if user:
        base = _like(space_key(user, ""))
        return [("scope", base), ("scope", base + "/%"), ("playbook", base + "/%")]
    tail = _like(space_key("", agent))
    return [("scope", tail), ("scope", "user:%/" + tail), ("playbook", _like(component(agent)) + "/%"),
            ("playbook", tail + "/%"), ("playbook", "user:%/" + tail + "/%")]


def names_owned(object_type: str, object_id: str, user: str, agent: str) -> bool:
    """Whether the scope or playbook ``object_id`` is of what ``user`` and/or ``agent``
    own, exactly (an erasure of them removes the tuples on it)."""
    if object_type == "scope":
        space = parse_space(object_id)
        if space is None:
            return False
        owner_user, owner_agent = space
    elif object_type == "playbook":
        path = parse_playbook(object_id)
        if path is None or path.label in ("tenant", "global"):
            return False
        owner_user, owner_agent = path.user, path.agent
    else:
        return False
    return (not user or owner_user == user) and (not agent or owner_agent == agent)


__all__ = [
    "ACCESS", "EDITOR", "MAX_GROUPS", "MAX_GROUP_DEPTH", "MEMBER", "OBJECT_TYPES", "OWNER", "RELATIONS", "SUBJECT_TYPES", "VIEWER",
    "PlaybookPath", "check_tuple", "component", "covering_scopes", "decoded", "is_write", "names_owned", "object_of", "owner_object_patterns",
    "owner_subjects", "owners_of", "owns", "parse_playbook",
    "parse_space", "playbook_key", "relation_of", "satisfying", "space_key", "subject_of",
]
