"""What checking a filter costs, against what its budget counts; and what a costly
filtered search does to the store's other callers meanwhile.

Run:  python bench/filter_cost.py [--records 20000] [--size 100000] [--backend sqlite|postgresql]

1. **Units.** Each filter below is compiled and checked against ``--records``
   in-memory records (metadata like the scope's below, a list, a 2,000-character
   text); one row each: its conditions, the units one memory costs
   (``Filter.cost`` and the long values it reads), the microseconds one memory
   takes, and nanoseconds per unit. ``filters.MAX_CHECKS`` units are meant to be
   about a second: the largest ns/unit times 5,000,000 is the budget's worst case.
2. **Costly searches.** One scope of ``--size`` memories (``add`` in calls of 1,000,
   the hashing embedder, metadata ``{"k": n % 50, "tag": "t<n % 7>"}``) and another
   user's one memory. For each costly filter, a search of the large scope in one
   thread; meanwhile another thread lists the other user's memory every 50 ms. One
   row each: the search's answer (its results, or the error's name) and time, and
   the listing's median and max in ms while the search ran (``0 calls``: it
   ended before the first). ``--size 0`` skips this part.

Run it against another checkout with ``PYTHONPATH=<checkout>/src`` to compare two
commits in one sitting.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from core import store_at  # noqa: E402

import memorist  # noqa: E402
from memorist import Memory  # noqa: E402
from memorist.model import MemoryRecord, Scope  # noqa: E402
from memorist.policies import filters  # noqa: E402

UNITS: dict[str, dict[str, Any]] = {
    "eq (number)": {"k": 7},
    "eq (text)": {"tag": "t3"},
    "ne": {"k": {"ne": 7}},
    "gte": {"k": {"gte": 7}},
    "exists": {"k": {"exists": True}},
    "created_at gte": {"created_at": {"gte": 1e9 + 5}},
    "tags eq": {"tags": "y"},
    "contains (short text)": {"note": {"contains": "zz"}},
    "contains (2,000 characters)": {"long": {"contains": "zz"}},
    "in of 500": {"k": {"in": list(range(100, 600))}},
    "nin of 50": {"k": {"nin": list(range(50))}},
    "in of 10 (a stored list)": {"lst": {"in": list(range(100, 110))}},
    "in of 10 pairs (a stored list)": {"lst": {"in": [[i, i] for i in range(10)]}},
    "OR of 499 values of one key": {"OR": [{"k": i + 1000} for i in range(499)]},
    "OR of 100 keys": {"OR": [{f"k{i}": i} for i in range(100)]},
    "AND of 10 gte": {"AND": [{"k": {"gte": -i}} for i in range(10)]},
    "AND of 10 ne": {"AND": [{"k": {"ne": -i}} for i in range(10)]},
    "NOT": {"NOT": {"k": 7}},
    "10 NOTs deep": {"NOT": {"NOT": {"NOT": {"NOT": {"NOT": {"NOT": {"NOT": {"NOT": {"NOT": {"NOT": {"k": 1}}}}}}}}}}},
    "5 fields": {"k": {"gte": 0}, "tag": {"ne": "zz"}, "note": {"contains": "words"}, "tags": "y", "created_at": {"gte": 0}},
}

COSTLY: dict[str, dict[str, Any]] = {
    "OR of 499 values of one key": {"OR": [{"k": i + 1000} for i in range(499)]},
    "OR of 70 values of one key": {"OR": [{"k": i + 1000} for i in range(70)]},
    "OR of 499 keys": {"OR": [{f"k{i}": i} for i in range(499)]},
    "contains, keeps none": {"tag": {"contains": "zz"}},
    "nin of 50, keeps none": {"k": {"nin": list(range(50))}},
    "AND of 10 ne, keeps most": {"AND": [{"k": {"ne": -i}} for i in range(10)]},
}


def units(records: int) -> None:
    rows = [
        MemoryRecord(id=str(i), scope=Scope(user_id="u"), text="t", tags=[f"x{i % 5}", "y"], created_at=1e9 + i,
                     metadata={"k": i % 50, "tag": f"t{i % 7}", "note": "some words here " * 3, "long": "w" * 2000,
                               "lst": list(range(i % 10))})
        for i in range(records)
    ]
    print("| filter | conditions | units a memory | µs a memory | ns a unit |")
    print("|---|---:|---:|---:|---:|")
    worst = 0.0
    for name, spec in UNITS.items():
        flt = filters.compile_filters(spec)
        assert flt is not None
        flt._left = 10**15  # (measuring, not bounding)
        began = time.perf_counter()
        for record in rows:
            flt(record)
        seconds = time.perf_counter() - began
        spent = (10**15 - flt._left) / records
        per_unit = seconds / records / spent * 1e9
        worst = max(worst, per_unit)
        print(f"| {name} | {flt.nodes} | {spent:.1f} | {seconds / records * 1e6:.2f} | {per_unit:.0f} |")
    print(f"\nworst case of the budget: {filters.MAX_CHECKS:,} units x {worst:.0f} ns = {filters.MAX_CHECKS * worst / 1e9:.2f} s\n")


def costly(where: str, size: int) -> None:
    memory = Memory(where, embedder="hashing")
    began = time.perf_counter()
    for start in range(0, size, 1000):
        memory.add([{"role": "user", "content": f"note {n} about hiking and jazz", "metadata": {"k": n % 50, "tag": f"t{n % 7}"}}
                    for n in range(start, min(size, start + 1000))], user_id="big", infer=False)
    memory.add("another user's note", user_id="other", infer=False)
    print(f"loaded {size:,} memories in {time.perf_counter() - began:.1f} s\n")
    memory.search("hiking", user_id="big")
    memory.get_all(user_id="other", limit=1)
    print("| filter | answer | search s | other user's listing meanwhile: median ms | max ms |")
    print("|---|---|---:|---:|---:|")
    for name, spec in COSTLY.items():
        answer: list[str] = []

        def search(spec: dict[str, Any] = spec, answer: list[str] = answer) -> None:
            try:
                answer.append(f"{len(memory.search('hiking jazz', user_id='big', filters=spec)['results'])} results")
            except memorist.MemoristError as exc:
                answer.append(type(exc).__name__)

        thread = threading.Thread(target=search)
        began = time.perf_counter()
        thread.start()
        waits: list[float] = []
        while thread.is_alive():
            time.sleep(0.05)
            start = time.perf_counter()
            memory.get_all(user_id="other", limit=1)
            waits.append((time.perf_counter() - start) * 1000)
        thread.join()
        took = time.perf_counter() - began
        shown = f"{statistics.median(waits):.1f} | {max(waits):.1f}" if waits else "0 calls | -"
        print(f"| {name} | {answer[0]} | {took:.2f} | {shown} |")
    memory.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--backend", choices=["sqlite", "postgresql"], default="sqlite")
    args = parser.parse_args()
    print(f"memorist {memorist.__file__}, Python {platform.python_version()}, {platform.machine()}\n")
    units(args.records)
    if args.size:
        with store_at(args.backend, "filter-cost") as where:
            costly(where, args.size)


if __name__ == "__main__":
    main()
