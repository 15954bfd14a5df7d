"""Every public Memory call under generated hostile arguments (hypothesis).

For each example a fresh ``Memory(":memory:", embedder="hashing")`` holding a few
memories receives a short sequence of calls. In each call one argument (sometimes
none, sometimes all) is hostile: a wrong type, a lone surrogate, control
characters, a huge or empty string, deep or cyclic nesting, an extreme number, NaN,
an arbitrary object; the others are valid, so every check along the way is reached.
Invariants:

- each call returns or raises a :class:`~memorist.MemoristError` subclass;
- after an error the store is unchanged: the whole event log and every memory are
  as before (an import that fails on a later line keeps the lines before it, by
  design, so only a failure on its first line must change nothing);
- the instance keeps working: an add and a search succeed after every call, and
  ``close()``, which writes the buffered retrievals, succeeds at the end.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from memorist import ImportLineError, MemoristError, Memory

USERS = ("alice", "bob")
SPECIAL_CHARS = ["\ud800", "\udfff", "\udc80", "\x00", "\x1b", "\x7f", "\u200b", "\ufeff", "\u2028", " ", "\n", "\t", "é", "🙂", "%", "_", "'", '"', "\\"]


class Weird:
    """An object no JSON encoder knows, whose str() fails (``default=str`` encoders)."""

    def __str__(self) -> str:
        raise RuntimeError("no str")

    def __repr__(self) -> str:
        return "Weird()"


def nest_dicts(depth: int) -> dict:
    value: Any = 1
    for _ in range(depth):
        value = {"k": value}
    return value


def nest_lists(depth: int) -> list:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


def nest_not(depth: int) -> dict:
    value: dict = {"category": "food"}
    for _ in range(depth):
        value = {"NOT": value}
    return value


def cycle() -> dict:
    value: dict = {"a": 1}
    value["self"] = value
    return value


# valid values -----------------------------------------------------------------------------
plain_text = st.sampled_from(["I like green tea.", "I live in Oslo.", "tea", "Hi, I'm Alex and I'm vegetarian.", "café 🙂"])
valid_json = st.recursive(
    st.one_of(
        st.none(), st.booleans(), st.text(max_size=8), st.integers(min_value=-(2**63), max_value=2**63 - 1),
        st.floats(allow_nan=False, allow_infinity=False),
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=8,
)
valid_metadata = st.one_of(st.none(), st.dictionaries(st.sampled_from(["category", "priority", "name", "k"]), valid_json, max_size=3))
valid_time = st.one_of(
    st.none(),
    st.sampled_from([0, 1_700_000_000, 1_700_000_000.5, "2024-05-01T10:00:00Z", "2024-05-01"]),
    st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(9998, 12, 31), timezones=st.sampled_from([None, UTC])),
)
valid_message = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system", "tool"]), "content": plain_text},
    optional={"name": st.sampled_from(["Alex", "Sam", ""]), "metadata": valid_metadata, "timestamp": valid_time},
)
valid_messages = st.one_of(plain_text, st.lists(valid_message, min_size=1, max_size=3).map(lambda ms: [*ms, {"role": "user", "content": "ok then"}]))
valid_filters = st.sampled_from([
    None, {}, {"category": "food"}, {"priority": {"gte": 1}}, {"NOT": {"category": "x"}},
    {"created_at": {"gte": "2020-01-01"}}, {"OR": [{"category": "food"}, {"kind": "fact"}]}, {"tags": {"contains": "x"}},
])
valid_lines = st.lists(
    st.one_of(
        st.fixed_dictionaries({"text": plain_text, "user_id": st.sampled_from(USERS), "infer": st.booleans()}, optional={"metadata": valid_metadata}),
        st.fixed_dictionaries({"memory": plain_text, "user_id": st.sampled_from(USERS), "created_at": st.sampled_from([5, 1_700_000_000])}),
        st.just('{"text": "I like tea.", "user_id": "bob", "infer": false}'),
    ),
    min_size=1,
    max_size=2,
)

# hostile values ---------------------------------------------------------------------------
texts = st.one_of(
    st.lists(st.one_of(st.sampled_from(SPECIAL_CHARS), st.characters()), max_size=12).map("".join),
    st.sampled_from(["", " ", "\n\t ", "\x00\x01", "\u200b\u200b", "x" * 257, "tea \ud800", "\ud800"]),
    st.just("x").map(lambda s: s * 100_001),
)
numbers = st.one_of(
    st.integers(min_value=-5, max_value=10),
    st.sampled_from([-1, 0, 2**63 - 1, 2**63, 2**64, 10**30, 10**400, -(10**400), 253_402_300_800, 1_000_001]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([1e20, -1e20, 1e308, 5e-324, math.nan, math.inf, -math.inf]),
)
oddities = st.sampled_from([
    object(), Weird(), b"bytes", bytearray(b"x"), {1, 2}, frozenset(), (1, 2), Decimal("1.5"), Decimal("NaN"),
    complex(1, 2), len, type, Ellipsis, range(3),
])
odd_times = st.one_of(
    st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30),
                 timezones=st.sampled_from([None, UTC, timezone(timedelta(hours=14)), timezone(timedelta(hours=-12))])),
    st.sampled_from(["0001-01-01T00:00:00", "9999-12-31T23:59:59-12:00", "yesterday", "1969-12-31T23:59:59Z", "2024-13-01"]),
)
deep = st.one_of(
    st.integers(min_value=14, max_value=40).map(nest_dicts),
    st.sampled_from([200, 201, 1000, 5000]).map(nest_dicts),
    st.sampled_from([17, 201, 5000]).map(nest_lists),
    st.builds(cycle),
)
json_like = st.recursive(
    st.one_of(st.none(), st.booleans(), texts, numbers, oddities),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.one_of(st.text(max_size=3), texts, st.integers(-2, 2), st.none(), st.booleans()), inner, max_size=3),
        st.tuples(inner, inner),
    ),
    max_leaves=6,
)
hostile = st.one_of(st.none(), st.booleans(), texts, numbers, oddities, odd_times, json_like, deep, st.just({}), st.just([]))
hostile_metadata = st.one_of(
    hostile,
    st.dictionaries(st.sampled_from(["category", "name", "k"]), st.one_of(json_like, deep), min_size=1, max_size=2),
    st.just({"s": "x" * 70_000}),
    st.just({"t": (1, 2, "x")}),
)
hostile_messages = st.one_of(
    hostile,
    st.lists(
        st.one_of(
            st.fixed_dictionaries(
                {"role": st.one_of(st.sampled_from(["user", "assistant"]), hostile), "content": st.one_of(plain_text, texts, hostile)},
                optional={"name": st.one_of(texts, hostile), "metadata": hostile_metadata, "timestamp": st.one_of(numbers, odd_times, hostile)},
            ),
            hostile,
        ),
        max_size=3,
    ),
)
hostile_filters = st.one_of(
    hostile,
    st.dictionaries(
        st.one_of(st.sampled_from(["category", "priority", "created_at", "tags", "metadata.k", "AND", "OR", "NOT"]), texts),
        st.one_of(
            hostile,
            st.dictionaries(st.one_of(st.sampled_from(["eq", "ne", "in", "nin", "gt", "gte", "lt", "lte", "contains", "exists"]), texts), hostile, max_size=2),
        ),
        min_size=1,
        max_size=2,
    ),
    st.sampled_from([5, 31, 32, 33, 5000]).map(nest_not),
    st.builds(lambda: {"AND": [nest_not(40)]}),
    st.builds(lambda: {"OR": [{"category": "food"}, {"NOT": cycle()}]}),
)
hostile_lines = st.lists(
    st.one_of(
        hostile,
        st.fixed_dictionaries(
            {"text": st.one_of(plain_text, texts, hostile)},
            optional={"user_id": hostile, "metadata": hostile_metadata, "timestamp": st.one_of(numbers, odd_times), "infer": hostile},
        ),
        st.fixed_dictionaries(
            {"memory": st.one_of(plain_text, texts), "user_id": st.one_of(st.sampled_from(USERS), hostile), "created_at": st.one_of(st.just(5), numbers, odd_times)},
            optional={"id": st.one_of(st.just("imported-1"), texts, hostile), "metadata": hostile_metadata, "lineage": hostile,
                      "tags": hostile, "helpful": numbers, "importance": numbers, "strengths": hostile, "status": hostile,
                      "search_text": st.one_of(texts, hostile), "topic": st.one_of(texts, hostile)},
        ),
        st.sampled_from(['{"memory": ' + "[" * 5000 + "]" * 5000 + "}", '{"memory": "tea \\ud800", "user_id": "alice", "created_at": 5}',
                         "not json", "{}", "[]", '{"text": "hi", "user_id": "\\u0000"}']),
    ),
    min_size=1,
    max_size=2,
)
hostile_sources = st.one_of(hostile_lines, st.sampled_from(["/nonexistent/memorist.jsonl", "\ud800.jsonl", "a\x00b", "", "/"]), hostile)

# The parameters of each call: (name, valid strategy, hostile strategy).
ID = st.one_of(hostile, st.sampled_from(["x" * 257, "al\x00ice", " ", "\ud800", "ok\u2028"]))
SCOPE = [("user_id", st.sampled_from(USERS), ID), ("agent_id", st.sampled_from([None, "agent-1"]), ID), ("run_id", st.sampled_from([None, "run-1"]), ID)]
TENANT_SCOPE = [(n, st.sampled_from([None, *USERS]) if n == "user_id" else valid, bad) for n, valid, bad in SCOPE]
LIMIT = st.one_of(hostile, st.sampled_from([0, -1, 1_000_001, 10**30, 2.0, True]))


def by_id(method: str) -> list[tuple[str, st.SearchStrategy, st.SearchStrategy]]:
    """The caller's scope of a by-id call, when this version takes one."""
    if "user_id" in inspect.signature(getattr(Memory, method)).parameters:
        return [("user_id", st.sampled_from([None, *USERS]), ID)]
    return []


def calls(known: list[str]) -> dict[str, tuple[list[tuple[str, st.SearchStrategy, st.SearchStrategy]], Callable[..., Any]]]:
    mid = st.sampled_from([*known, known[0][:8]])
    since = ("since", st.sampled_from([0, 1, 5]), st.one_of(hostile, st.sampled_from([-1, 2**63, 10**30])))
    return {
        "add": ([("messages", valid_messages, hostile_messages), *SCOPE, ("metadata", valid_metadata, hostile_metadata),
                 ("infer", st.booleans(), hostile), ("timestamp", valid_time, st.one_of(numbers, odd_times, hostile))],
                lambda m, messages, **kw: m.add(messages, **kw)),
        "search": ([("query", plain_text, st.one_of(texts, hostile)), *SCOPE, ("limit", st.sampled_from([1, 5, 1_000_000]), LIMIT),
                    ("filters", valid_filters, hostile_filters), ("reference_time", valid_time, st.one_of(numbers, odd_times, hostile)),
                    ("threshold", st.sampled_from([None, -1, 0, 0.2, 1]), st.one_of(numbers, hostile))],
                   lambda m, query, **kw: m.search(query, **kw)),
        "get": ([("memory_id", mid, ID), *by_id("get")], lambda m, memory_id, **kw: m.get(memory_id, **kw)),
        "get_all": ([*SCOPE, ("limit", st.sampled_from([1, 100, 1_000_000]), LIMIT), ("filters", valid_filters, hostile_filters)],
                    lambda m, **kw: m.get_all(**kw)),
        "update": ([("memory_id", mid, ID), ("text", plain_text, st.one_of(texts, hostile)), ("metadata", valid_metadata, hostile_metadata),
                    *by_id("update")],
                   lambda m, memory_id, text, metadata, **kw: m.update(memory_id, text, metadata, **kw)),
        "delete": ([("memory_id", mid, ID), *by_id("delete")], lambda m, memory_id, **kw: m.delete(memory_id, **kw)),
        "delete_all": (SCOPE, lambda m, **kw: m.delete_all(**kw)),
        "history": ([("memory_id", mid, ID), *by_id("history")], lambda m, memory_id, **kw: m.history(memory_id, **kw)),
        "events": ([*SCOPE, since, ("limit", st.sampled_from([None, 1, 1_000_000]), LIMIT)], lambda m, **kw: m.events(**kw)),
        "export": ([*SCOPE, ("all_scopes", st.just(False), hostile), ("events", st.booleans(), hostile)], lambda m, **kw: list(m.export(**kw))),
        "import_": ([("source", valid_lines, hostile_sources), *TENANT_SCOPE, ("infer", st.sampled_from([None, True, False]), hostile),
                     ("progress", st.sampled_from([None, lambda n: None]), hostile)],
                    lambda m, source, **kw: m.import_(source, **kw)),
        "resolve_id": ([("prefix", mid, ID), ("include_deleted", st.booleans(), hostile)],
                       lambda m, prefix, **kw: m.resolve_id(prefix, **kw)),
        "stats": ([], lambda m: m.stats()),
        "pending": ([*TENANT_SCOPE, ("limit", st.sampled_from([None, 1, 1_000_000]), LIMIT)], lambda m, **kw: m.pending(**kw)),
        "llm_usage": ([*TENANT_SCOPE, since], lambda m, **kw: m.llm_usage(**kw)),
    }


def draw_call(draw: st.DrawFn, m: Memory, known: list[str]) -> tuple[str, Callable[[], Any]]:
    table = calls(known)
    name = draw(st.sampled_from(sorted(table)), label="call")
    params, call = table[name]
    names = [p[0] for p in params]
    # One hostile argument most of the time; sometimes none, sometimes each a coin toss.
    target = draw(st.sampled_from([*names, *names, None, "*"]), label="hostile argument")
    kwargs = {}
    for pname, valid, bad in params:
        is_bad = pname == target or (target == "*" and draw(st.booleans()))
        kwargs[pname] = draw(bad if is_bad else valid, label=pname)
    event(f"{name}, hostile: {target}")
    return name, lambda: call(m, **kwargs)


def snapshot(m: Memory) -> tuple:
    """Everything a write could change: the whole event log, and the memories."""
    events = [(e.seq, e.op, e.memory_id, e.old_text, e.new_text, repr(e.payload)) for e in m.store.events()]
    stats = m.stats()
    memories = {u: m.get_all(user_id=u, limit=1000)["results"] for u in USERS}
    return events, memories, stats["memories"], stats["deleted"], stats["archived"]


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)
@given(data=st.data())
def test_no_argument_breaks_an_instance(data):
    m = Memory(":memory:", embedder="hashing")
    try:
        known = [
            m.add("I like green tea.", user_id="alice", metadata={"category": "food"}, infer=False)["results"][0]["id"],
            m.add("I live in Oslo.", user_id="bob", infer=False)["results"][0]["id"],
        ]
        m.search("tea", user_id="alice")  # a buffered retrieval, written by the next write
        for _ in range(data.draw(st.integers(min_value=1, max_value=3), label="calls")):
            name, call = draw_call(data.draw, m, known)
            before = snapshot(m)
            try:
                call()
                event(f"{name}: returned")
            except MemoristError as exc:
                event(f"{name}: {type(exc).__name__}")
                kept_earlier_lines = isinstance(exc, ImportLineError) and exc.line > 1
                if not kept_earlier_lines:
                    assert snapshot(m) == before, f"{name} failed with {exc!r} but changed the store"
            except Exception as exc:
                raise AssertionError(f"{name} raised {type(exc).__name__}, not a MemoristError: {exc!r}") from exc
            # The instance keeps working.
            assert m.add("I drink coffee.", user_id="carol", infer=False)["results"]
            assert m.search("coffee", user_id="carol")["results"]
    finally:
        m.close()
