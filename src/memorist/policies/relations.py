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

Everything here is pure: the store reads the tuples, :mod:`memorist.relations` decides
with these rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import ValidationError

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


def satisfying(relation: str) -> tuple[str, ...]:
    """The relations that grant ``relation``: ``viewer`` is granted by viewer, editor and owner."""
    if relation == MEMBER:
        return (MEMBER,)
    return ACCESS[: ACCESS.index(relation) + 1]


def is_write(relation: str) -> bool:
    return relation in (OWNER, EDITOR)


# parsing ---------------------------------------------------------------------------------
def _pair(field: str, value: Any, types: tuple[str, ...]) -> tuple[str, str]:
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
    if len(ident) > MAX_ID_CHARS:
        raise ValidationError(field, f"id is {len(ident):,} characters; the limit is {MAX_ID_CHARS}")
    if not ident.isprintable():
        raise ValidationError(field, "id must not hold control characters")
    return kind, ident


def subject_of(value: Any, field: str = "subject") -> tuple[str, str]:
    return _pair(field, value, SUBJECT_TYPES)


def object_of(value: Any, field: str = "object") -> tuple[str, str]:
    kind, ident = _pair(field, value, OBJECT_TYPES)
    if kind == "scope":
        space = parse_space(ident)
        if space is None:
            raise ValidationError(field, f"a scope is 'user:<user>', 'agent:<agent>' or 'user:<user>/agent:<agent>', got {ident!r}")
        return kind, space_key(*space)
    if kind == "playbook":
        path = parse_playbook(ident)
        if path is not None:
            return kind, playbook_key(path)
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
def space_key(user: str, agent: str) -> str:
    """The canonical id of the space of ``user`` and ``agent`` (either may be empty)."""
    if user and agent:
        return f"user:{user}/agent:{agent}"
    return f"user:{user}" if user else f"agent:{agent}"


def parse_space(ident: str) -> tuple[str, str] | None:
    """``(user, agent)`` of a space id, or None when it is not one."""
    if ident.startswith("user:"):
        rest = ident[len("user:"):]
        user, sep, agent = rest.partition("/agent:")
        if not user or (sep and not agent):
            return None
        return user, agent
    if ident.startswith("agent:") and len(ident) > len("agent:"):
        return "", ident[len("agent:"):]
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
    if path.label in ("tenant", "global"):
        return f"{path.label}/{path.name}"
    if path.user and path.agent:
        return f"user:{path.user}/agent:{path.agent}/{path.name}"
    if path.user:
        return f"user:{path.user}/{path.name}"
    return f"{path.agent}/{path.name}"


def parse_playbook(ident: str) -> PlaybookPath | None:
    """The playbook a path names, or None (an id, or not a path)."""
    head, sep, rest = ident.partition("/")
    if not sep or not rest:
        return None
    if head in ("tenant", "global"):
        return PlaybookPath(head, "", "", rest)
    if head.startswith("user:"):
        user = head[len("user:"):]
        if not user:
            return None
        if rest.startswith("agent:"):
            agent, sep, name = rest[len("agent:"):].partition("/")
            return PlaybookPath("agent", user, agent, name) if agent and sep and name else None
        return PlaybookPath("user", user, "", rest)
    if head.startswith("agent:"):
        head = head[len("agent:"):]
    return PlaybookPath("agent", "", head, rest) if head else None


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
    tail = _like(f"agent:{agent}")
    return [("scope", tail), ("scope", "user:%/" + tail), ("playbook", _like(agent) + "/%"),
            ("playbook", "agent:" + _like(agent) + "/%"), ("playbook", "user:%/" + tail + "/%")]


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
    "PlaybookPath", "check_tuple", "covering_scopes", "is_write", "names_owned", "object_of", "owner_object_patterns",
    "owner_subjects", "owners_of", "owns", "parse_playbook",
    "parse_space", "playbook_key", "relation_of", "satisfying", "space_key", "subject_of",
]
