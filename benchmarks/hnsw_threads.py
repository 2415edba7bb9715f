"""usearch's HNSW graph built on every core or on one thread: vectors a search for themselves misses (not a test).

    .venv/bin/python benchmarks/hnsw_threads.py --json OUT.json

usearch's concurrent ``add()`` (its default: a thread per core) leaves some nodes stored but unreachable by
search (unum-cloud/USearch#735). For each shape (vectors x dimension, builds), random unit vectors are added
to an int8 cosine graph with this package's parameters, 256 at a time as a scope's build adds them
(``scope_vectors._add_sliced``), once with usearch's default threads and once on one thread; then every
vector is searched for itself (k=1). Reported per shape and mode: the self-searches that did not return the
vector itself, and the build seconds. ``_HnswRows`` adds on one thread since session 56 (BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from langmem_tiers.recall.scope_vectors import (
    GRAPH_SLICE,
    HNSW_CONNECTIVITY,
    HNSW_EXPANSION_ADD,
    HNSW_EXPANSION_SEARCH,
    _HnswRows,
)

SHAPES = ((40, 32, 400), (300, 32, 40), (3000, 32, 6), (300, 384, 10), (5000, 384, 2))  # vectors, dim, builds


def run(count: int, dim: int, builds: int, threads: int) -> dict[str, Any]:
    missed, searched, build_s = 0, 0, 0.0
    for seed in range(builds):
        rng = np.random.default_rng(seed)
        matrix = rng.standard_normal((count, dim)).astype(np.float32)
        matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
        # The package's graph; its usearch index is driven directly, since _HnswRows.add always adds on one thread.
        index = _HnswRows(dim, HNSW_CONNECTIVITY, HNSW_EXPANSION_ADD, HNSW_EXPANSION_SEARCH).index
        keys = np.arange(1, count + 1, dtype=np.uint64)
        t = time.perf_counter()
        for start in range(0, count, GRAPH_SLICE):
            index.add(keys[start:start + GRAPH_SLICE], matrix[start:start + GRAPH_SLICE], threads=threads)
        build_s += time.perf_counter() - t
        found = np.asarray(index.search(matrix, 1).keys).reshape(-1)
        missed += int((found != keys).sum())
        searched += count
    return {"vectors": count, "dim": dim, "builds": builds, "threads": threads or "every core",
            "self_searches": searched, "missed": missed, "build_s": round(build_s, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    rows = []
    for count, dim, builds in SHAPES:
        for threads in (0, 1):  # 0: usearch's default, a thread per core
            rows.append(run(count, dim, builds, threads))
            print(json.dumps(rows[-1]), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
