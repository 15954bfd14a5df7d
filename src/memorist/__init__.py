"""Memorist: long-term memory for LLM agents.

>>> from memorist import Memory
>>> memory = Memory(":memory:", embedder="hashing")
>>> memory.add("I'm a vegetarian.", user_id="alex")["results"][0]["memory"]
'Is vegetarian'
"""

from typing import TYPE_CHECKING

# The errors are imported at once (every layer raises them); every other name is
# loaded on first use, so that `import memorist` (and each `memorist` command, which
# imports the package) pays only for what it touches: a search never imports the
# learning playbooks, the LLM roles or asyncio.
from .errors import (
    ConfigurationError,
    ConflictError,
    CorruptStoreError,
    EmbedderMismatchError,
    ImportLineError,
    InvalidOutputError,
    MemoristError,
    MissingDependencyError,
    NotFoundError,
    PermissionDeniedError,
    ProviderError,
    StoreError,
    TransientProviderError,
    ValidationError,
)

if TYPE_CHECKING:
    from .ace.playbook import Playbook, PlaybookTurn
    from .aio import AsyncMemory
    from .client import AsyncClient, Client
    from .config import MemoryConfig, RetrievalConfig
    from .embed import Embedder, HashingEmbedder
    from .llm import LLM, resolve_llm
    from .llm.testing import ScriptedLLM
    from .memory import Memory, reembed
    from .model import (
        Action,
        Decision,
        Existing,
        Fact,
        Kind,
        MemoryClass,
        MemoryRecord,
        Message,
        Scope,
        Status,
        Tier,
    )
    from .pipelines.context import format_context, pack_context
    from .pipelines.context_window import ContextWindow
    from .pipelines.pair import PairResult
    from .policies.evaluation import EvaluationConfig
    from .policies.playbook import PlaybookConfig
    from .policies.ranking import RankContext, RankingPolicy
    from .roles.base import Extractor, Reconciler
    from .roles.evaluator import Evaluation, Evaluator, ScriptedEvaluator
    from .roles.learning import Bullet, Curator, Delta, Lesson, Reflection, Reflector, Trace

# The one place the version is written: pyproject.toml reads it (dynamic version),
# `memorist --version` prints it, CHANGELOG.md's latest release names it (a test).
__version__ = "0.2.0"

# Public name -> the module that defines it. Client/AsyncClient/AsyncMemory also
# need the `client` extra (httpx).
_LAZY = {
    **dict.fromkeys(("Playbook", "PlaybookTurn"), "ace.playbook"),
    "AsyncMemory": "aio",
    **dict.fromkeys(("AsyncClient", "Client"), "client"),
    **dict.fromkeys(("MemoryConfig", "RetrievalConfig"), "config"),
    **dict.fromkeys(("Embedder", "HashingEmbedder"), "embed"),
    **dict.fromkeys(("LLM", "resolve_llm"), "llm"),
    "ScriptedLLM": "llm.testing",
    **dict.fromkeys(("Memory", "reembed"), "memory"),
    **dict.fromkeys(
        ("Action", "Decision", "Existing", "Fact", "Kind", "MemoryClass", "MemoryRecord", "Message", "Scope", "Status", "Tier"),
        "model",
    ),
    **dict.fromkeys(("format_context", "pack_context"), "pipelines.context"),
    "ContextWindow": "pipelines.context_window",
    "PairResult": "pipelines.pair",
    "EvaluationConfig": "policies.evaluation",
    "PlaybookConfig": "policies.playbook",
    **dict.fromkeys(("RankContext", "RankingPolicy"), "policies.ranking"),
    **dict.fromkeys(("Extractor", "Reconciler"), "roles.base"),
    **dict.fromkeys(("Evaluation", "Evaluator", "ScriptedEvaluator"), "roles.evaluator"),
    **dict.fromkeys(("Bullet", "Curator", "Delta", "Lesson", "Reflection", "Reflector", "Trace"), "roles.learning"),
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'memorist' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "Action",
    "AsyncClient",
    "AsyncMemory",
    "Bullet",
    "Client",
    "ConfigurationError",
    "ConflictError",
    "ContextWindow",
    "CorruptStoreError",
    "Curator",
    "Decision",
    "Delta",
    "Embedder",
    "EmbedderMismatchError",
    "Evaluation",
    "EvaluationConfig",
    "Evaluator",
    "Existing",
    "Extractor",
    "Fact",
    "HashingEmbedder",
    "ImportLineError",
    "InvalidOutputError",
    "Kind",
    "LLM",
    "Lesson",
    "MemoristError",
    "Memory",
    "MemoryClass",
    "MemoryConfig",
    "MemoryRecord",
    "Message",
    "MissingDependencyError",
    "NotFoundError",
    "PairResult",
    "PermissionDeniedError",
    "Playbook",
    "PlaybookConfig",
    "PlaybookTurn",
    "ProviderError",
    "RankContext",
    "RankingPolicy",
    "Reconciler",
    "Reflection",
    "Reflector",
    "RetrievalConfig",
    "Scope",
    "ScriptedEvaluator",
    "ScriptedLLM",
    "Status",
    "StoreError",
    "Tier",
    "Trace",
    "TransientProviderError",
    "ValidationError",
    "__version__",
    "format_context",
    "pack_context",
    "reembed",
    "resolve_llm",
]
