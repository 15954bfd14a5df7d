""":class:`AsyncMemory`: :class:`~memorist.Memory` for asyncio applications (FastAPI,
LangGraph), as mem0's ``AsyncMemory``.

Every call is Memory's, awaited: it runs in the instance's own worker thread, so the
event loop never waits on SQLite or an embedding model:

>>> import asyncio
>>> from memorist import AsyncMemory
>>> async def main():
...     async with AsyncMemory(":memory:", embedder="hashing") as memory:
...         await memory.add("I'm a vegetarian.", user_id="alex")
...         return [r["memory"] for r in (await memory.search("food?", user_id="alex"))["results"]]
>>> asyncio.run(main())
['Is vegetarian']

The calls of one AsyncMemory run one at a time, in the order they were made. The store
serialises its own reads and writes, but Memory keeps state between them that is not
under that lock (the query-vector cache; an ``add`` reads the scope's memories, then
writes what it decided), so concurrent tasks queue for the instance's worker thread
instead. They queue as futures, not as threads: a burst of calls on one busy instance
holds no thread of the event loop's default executor, so other instances and the
application's own :func:`asyncio.to_thread` work go on meanwhile, and a call cancelled
before its turn never runs. One AsyncMemory may serve several event loops (threads):
their calls share the one queue. Building one opens the store (and may load a model):
do it at start-up, or in ``await asyncio.to_thread(AsyncMemory, ...)``.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import inspect
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from .ace.learning import Learning
from .ace.playbook import Playbook, PlaybookTurn
from .api import CALLS, Scoped
from .capabilities import (
    BACKGROUND_WAITS,
    LEARNING_CALLS,
    PLAYBOOK_CALLS,
    PLAYBOOK_TURN_CALLS,
    Minutes,
    Tiers,
)
from .config import MemoryConfig
from .embed import Embedder
from .llm import LLM
from .memory import Memory
from .policies.ranking import RankingPolicy
from .relations import Relations
from .roles.base import Extractor, Reconciler
from .store.base import Store

T = TypeVar("T")


class AsyncMemory:
    """:class:`~memorist.Memory`'s calls as coroutines; the same constructor.

    ``memory`` is the wrapped (synchronous) Memory. Use ``async with`` or
    :meth:`aclose`. :meth:`export` returns a list (Memory's returns an iterator).
    """

    def __init__(
        self,
        path: str | None = None,
        *,
        embedder: str | Embedder | None = None,
        decay_days: float | None = None,
        tenant_id: str | None = None,
        extractor: Extractor | None = None,
        reconciler: Reconciler | None = None,
        ranking: RankingPolicy | None = None,
        store: Store | None = None,
        config: MemoryConfig | None = None,
        llm: str | LLM | None = None,
        policy: str | None = None,
        **settings: Any,
    ) -> None:
        self.memory = Memory(
            path,
            embedder=embedder,
            decay_days=decay_days,
            tenant_id=tenant_id,
            extractor=extractor,
            reconciler=reconciler,
            ranking=ranking,
            store=store,
            config=config,
            llm=llm,
            policy=policy,
            **settings,
        )
        # The instance's calls run on one worker thread of its own, made on first use:
        # queued calls wait in its queue, not in threads of the loop's default executor.
        self._worker: ThreadPoolExecutor | None = None
        self._worker_lock = threading.Lock()
        # Held while a call runs: the worker replaced after aclose() may start before the
        # old one has drained, and two threads must never work the Memory at once.
        self._lock = threading.Lock()

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> AsyncMemory:
        """Build from a plain mapping, as :meth:`memorist.Memory.from_config`."""
        return cls(config=MemoryConfig.from_mapping(config))

    @property
    def config(self) -> MemoryConfig:
        """The wrapped Memory's resolved configuration."""
        return self.memory.config

    # The wrapped Memory's settings, read and assigned there (checked as Memory checks them).
    @property
    def ranking(self) -> RankingPolicy:
        """:attr:`memorist.Memory.ranking`: the ranking policy searches apply (assignable)."""
        return self.memory.ranking

    @ranking.setter
    def ranking(self, policy: RankingPolicy) -> None:
        self.memory.ranking = policy

    @property
    def energy(self) -> bool:
        """:attr:`memorist.Memory.energy`: whether the energy policy runs (energy tiers)."""
        return self.memory.energy

    @property
    def learning_config(self) -> Any:
        """:attr:`memorist.Memory.learning_config` (assignable: a LearningConfig or a
        mapping of its fields; an unknown setting is an error, as on Memory)."""
        return self.memory.learning_config

    @learning_config.setter
    def learning_config(self, config: Any) -> None:
        self.memory.learning_config = config

    async def _run(self, call: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``call(*args, **kwargs)`` on the instance's worker thread, after the calls
        queued before it, in the caller's context (as :func:`asyncio.to_thread`)."""
        loop = asyncio.get_running_loop()
        context = contextvars.copy_context()

        def locked() -> T:
            with self._lock:
                return context.run(call, *args, **kwargs)

        return await asyncio.wrap_future(self._submit(locked), loop=loop)

    def _submit(self, fn: Callable[[], T]) -> Future[T]:
        with self._worker_lock:
            if self._worker is None:
                self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memorist-async")
            return self._worker.submit(fn)

    # The declared calls (memorist.api.CALLS) are derived below, one per declaration.

    async def reset(self) -> None:
        """:meth:`memorist.Memory.reset`, awaited."""
        await self._run(self.memory.reset)

    def scope(self, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None) -> Scoped:
        """A handle bound to one scope whose calls are awaited: ``await
        memory.scope(user_id="alex").search("food")`` (see :meth:`memorist.Memory.scope`)."""
        return Scoped(self, user_id=user_id, agent_id=agent_id, run_id=run_id)

    def as_subject(self, *, user_id: str | None = None, agent_id: str | None = None) -> AsyncSubject:
        """A handle acting as a user and/or agent whose calls are awaited: ``await
        memory.as_subject(agent_id="b").learning.get_playbook("default", agent_id="a")``
        (see :meth:`memorist.Memory.as_subject`)."""
        return AsyncSubject(self, self.memory.as_subject(user_id=user_id, agent_id=agent_id))

    # inspection and maintenance ------------------------------------------------------
    async def stats(self) -> dict[str, Any]:
        """:meth:`memorist.Memory.stats`, awaited."""
        return await self._run(self.memory.stats)

    async def pending(
        self, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """:meth:`memorist.Memory.pending`, awaited."""
        return await self._run(self.memory.pending, user_id=user_id, agent_id=agent_id, run_id=run_id, limit=limit)

    async def reprocess(
        self, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None, limit: int | None = None
    ) -> dict[str, Any]:
        """:meth:`memorist.Memory.reprocess`, awaited."""
        return await self._run(self.memory.reprocess, user_id=user_id, agent_id=agent_id, run_id=run_id, limit=limit)

    async def llm_usage(
        self, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None, since: int = 0
    ) -> dict[str, Any]:
        """:meth:`memorist.Memory.llm_usage`, awaited."""
        return await self._run(self.memory.llm_usage, user_id=user_id, agent_id=agent_id, run_id=run_id, since=since)

    async def reindex(self, *, embedder: str | Embedder | None = None, progress: Any = None) -> dict[str, int]:
        """:meth:`memorist.Memory.reindex`, awaited (``progress`` is called in the worker thread)."""
        return await self._run(self.memory.reindex, embedder=embedder, progress=progress)

    @property
    def playbooks(self) -> AsyncPlaybook:
        """:attr:`memorist.Memory.playbooks`, its calls awaited (``turn()`` gives a turn
        whose calls are awaited)."""
        return AsyncPlaybook(self, self.memory.playbooks)

    @property
    def learning(self) -> AsyncLearning:
        """:attr:`memorist.Memory.learning`, its calls awaited."""
        return AsyncLearning(self)

    @property
    def tiers(self) -> AsyncTiers:
        """:attr:`memorist.Memory.tiers`, its calls awaited."""
        return AsyncTiers(self)

    @property
    def minutes(self) -> AsyncMinutes:
        """:attr:`memorist.Memory.minutes`, its calls awaited (PAIR's revise callback
        runs in the worker thread too)."""
        return AsyncMinutes(self)

    @property
    def relations(self) -> AsyncRelations:
        """:attr:`memorist.Memory.relations`, its calls awaited."""
        return AsyncRelations(self)

    # ids, export and import -------------------------------------------------------------
    async def resolve_id(
        self, prefix: str, *, include_deleted: bool = False, user_id: str | None = None, agent_id: str | None = None,
        run_id: str | None = None,
    ) -> str:
        """:meth:`memorist.Memory.resolve_id`, awaited."""
        return await self._run(
            self.memory.resolve_id, prefix, include_deleted=include_deleted, user_id=user_id, agent_id=agent_id, run_id=run_id
        )

    async def export(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        all_scopes: bool = False,
        events: bool = False,
    ) -> list[dict[str, Any]]:
        """:meth:`memorist.Memory.export`, awaited, as a list (read whole in the worker thread)."""

        def read() -> list[dict[str, Any]]:
            return list(self.memory.export(user_id=user_id, agent_id=agent_id, run_id=run_id, all_scopes=all_scopes, events=events))

        return await self._run(read)

    async def import_(
        self,
        source: Any,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        infer: bool | None = None,
        progress: Callable[[int], None] | None = None,
        from_line: int = 1,
    ) -> dict[str, int]:
        """:meth:`memorist.Memory.import_`, awaited (``source`` is read and ``progress``
        called in the worker thread)."""
        return await self._run(
            self.memory.import_, source, user_id=user_id, agent_id=agent_id, run_id=run_id, infer=infer, progress=progress,
            from_line=from_line,
        )

    # integrity and backup -------------------------------------------------------------
    async def check(self, *, quick: bool = False) -> dict[str, Any]:
        """:meth:`memorist.Memory.check`, awaited."""
        return await self._run(self.memory.check, quick=quick)

    async def backup(self, dest: str, *, force: bool = False) -> dict[str, Any]:
        """:meth:`memorist.Memory.backup`, awaited."""
        return await self._run(self.memory.backup, dest, force=force)

    async def aclose(self) -> None:
        """Flush buffered bookkeeping and close the store (after the calls queued
        before), then let the worker thread end."""
        try:
            await self._run(self.memory.close)
        finally:
            with self._worker_lock:
                worker, self._worker = self._worker, None
            if worker is not None:
                worker.shutdown(wait=False)

    async def __aenter__(self) -> AsyncMemory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"Async{self.memory!r}"


def _awaited(name: str, declared: Callable[..., Any] | None = None) -> Callable[..., Any]:
    """``AsyncMemory.<name>``: :class:`~memorist.Memory`'s call of that name, awaited
    (same parameters; run on the instance's worker thread, after the calls queued
    before it). A declared
    call (:mod:`memorist.api`) takes its declaration's signature and docstring."""
    call = declared if declared is not None else getattr(Memory, name)

    @functools.wraps(call)
    async def method(self: AsyncMemory, *args: Any, **kwargs: Any) -> Any:
        return await self._run(getattr(self.memory, name), *args, **kwargs)

    if declared is None:
        method.__doc__ = f":meth:`memorist.Memory.{name}`, awaited."
    return method


# The declared calls: each exactly its declaration, awaited.
for _call in CALLS:
    setattr(AsyncMemory, _call.name, _awaited(_call.name, _call.declared))
del _call


class AsyncSubject:
    """``AsyncMemory.as_subject(...)``: a :class:`memorist.relations.Subject`'s calls
    (and those of its ``learning``, ``relations``, ``tiers`` and ``minutes``), awaited
    in the AsyncMemory's worker thread; the relation checks run there with them."""

    def __init__(self, owner: AsyncMemory, target: Any) -> None:
        self._owner = owner
        self._target = target

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._target, name)
        if not callable(found):
            return AsyncSubject(self._owner, found) if not isinstance(found, str | int | float | dict | frozenset) else found

        @functools.wraps(found)
        async def call(*args: Any, **kwargs: Any) -> Any:
            return await self._owner._run(found, *args, **kwargs)

        return call

    def __repr__(self) -> str:
        return f"Async{self._target!r}"


class _AsyncCapability:
    """One capability of an :class:`AsyncMemory`: the Memory's calls, awaited."""

    _name = ""

    def __init__(self, owner: AsyncMemory) -> None:
        self._owner = owner


def _awaited_call(capability: str, name: str, source: type) -> Callable[..., Any]:
    target = getattr(source, name)

    @functools.wraps(target)
    async def method(self: _AsyncCapability, *args: Any, **kwargs: Any) -> Any:
        return await self._owner._run(getattr(getattr(self._owner.memory, capability), name), *args, **kwargs)

    return method


async def _waited(call: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``call(*args, **kwargs)``, a wait for this process's background runs, on a
    thread of its own: not in the instance's queue (its other calls go on while it
    waits, and the runs it waits for are not among them) and not in the loop's
    default executor (a long wait holds none of its threads)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    context = contextvars.copy_context()

    def settle(result: Any, error: BaseException | None) -> None:
        if future.done():  # cancelled meanwhile
            return
        if error is None:
            future.set_result(result)
        else:
            future.set_exception(error)

    def wait() -> None:
        result: Any = None
        error: BaseException | None = None
        try:
            result = context.run(call, *args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: no one awaits the answer
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=wait, name="memorist-wait", daemon=True).start()
    return await future


def _awaited_wait(capability: str, name: str, source: type) -> Callable[..., Any]:
    target = getattr(source, name)

    @functools.wraps(target)
    async def method(self: _AsyncCapability, *args: Any, **kwargs: Any) -> Any:
        return await _waited(getattr(getattr(self._owner.memory, capability), name), *args, **kwargs)

    return method


class AsyncLearning(_AsyncCapability):
    """``AsyncMemory.learning``: trajectories, reflection, curation, versioned playbooks."""

    async def execute_with_learning(
        self,
        task_fn: Callable[..., Any] | None = None,
        task_description: str | None = None,
        task_type: str | None = None,
        auto_reflect: bool = True,
        auto_curate: bool = True,
        playbook_name: str = "default",
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        scope: str | None = None,
        parent_trajectory_id: str | None = None,
    ) -> Any:
        """:meth:`memorist.ace.learning.Learning.execute_with_learning`, awaited: a sync ``task_fn``
        runs in a worker thread, an async one on this loop. Without the instance
        lock: the task may await the AsyncMemory's other calls. Without ``task_fn``,
        the (Memory's) decorator."""
        options = dict(task_type=task_type, auto_reflect=auto_reflect, auto_curate=auto_curate, playbook_name=playbook_name,
                       user_id=user_id, agent_id=agent_id, scope=scope, parent_trajectory_id=parent_trajectory_id)
        if task_fn is None:
            return self._owner.memory.learning.execute_with_learning(None, task_description, **options)
        if inspect.iscoroutinefunction(task_fn):
            return await self._owner.memory.learning.execute_with_learning(task_fn, task_description, **options)
        return await asyncio.to_thread(self._owner.memory.learning.execute_with_learning, task_fn, task_description, **options)



class AsyncTiers(_AsyncCapability):
    """``AsyncMemory.tiers``: energy tiers."""


class AsyncMinutes(_AsyncCapability):
    """``AsyncMemory.minutes``: coordination minutes, the context window, evaluation, PAIR."""


class AsyncRelations(_AsyncCapability):
    """``AsyncMemory.relations``: relation tuples (sharing)."""


# Each call of a capability awaited on the instance's worker thread; its waits for
# background runs (BACKGROUND_WAITS) on a thread of their own.
for _cls, _capability, _source, _names in (
    (AsyncLearning, "learning", Learning, LEARNING_CALLS),
    (AsyncTiers, "tiers", Tiers, Tiers.CALLS),
    (AsyncMinutes, "minutes", Minutes, Minutes.CALLS),
    (AsyncRelations, "relations", Relations, Relations.CALLS),
):
    _waits = BACKGROUND_WAITS.get(_capability, ())
    for _name in dict.fromkeys((*_names, *_waits)):
        if _name not in vars(_cls):
            setattr(_cls, _name, (_awaited_wait if _name in _waits else _awaited_call)(_capability, _name, _source))
# The store's configuration.
AsyncMemory.set_policy = _awaited("set_policy")
del _cls, _capability, _source, _names, _name, _waits


class AsyncPlaybook:
    """``AsyncMemory.playbooks``: a :class:`~memorist.Playbook`'s calls, awaited on the
    AsyncMemory's worker thread (``run_turn``'s ``answerer`` is called there too);
    :meth:`turn` gives a turn whose calls are awaited. ``playbook`` is the Playbook
    itself (its ``config`` and roles)."""

    def __init__(self, owner: AsyncMemory, playbook: Playbook) -> None:
        self._owner = owner
        self.playbook = playbook

    @property
    def config(self) -> Any:
        """The playbook's rules (:class:`memorist.policies.playbook.PlaybookConfig`)."""
        return self.playbook.config

    def turn(self, learner_id: str, conversation_id: str | None = None, *, topic: str | None = None) -> AsyncPlaybookTurn:
        """:meth:`memorist.Playbook.turn`: one turn of ``learner_id``; its ``retrieve``,
        ``context`` and ``learn`` are awaited. The ids are checked now."""
        return AsyncPlaybookTurn(self._owner, self.playbook.turn(learner_id, conversation_id, topic=topic))

    def __repr__(self) -> str:
        return f"AsyncPlaybook({self.playbook.config.preset_name!r})"


class AsyncPlaybookTurn:
    """``AsyncMemory.playbooks.turn(...)``: one turn of one learner, its calls awaited on
    the AsyncMemory's worker thread. ``turn`` is the
    :class:`memorist.ace.playbook.PlaybookTurn` itself (``state``, ``size``: read it
    after an awaited call, as those load the learner's playbook)."""

    def __init__(self, owner: AsyncMemory, turn: PlaybookTurn) -> None:
        self._owner = owner
        self.turn = turn

    @property
    def learner_id(self) -> str:
        return self.turn.learner_id

    @property
    def conversation_id(self) -> str:
        return self.turn.conversation_id

    @property
    def injected(self) -> list[Any]:
        """The bullets this turn's retrievals returned (what ``learn`` tags by default)."""
        return self.turn.injected

    def __repr__(self) -> str:
        return f"AsyncPlaybookTurn(learner_id={self.turn.learner_id!r})"


def _awaited_of(name: str, source: type, wrapped: str) -> Callable[..., Any]:
    """``<source>.<name>`` of the object in attribute ``wrapped``, awaited on the owner's worker thread."""
    target = getattr(source, name)

    @functools.wraps(target)
    async def method(self: AsyncPlaybook | AsyncPlaybookTurn, *args: Any, **kwargs: Any) -> Any:
        return await self._owner._run(getattr(getattr(self, wrapped), name), *args, **kwargs)

    return method


for _cls, _source, _wrapped, _names in ((AsyncPlaybook, Playbook, "playbook", PLAYBOOK_CALLS),
                                        (AsyncPlaybookTurn, PlaybookTurn, "turn", PLAYBOOK_TURN_CALLS)):
    for _name in _names:
        setattr(_cls, _name, _awaited_of(_name, _source, _wrapped))
del _cls, _source, _wrapped, _names, _name


__all__ = [
    "AsyncLearning", "AsyncMemory", "AsyncMinutes", "AsyncPlaybook", "AsyncPlaybookTurn", "AsyncRelations", "AsyncSubject", "AsyncTiers",
]
