"""Where one context() spends its time: each journal statement and each Chroma query, per call (issue 15).

    .venv/bin/python benchmarks/context_trace.py FOLDER [--samples 20] [--adds 40] [--profile 30]

FOLDER is a memory folder that ``benchmarks/scale.py`` filled (each run prints its ``folder``; copy it
first, the trace writes to it). The live session adds ``--adds`` messages (so the semantic tier has
something to put in the profile, as in scale.py), waits for the index, warms up, then calls
``context()`` ``--samples`` times with scale.py's questions and prints, per call: the milliseconds
and count of each distinct journal statement (by its text), and how many of Chroma's filtered
queries ran and their time (each one is a scope the in-process index did not answer). Found with it:
reads that walked the whole scope, and the turns re-query beside the profile that went to Chroma.
Times include the tracer's overhead; use them to rank, and scale.py for latency.

``--profile N`` runs the same calls under cProfile instead of the statement tracer and prints the N
functions with the most own time per call (and their cumulative time): where Python's time goes, to
compare a 1k fill with a 1M one (cProfile's overhead inflates every figure; compare, do not add up).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale import LIVE_SESSION, LIVE_USER, filler_question, line

from langmem_tiers import MemoryConfig, TieredMemory
from langmem_tiers.journal import sql_core
from langmem_tiers.recall import vector_store

Tally = dict[str, list[float]]  # name -> [count, seconds]


def _trace(tally: Tally, on: list[bool]) -> None:
    """Count each journal statement (outermost Sql call only) and each Chroma query while ``on[0]``."""
    depth = [0]

    def wrap(fn: Any, name_of: Any) -> Any:
        def traced(self: Any, *args: Any, **kwargs: Any) -> Any:
            if not on[0] or depth[0]:
                return fn(self, *args, **kwargs)
            depth[0] += 1
            start = time.perf_counter()
            try:
                return fn(self, *args, **kwargs)
            finally:
                depth[0] -= 1
                entry = tally.setdefault(name_of(args), [0, 0.0])
                entry[0] += 1
                entry[1] += time.perf_counter() - start
        return traced

    for method in ("execute", "one", "all", "many"):
        setattr(sql_core.Sql, method, wrap(getattr(sql_core.Sql, method), lambda a: " ".join(str(a[0]).split())))
    vector_store.ChromaStore.query = wrap(vector_store.ChromaStore.query,  # type: ignore[method-assign]
                                          lambda a: "CHROMA filtered query")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path)
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--adds", type=int, default=40)
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="cProfile the calls instead and print the N functions with the most own time")
    args = parser.parse_args()
    tally: Tally = {}
    on = [False]
    if not args.profile:
        _trace(tally, on)
    profiler = cProfile.Profile()
    config = MemoryConfig(context_tokens=4000, window_tokens=2000, summary_tokens=400, recall_tokens=800,
                          recall_scope="user")  # scale.py's
    rng = random.Random(5)
    with TieredMemory.open(args.folder, session_id=LIVE_SESSION, user_id=LIVE_USER, config=config) as memory:
        for i in range(args.adds):
            memory.add("user" if i % 2 == 0 else "assistant", line(rng))
        memory.flush()
        memory.context("What did we say about the plan?")
        wait_builds = getattr(getattr(memory.recall, "_scope_vectors", None), "wait_builds", None)
        if wait_builds is not None:  # absent in trees without background graph builds
            wait_builds()
        questions = [filler_question(rng)
                     for _ in range(args.samples + 5)]
        for q in questions[:5]:
            memory.context(q)
        on[0] = True
        took = []
        for q in questions[5:]:
            start = time.perf_counter()
            if args.profile:
                profiler.runcall(memory.context, q)
            else:
                memory.context(q)
            took.append((time.perf_counter() - start) * 1000)
        on[0] = False
    n = args.samples
    if args.profile:
        _print_profile(profiler, n, args.profile, statistics.median(took))
        return
    print(f"context() p50 {statistics.median(took):.1f} ms over {n} calls (traced); per call:")
    for name, (count, seconds) in sorted(tally.items(), key=lambda kv: -kv[1][1]):
        shown = name if len(name) <= 150 else f"{name[:60]} ... {name[-85:]}"
        print(f"{seconds / n * 1000:8.2f} ms  x{count / n:4.1f}  {shown}")
    chroma = tally.get("CHROMA filtered query", [0, 0.0])
    print(f"Chroma filtered queries: {int(chroma[0])} in {n} context() calls")


def _print_profile(profiler: cProfile.Profile, calls: int, top: int, p50_ms: float) -> None:
    """The ``top`` functions by own time, per context() call: own ms, cumulative ms, calls per call."""
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]  # (file, line, name) -> (cc, nc, tt, ct, callers)
    rows = sorted(stats.items(), key=lambda kv: -kv[1][2])[:top]
    print(f"context() p50 {p50_ms:.1f} ms over {calls} calls (profiled); per call: own ms, cumulative ms, calls")
    for (file, line_no, name), (_, ncalls, own, cumulative, _) in rows:
        where = f"{Path(file).name}:{line_no}" if line_no else file
        print(f"{own / calls * 1000:8.3f} {cumulative / calls * 1000:8.3f} {ncalls / calls:8.1f}  {name} ({where})")


if __name__ == "__main__":
    main()
