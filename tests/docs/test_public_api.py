"""The public surface: exactly the names users import, and docstring examples that run."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import memorist

# Adding a name is a decision; removing or renaming one breaks users. Either is a
# change to this list, made on purpose.
PUBLIC = [
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


def test_the_public_names_are_exactly_these() -> None:
    assert memorist.__all__ == sorted(memorist.__all__), "keep __all__ sorted"
    assert memorist.__all__ == PUBLIC
    for name in PUBLIC:
        assert getattr(memorist, name) is not None, name
    # What `from memorist import *` gives is what __all__ says, nothing more.
    namespace: dict[str, object] = {}
    exec("from memorist import *", namespace)
    assert sorted(k for k in namespace if k != "__builtins__") == sorted(PUBLIC)


def _modules() -> list[str]:
    names = ["memorist"]
    for info in pkgutil.walk_packages(memorist.__path__, "memorist."):
        names.append(info.name)
    return sorted(names)


MODULES = _modules()


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name: str, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # an example that writes a file writes it here
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in finder.find(module, name):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed (see the output above)"


def test_the_examples_users_read_first_are_doctested() -> None:
    finder = doctest.DocTestFinder(exclude_empty=True)
    for name in ("memorist", "memorist.memory", "memorist.ace.playbook", "memorist.demo"):
        examples = sum(len(t.examples) for t in finder.find(importlib.import_module(name), name))
        assert examples > 0, name
