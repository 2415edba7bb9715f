"""What the query-time recall switches (issue 19) cost context(): off vs on, interleaved, same history.

    .venv/bin/python benchmarks/recall_switches_cost.py                      # 40 sessions x 20 turns
    .venv/bin/python benchmarks/recall_switches_cost.py --sessions 10 --turns 5 --queries 20   # smoke

One user holds ``--sessions`` sessions of ``--turns`` turns (Zipf text, as benchmarks/core_latency.py,
with a few names and dated phrases mixed in so every switch has work to do), all indexed, real
MiniLM embedder, embedded SQLite + Chroma. From a fresh session the same questions (half of them
"when" questions, each naming someone and a time: every switch acts) are asked with each variant in
turn, round after round, so machine load hits all alike; p50/p95 of ``context(query=...)`` with
recall (query embedding included) per variant and its p50 ratio to ``off``. Ingest is not measured:
no switch changes what is indexed.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import tempfile
import time
from pathlib import Path

from core_latency import sentence  # type: ignore[import-not-found]
from cross_session import fill  # type: ignore[import-not-found]

from langmem_tiers import TieredMemory
from langmem_tiers.recall.options import RecallOptions

NAMES = ["Ada", "Bruno", "Chen", "Dalia", "Emeka", "Farah", "Goran", "Hana"]
WHEN = ["last week", "yesterday", "two weeks ago", "in March", "on Friday"]
VARIANTS = {
    "off": RecallOptions(),
    "salient": RecallOptions(salient_weight=1.0),
    "time+when": RecallOptions(time_boost=1.0, when_boost=0.5),
    "two-stage": RecallOptions(session_weight=0.5),
    "all": RecallOptions(salient_weight=1.0, time_boost=1.0, when_boost=0.5, session_weight=0.5),
    "neighbors": RecallOptions(neighbor_weight=0.5),
    "defaults (time+when+neighbors)": RecallOptions(time_boost=1.0, when_boost=0.5, neighbor_weight=0.5),
}


def line(rng: random.Random) -> str:
    return f"{rng.choice(NAMES)} {rng.choice(WHEN)}: {sentence(rng)}"


def questions(rng: random.Random, n: int) -> list[str]:
    out = []
    for i in range(n):
        topic = sentence(rng, 3).rstrip(".").lower()
        who = rng.choice(NAMES)
        out.append(f"When did {who} talk about {topic}?" if i % 2 == 0
                   else f"What did {who} say {rng.choice(WHEN)} about {topic}?")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=40)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        started = time.perf_counter()
        fill(folder, args.sessions, args.turns, rng, user_line=line)
        print(f"filled {args.sessions} sessions x {args.turns} turns in {time.perf_counter() - started:.1f} s")
        qs = questions(rng, args.queries)
        times: dict[str, list[float]] = {name: [] for name in VARIANTS}
        with TieredMemory.open(folder, session_id="asking", user_id="ada") as memory:
            assert memory.recall is not None
            memory.context(query=qs[0])  # warm: model loaded, vectors copied
            for q in qs:  # one round per question: every variant answers it, back to back
                for name, options in VARIANTS.items():
                    memory.recall.options = options
                    start = time.perf_counter()
                    memory.context(query=q)
                    times[name].append((time.perf_counter() - start) * 1000)
        result = {}
        for name, t in times.items():
            t.sort()
            result[name] = {"p50_ms": statistics.median(t), "p95_ms": t[int(0.95 * (len(t) - 1))], "n": len(t)}
        off = result["off"]["p50_ms"]
        print("| variant | p50 ms | p95 ms | p50 / off |\n|---|---|---|---|")
        for name, r in result.items():
            print(f"| {name} | {r['p50_ms']:.1f} | {r['p95_ms']:.1f} | {r['p50_ms'] / off:.2f} |")
        if args.json:
            args.json.write_text(json.dumps({"sessions": args.sessions, "turns": args.turns, "result": result,
                                             "machine": platform.platform()}, indent=2))


if __name__ == "__main__":
    main()
