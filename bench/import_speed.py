"""`memorist import` of conversation lines against `add`'s batched rate, and the
progress bar's first time estimate against the truth.

Run:  python bench/import_speed.py [--lines 5000] [--embedder hashing] [--batch 500]
                                   [--cli-lines 5000,50000] [--kind messages|text]

- ``add``: the lines' messages added with ``Memory.add(list, infer=False)`` in calls
  of ``--batch`` messages into a fresh store (the batched rate);
- ``import_``: ``Memory.import_`` of the file (one conversation turn a line, each
  with its own timestamp and metadata, ``"infer": false``; with ``--kind text``,
  ``{"text": ...}`` lines, stored as ``add(text)`` stores them) into a fresh store;
- ``cli``: ``memorist import`` of a file of each of ``--cli-lines`` lines in a new
  process whose stderr is a terminal (a pty), so that it draws its bar: the first
  time estimate the bar shows, and the time the import actually took from then on.
  The bar shows tenths of a second under ten seconds, whole seconds above (the
  estimate is rounded to that), hence a range for the ratio above ten seconds.

The lines are sentences sampled from LoCoMo's dialog vocabulary, two speakers
alternating, a minute apart. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from core import corpus_model, sentence  # noqa: E402

import memorist  # noqa: E402
from memorist import Memory  # noqa: E402

# "0.7 s left", "42 s left", "3 min 05 s left", "1 h 02 min left" (memorist.cli.app.time_left).
_ETA = re.compile(rb"(?:(\d+) h )?(?:(\d+) min )?(?:([\d.]+) s )?left")
_ANSI = re.compile(rb"\x1b\[[0-9;]*m")


def seconds_shown(match: re.Match[bytes]) -> float:
    hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    return 3600 * hours + 60 * minutes + seconds


def lines_of(texts: list[str], kind: str = "messages") -> list[dict]:
    start = 1_683_561_360  # 8 May 2023
    return [
        {
            **({"text": t} if kind == "text" else {"messages": [{"role": "user", "content": t, "name": ("Caroline", "Melanie")[i % 2]}]}),
            "user_id": "importer",
            "timestamp": start + 60 * i,
            "metadata": {"dia_id": f"D{i // 20 + 1}:{i % 20 + 1}"},
            "infer": False,
        }
        for i, t in enumerate(texts)
    ]


def add_rate(texts: list[str], embedder: str, batch: int) -> float:
    with tempfile.TemporaryDirectory(prefix="memorist-import-") as tmp:
        memory = Memory(str(Path(tmp) / "a.db"), embedder=embedder)
        memory.embedder.embed(["warm up"])
        began = time.perf_counter()
        for s in range(0, len(texts), batch):
            memory.add([{"role": "user", "content": t, "name": ("Caroline", "Melanie")[(s + i) % 2]}
                        for i, t in enumerate(texts[s : s + batch])], user_id="importer", infer=False)
        secs = time.perf_counter() - began
        memory.close()
    return len(texts) / secs


def import_rate(path: Path, embedder: str) -> tuple[float, int]:
    with tempfile.TemporaryDirectory(prefix="memorist-import-") as tmp:
        memory = Memory(str(Path(tmp) / "i.db"), embedder=embedder)
        memory.embedder.embed(["warm up"])
        began = time.perf_counter()
        summary = memory.import_(str(path))
        secs = time.perf_counter() - began
        memory.close()
    return summary["lines"] / secs, summary["added"]


def cli_estimate(path: Path, embedder: str) -> tuple[float | None, float, float]:
    """(first estimate shown, seconds the import took from then on, whole run seconds)."""
    with tempfile.TemporaryDirectory(prefix="memorist-import-") as tmp:
        master, slave = pty.openpty()
        env = {**os.environ, "COLUMNS": "120"}
        began = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "memorist", "--db", str(Path(tmp) / "c.db"), "--embedder", embedder, "import", str(path)],
            stdout=subprocess.DEVNULL, stderr=slave, env=env,
        )
        os.close(slave)
        first: tuple[float, float] | None = None
        buffer = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            buffer += chunk
            for part in re.split(rb"[\r\n]", buffer)[:-1]:
                match = _ETA.search(_ANSI.sub(b"", part))
                if first is None and match and b"%" in part:
                    first = (time.perf_counter(), seconds_shown(match))
            buffer = re.split(rb"[\r\n]", buffer)[-1]
        proc.wait()
        end = time.perf_counter()
        os.close(master)
    if first is None:
        return None, 0.0, end - began
    return first[1], end - first[0], end - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=5000)
    parser.add_argument("--embedder", default="hashing")
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--seed", type=int, default=29)
    parser.add_argument("--no-cli", action="store_true")
    parser.add_argument("--cli-lines", default="5000,50000", help="sizes of the CLI imports timed against their bar")
    parser.add_argument("--kind", choices=("messages", "text"), default="messages", help="the lines' kind of turn")
    args = parser.parse_args()
    words, weights, _ = corpus_model()
    rng = random.Random(args.seed)
    texts = [sentence(rng, words, weights) for _ in range(args.lines)]
    print(f"# bench/import_speed.py: memorist from {Path(memorist.__file__).resolve().parents[1]}, "
          f"{args.lines} {args.kind} lines, embedder {args.embedder}", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="memorist-import-") as tmp:
        path = Path(tmp) / "turns.jsonl"
        path.write_text("".join(json.dumps(line) + "\n" for line in lines_of(texts, args.kind)), encoding="utf-8")
        added = add_rate(texts, args.embedder, args.batch)
        imported, count = import_rate(path, args.embedder)
        print("| lines | add batched lines/s | import lines/s | import / add | memories added |")
        print("|---:|---:|---:|---:|---:|")
        print(f"| {args.lines:,} | {added:,.0f} | {imported:,.0f} | {imported / added:.0%} | {count:,} |", flush=True)
        if not args.no_cli:
            print()
            print("| `memorist import` lines | run s | first estimate shown s | time it took from then s | estimate / truth |")
            print("|---:|---:|---:|---:|---:|")
            for size in (int(n) for n in args.cli_lines.split(",") if n):
                cli_path = path
                if size != args.lines:
                    cli_texts = [sentence(rng, words, weights) for _ in range(max(size - len(texts), 0))]
                    cli_path = Path(tmp) / f"turns-{size}.jsonl"
                    cli_path.write_text("".join(json.dumps(line) + "\n" for line in lines_of((texts + cli_texts)[:size], args.kind)), encoding="utf-8")
                eta, rest, whole = cli_estimate(cli_path, args.embedder)
                if eta is None or rest <= 0:
                    ratio = "no estimate shown"
                elif eta < 9.95:  # tenths of a second: the estimate is within 0.05 s of the value shown
                    ratio = f"{eta / rest:.2f}"
                else:  # whole seconds, rounded
                    ratio = f"{(eta - 0.5) / rest:.2f}–{(eta + 0.5) / rest:.2f}"
                print(f"| {size:,} | {whole:.1f} | {eta if eta is not None else '-'} | {rest:.1f} | {ratio} |", flush=True)


if __name__ == "__main__":
    main()
