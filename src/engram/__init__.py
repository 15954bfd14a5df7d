"""Engram: long-term memory for LLM agents.

>>> from engram import Memory
>>> memory = Memory(":memory:", embedder="hashing")
>>> memory.add("I'm a vegetarian.", user_id="alex")["results"][0]["memory"]
'Is vegetarian'
"""

from .ace.playbook import Playbook, PlaybookTurn
from .config import MemoryConfig, RetrievalConfig
from .embed import Embedder, HashingEmbedder
from .errors import (
    ConfigurationError,
    CorruptStoreError,
    EmbedderMismatchError,
    EngramError,
    ImportLineError,
    InvalidOutputError,
    MissingDependencyError,
    NotFoundError,
    ProviderError,
    StoreError,
    TransientProviderError,
    ValidationError,
)
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
from .pipelines.context import format_context
from .policies.playbook import PlaybookConfig
from .policies.ranking import RankContext, RankingPolicy
from .roles.base import Extractor, Reconciler
from .roles.learning import Bullet, Curator, Delta, Lesson, Reflection, Reflector, Trace

__version__ = "0.1.0"

# Loaded on first use: they need the `client` extra (httpx), and `import engram`
# must not pay for it.
_LAZY = {"Client": "client", "AsyncClient": "client", "AsyncMemory": "aio"}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'engram' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "Action",
    "AsyncClient",
    "AsyncMemory",
    "Bullet",
    "Client",
    "ConfigurationError",
    "CorruptStoreError",
    "Curator",
    "Decision",
    "Delta",
    "Embedder",
    "EmbedderMismatchError",
    "EngramError",
    "Existing",
    "Extractor",
    "Fact",
    "HashingEmbedder",
    "ImportLineError",
    "InvalidOutputError",
    "Kind",
    "LLM",
    "Lesson",
    "Memory",
    "MemoryClass",
    "MemoryConfig",
    "MemoryRecord",
    "Message",
    "MissingDependencyError",
    "NotFoundError",
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
    "ScriptedLLM",
    "Status",
    "StoreError",
    "Tier",
    "Trace",
    "TransientProviderError",
    "ValidationError",
    "__version__",
    "format_context",
    "reembed",
    "resolve_llm",
]
