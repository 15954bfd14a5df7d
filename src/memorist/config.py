"""Typed configuration of a :class:`~memorist.Memory`.

Settings are read when a ``Memory`` is built, never at import, so differently
configured engines can live side by side. Precedence: explicit argument, then the
environment, then the default.

=====================  ==========================  =================================
setting                environment                 default
=====================  ==========================  =================================
path                   ``MEMORIST_DB``               ``<user data dir>/memorist/memorist.db``
embedder               ``MEMORIST_EMBEDDER``         MiniLM if installed, else hashing
decay_days             ``MEMORIST_DECAY_DAYS``       0 (no decay); ``MEMORY_DECAY_DAYS``
                                                   is accepted too
tenant_id              ``MEMORIST_TENANT``           "" (single tenant)
llm                    ``MEMORIST_LLM``              none: heuristic roles, no network
busy_timeout           ``MEMORIST_BUSY_TIMEOUT``     30 (seconds a write waits for
                                                   another process's write lock)
policy                 ``MEMORIST_POLICY``           the store's own (recorded when
                                                   it was created); "default" for a
                                                   new store; "energy": energy tiers
maintenance_log        ``MEMORIST_MAINTENANCE_LOG``  next to a SQLite file
                                                   (``<name>.maintenance.log``);
                                                   none for PostgreSQL and
                                                   ``:memory:``; "off": none
consolidation_         ``CONSOLIDATION_BATCH_SIZE``  1000 (memories grouped and
batch_size                                         merged per transaction)
auto_consolidate_      ``AUTO_CONSOLIDATE_           0 (off); N: a scope holding
threshold              THRESHOLD``                 more than N memories is
                                                   consolidated after adds
run_consolidation_     ``RUN_CONSOLIDATION_ASYNC``   true: that run is in the
async                                              background
consolidation_         ``MEMORIST_CONSOLIDATION_     by embedder: 0.9 (a semantic
similarity             SIMILARITY``                model), 0.8 (hashing); the
                                                   cosine of one group's memories
=====================  ==========================  =================================

This module is the only one that reads the environment (a test scans the package
for any other reader). The other variables are read by the functions at the end of
this module, each when the object that needs it is built: the LLM providers'
(``OPENAI_API_KEY``, ``OPENAI_BASE_URL``, ``MEMORIST_LLM_BASE_URL``,
``MEMORIST_LLM_API_KEY``, ``GEMINI_API_KEY``, ``GEMINI_MODEL``, ``GEMINI_BASE_URL``,
``ACE_LLM_TEMPERATURE``), the embedder's (``MEMORIST_EMBED_RUNTIME``,
``MEMORIST_CACHE_DIR``), the playbooks' (``ACE_CURATOR_MAX_NEW``,
``ACE_CURATOR_USE_LLM``, ``ACE_MEMORY_FILE``), the learning loop's (``TRAJECTORY_*``,
``PLAYBOOK_VERSION_*``) and ``memorist serve``'s limits
(:data:`SERVE_ENVIRONMENT`: ``MEMORIST_RATE_LIMIT`` and the others).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from .errors import ConfigurationError, ValidationError
from .reserved import PREVIOUS_NAME
from .validate import finite_number, scope_id


def default_db_path() -> Path:
    """Where the store lives when no path is given: ``MEMORIST_DB`` or the user data dir
    (where a store made by release 0.1.0 is kept if it has no successor there yet)."""
    env = os.environ.get("MEMORIST_DB")
    if env:
        return Path(env).expanduser()
    import platformdirs

    path = Path(platformdirs.user_data_dir("memorist", appauthor=False)) / "memorist.db"
    if not path.exists():
        # The default store of release 0.1.0, published under its previous name, is
        # opened where it is (and migrated) rather than replaced by an empty one.
        previous = Path(platformdirs.user_data_dir(PREVIOUS_NAME, appauthor=False)) / f"{PREVIOUS_NAME}.db"
        if previous.exists():
            return previous
    return path


def _env_decay_days() -> float | None:
    for name in ("MEMORIST_DECAY_DAYS", "MEMORY_DECAY_DAYS"):
        raw = os.environ.get(name)
        if raw is not None and raw.strip():
            try:
                value = float(raw)
            except ValueError as exc:
                raise ConfigurationError(f"{name} must be a number of days, got {raw!r}") from exc
            if not finite_number(value) or value < 0:
                raise ConfigurationError(f"{name} must be a finite number of days >= 0, got {raw!r}")
            return value
    return None


#: Seconds a write waits for another process's write lock when nothing says otherwise.
DEFAULT_BUSY_TIMEOUT = 30.0
#: The longest busy timeout a setting may give (a day).
MAX_BUSY_TIMEOUT = 86_400


def _env_busy_timeout() -> float:
    raw = os.environ.get("MEMORIST_BUSY_TIMEOUT")
    if raw is None or not raw.strip():
        return DEFAULT_BUSY_TIMEOUT
    try:
        value = float(raw)
    except ValueError as exc:
        raise ConfigurationError(f"MEMORIST_BUSY_TIMEOUT must be a number of seconds, got {raw!r}") from exc
    # Checked here, not only as busy_timeout: the message names what the user set.
    if not finite_number(value) or not 0 <= value <= MAX_BUSY_TIMEOUT:
        raise ConfigurationError(f"MEMORIST_BUSY_TIMEOUT must be seconds from 0 to {MAX_BUSY_TIMEOUT:,}, got {raw!r}")
    return value


#: The memory policies: ``default`` (no energy) and ``energy`` (the energy tiers).
POLICIES = ("default", "energy")


#: ``policy=STORE_POLICY``: the store's own policy, whatever MEMORIST_POLICY says (for
#: tools that manage a store, such as ``memorist config set``).
STORE_POLICY = "store"


def _policy(value: Any) -> str | None:
    """The policy asked for (the argument, else MEMORIST_POLICY), or None: the store's own."""
    if value == STORE_POLICY:
        return None
    raw = value if value is not None else (os.environ.get("MEMORIST_POLICY") or None)
    if raw is None:
        return None
    if not isinstance(raw, str) or raw.strip().lower() not in POLICIES:
        source = "policy" if value is not None else "MEMORIST_POLICY"
        raise ConfigurationError(f"{source} must be one of {', '.join(POLICIES)}, got {raw!r}")
    return raw.strip().lower()


_MAX_BATCH = 100_000


def _tenant(value: Any) -> str:
    """``tenant_id``, else ``MEMORIST_TENANT``, else "" (the default tenant); a tenant
    that is not "" is held to the rules of any other id (not blank, no control
    characters), its spaces kept as they are."""
    source = "tenant_id"
    if value is None:
        value, source = os.environ.get("MEMORIST_TENANT", ""), "MEMORIST_TENANT"
    if not isinstance(value, str):
        raise ConfigurationError(f"tenant_id must be a string, got {type(value).__name__}")
    if value:
        try:
            scope_id(source, value)
        except ValidationError as exc:
            raise ConfigurationError(f"{exc} (\"\" is the default tenant)") from exc
    return value


def _whole(value: Any, name: str, env: str, default: int, *, low: int) -> int:
    source = name
    if value is None:
        raw = os.environ.get(env)
        if raw is None or not raw.strip():
            return default
        source = env
        try:
            value = int(raw.strip())
        except ValueError as exc:
            raise ConfigurationError(f"{env} must be a whole number, got {raw!r}") from exc
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= (_MAX_BATCH if "batch" in name else 2**62):
        raise ConfigurationError(f"{source} must be a whole number >= {low}{' and <= 100000' if 'batch' in name else ''}, got {value!r}")
    return value


def _flag(value: Any, name: str, env: str, default: bool) -> bool:
    if value is None:
        raw = os.environ.get(env)
        if raw is None or not raw.strip():
            return default
        word = raw.strip().lower()
        if word in ("1", "true", "yes", "on"):
            return True
        if word in ("0", "false", "no", "off"):
            return False
        raise ConfigurationError(f"{env} must be true or false, got {raw!r}")
    if not isinstance(value, bool):
        raise ConfigurationError(f"{name} must be True or False, got {value!r}")
    return value


def _fraction(value: Any, name: str, env: str, default: float | None) -> float | None:
    source = name
    if value is None:
        raw = os.environ.get(env)
        if raw is None or not raw.strip():
            return default
        source = env
        try:
            value = float(raw)
        except ValueError as exc:
            raise ConfigurationError(f"{env} must be a number from 0 to 1, got {raw!r}") from exc
    if not finite_number(value) or not 0 < value <= 1:
        raise ConfigurationError(f"{source} must be a finite number above 0 and at most 1, got {value!r}")
    return float(value)


@dataclass(slots=True)
class RetrievalConfig:
    """How search finds and orders candidates."""

    vector_weight: float = 1.0  # weight of the embedding ranking in the fusion
    text_weight: float = 1.0  # weight of the BM25 ranking in the fusion
    # Reciprocal rank fusion constant: small values let the top of each ranking
    # dominate (bench/RESULTS.md: 10 beat the textbook 60 by 9 points of R@10).
    rrf_k: int = 10
    # Per ranking, before fusion (at least 4 x limit). 100, not 50: a search for 10
    # results then fuses as deep as the LoCoMo benchmark's searches for 50 did, and
    # its recall@10 rose from 80.8 to 82.0 on the dev split, on both halves, with no
    # category falling (bench/RESULTS.md, issue 29).
    candidates: int = 100
    time_weight: float = 1.0  # a time expression in the query adds that window's memories
    # With no reference_time, a relative time expression ("last week", "in June", "3
    # days ago") whose window counted from now holds none of the scope's memories is
    # counted from the scope's newest memory instead: an imported conversation's
    # "in June" is the June of its own dates (bench/RESULTS.md, issue 29).
    time_from_latest: bool = True
    # A speaker named in the query adds that speaker's memories. Off by default: on
    # LoCoMo it lifted multi-hop recall but cost adversarial questions (which pin an
    # event on the wrong speaker) more than it gained (bench/RESULTS.md).
    speaker_weight: float = 0.0
    # Share of the fused score that comes from each ranking's scores normalised to
    # [0, 1] (memorist.policies.fusion.normalized_score_fusion), the rest from ranks.
    score_weight: float = 0.0
    # Episodes: among the ``episode_depth`` best candidates, those stored within
    # ``episode_gap`` seconds of each other form one, and each rises toward its
    # episode's best score by ``episode_weight`` (memorist.policies.fusion.episode_fusion):
    # the replies and follow-ups around a strong match come up with it. On LoCoMo's
    # dev split, weight 0.5 over the best 20 raised recall@10 from 82.3 to 84.0,
    # chosen on one half of the questions and +2.1 on the other, no category falling
    # at any depth (bench/RESULTS.md). 0: off.
    episode_weight: float = 0.5
    episode_gap: float = 3600.0
    episode_depth: int = 20
    # A memory that asks a question (one of its sentences ends in "?") ranks with its
    # fused score times 1 - question_discount: in a conversation, the turn that asks
    # ("That's great! How did it go?") tells less than the turns around it, yet shares
    # the words of a question about them. On LoCoMo's dev split 0.25 raised recall@10
    # from 84.0 to 85.1 and recall@5 from 75.0 to 77.9, chosen on one half of the
    # questions (+0.6) and +1.6 on the other (bench/RESULTS.md, issue 29). 0: off.
    question_discount: float = 0.25
    # Search keys of verbatim conversation turns (add(..., infer=False) with a list
    # of messages); see memorist.policies.search_keys.
    speaker_keys: bool = True  # "<name>: <text>"
    context_keys: bool = True  # the turn it replies to
    fact_keys: bool = True  # the heuristic extractor's facts of the turn

    def __post_init__(self) -> None:
        _check_retrieval(self)

    def __setattr__(self, name: str, value: Any) -> None:
        # A setting changed on a live config (``memory.config.retrieval.rrf_k = 0``)
        # is checked as one given at the start, and a refused one leaves the old.
        try:
            before = getattr(self, name)
        except AttributeError:  # being built: __post_init__ checks the whole
            object.__setattr__(self, name, value)
            return
        object.__setattr__(self, name, value)
        try:
            _check_retrieval(self)
        except ConfigurationError:
            object.__setattr__(self, name, before)
            raise


def refuse_unknown(given: Iterable[Any], settings: type, what: str) -> None:
    """Refuse, naming them and the known ones, the names of ``given`` that are no
    field of the dataclass ``settings`` (``what``: "config key", "setting", ...)."""
    known = {f.name for f in fields(settings)}
    unknown = sorted(set(given) - known, key=str)
    if unknown:
        raise ConfigurationError(f"unknown {what}(s) {', '.join(map(str, unknown))}; known: {', '.join(sorted(known))}")


def retrieval_config(value: Any) -> RetrievalConfig:
    """``value`` as a RetrievalConfig: one as it is, or a mapping of its settings
    (unknown keys refused, each setting checked)."""
    if isinstance(value, RetrievalConfig):
        return value
    if isinstance(value, Mapping):
        refuse_unknown(value, RetrievalConfig, "retrieval key")
        return RetrievalConfig(**value)
    raise ConfigurationError(f"retrieval must be a RetrievalConfig or a mapping of its settings, got {type(value).__name__}")


def _check_retrieval(r: RetrievalConfig) -> None:
    """Refuse, naming the setting, a retrieval setting every search would fail or
    misread on: a fraction where a count goes, no ranking left to fuse, a flag that is
    not True or False (the string "no" would count as true)."""
    for name in ("vector_weight", "text_weight", "time_weight", "speaker_weight", "episode_weight", "episode_gap"):
        value = getattr(r, name)
        if not finite_number(value) or value < 0:
            raise ConfigurationError(f"retrieval.{name} must be a finite number >= 0, got {value!r}")
    for name, low in (("rrf_k", 0), ("candidates", 1), ("episode_depth", 1)):
        value = getattr(r, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ConfigurationError(f"retrieval.{name} must be a whole number >= {low}, got {value!r}")
    for name in ("score_weight", "question_discount"):
        value = getattr(r, name)
        if not finite_number(value) or not 0 <= value <= 1:
            raise ConfigurationError(f"retrieval.{name} must be a number from 0 to 1, got {value!r}")
    if r.vector_weight == 0 and r.text_weight == 0:
        # Every search ranks by vector and by keywords; time and speaker rankings only
        # join when the query names a time or a speaker. With both off, most searches
        # would silently find nothing.
        raise ConfigurationError(
            "retrieval.vector_weight and retrieval.text_weight are both 0: every search would find nothing; "
            "give one of them a weight above 0"
        )
    for name in ("time_from_latest", "speaker_keys", "context_keys", "fact_keys"):
        value = getattr(r, name)
        if not isinstance(value, bool):
            raise ConfigurationError(f"retrieval.{name} must be True or False, got {value!r}")


@dataclass(slots=True)
class MemoryConfig:
    path: str | None = None
    embedder: Any = None
    decay_days: float | None = None
    # None: MEMORIST_TENANT, else "" (the default tenant); "" given: the default
    # tenant whatever the environment says (an argument beats the environment).
    tenant_id: str | None = None
    max_message_chars: int = 100_000
    # Metadata is checked where it enters (add, update, import): how deep it may
    # nest and how large its JSON may be. Stored rows stay readable whatever they hold.
    max_metadata_depth: int = 16
    max_metadata_bytes: int = 65_536
    # Seconds a write waits for another writer's lock before failing (looking again
    # after short jittered sleeps); an import batch that still finds the store locked
    # is retried whole, with backoff (memorist.pipelines.transfer).
    busy_timeout: float | None = None  # None: MEMORIST_BUSY_TIMEOUT, else 30
    similar_k: int = 5  # stored memories shown to the reconciler per fact
    retrieval: RetrievalConfig = field(default_factory=RetrievalConfig)
    # "provider:model" (e.g. "openai:gpt-5-mini"), a memorist.llm.LLM, or None
    # (MEMORIST_LLM, else no LLM). See memorist.llm.resolve_llm.
    llm: Any = None
    # "default", or "energy": energy tiers (memorist.policies.energy). None:
    # MEMORIST_POLICY, else the policy recorded in the store (a new store records
    # what it was opened with). Opening a store under another policy is an error;
    # Memory.set_policy changes it, logged.
    policy: str | None = None
    # Where maintenance runs append their JSON lines: a path, "off", or None
    # (MEMORIST_MAINTENANCE_LOG, else next to a SQLite file; none for other stores).
    maintenance_log: str | None = None
    # Consolidation (memory.learning.consolidate): None reads the environment (above).
    consolidation_batch_size: int | None = None
    auto_consolidate_threshold: int | None = None
    run_consolidation_async: bool | None = None
    consolidation_similarity: float | None = None

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> MemoryConfig:
        if not isinstance(data, Mapping):
            raise ConfigurationError(f"config must be a mapping, got {type(data).__name__}")
        refuse_unknown(data, cls, "config key")
        return cls(**data)

    def __setattr__(self, name: str, value: Any) -> None:
        # ``retrieval`` is read by every search: a mapping of its settings becomes a
        # checked RetrievalConfig, anything else is refused, when given or changed.
        object.__setattr__(self, name, retrieval_config(value) if name == "retrieval" else value)

    def resolved(self) -> MemoryConfig:
        """A copy with environment defaults filled in and values checked."""
        decay = self.decay_days if self.decay_days is not None else _env_decay_days()
        if decay is not None and (not finite_number(decay) or decay < 0):
            raise ConfigurationError(f"decay_days must be a finite number >= 0, got {decay!r}")
        embedder = self.embedder if self.embedder is not None else (os.environ.get("MEMORIST_EMBEDDER") or None)
        tenant = _tenant(self.tenant_id)
        r = self.retrieval
        _check_retrieval(r)
        for name in ("max_message_chars", "similar_k", "max_metadata_depth", "max_metadata_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"{name} must be a whole number >= 1, got {value!r}")
        if isinstance(self.path, str) and not self.path.strip():
            raise ConfigurationError(
                f"path must name a store (a file, ':memory:' or a postgresql:// URL), got {self.path!r}; "
                "leave it out for the default store"
            )
        busy = self.busy_timeout if self.busy_timeout is not None else _env_busy_timeout()
        if isinstance(busy, bool) or not isinstance(busy, int | float) or not 0 <= busy <= MAX_BUSY_TIMEOUT:
            raise ConfigurationError(f"busy_timeout must be seconds from 0 to {MAX_BUSY_TIMEOUT}, got {busy!r}")
        return MemoryConfig(
            path=self.path,
            embedder=embedder,
            decay_days=decay or None,
            tenant_id=tenant,
            max_message_chars=self.max_message_chars,
            max_metadata_depth=self.max_metadata_depth,
            max_metadata_bytes=self.max_metadata_bytes,
            busy_timeout=float(busy),
            similar_k=self.similar_k,
            retrieval=r,
            llm=self.llm if self.llm is not None else llm_spec(),
            policy=_policy(self.policy),
            maintenance_log=self._maintenance_log(),
            consolidation_batch_size=_whole(self.consolidation_batch_size, "consolidation_batch_size", "CONSOLIDATION_BATCH_SIZE", 1000, low=2),
            auto_consolidate_threshold=_whole(self.auto_consolidate_threshold, "auto_consolidate_threshold", "AUTO_CONSOLIDATE_THRESHOLD", 0, low=0),
            run_consolidation_async=_flag(self.run_consolidation_async, "run_consolidation_async", "RUN_CONSOLIDATION_ASYNC", True),
            consolidation_similarity=_fraction(self.consolidation_similarity, "consolidation_similarity", "MEMORIST_CONSOLIDATION_SIMILARITY", None),
        )

    def _maintenance_log(self) -> str | None:
        value = self.maintenance_log if self.maintenance_log is not None else (os.environ.get("MEMORIST_MAINTENANCE_LOG") or None)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise ConfigurationError(f"maintenance_log must be a file path or 'off', got {value!r}")
        return value


# The rest of the environment ------------------------------------------------------------
# Read when the object that needs it is built (a provider, an embedder, a playbook),
# never at import: a variable set after ``import memorist`` counts from the next one.


def llm_spec() -> str | None:
    """``MEMORIST_LLM``: the model used when none is given (None: unset or empty)."""
    return os.environ.get("MEMORIST_LLM") or None


#: The most seconds ``MEMORIST_LLM_TIMEOUT`` may give one model request.
MAX_LLM_TIMEOUT = 3600.0


def llm_bounds() -> dict[str, Any]:
    """``MEMORIST_LLM_TIMEOUT`` (seconds each model request may take, above 0 and at
    most an hour) and ``MEMORIST_LLM_RETRIES`` (times a request that timed out or
    failed on the way is tried again, 0 to 10): the provider options of the set ones."""
    bounds: dict[str, Any] = {}
    raw = os.environ.get("MEMORIST_LLM_TIMEOUT", "").strip()
    if raw:
        try:
            timeout = float(raw)
        except ValueError:
            timeout = float("nan")
        if not finite_number(timeout) or not 0 < timeout <= MAX_LLM_TIMEOUT:
            raise ConfigurationError(f"MEMORIST_LLM_TIMEOUT must be seconds above 0 and at most {MAX_LLM_TIMEOUT:g}, got {raw!r}")
        bounds["timeout"] = timeout
    raw = os.environ.get("MEMORIST_LLM_RETRIES", "").strip()
    if raw:
        # ASCII digits only: str.isdigit also takes "²" (which int() refuses) and "٣".
        if not (raw.isascii() and raw.isdigit()) or int(raw) > 10:
            raise ConfigurationError(f"MEMORIST_LLM_RETRIES must be a whole number from 0 to 10, got {raw!r}")
        bounds["max_retries"] = int(raw)
    return bounds


def openai_api_key() -> str | None:
    """``OPENAI_API_KEY``: the key of OpenAI's Responses API."""
    return os.environ.get("OPENAI_API_KEY")


def openai_base_url() -> str | None:
    """``OPENAI_BASE_URL``: another address for OpenAI's API (None: unset or empty)."""
    return os.environ.get("OPENAI_BASE_URL") or None


def compatible_api_key() -> str | None:
    """``MEMORIST_LLM_API_KEY``: the key sent to an OpenAI-compatible server."""
    return os.environ.get("MEMORIST_LLM_API_KEY")


def compatible_endpoint() -> tuple[str, str | None, str] | None:
    """An OpenAI-compatible server's base URL, key and the variable the URL came from:
    ``MEMORIST_LLM_BASE_URL`` with ``MEMORIST_LLM_API_KEY``, else ``OPENAI_BASE_URL``
    with ``OPENAI_API_KEY`` (a key goes with its own URL only); None when neither URL
    is set."""
    for url_var, key_var in (("MEMORIST_LLM_BASE_URL", "MEMORIST_LLM_API_KEY"), ("OPENAI_BASE_URL", "OPENAI_API_KEY")):
        url = os.environ.get(url_var)
        if url:
            return url, os.environ.get(key_var), url_var
    return None


def gemini_api_key() -> str | None:
    """``GEMINI_API_KEY``: Gemini's API key."""
    return os.environ.get("GEMINI_API_KEY")


def gemini_model() -> str | None:
    """``GEMINI_MODEL``: the Gemini model to use (None: unset or empty)."""
    return os.environ.get("GEMINI_MODEL") or None


def ace_memory_file() -> str | None:
    """``ACE_MEMORY_FILE``: the store of the tutoring playbooks (``memorist run-turn``,
    ``memorist analyze``) when neither ``--db`` nor ``MEMORIST_DB`` names one (None:
    unset or empty)."""
    return os.environ.get("ACE_MEMORY_FILE") or None


def gemini_base_url() -> str | None:
    """``GEMINI_BASE_URL``: another address for Gemini (None: unset or empty)."""
    return os.environ.get("GEMINI_BASE_URL") or None


def llm_temperature(default: float) -> float:
    """``ACE_LLM_TEMPERATURE``, checked; ``default`` when unset."""
    raw = os.environ.get("ACE_LLM_TEMPERATURE")
    if raw is None or not raw.strip():
        return default
    try:
        value = float(raw)
    except ValueError as exc:
        raise ConfigurationError(f"ACE_LLM_TEMPERATURE must be a number in [0, 2], got {raw!r}") from exc
    if not 0 <= value <= 2:
        raise ConfigurationError(f"ACE_LLM_TEMPERATURE must be in [0, 2], got {raw!r}")
    return value


def curator_uses_llm() -> bool:
    """``ACE_CURATOR_USE_LLM`` (default false) as the learning roles read it:
    true for ``1``, ``true``, ``yes`` or ``on``, false for anything else."""
    return os.environ.get("ACE_CURATOR_USE_LLM", "").strip().lower() in ("1", "true", "yes", "on")


def embed_runtime() -> str:
    """``MEMORIST_EMBED_RUNTIME`` as set ("" when unset); the embedder checks it."""
    return os.environ.get("MEMORIST_EMBED_RUNTIME", "")


def cache_dir() -> Path | None:
    """``MEMORIST_CACHE_DIR``, user-expanded (None: unset or empty)."""
    env = os.environ.get("MEMORIST_CACHE_DIR")
    return Path(env).expanduser() if env else None


def playbook_environment() -> dict[str, str]:
    """Those set of the variables :meth:`memorist.PlaybookConfig.resolved` reads:
    ``ACE_CURATOR_MAX_NEW``, ``ACE_CURATOR_USE_LLM``."""
    return _set(("ACE_CURATOR_MAX_NEW", "ACE_CURATOR_USE_LLM"))


def learning_environment() -> dict[str, str]:
    """Those set of the variables :meth:`memorist.policies.learning.LearningConfig.resolved`
    reads (the learning loop's settings)."""
    return _set(
        (
            "TRAJECTORY_RETENTION_DAYS",
            "TRAJECTORY_SAMPLE_RATE",
            "TRAJECTORY_ALWAYS_STORE_FAILURES",
            "PLAYBOOK_VERSION_KEEP_LATEST",
            "PLAYBOOK_VERSION_KEEP_ALL_MAJOR",
            "PLAYBOOK_VERSION_KEEP_DAYS",
        )
    )


#: ``memorist serve``'s options that the environment may set (every limit), and their
#: variables. A variable is the default of its option (the flag wins); it is checked
#: as the flag is. docs/configuration.md lists them (a test compares the two).
SERVE_ENVIRONMENT = {
    "rate_limit": "MEMORIST_RATE_LIMIT",
    "burst": "MEMORIST_BURST",
    "max_body_bytes": "MEMORIST_MAX_BODY_BYTES",
    "max_messages": "MEMORIST_MAX_MESSAGES",
    "max_text_chars": "MEMORIST_MAX_TEXT_CHARS",
    "max_connections": "MEMORIST_MAX_CONNECTIONS",
    "max_concurrency": "MEMORIST_MAX_CONCURRENCY",
    "max_concurrency_per_caller": "MEMORIST_MAX_CONCURRENCY_PER_CALLER",
    "timeout_keep_alive": "MEMORIST_TIMEOUT_KEEP_ALIVE",
    "timeout_head": "MEMORIST_TIMEOUT_HEAD",
    "timeout_body": "MEMORIST_TIMEOUT_BODY",
    "auth_failures": "MEMORIST_AUTH_FAILURES",
    "erasures": "MEMORIST_ERASURES",
}


def serve_environment() -> dict[str, tuple[str, str]]:
    """The options of :data:`SERVE_ENVIRONMENT` set in the environment (and not empty):
    option -> (variable, text)."""
    return {option: (var, os.environ[var]) for option, var in SERVE_ENVIRONMENT.items() if os.environ.get(var, "").strip()}


def _set(names: Iterable[str]) -> dict[str, str]:
    return {name: os.environ[name] for name in names if name in os.environ}


#: Where ``memorist chat`` finds the memory service when ``MEMORY_MANAGEMENT_URL`` is unset.
DEFAULT_MEMORY_MANAGEMENT_URL = "http://localhost:6060/api/memories"


def chat_environment() -> dict[str, Any]:
    """The chat service's settings (``memorist chat``), read when it is built:
    ``MEMORY_MANAGEMENT_URL`` (the memory service; default
    :data:`DEFAULT_MEMORY_MANAGEMENT_URL`), ``MEMORY_API_KEY`` (the chat's key for
    it; none for a development memory service) and the decay window
    (``MEMORIST_DECAY_DAYS`` / ``MEMORY_DECAY_DAYS``; 0 or unset: no decay)."""
    return {
        "memory_url": os.environ.get("MEMORY_MANAGEMENT_URL") or DEFAULT_MEMORY_MANAGEMENT_URL,
        "memory_api_key": os.environ.get("MEMORY_API_KEY") or None,
        "decay_days": _env_decay_days() or 0.0,
    }


def quiet_onnxruntime() -> None:
    """Turn ONNX Runtime's own telemetry off for this process before it is first
    imported (``ORT_DISABLE_TELEMETRY``), unless the process chose already: on Linux
    and macOS it writes a device id under ``~/.cache/Microsoft`` and looks up its
    collector on the network, and Memorist makes no network call it was not asked for."""
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
