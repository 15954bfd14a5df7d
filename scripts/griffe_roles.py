"""A Griffe extension for the Python API reference: the reST roles of Memorist's
docstrings (``:class:`~memorist.Memory```, ``:meth:`search```, ``:data:`CALLS```) become
Markdown code spans (``Memory``, ``search``, ``CALLS``), so mkdocstrings renders the
name instead of the role's markup. ``~`` keeps only the last dotted part, as Sphinx does.
Doctest examples (paragraphs of ``>>>`` lines and their output) become fenced Python
console blocks, so their brackets are code, not Markdown links.

mkdocs.yml names it in the options of the python handler::

    plugins:
      - mkdocstrings:
          handlers:
            python:
              options:
                extensions:
                  - scripts/griffe_roles.py:ReSTRoles
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:class|meth|func|attr|mod|data|exc|obj|const|ref|term):`(~?)([^`]+)`")


def plain(text: str) -> str:
    """``text`` with each reST role as a code span of the name it points at."""

    def name(match: re.Match[str]) -> str:
        target = match.group(2)
        shown = re.sub(r"^(.*?)\s*<.*>$", r"\1", target) if target.endswith(">") else target
        if match.group(1):
            shown = shown.rsplit(".", 1)[-1]
        return f"`{shown}`"

    return ROLE.sub(name, text)


def fence_doctests(text: str) -> str:
    """``text`` with each doctest paragraph (from a ``>>>`` line to the next blank line)
    inside a ``pycon`` fence, at its own indentation."""
    out: list[str] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        starts = line.lstrip().startswith(">>>") and (i == 0 or not lines[i - 1].strip())
        if not starts:
            out.append(line)
            i += 1
            continue
        indent = line[: len(line) - len(line.lstrip())]
        out.append(f"{indent}```pycon")
        while i < len(lines) and lines[i].strip():
            out.append(lines[i])
            i += 1
        out.append(f"{indent}```")
    return "\n".join(out)


class ReSTRoles(griffe.Extension):
    """Rewrite the roles of every docstring Griffe loads (see the module)."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = fence_doctests(plain(obj.docstring.value))

    def on_class_members(self, *, cls: griffe.Class, **kwargs: Any) -> None:
        # Aliases kept for code written against a former name (``PlaybookConfig.ltmbse``
        # is ``per_learner_preset``) still work but are not documented.
        for name in FORMER_NAMES.get(cls.name, ()):
            if name in cls.members:
                cls.del_member(name)


#: Class members kept under a former name only for old code, by class.
FORMER_NAMES: dict[str, tuple[str, ...]] = {"PlaybookConfig": ("ltmbse",)}
