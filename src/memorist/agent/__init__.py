"""The tutor agent and the chat service (``pip install 'memorist[agent]'``).

- :class:`Tutor` (:mod:`memorist.agent.tutor`): a LangGraph graph (router → planner
  → solver in ``cot`` / ``tot`` / ``react`` → critic → learning) over a learner's
  playbook and facts; ``memorist run-turn`` runs one turn of it.
- :mod:`memorist.agent.chat`: ``memorist chat``, the chat service and page.
- :mod:`memorist.agent.calculator`: exact arithmetic (no LangGraph needed).

Importing this package needs nothing extra; asking for the tutor without LangGraph
raises an ImportError that names the pip command.
"""

from __future__ import annotations

from typing import Any

INSTALL = "pip install 'memorist[agent]'"


def require_langgraph() -> None:
    """Raise :class:`~memorist.errors.ConfigurationError` naming the pip command when
    LangGraph is not installed."""
    try:
        import langgraph.graph  # noqa: F401
    except ImportError as exc:
        from ..errors import ConfigurationError

        raise ConfigurationError(f"the tutor agent needs LangGraph, which is not installed: {INSTALL}") from exc


def __getattr__(name: str) -> Any:
    if name in ("Tutor", "build_tutor_graph", "choose_mode"):
        require_langgraph()
        from . import tutor

        return getattr(tutor, name)
    raise AttributeError(f"module 'memorist.agent' has no attribute {name!r}")


__all__ = ["INSTALL", "Tutor", "build_tutor_graph", "choose_mode", "require_langgraph"]
