"""LoCoMo recall@10 per category and on two halves of the questions, for search settings.

Run:  python bench/locomo_levers.py UNIT LIMIT '{"name": {retrieval setting: value, ...}, ...}'
e.g.  python bench/locomo_levers.py dialog 10 '{"base": {}, "pool100": {"candidates": 100}}'
      python bench/locomo_levers.py dialog 10 '{...}' /tmp/dialog.db   (ingested once, reused)

Each conversation of the dev split (../shared/data/locomo/locomo_dev.json) is
ingested once (all-MiniLM-L6-v2) as ``memorist bench locomo`` does; then, for each
named variant, every question is searched with ``limit=LIMIT`` under that
``RetrievalConfig`` (search-time settings only) and recall@10 is averaged per
category, overall, and on the even-numbered (half A) and odd-numbered (half B)
questions of each conversation: tune on one half, check on the other.

An optional fourth argument names a store file: ingested into when it does not exist
yet, reused as it is when it does (the settings compared here are search-time only,
so one ingest serves every run of the same unit).
"""

from __future__ import annotations

import dataclasses
import json
import sys
import tempfile
from pathlib import Path

from memorist import Memory
from memorist.benchmarks.locomo import (
    CATEGORIES,
    ingest,
    load,
    parse_evidence,
    question_recall,
    retrieved_keys,
)
from memorist.config import RetrievalConfig

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "locomo" / "locomo_dev.json"


def main() -> None:
    unit, limit, variants = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
    conversations = load(DATA)
    with tempfile.TemporaryDirectory(prefix="memorist-levers-") as tmp:
        db = Path(sys.argv[4]) if len(sys.argv) > 4 else Path(tmp) / "l.db"
        fresh = not db.exists()
        memory = Memory(str(db))
        for conv in conversations if fresh else ():
            ingest(memory, conv, unit)
        for name, settings in variants.items():
            memory.config.retrieval = dataclasses.replace(RetrievalConfig(), **settings)
            per: dict[str, list[float]] = {}
            for conv in conversations:
                for i, qa in enumerate(conv.questions):
                    evidence, bad = parse_evidence(qa.get("evidence", []))
                    category = CATEGORIES.get(int(qa.get("category", 0)), "other")
                    hits = memory.search(str(qa["question"]), user_id=conv.sample_id, limit=limit)["results"]
                    r = question_recall(evidence, retrieved_keys(hits[:10], unit), bad=bad, unit=unit)
                    for key in (category, "overall", "half A" if i % 2 == 0 else "half B"):
                        per.setdefault(key, []).append(r)
            print(name, json.dumps({k: round(100 * sum(v) / len(v), 1) for k, v in sorted(per.items())}), flush=True)
        memory.close()


if __name__ == "__main__":
    main()
