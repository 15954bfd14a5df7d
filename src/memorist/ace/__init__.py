"""Self-evolving playbooks: one per learner (and the ACE baseline, one shared by
every learner), and the learning loop of tasks.

:class:`Playbook` is the entry point (``Memory.playbooks`` is one with the default settings);
:mod:`memorist.ace.runner` is the turn protocol of ``memorist run-turn``.
:class:`Learning` is the learning loop (trajectories, reflection, curation, versioned
playbooks, ``execute_with_learning``) behind the Memory's learning calls. The
commands live in :mod:`memorist.cli.playbook` and :mod:`memorist.cli.learning`, the
benchmarks in :mod:`memorist.benchmarks.evolve` and :mod:`memorist.benchmarks.learn`.
"""

from ..policies.learning import LearningConfig, VersionRetention
from ..policies.playbook import PlaybookConfig
from .context import format_context
from .learning import Learning, LearningRun
from .playbook import Playbook, PlaybookTurn

__all__ = ["Learning", "LearningConfig", "LearningRun", "Playbook", "PlaybookConfig", "PlaybookTurn", "VersionRetention", "format_context"]
