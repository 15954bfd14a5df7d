"""Self-evolving playbooks per learner: spec 000's LTMBSE-ACE and its ACE baseline.

:class:`Playbook` is the entry point (``Memory.playbook()`` builds one);
:mod:`engram.ace.runner` is the turn protocol of ``engram run-turn``. The commands
live in :mod:`engram.cli.playbook`, the benchmark in :mod:`engram.benchmarks.evolve`.
"""

from ..policies.playbook import PlaybookConfig
from .context import format_context
from .playbook import Playbook, PlaybookTurn

__all__ = ["Playbook", "PlaybookConfig", "PlaybookTurn", "format_context"]
