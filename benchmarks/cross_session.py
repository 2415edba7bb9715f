"""context() latency with recall across the user's sessions vs within one session.

    .venv/bin/python benchmarks/cross_session.py                  # 100 sessions x 20 turns, real embedder
    .venv/bin/python benchmarks/cross_session.py --sessions 10 --turns 5 --queries 20   # a smoke run

One user holds ``--sessions`` sessions of ``--turns`` turns each (Zipf text, as
benchmarks/core_latency.py), all indexed. From the last session, the same questions are
asked with ``recall_scope="session"`` and ``recall_scope="user"``; p50/p95 of context()
(query embedding included) are printed side by side, with their ratio. Target (issue 12):
user scope within 2x of session scope.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from core_latency import question, sentence  # type: ignore[import-not-found]

from langmem_tiers import MemoryConfig, TieredMemory


def fill(path: Path, sessions: int, turns: int, rng: random.Random,
         user_line: Callable[[random.Random], str] = sentence) -> None:
    """One user ("ada") with ``sessions`` sessions of ``turns`` user/assistant turns, indexed."""
    config = MemoryConfig(background_index=False)
    with TieredMemory.open(path, session_id="s0", user_id="ada", config=config) as first:
        for s in range(sessions):
            memory = first if s == 0 else first.for_session(f"s{s}")
            for _ in range(turns):
                memory.add_messages([{"role": "user", "content": user_line(rng)},
                                     {"role": "assistant", "content": sentence(rng)}])
        first.flush()


def measure(path: Path, sessions: int, scope: str, queries: list[str]) -> list[float]:
    config = MemoryConfig(recall_scope=scope)  # type: ignore[arg-type]
    with TieredMemory.open(path, session_id=f"s{sessions - 1}", user_id="ada", config=config) as memory:
        memory.context(query=queries[0])  # warm: model loaded, vectors copied
        times = []
        for q in queries:
            start = time.perf_counter()
            memory.context(query=q)
            times.append((time.perf_counter() - start) * 1000)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        started = time.perf_counter()
        fill(folder, args.sessions, args.turns, rng)
        print(f"filled {args.sessions} sessions x {args.turns} turns in {time.perf_counter() - started:.1f} s")
        queries = [question(rng) for _ in range(args.queries)]
        result: dict[str, dict[str, float]] = {}
        # Interleave the two scopes in rounds so machine load affects both alike.
        times: dict[str, list[float]] = {"session": [], "user": []}
        for start in range(0, len(queries), 50):
            for scope in times:
                times[scope] += measure(folder, args.sessions, scope, queries[start:start + 50])
        for scope, t in times.items():
            t.sort()
            result[scope] = {"p50_ms": statistics.median(t), "p95_ms": t[int(0.95 * (len(t) - 1))], "n": len(t)}
        ratio = result["user"]["p50_ms"] / result["session"]["p50_ms"]
        print("| recall_scope | p50 ms | p95 ms |\n|---|---|---|")
        for scope, r in result.items():
            print(f"| {scope} | {r['p50_ms']:.1f} | {r['p95_ms']:.1f} |")
        print(f"user/session p50 ratio: {ratio:.2f} (target <= 2)")
        if args.json:
            args.json.write_text(json.dumps({"sessions": args.sessions, "turns": args.turns, "result": result,
                                             "ratio": ratio, "machine": platform.platform()}, indent=2))


if __name__ == "__main__":
    main()
