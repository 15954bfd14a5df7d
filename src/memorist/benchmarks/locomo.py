"""LoCoMo retrieval benchmark through Memorist's public API.

Each conversation goes into its own user space with ``Memory.add``; each question
is searched in that space with ``Memory.search``; recall@k is the metric of the
LoCoMo paper's retrieval experiments (see ``../shared/data/README.md``): for a
question, the share of its evidence turns found among the top k; a question with no
evidence counts 1; categories averaged separately and overall.

Units:

- ``dialog``: every turn is one memory, with its session's date as ``timestamp``
  and its speaker as the message name;
- ``observation``: every observation (a fact about a speaker) is one memory and
  counts as its source turn;
- ``summary``: one memory per session summary, matched at session level.
"""

from __future__ import annotations

import json
import re
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

CATEGORIES = {1: "multi_hop", 2: "temporal", 3: "open_domain", 4: "single_hop", 5: "adversarial"}
UNITS = ("dialog", "observation", "summary")
_EVIDENCE = re.compile(r"^D(\d+):(\d+)$")
_TOKEN = re.compile(r"\w+|[^\w\s]")


def count_tokens(text: str) -> int:
    """Approximate tokens: words and punctuation marks (no model tokenizer needed)."""
    return len(_TOKEN.findall(text))


def parse_evidence(raw: Iterable[str]) -> tuple[list[str], int]:
    """Turn ids out of an evidence list, and how many entries could not be parsed.

    Well-formed ids look like ``D3:12``. Entries holding several ids
    (``"D8:6; D9:17"``, space-joined lists) are split; leading zeros are dropped
    (``D30:05`` is ``D30:5``). What still does not parse (``"D"``, ``"D:11:26"``)
    counts as evidence that cannot be retrieved.
    """
    ids: list[str] = []
    bad = 0
    for entry in raw:
        for part in re.split(r"[;,\s]+", str(entry).strip()):
            if not part:
                continue
            match = _EVIDENCE.match(part)
            if match:
                ids.append(f"D{int(match.group(1))}:{int(match.group(2))}")
            else:
                bad += 1
    return list(dict.fromkeys(ids)), bad


def session_of(dia_id: str) -> int:
    return int(dia_id[1:].split(":", 1)[0])


def parse_date(text: str) -> datetime:
    """LoCoMo's ``"1:56 pm on 8 May, 2023"``, as UTC."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def question_recall(evidence: Sequence[str], retrieved: Sequence[str], *, bad: int = 0, unit: str = "dialog") -> float:
    """Recall of one question: evidence found in ``retrieved`` / all evidence.

    ``retrieved`` holds turn ids (dialog, observation) or session numbers as
    strings (summary). ``bad`` unparseable evidence entries count as missed. A
    question without any evidence counts 1.
    """
    total = len(evidence) + bad
    if total == 0:
        return 1.0
    got = set(retrieved)
    if unit == "summary":
        found = sum(1 for e in evidence if str(session_of(e)) in got)
    else:
        found = sum(1 for e in evidence if e in got)
    return found / total


@dataclass
class Conversation:
    sample_id: str
    speakers: tuple[str, str]
    sessions: list[tuple[int, datetime, list[dict[str, Any]]]]
    observations: list[tuple[int, str, str, tuple[str, ...]]]  # session, speaker, fact, the turns it comes from
    summaries: list[tuple[int, str]]
    questions: list[dict[str, Any]] = field(default_factory=list)

    def full_text(self) -> str:
        return "\n".join(f"{t['speaker']}: {turn_text(t)}" for _, _, turns in self.sessions for t in turns)


def turn_text(turn: dict[str, Any]) -> str:
    text = turn.get("text", "")
    caption = turn.get("blip_caption")
    return f"{text} [shared a photo of {caption}]" if caption else text


class DataError(ValueError):
    """A file that is not LoCoMo data; the message names the file and what is wrong."""


_KINDS = {dict: "an object", list: "a list", str: "a string"}


def _kind(value: Any) -> str:
    return "null" if value is None else "a boolean" if isinstance(value, bool) else _KINDS.get(type(value), "a number")


def _session(key: str, suffix: str) -> bool:
    return re.fullmatch(rf"session_\d+{suffix}", key) is not None


def _check_conversation(where: str, item: Any, *, learn: bool) -> tuple[int, int]:
    """What the benchmarks read of one conversation; returns its numbers of
    questions and observations. Raises ValueError saying what is wrong."""
    if not isinstance(item, dict):
        raise ValueError(f"{where} is {_kind(item)}, not an object")
    required = {"sample_id": str, "conversation": dict, **({"observation": dict} if learn else {})}
    optional = {"qa": list, "observation": dict, "session_summary": dict}
    for key, kind in {**required, **optional}.items():
        if key not in item and key in required:
            raise ValueError(f"{where} has no {key!r}")
        value = item.get(key)
        if not isinstance(value, kind) and (key in required or value is not None):
            raise ValueError(f"{where}'s {key!r} is {_kind(value)}, not {_KINDS[kind]}")
    conv = item["conversation"]
    if learn:  # both speakers' playbooks answer each question
        for key in ("speaker_a", "speaker_b"):
            if not isinstance(conv.get(key), str):
                raise ValueError(f"{where}'s conversation has no {key!r} (a name)")
    else:  # the turns are stored, dated
        for key, turns in conv.items():
            if not _session(key, "") or not isinstance(turns, list):
                continue
            stamp = conv.get(f"{key}_date_time")
            try:
                parse_date(stamp)
            except (AttributeError, TypeError, ValueError):
                raise ValueError(f"{where}'s {key} has no {key}_date_time such as '1:56 pm on 8 May, 2023'") from None
            if not all(isinstance(t, dict) and isinstance(t.get("speaker"), str) for t in turns):
                raise ValueError(f"{where}'s {key} holds a turn that is not an object with a 'speaker'")
    facts = 0
    for key, by_speaker in (item.get("observation") or {}).items():
        if not _session(key, "_observation") or not isinstance(by_speaker, dict):
            raise ValueError(f"{where}'s observation {key!r} is not session_N_observation: {{speaker: [[fact, turn id], ...]}}")
        for speaker, found in by_speaker.items():
            if not isinstance(found, list) or not all(isinstance(f, list) and len(f) == 2 for f in found):
                raise ValueError(f"{where}'s {key} of {speaker!r} is not a list of [fact, turn id] pairs")
            facts += len(found)
    for key in item.get("session_summary") or {}:
        if not _session(key, "_summary"):
            raise ValueError(f"{where}'s session_summary {key!r} is not session_N_summary")
    questions = item.get("qa") or []
    for j, qa in enumerate(questions):
        if not isinstance(qa, dict) or not isinstance(qa.get("question"), str):
            raise ValueError(f"{where}'s question {j + 1} is not an object with a 'question'")
        category = qa.get("category", 0)
        if not isinstance(qa.get("evidence") or [], list) or isinstance(category, bool) or not isinstance(category, int):
            raise ValueError(f"{where}'s question {j + 1} has an 'evidence' that is not a list or a 'category' that is not a number")
    return len(questions), facts


def read(path: str | Path, *, learn: bool = False) -> list[dict[str, Any]]:
    """The conversations of a LoCoMo JSON file (a list of them, as ``locomo10.json``),
    checked for what the benchmarks read: a ``sample_id`` and a ``conversation``
    each, questions (``qa``), the date of each session with turns, and (``learn``,
    ``memorist bench evolve``) observations and both speakers' names. A file that is
    no such thing, or holds no question (or, to learn from, no observation), raises
    :class:`DataError` naming it and what is wrong."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise DataError(f"{path} is not LoCoMo data: it is not UTF-8 text") from None
    if not text.strip():
        raise DataError(f"{path} is not LoCoMo data: the file is empty")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"{path} is not LoCoMo data: not JSON ({exc})") from None
    if not isinstance(data, list):
        raise DataError(f"{path} is not LoCoMo data: it holds {_kind(data)}, not a list of conversations")
    if not data:
        raise DataError(f"{path} is not LoCoMo data: it holds no conversation")
    questions = facts = 0
    seen: dict[str, int] = {}
    for i, item in enumerate(data):
        try:
            q, f = _check_conversation(f"conversation {i + 1}", item, learn=learn)
        except ValueError as exc:
            raise DataError(f"{path} is not LoCoMo data: {exc}") from None
        # Each conversation is stored in the user space its id names: two with one id
        # would be searched as one.
        first = seen.setdefault(str(item["sample_id"]), i + 1)
        if first != i + 1:
            raise DataError(
                f"{path} is not LoCoMo data: conversations {first} and {i + 1} have the same sample_id {item['sample_id']!r}"
            )
        questions, facts = questions + q, facts + f
    if not questions:
        raise DataError(f"{path} is not LoCoMo data: it holds no question to measure recall with")
    if learn and not facts:
        raise DataError(f"{path} is not LoCoMo data: it holds no observation to learn from")
    return data


def load(path: str | Path) -> list[Conversation]:
    data = read(path)
    out = []
    for item in data:
        conv = item["conversation"]
        sessions = []
        for key in conv:
            match = re.fullmatch(r"session_(\d+)", key)
            if match and isinstance(conv[key], list):
                n = int(match.group(1))
                sessions.append((n, parse_date(conv[f"session_{n}_date_time"]), conv[key]))
        sessions.sort(key=lambda s: s[0])
        dates = {n: d for n, d, _ in sessions}
        observations = []
        for key, by_speaker in (item.get("observation") or {}).items():
            n = int(re.search(r"session_(\d+)", key).group(1))  # type: ignore[union-attr]
            for speaker, facts in by_speaker.items():
                for fact in facts:
                    if isinstance(fact, list | tuple) and len(fact) >= 2 and n in dates:
                        # A fact may come from several turns (a list of ids): it finds each.
                        sources, _ = parse_evidence(fact[1] if isinstance(fact[1], list | tuple) else [fact[1]])
                        if sources:
                            observations.append((n, speaker, str(fact[0]), tuple(sources)))
        summaries = []
        for key, text in (item.get("session_summary") or {}).items():
            n = int(re.search(r"session_(\d+)", key).group(1))  # type: ignore[union-attr]
            if n in dates:
                summaries.append((n, str(text)))
        out.append(
            Conversation(
                sample_id=item["sample_id"],
                speakers=(conv.get("speaker_a", ""), conv.get("speaker_b", "")),
                sessions=sessions,
                observations=observations,
                summaries=sorted(summaries),
                questions=list(item.get("qa", [])),
            )
        )
    return out


def ingest(memory: Any, conv: Conversation, unit: str) -> None:
    """Store a conversation in its own user space through ``Memory.add``."""
    dates = {n: d for n, d, _ in conv.sessions}
    if unit == "dialog":
        for n, date, turns in conv.sessions:
            messages = [
                {
                    "role": "user",
                    "content": turn_text(t),
                    "name": t["speaker"],
                    "metadata": {"dia_id": t["dia_id"]},
                    # Turns of a session share its date; keep their order.
                    "timestamp": date.timestamp() + i,
                }
                for i, t in enumerate(turns)
            ]
            memory.add(messages, user_id=conv.sample_id, infer=False, metadata={"session": n})
    elif unit == "observation":
        by_session: dict[int, list[dict[str, Any]]] = {}
        for n, speaker, fact, sources in conv.observations:
            meta: dict[str, Any] = {"dia_id": sources[0], **({"dia_ids": list(sources)} if len(sources) > 1 else {})}
            by_session.setdefault(n, []).append({"role": "user", "content": fact, "name": speaker, "metadata": meta})
        for n, messages in sorted(by_session.items()):
            memory.add(messages, user_id=conv.sample_id, infer=False, metadata={"session": n}, timestamp=dates[n])
    elif unit == "summary":
        for n, text in conv.summaries:
            memory.add(
                [{"role": "user", "content": text}],
                user_id=conv.sample_id,
                infer=False,
                metadata={"session": n},
                timestamp=dates[n],
            )
    else:
        raise ValueError(f"unknown unit {unit!r}; use one of {', '.join(UNITS)}")


#: What ``--budget`` compares: the context a budget buys, built in several ways.
#: ``packed`` is :func:`memorist.format_context` with ``max_tokens`` (the default
#: packing); the others switch one of its levers off or change it; ``top_k`` is the
#: plain search results in rank order, each line as without a budget, until one does
#: not fit.
BUDGET_WAYS = ("packed", "top_k", "no_dedupe", "by_value", "long_headers", "no_bullets")
#: Results a budgeted context is packed from (a conversation of LoCoMo has ~600 turns).
BUDGET_POOL = 200


def conversation_replay(conv: Conversation) -> str:
    """The whole conversation as a context: every session under its date, each turn
    ``Speaker: text`` (what replaying it to a model costs)."""
    lines = []
    for _, date, turns in conv.sessions:
        lines.append(f"[{date:%Y-%m-%d}]")
        lines.extend(f"{t['speaker']}: {' '.join(turn_text(t).split())}" for t in turns)
    return "\n".join(lines)


def _top_k_context(hits: Sequence[dict[str, Any]], budget: int, count: Callable[[str], int]) -> str:
    """Plain top-k: ``format_context`` lines in rank order while they fit, the title
    line counted; empty when not one memory fits (as a packed context is), so it
    never holds more than ``budget`` tokens."""
    from ..pipelines.context import TITLE

    lines = [f"## {TITLE}"]
    used = count(lines[0])
    for h in hits:
        when = str(h.get("updated_at") or h.get("created_at") or "")[:10]
        line = f"- {' '.join(str(h['memory']).split())}" + (f" ({when})" if when else "")
        cost = count(line)
        if used + cost > budget:
            break
        lines.append(line)
        used += cost
    # Lines are counted apart; a tokenizer may count their join differently.
    while len(lines) > 1 and count("\n".join(lines)) > budget:
        lines.pop()
    return "\n".join(lines) if len(lines) > 1 else ""


def budget_contexts(hits: Sequence[dict[str, Any]], budget: int, count: Callable[[str], int]) -> dict[str, str]:
    """The context each of :data:`BUDGET_WAYS` builds from ``hits`` within ``budget`` tokens."""
    from ..pipelines.context import pack_context

    def long_headers(h: dict[str, Any]) -> dict[str, Any]:
        # Every line with its own date and speaker, as without a budget: no shared header.
        when = str(h.get("updated_at") or h.get("created_at") or "")[:10]
        name = ((h.get("metadata") or {}).get("name") or "")
        return {**h, "memory": f"{h['memory']} ({name}, {when})", "metadata": {}, "created_at": None, "updated_at": None}

    return {
        "packed": pack_context(hits, max_tokens=budget, count_tokens=count).text,
        "top_k": _top_k_context(hits, budget, count),
        "no_dedupe": pack_context(hits, max_tokens=budget, count_tokens=count, dedupe=False).text,
        "by_value": pack_context(hits, max_tokens=budget, count_tokens=count, order="value").text,
        "long_headers": pack_context([long_headers(h) for h in hits], max_tokens=budget, count_tokens=count).text,
        "no_bullets": pack_context(hits, max_tokens=budget, count_tokens=count, bullets=False).text,
    }


def evidence_inside(evidence: Sequence[str], bad: int, texts: dict[str, str], context: str) -> tuple[bool, float]:
    """Whether every evidence turn is whole inside ``context``, and the share that is."""
    total = len(evidence) + bad
    if total == 0:
        return True, 1.0
    found = sum(1 for e in evidence if e in texts and texts[e] in context)
    return found == total, found / total


def retrieved_keys(hits: Sequence[dict[str, Any]], unit: str) -> list[str]:
    """What ``hits`` retrieved, in rank order: turn ids (an observation drawn from
    several turns gives each of them), or session numbers as strings (summary)."""
    keys: list[str] = []
    for item in hits:
        meta = item.get("metadata") or {}
        if unit == "summary":
            keys.append(str(meta.get("session")))
        else:
            keys.extend(str(k) for k in (meta.get("dia_ids") or [meta.get("dia_id")]))
    return keys


def run(
    path: str | Path,
    *,
    unit: str = "dialog",
    ks: Sequence[int] = (5, 10, 25, 50),
    embedder: Any = None,
    memory_factory: Callable[[str], Any] | None = None,
    progress: Callable[[int, int], None] | None = None,
    db: str | None = None,
    budgets: Sequence[int] = (),
    token_counter: Callable[[str], int] | None = None,
) -> dict[str, Any]:
    """Run the benchmark; returns the JSON-ready result (see ``memorist bench locomo``).

    ``db``: the store to run in (a path or a ``postgresql://`` URL), in a tenant of
    its own whose memories are deleted afterwards; by default a temporary SQLite file.

    ``budgets`` (dialog unit): for each, the context each of :data:`BUDGET_WAYS`
    builds within that many tokens from the best :data:`BUDGET_POOL` results, and
    the share of questions whose evidence turns are all whole inside it (each turn's
    text found in the context), with ``token_counter`` (default: the embedding
    model's tokenizer, required). The whole conversation replayed is the reference.
    """
    if unit not in UNITS:
        raise ValueError(f"unknown unit {unit!r}; use one of {', '.join(UNITS)}")
    ks = sorted({int(k) for k in ks})
    if not ks or ks[0] <= 0:
        raise ValueError("k values must be positive whole numbers")
    budgets = sorted({int(b) for b in budgets})
    if budgets and budgets[0] <= 0:
        raise ValueError("budgets must be positive whole numbers")
    if budgets and unit != "dialog":
        raise ValueError("a budget is measured on dialog turns (--unit dialog)")
    count = token_counter
    if budgets and count is None:
        from ..embed.tokens import token_counter as real_counter

        count = real_counter(required=True)
    if count is not None:
        count = _cached(count)
    conversations = load(path)
    from ..memory import Memory

    per_k: dict[int, dict[str, list[float]]] = {k: {} for k in ks}
    # Overall recall per conversation, and on two halves of each one's questions (A:
    # the 1st, 3rd, 5th...; B: the 2nd, 4th...): a setting tuned on one half is
    # checked on the other.
    per_conversation: dict[str, dict[int, list[float]]] = {}
    per_half: dict[str, dict[int, list[float]]] = {half: {k: [] for k in ks} for half in ("A", "B")}
    context_tokens: dict[int, list[int]] = {k: [] for k in ks}
    full_tokens: list[int] = []
    latencies: list[float] = []
    inside: dict[int, dict[str, dict[str, list[float]]]] = {b: {way: {} for way in BUDGET_WAYS} for b in budgets}
    inside_share: dict[int, dict[str, list[float]]] = {b: {way: [] for way in BUDGET_WAYS} for b in budgets}
    used: dict[int, dict[str, list[int]]] = {b: {way: [] for way in BUDGET_WAYS} for b in budgets}
    replay_tokens: list[int] = []
    replay_inside: list[float] = []
    total_q = sum(len(c.questions) for c in conversations)
    done = 0
    with tempfile.TemporaryDirectory(prefix="memorist-locomo-") as tmp:
        if db is not None:
            # A store that may hold other data: a tenant nobody else uses.
            memory = Memory(db, embedder=embedder, tenant_id=f"bench-locomo-{uuid.uuid4().hex[:12]}")
        else:
            db = str(Path(tmp) / "locomo.db")
            memory = memory_factory(db) if memory_factory else Memory(db, embedder=embedder)
        try:
            for conv in conversations:
                ingest(memory, conv, unit)
                conv_tokens = count_tokens(conv.full_text())
                if budgets:
                    assert count is not None
                    replay = conversation_replay(conv)
                    texts = {t["dia_id"]: " ".join(turn_text(t).split()) for _, _, turns in conv.sessions for t in turns}
                for number, qa in enumerate(conv.questions):
                    evidence, bad = parse_evidence(qa.get("evidence", []))
                    category = CATEGORIES.get(int(qa.get("category", 0)), "other")
                    start = time.perf_counter()
                    hits = memory.search(str(qa["question"]), user_id=conv.sample_id, limit=ks[-1])["results"]
                    latencies.append(time.perf_counter() - start)
                    if budgets:
                        assert count is not None
                        # A search of its own: recall@k stays that of a search for max(k).
                        pool = memory.search(str(qa["question"]), user_id=conv.sample_id, limit=BUDGET_POOL)["results"]
                        replay_tokens.append(count(replay))
                        replay_inside.append(float(evidence_inside(evidence, bad, texts, replay)[0]))
                        for b in budgets:
                            for way, context in budget_contexts(pool, b, count).items():
                                whole, share = evidence_inside(evidence, bad, texts, context)
                                inside[b][way].setdefault(category, []).append(float(whole))
                                inside[b][way].setdefault("overall", []).append(float(whole))
                                inside_share[b][way].append(share)
                                used[b][way].append(count(context))
                    for k in ks:
                        r = question_recall(evidence, retrieved_keys(hits[:k], unit), bad=bad, unit=unit)
                        per_k[k].setdefault(category, []).append(r)
                        per_k[k].setdefault("overall", []).append(r)
                        per_conversation.setdefault(conv.sample_id, {n: [] for n in ks})[k].append(r)
                        per_half["A" if number % 2 == 0 else "B"][k].append(r)
                        context_tokens[k].append(sum(count_tokens(h["memory"]) for h in hits[:k]))
                    full_tokens.append(conv_tokens)
                    done += 1
                    if progress:
                        progress(done, total_q)
        finally:
            embedder_name = memory.embedder.name
            try:
                if memory.config.tenant_id.startswith("bench-locomo-"):
                    for conv in conversations:
                        memory.delete_all(user_id=conv.sample_id)
            finally:
                memory.close()
    recall = {
        str(k): {name: _mean(v) for name, v in sorted(per_k[k].items())}
        for k in ks
    }
    for k in ks:  # every category key is present, even when a data set lacks one
        for name in CATEGORIES.values():
            recall[str(k)].setdefault(name, 0.0)
    latencies.sort()
    extra: dict[str, Any] = {}
    if budgets:
        extra["budget"] = {
            str(b): {
                way: {
                    "all_evidence": {name: _mean(v) for name, v in sorted(inside[b][way].items())},
                    "evidence_share": _mean(inside_share[b][way]),
                    "tokens": _mean(used[b][way]),
                }
                for way in BUDGET_WAYS
            }
            for b in budgets
        }
        extra["replay"] = {"tokens": _mean(replay_tokens), "all_evidence": _mean(replay_inside)}
        extra["tokenizer"] = getattr(token_counter, "name", None) or getattr(count, "name", "given")
    return {
        **extra,
        "unit": unit,
        "questions": done,
        "conversations": len(conversations),
        "embedder": embedder_name,
        "recall": recall,
        "by_conversation": {name: {str(k): _mean(v) for k, v in per.items()} for name, per in per_conversation.items()},
        "halves": {half: {str(k): _mean_or_none(v) for k, v in per.items()} for half, per in per_half.items()},
        "context_tokens": {str(k): _mean(v) for k, v in context_tokens.items()},
        "full_tokens": (sum(full_tokens) / len(full_tokens)) if full_tokens else 0.0,
        "search_ms_p50": latencies[len(latencies) // 2] * 1000 if latencies else 0.0,
    }


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _mean_or_none(values: Sequence[float]) -> float | None:
    """The mean, or None for no values (a half without questions was not measured)."""
    return _mean(values) if values else None


def _cached(count: Callable[[str], int]) -> Callable[[str], int]:
    """``count`` remembering its answers (the same lines are counted for every budget)."""
    memo: dict[str, int] = {}

    def cached(text: str) -> int:
        n = memo.get(text)
        if n is None:
            n = memo[text] = count(text)
            if len(memo) > 200_000:
                memo.clear()
        return n

    cached.name = getattr(count, "name", "given")  # type: ignore[attr-defined]
    return cached


def format_budget_table(result: dict[str, Any]) -> str:
    """A Markdown table: share of questions with all evidence inside each budget."""
    names = ["single_hop", "multi_hop", "temporal", "open_domain", "adversarial", "overall"]
    replay = result["replay"]
    lines = [
        f"Recall per token (tokens counted by {result.get('tokenizer')}): share of questions whose evidence "
        "turns are all whole inside the context",
        "",
        "| budget | context | " + " | ".join(names) + " | evidence share | tokens used |",
        "|---" * (len(names) + 4) + "|",
    ]
    for b, ways in result["budget"].items():
        for way, row in ways.items():
            cells = " | ".join(f"{100 * row['all_evidence'].get(n, 0.0):.1f}" for n in names)
            lines.append(f"| {b} | {way} | {cells} | {100 * row['evidence_share']:.1f} | {row['tokens']:.0f} |")
    lines.append("")
    lines.append(
        f"whole conversation replayed: {replay['tokens']:.0f} tokens on average, "
        f"{100 * replay['all_evidence']:.1f} % of questions with all evidence inside"
    )
    return "\n".join(lines)


def format_table(result: dict[str, Any]) -> str:
    """A Markdown table: recall per category and overall for each k, and context size."""
    names = ["single_hop", "multi_hop", "temporal", "open_domain", "adversarial", "overall"]
    lines = [
        f"LoCoMo retrieval, unit={result['unit']}, {result['questions']} questions, "
        f"{result['conversations']} conversations, embedder={result['embedder']}",
        "",
        "| k | " + " | ".join(names) + " | context tokens | of full conversation |",
        "|---" * (len(names) + 3) + "|",
    ]
    for k, row in result["recall"].items():
        ctx = result["context_tokens"][k]
        share = ctx / result["full_tokens"] if result["full_tokens"] else 0.0
        lines.append(
            f"| {k} | " + " | ".join(f"{100 * row[n]:.1f}" for n in names) + f" | {ctx:.0f} | {share:.1%} |"
        )
    lines.append("")
    lines.append(
        f"full conversation: {result['full_tokens']:.0f} tokens on average; search p50 {result['search_ms_p50']:.1f} ms"
    )
    # Overall recall on each half of the questions and in each conversation.
    conversations = list(result["by_conversation"])
    lines += [
        "",
        "| k | half A | half B | " + " | ".join(c.replace("|", "\\|") for c in conversations) + " |",
        "|---" * (len(conversations) + 3) + "|",
    ]
    for k in result["recall"]:
        cells = [result["halves"]["A"][k], result["halves"]["B"][k]] + [result["by_conversation"][c][k] for c in conversations]
        lines.append(f"| {k} | " + " | ".join("–" if v is None else f"{100 * v:.1f}" for v in cells) + " |")
    lines.append("")
    lines.append(
        "half A: the 1st, 3rd, 5th... question of each conversation; half B: the 2nd, 4th... "
        "(tune on one, check on the other)"
    )
    return "\n".join(lines)
