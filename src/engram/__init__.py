"""Engram: long-term memory for LLM agents.

>>> from engram import Memory
>>> memory = Memory(":memory:", embedder="hashing")
>>> memory.add("I'm a vegetarian.", user_id="alex")["results"][0]["memory"]
'Is vegetarian'
"""

from .config import MemoryConfig, RetrievalConfig
from .embed import Embedder, HashingEmbedder
from .errors import (
    ConfigurationError,
    CorruptStoreError,
    EmbedderMismatchError,
    EngramError,
    MissingDependencyError,
    NotFoundError,
    ProviderError,
    StoreError,
    ValidationError,
)
from .memory import Memory, reembed
from .model import Kind, MemoryClass, MemoryRecord, Scope, Status, Tier
from .pipelines.context import format_context
from .policies.ranking import RankContext, RankingPolicy
from .roles.base import Decision, Event, Existing, Extractor, Fact, Message, Reconciler

__version__ = "0.1.0"

__all__ = [
    "ConfigurationError",
    "CorruptStoreError",
    "Decision",
    "Embedder",
    "EmbedderMismatchError",
    "EngramError",
    "Event",
    "Existing",
    "Extractor",
    "Fact",
    "HashingEmbedder",
    "Kind",
    "Memory",
    "MemoryClass",
    "MemoryConfig",
    "MemoryRecord",
    "Message",
    "MissingDependencyError",
    "NotFoundError",
    "ProviderError",
    "RankContext",
    "RankingPolicy",
    "Reconciler",
    "RetrievalConfig",
    "Scope",
    "Status",
    "StoreError",
    "Tier",
    "ValidationError",
    "__version__",
    "format_context",
    "reembed",
]
