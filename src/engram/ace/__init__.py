"""Self-evolving playbooks: spec 000's LTMBSE-ACE per learner (and its ACE baseline),
and spec 001's learning loop.

:class:`Playbook` is spec 000's entry point (``Memory.playbook()`` builds one);
:mod:`engram.ace.runner` is the turn protocol of ``engram run-turn``.
:class:`Learning` is spec 001's loop (trajectories, reflection, curation, versioned
playbooks, ``execute_with_learning``) behind the Memory's learning calls. The
commands live in :mod:`engram.cli.playbook` and :mod:`engram.cli.learning`, the
benchmarks in :mod:`engram.benchmarks.evolve` and :mod:`engram.benchmarks.learn`.
"""

from ..policies.learning import LearningConfig, VersionRetention
from ..policies.playbook import PlaybookConfig
from .context import format_context
from .learning import Learning, LearningRun
from .playbook import Playbook, PlaybookTurn

__all__ = ["Learning", "LearningConfig", "LearningRun", "Playbook", "PlaybookConfig", "PlaybookTurn", "VersionRetention", "format_context"]
