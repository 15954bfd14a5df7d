"""``memorist bench evolve``: per-learner playbooks against the ACE baseline on the same streams.

Two streams, each run through both presets on a fresh store:

- **tutoring** — the seeded synthetic stream shipped with Memorist
  (:mod:`memorist.benchmarks.tutoring`): each turn injects bullets for the question, then
  learns from the outcome and the turn's lessons; afterwards each learner's queries
  about their misconceptions are asked.
- **locomo** — LoCoMo's development observations (``../shared/data``), fed in session
  order, one turn per (speaker, dialog turn), as lessons of the speaker's playbook;
  then every QA question is asked of both speakers' playbooks (the baseline has
  one shared playbook for everyone). A bullet counts as its source dialog ids.

Each stream also runs the baseline a second time with the same total capacity as
the per-learner playbooks together (``max_bullets`` times the stream's learners):
at the default capacity the baseline has one learner's room for everyone.

Reported per preset: its capacity; bullets stored at the end; near-duplicate pairs
(within one playbook) as a percentage of bullets at cosine ``>= 0.9`` (the
per-learner preset's own reinforce threshold: it avoids them by construction) and
at ``>= 0.8`` (below it, so the figure can fail); the most new bullets
one turn added; whether any playbook ever held more than ``max_bullets`` after a
turn; recall@5 and @10 of the right bullets. Evaluation queries do not touch (they
measure the playbook, they do not use it).
"""

from __future__ import annotations

import re
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..embed.base import Embedder
from ..policies.dedup import near_duplicate_pairs
from ..policies.playbook import PlaybookConfig
from .locomo import read as read_locomo

PRESETS = ("baseline", "per-learner")
#: The baseline again with the total capacity of the per-learner playbooks
#: (``max_bullets`` times the stream's learners), so neither preset wins on room alone.
EQUAL_CAPACITY = "baseline@equal-capacity"
NEAR_DUPLICATE = 0.9
#: Below the per-learner preset's own reinforce and dedup threshold (0.9), so its
#: near-duplicate figure is not zero by construction.
NEAR_DUPLICATE_LOOSE = 0.8
KS = (5, 10)
LOCOMO_TOPIC = "personal"
_DIA = re.compile(r"D(\d+):(\d+)")


class CachingEmbedder(Embedder):
    """Wraps an embedder with a cache, so both presets embed each text once.
    Same name and dimension as the wrapped one."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.batch_size = max(inner.batch_size, 256)
        self._cache: dict[str, np.ndarray] = {}

    def prefill(self, texts: Sequence[str]) -> None:
        """Embed ``texts`` now, in large batches (much faster than one by one)."""
        missing = [t for t in dict.fromkeys(texts) if t and t not in self._cache]
        for start in range(0, len(missing), 512):
            chunk = missing[start : start + 512]
            for t, v in zip(chunk, self.inner.embed(chunk), strict=True):
                self._cache[t] = v

    def _embed(self, texts: list[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if missing:
            vectors = self.inner.embed(missing)
            for t, v in zip(missing, vectors, strict=True):
                self._cache[t] = v
        return np.stack([self._cache[t] for t in texts])


def default_data_path() -> Path:
    """``../shared/data/locomo/locomo_dev.json`` beside the repository (a source checkout)."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        candidate = parent.parent / "shared" / "data" / "locomo" / "locomo_dev.json"
        if candidate.is_file():
            return candidate
    return here.parents[3].parent / "shared" / "data" / "locomo" / "locomo_dev.json"


def _dia(text: Any) -> str | None:
    m = _DIA.fullmatch(str(text).strip())
    return f"D{int(m.group(1))}:{int(m.group(2))}" if m else None


def _evidence(items: Sequence[Any]) -> list[str | None]:
    """Evidence dia_ids, malformed entries split where possible; None = not retrievable."""
    out: list[str | None] = []
    for item in items:
        found = _DIA.findall(str(item))
        if not found:
            out.append(None)
            continue
        out.extend(f"D{int(a)}:{int(b)}" for a, b in found)
    return out


def _recall(relevant: Sequence[str | None], retrieved: Sequence[set[str]], k: int) -> float:
    if not relevant:
        return 1.0
    got: set[str] = set().union(*retrieved[:k]) if retrieved[:k] else set()
    return sum(1 for r in relevant if r is not None and r in got) / len(relevant)


class _Run:
    """One preset on one stream: a fresh store, the playbook, the counters."""

    def __init__(self, preset: str, embedder: Embedder, folder: str, max_bullets: int) -> None:
        from ..ace.playbook import Playbook
        from ..memory import Memory

        self.memory = Memory(str(Path(folder) / f"{preset}.db"), embedder=embedder)
        base = "baseline" if preset == EQUAL_CAPACITY else preset
        self.playbook = Playbook(self.memory, PlaybookConfig.preset(base, max_bullets=max_bullets, use_llm=False, max_new=None))
        self.max_new_in_turn = 0
        self.capacity_exceeded = False
        self.max_bullets = max_bullets

    def learn(self, learner: str, conversation: str, *, topic: str, question: str = "", retrieve: bool = False, **trace: Any) -> None:
        turn = self.playbook.turn(learner, conversation, topic=topic)
        if retrieve:
            turn.retrieve(question)
        result = turn.learn(question=question, topic=topic, **trace)
        self.max_new_in_turn = max(self.max_new_in_turn, result["num_new_bullets"])
        if turn.size > self.max_bullets:
            self.capacity_exceeded = True

    def ranked_sources(self, learners: Sequence[str], vector: np.ndarray, k: int) -> list[set[str]]:
        """The sources of the ``k`` best bullets for ``vector`` across the playbooks of
        ``learners`` (for the baseline: its one shared playbook)."""
        pipeline = self.playbook.pipeline
        spaces = {pipeline.space(learner).user_id: learner for learner in learners}
        hits = []
        for learner in spaces.values():
            state = pipeline.load(learner)
            for mid, _score, _rel, combined in pipeline.rank(state, vector, top_k=k):
                hits.append((combined, state.records[mid]))
        hits.sort(key=lambda h: -h[0])
        return [set(r.metadata.get("sources", [])) for _, r in hits[:k]]

    def totals(self) -> tuple[int, float, float]:
        """Bullets, and near-duplicate pairs as a % of them at 0.9 and at 0.8."""
        rows = self.memory.store.list_bullets(self.playbook._spaces(None))
        by_space: dict[tuple[str, str, str], list[np.ndarray]] = {}
        for record, vector in rows:
            if vector is not None:
                by_space.setdefault(record.scope.space, []).append(vector)
        n = len(rows)
        pct = []
        for threshold in (NEAR_DUPLICATE, NEAR_DUPLICATE_LOOSE):
            pairs = sum(near_duplicate_pairs(np.stack(vs), threshold) for vs in by_space.values())
            pct.append(100.0 * pairs / n if n else 0.0)
        return n, pct[0], pct[1]

    def close(self) -> None:
        self.memory.close()

    def report(self, recalls: dict[int, list[float]]) -> dict[str, Any]:
        bullets, dup, loose = self.totals()
        return {
            "bullets": bullets,
            "capacity": self.max_bullets,
            "near_duplicate_pct": round(dup, 2),
            "near_duplicate_pct_at_0_8": round(loose, 2),
            "max_new_in_turn": self.max_new_in_turn,
            "capacity_exceeded": self.capacity_exceeded,
            "recall_at_5": round(float(np.mean(recalls[5])) if recalls[5] else 0.0, 4),
            "recall_at_10": round(float(np.mean(recalls[10])) if recalls[10] else 0.0, 4),
        }


def run_tutoring(preset: str, embedder: Embedder, folder: str, *, max_bullets: int, stream: dict[str, Any] | None = None) -> dict[str, Any]:
    from .tutoring import load

    stream = stream or load()
    run = _Run(preset, embedder, folder, max_bullets)
    try:
        for t in stream["turns"]:
            lessons = [{"content": x["content"], "type": x["type"], "topic": x["topic"], "source": x["key"]} for x in t["lessons"]]
            run.learn(
                t["learner_id"], t["conversation_id"], topic=t["topic"], question=t["question"], retrieve=True,
                answer=t["answer"], feedback=t["feedback"], outcome=t["outcome"], lessons=lessons, answer_mode="llm",
            )
        recalls: dict[int, list[float]] = {k: [] for k in KS}
        vectors = embedder.embed([q["query"] for q in stream["queries"]])
        for q, vector in zip(stream["queries"], vectors, strict=True):
            sources = run.ranked_sources([q["learner_id"]], vector, max(KS))
            for k in KS:
                recalls[k].append(_recall(q["relevant"], sources, k))
        return run.report(recalls)
    finally:
        run.close()


def _locomo_turns(conv: dict[str, Any]) -> list[tuple[str, str, list[tuple[str, list[str]]]]]:
    """(speaker, session, [(fact, [dia_ids])]) per (session, dialog turn, speaker), in order."""
    observations = conv["observation"]
    sessions = sorted((int(m.group(1)), key) for key in observations if (m := re.fullmatch(r"session_(\d+)_observation", key)))
    turns = []
    for number, key in sessions:
        items = []
        for speaker, facts in observations[key].items():
            for fact, dia in facts:
                dias = [d for d in (_dia(x) for x in (dia if isinstance(dia, list) else [dia])) if d]
                if not dias or not isinstance(fact, str) or not fact.strip():
                    continue
                a, b = map(int, dias[0][1:].split(":"))
                items.append(((a, b), speaker, fact.strip(), dias))
        items.sort(key=lambda it: it[0])
        grouped: dict[tuple[tuple[int, int], str], list[tuple[str, list[str]]]] = {}
        for order, speaker, fact, dias in items:
            grouped.setdefault((order, speaker), []).append((fact, dias))
        for (_order, speaker), facts in grouped.items():
            turns.append((speaker, f"session_{number}", facts))
    return turns


def run_locomo(preset: str, embedder: Embedder, folder: str, *, max_bullets: int, data: list[dict[str, Any]]) -> dict[str, Any]:
    run = _Run(preset, embedder, folder, max_bullets)
    try:
        for conv in data:
            sample = conv["sample_id"]
            for speaker, session, facts in _locomo_turns(conv):
                lessons = [
                    {"content": fact, "type": "observation", "topic": LOCOMO_TOPIC, "source": dias[0]}
                    if len(dias) == 1 else
                    {"content": fact, "type": "observation", "topic": LOCOMO_TOPIC, "source": ",".join(dias)}
                    for fact, dias in facts
                ]
                run.learn(f"{sample}/{speaker}", f"{sample}/{session}", topic=LOCOMO_TOPIC, lessons=lessons, answer_mode="none")
        # A multi-turn source ("D15:3,D15:5") counts for each of its turns.
        recalls: dict[int, list[float]] = {k: [] for k in KS}
        for conv in data:
            sample = conv["sample_id"]
            speakers = [conv["conversation"]["speaker_a"], conv["conversation"]["speaker_b"]]
            questions = [qa["question"] for qa in conv["qa"]]
            vectors = embedder.embed(questions)
            for qa, vector in zip(conv["qa"], vectors, strict=True):
                # Both speakers' playbooks, equally: a question naming one speaker often
                # rests on what the other said (boosting the named one costs recall here).
                ranked = run.ranked_sources([f"{sample}/{s}" for s in speakers], vector, max(KS))
                ranked = [{d for src in sources for d in src.split(",")} for sources in ranked]
                evidence = _evidence(qa.get("evidence") or [])
                for k in KS:
                    recalls[k].append(_recall(evidence, ranked, k))
        return run.report(recalls)
    finally:
        run.close()


def run(
    *,
    streams: Sequence[str] = ("tutoring", "locomo"),
    embedder: Embedder,
    data_path: str | Path | None = None,
    max_bullets: int = 100,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Both presets on each stream; returns ``{"streams": {name: {preset: figures}}}``."""
    cached = CachingEmbedder(embedder)
    out: dict[str, Any] = {"streams": {}}
    data = None
    if "locomo" in streams:
        path = Path(data_path) if data_path else default_data_path()
        if not path.is_file():
            raise FileNotFoundError(f"LoCoMo data not found at {path}; pass --data PATH")
        data = read_locomo(path, learn=True)  # DataError naming the file when it is not LoCoMo data
    texts: list[str] = []
    if "tutoring" in streams:
        from .tutoring import load

        tutoring = load()
        for t in tutoring["turns"]:
            texts += [t["question"], *(x["content"] for x in t["lessons"])]
        texts += [q["query"] for q in tutoring["queries"]]
    for conv in data or []:
        texts += [fact for _s, _n, facts in _locomo_turns(conv) for fact, _d in facts]
        texts += [qa["question"] for qa in conv["qa"]]
    cached.prefill(texts)
    if progress:
        progress(f"embedded {len(set(texts))} texts with {embedder.name}")
    learners = {
        "tutoring": len({t["learner_id"] for t in tutoring["turns"]}) if "tutoring" in streams else 0,
        "locomo": len({(conv["sample_id"], speaker) for conv in data or [] for speaker, _s, _f in _locomo_turns(conv)}),
    }
    with tempfile.TemporaryDirectory(prefix="memorist-evolve-") as folder:
        for stream in streams:
            out["streams"][stream] = {}
            for preset in (*PRESETS, EQUAL_CAPACITY):
                started = time.perf_counter()
                sub = str(Path(folder) / f"{stream}-{preset}")
                Path(sub).mkdir()
                capacity = max_bullets * max(1, learners.get(stream, 1)) if preset == EQUAL_CAPACITY else max_bullets
                if stream == "tutoring":
                    figures = run_tutoring(preset, cached, sub, max_bullets=capacity)
                elif stream == "locomo":
                    figures = run_locomo(preset, cached, sub, max_bullets=capacity, data=data or [])
                else:
                    raise ValueError(f"unknown stream {stream!r}; use tutoring or locomo")
                out["streams"][stream][preset] = figures
                if progress:
                    progress(f"{stream}/{preset}: {time.perf_counter() - started:.1f} s")
    return out


def format_table(result: dict[str, Any]) -> str:
    """The Markdown table of a :func:`run` result (as recorded in bench/RESULTS.md)."""
    lines = [
        "| stream | preset | capacity | bullets | near-duplicates ≥ 0.9 (% of bullets) | ≥ 0.8 | most new in a turn | capacity exceeded | recall@5 | recall@10 |",
        "|---|---|---:|---:|---:|---:|---:|---|---:|---:|",
    ]
    for stream, presets in result["streams"].items():
        for preset, f in presets.items():
            lines.append(
                f"| {stream} | {preset} | {f.get('capacity', '-')} | {f['bullets']} | {f['near_duplicate_pct']:.2f} | "
                f"{f.get('near_duplicate_pct_at_0_8', 0.0):.2f} | {f['max_new_in_turn']} | "
                f"{'yes' if f['capacity_exceeded'] else 'no'} | {f['recall_at_5']:.3f} | {f['recall_at_10']:.3f} |"
            )
    return "\n".join(lines)


__all__ = ["EQUAL_CAPACITY", "CachingEmbedder", "default_data_path", "format_table", "run", "run_locomo", "run_tutoring"]
