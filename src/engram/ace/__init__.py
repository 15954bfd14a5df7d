"""Self-evolving playbooks per learner: spec 000's LTMBSE-ACE and its ACE baseline.

:class:`Playbook` is the entry point (``Memory.playbook()`` builds one);
:mod:`engram.ace.runner` is the ``engram run-turn`` protocol, :mod:`engram.ace.analyze`
the ``engram analyze`` tools and :mod:`engram.ace.bench` ``engram bench evolve``.
"""

from ..policies.playbook import PlaybookConfig
from .context import format_context
from .playbook import Playbook, PlaybookTurn

__all__ = ["Playbook", "PlaybookConfig", "PlaybookTurn", "format_context"]
