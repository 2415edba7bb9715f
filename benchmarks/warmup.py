"""How context() warms after a large fill is opened: blocks of calls, interleaved or back to back (issue 15;
not a timed test).

    cp -r FILL COPY && sync && echo 3 > /proc/sys/vm/drop_caches   # FILL: a folder benchmarks/scale.py filled
    .venv/bin/python benchmarks/warmup.py COPY --rounds 2

Opens COPY as ``scale.py --reuse`` does (100 filler adds to the live session, the cold context(), the wait
for the HNSW graph), then runs ``--rounds`` pairs of blocks of ``--calls`` context() calls with fresh
questions: first interleaved (each call followed by search() at session and user scope and the embedder
alone, as scale.py's samples), then back to back. Each block prints its p50, mean, p95 and the mean of its
first 10 calls: whether the samples' cost is the interleaving or the process warming to the fill. Dropping
the page cache first (root only) makes the first block start from disk.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from pathlib import Path

from scale import LIVE_SESSION, LIVE_USER, _open_setup, filler_question, line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path, help="a copy of a folder scale.py filled (it is written to)")
    parser.add_argument("--rounds", type=int, default=2, help="pairs of blocks: interleaved, then back to back")
    parser.add_argument("--calls", type=int, default=100, help="context() calls per block")
    args = parser.parse_args()
    rng = random.Random(7)
    with _open_setup(args.folder, None, True) as setup:
        memory = setup.for_session(LIVE_SESSION, user_id=LIVE_USER)
        assert memory.recall is not None
        assert memory.recall.embedder is not None
        embedder = memory.recall.embedder
        embedder.embed(["warm up the model"])
        for i in range(100):
            memory.add("user" if i % 2 == 0 else "assistant", line(rng))
        memory.flush()
        t = time.perf_counter()
        memory.context("What did we say about the plan?")
        cold_ms = (time.perf_counter() - t) * 1000
        t = time.perf_counter()
        scope_vectors = getattr(memory.recall, "_scope_vectors", None)
        if scope_vectors is not None:
            scope_vectors.wait_builds()
        print(json.dumps({"cold_ms": round(cold_ms, 1), "build_s": round(time.perf_counter() - t, 1)}), flush=True)
        for r in range(1, args.rounds + 1):
            for name, interleave in (("interleaved", True), ("back_to_back", False)):
                ms = []
                for _ in range(args.calls):
                    question = filler_question(rng)
                    t = time.perf_counter()
                    memory.context(question)
                    ms.append((time.perf_counter() - t) * 1000)
                    if interleave:
                        memory.search(question, k=10)
                        memory.search(question, k=10, scope="user")
                        embedder.embed([question])
                print(json.dumps({"block": f"{name}_{r}", "p50": round(statistics.median(ms), 2),
                                  "mean": round(statistics.fmean(ms), 2),
                                  "p95": round(sorted(ms)[int(0.95 * len(ms)) - 1], 2),
                                  "first10_mean": round(statistics.fmean(ms[:10]), 2)}), flush=True)


if __name__ == "__main__":
    main()
