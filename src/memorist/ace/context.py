"""The playbook's prompt block, ACE style.

Its own module so that both :mod:`memorist.ace.playbook` (``PlaybookTurn.context``)
and :mod:`memorist.ace.runner` (the answer's system prompt) can use it while imports
flow one way: playbook → runner → context.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..policies.taxonomy import SECTIONS
from ..roles.learning import Bullet


def format_context(bullets: Sequence[Bullet], *, title: str = "ACE playbook") -> str:
    """The prompt block: bullets grouped by section, ACE style
    (``[id] helpful=X harmful=Y :: content``). Empty when there is nothing to inject.

    Not :func:`memorist.format_context`, which formats the results of
    :meth:`memorist.Memory.search`.

    >>> print(format_context([Bullet("b1", "Draw the fractions first", section="strategies_and_hard_rules", helpful=2)]))
    ## ACE playbook
    ### strategies_and_hard_rules
    [b1] helpful=2 harmful=0 :: Draw the fractions first
    """
    if not bullets:
        return ""
    groups: dict[str, list[Bullet]] = {}
    for b in bullets:
        groups.setdefault(b.section or "other", []).append(b)
    order = [s for s in SECTIONS if s in groups] + [s for s in groups if s not in SECTIONS]
    lines = [f"## {title}"]
    for section in order:
        lines.append(f"### {section}")
        lines.extend(b.format() for b in groups[section])
    return "\n".join(lines)


__all__ = ["format_context"]
