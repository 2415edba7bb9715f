"""What the memory types of issue 20 cost on context() p50 (a benchmark, not a timed test).

    .venv/bin/python benchmarks/memory_types_cost.py                    # 1,000 messages, keyword recall
    .venv/bin/python benchmarks/memory_types_cost.py --messages 5000 --reps 300
    .venv/bin/python benchmarks/memory_types_cost.py --vectors          # with the local embedding model

One session of the user is filled with ``--messages`` messages (user/assistant turns), 20 facts
and preferences, ``--skills`` skills with triggers and ``--keys`` working-memory keys, everything
indexed. Then ``context(query)`` runs ``--reps`` times per variant, the variants interleaved
call by call (so a load spike on a shared machine hits them all alike):

* ``baseline``: working_tokens=0, skills_k=0, metrics off (a no-op counter);
* ``+metrics``: the in-process counters on (the default);
* ``+working``: and the working-state block (working_tokens=200);
* ``+skills``: and the best skills for the query in recall (skills_k=2): everything on, the default.

The profile is on in every variant (the default): the working state and the skills are read in
the same query as the profile, so they add no journal round trip, only rows and assembly work.
Prints one JSON line per variant (p50, p95 in ms, and the p50 difference to the previous variant),
after a header line with the cost of the counters alone per context() (``metrics_observe_us``).
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import tempfile
import time
from typing import Any

from langmem_tiers import MemoryConfig, TieredMemory
from langmem_tiers.metrics import MemoryMetrics

TOPICS = ("deploy pipeline", "invoice billing", "marathon training", "garden basil", "piano lesson",
          "database migration", "cabin trip", "podcast episode", "cache latency", "sister wedding")


class NoMetrics(MemoryMetrics):
    """Counters off: what context() cost before the metrics existed."""

    def observe_context(self, context: Any) -> None:
        return None


def fill(path: str, args: argparse.Namespace, embedder: Any) -> None:
    rng = random.Random(7)
    config = MemoryConfig(background_index=False)
    with TieredMemory.open(path, session_id="s1", user_id="ada", config=config, embedder=embedder) as memory:
        for i in range(args.messages // 2):
            topic = rng.choice(TOPICS)
            memory.add_messages([
                {"role": "user", "content": f"Turn {i}: about the {topic}, note {rng.randint(0, 9999)} please."},
                {"role": "assistant", "content": f"Noted on the {topic}: item {rng.randint(0, 9999)} is done."},
            ])
        for i in range(20):
            kind = "preference" if i % 2 else "fact"
            memory.remember(f"About the {TOPICS[i % len(TOPICS)]}: detail {i}", kind=kind, category="misc")
        for i in range(args.skills):
            topic = TOPICS[i % len(TOPICS)]
            memory.remember(f"Skill {i}: when the {topic} goes wrong, check step {i}", kind="skill",
                            triggers=[f"{topic} fails", f"{topic} broken"])
        for i in range(args.keys):
            memory.working.set(f"task_{i}", {"step": i, "topic": TOPICS[i % len(TOPICS)]})
        memory.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=1000, help="messages in the session (default 1000)")
    parser.add_argument("--reps", type=int, default=200, help="context() calls per variant (default 200)")
    parser.add_argument("--skills", type=int, default=10, help="skills of the user (default 10)")
    parser.add_argument("--keys", type=int, default=5, help="working-memory keys of the session (default 5)")
    parser.add_argument("--vectors", action="store_true", help="vector recall with the local embedding model")
    args = parser.parse_args()

    embedder: Any = False
    if args.vectors:
        from langmem_tiers.embedders.local import LocalEmbedder

        embedder = LocalEmbedder()
    folder = tempfile.mkdtemp(prefix="langmem-types-bench-")
    started = time.perf_counter()
    fill(folder, args, embedder)
    fill_s = time.perf_counter() - started

    base = MemoryConfig(background_index=False)
    variants = {
        "baseline": (base.with_changes(working_tokens=0, skills_k=0), False),
        "+metrics": (base.with_changes(working_tokens=0, skills_k=0), True),
        "+working": (base.with_changes(skills_k=0), True),
        "+skills": (base, True),
    }
    memories = {}
    for name, (config, metrics) in variants.items():
        memory = TieredMemory.open(folder, session_id="s1", user_id="ada", config=config, embedder=embedder)
        if not metrics:
            memory.metrics = NoMetrics()
        memories[name] = memory
    queries = [f"What went wrong with the {t}? It fails again." for t in TOPICS]
    timings: dict[str, list[float]] = {name: [] for name in variants}
    try:
        for memory in memories.values():  # warm up caches (token counts, vectors) once per variant
            for q in queries:
                memory.context(q)
        for rep in range(args.reps):
            order = list(memories.items())
            random.Random(rep).shuffle(order)
            for name, memory in order:
                q = queries[rep % len(queries)]
                t0 = time.perf_counter()
                memory.context(q)
                timings[name].append((time.perf_counter() - t0) * 1000)
        check = memories["+skills"].context(queries[0])
        # The counters alone, without the noise of a whole context() on a shared machine.
        counters = MemoryMetrics()
        t0 = time.perf_counter()
        for _ in range(10_000):
            counters.observe_context(check)
        observe_us = (time.perf_counter() - t0) / 10_000 * 1e6
        print(json.dumps({"machine": platform.processor() or platform.machine(), "messages": args.messages,
                          "skills": args.skills, "keys": args.keys, "vectors": args.vectors,
                          "fill_s": round(fill_s, 1), "reps": args.reps,
                          "metrics_observe_us": round(observe_us, 2),
                          "delivered": {"working_tokens": check.tokens.working,
                                        "skills": sum(1 for h in check.recalled if h.kind == "skill")}}))
        previous = None
        for name, values in timings.items():
            p50 = statistics.median(values)
            p95 = sorted(values)[int(0.95 * (len(values) - 1))]
            row = {"variant": name, "p50_ms": round(p50, 3), "p95_ms": round(p95, 3)}
            if previous is not None:
                row["p50_delta_ms"] = round(p50 - previous, 3)
            print(json.dumps(row))
            previous = p50
    finally:
        for memory in memories.values():
            memory.close()


if __name__ == "__main__":
    main()
