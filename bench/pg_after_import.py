"""Keyword search on PostgreSQL right after a bulk import, before autovacuum analyzes.

A fresh PostgreSQL store (pgserver, in a temporary folder) imports ``--size`` memories
of one user from an export (``Memory.import_``), with autovacuum off so that the
tables stay unanalyzed as they are in the seconds after any bulk load; then the user
is searched ``--searches`` times at once. A space of 3,000 to 10,000 memories is
ranked by BM25 in SQL (above ``text_index_above`` it is ranked in process), so this
times the SQL ranking as the planner sees a freshly loaded table. Prints one JSON
line: the import's seconds, each search's milliseconds and their median.

    python bench/pg_after_import.py --size 8000
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=8000, help="memories imported (default 8000)")
    parser.add_argument("--searches", type=int, default=5, help="searches timed (default 5)")
    args = parser.parse_args()

    import psycopg

    from memorist import Memory

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver

    with tempfile.TemporaryDirectory() as folder:
        source = Memory(str(Path(folder) / "source.db"), embedder="hashing")
        source.add([{"role": "user", "content": f"note {i} about tea and the weather"} for i in range(args.size)],
                   user_id="u", infer=False)
        lines = list(source.export(user_id="u"))
        source.close()
        server = pgserver.get_server(Path(folder) / "pg", cleanup_mode="stop")
        try:
            url = server.get_uri()
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("ALTER SYSTEM SET autovacuum = off")
                conn.execute("SELECT pg_reload_conf()")
            memory = Memory(url, embedder="hashing")
            began = time.perf_counter()
            memory.import_(lines)
            imported = time.perf_counter() - began
            times = []
            for _ in range(args.searches):
                began = time.perf_counter()
                assert memory.search("tea weather", user_id="u", limit=5)["results"]
                times.append((time.perf_counter() - began) * 1000)
            memory.close()
        finally:
            server.cleanup()
    print(json.dumps({
        "size": args.size, "import_s": round(imported, 2), "search_ms": [round(t, 1) for t in times],
        "search_p50_ms": round(statistics.median(times), 1), "python": platform.python_version(), "argv": sys.argv[1:],
    }))


if __name__ == "__main__":
    main()
