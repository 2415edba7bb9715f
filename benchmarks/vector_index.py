"""The in-process scope vector index: exact float32 and int8 rows against int8 HNSW (usearch), by size (issue 15;
not a test).

    .venv/bin/python benchmarks/vector_index.py --sizes 10000,100000,1000000
    .venv/bin/python benchmarks/vector_index.py --sizes 590000 --kinds random --rows-only   # rows, no graph
    .venv/bin/python benchmarks/vector_index.py --sizes 5000,10000,20000,50000 --kinds real   # the crossover
    .venv/bin/python benchmarks/vector_index.py --sizes 100000 --kinds real --grid          # HNSW parameters

For each size and each kind of vectors, the two row stores of ``langmem_tiers.recall.scope_vectors``
(the code recall runs) are filled the way a scope entry is (chunks of ``FETCH_CHUNK`` normalized
rows) and searched with the engine's usual ``want`` (k=50):

* ``random``: unit vectors drawn at random (a worst case for HNSW: no structure to exploit),
  queries drawn the same way.
* ``real``: all-MiniLM-L6-v2 vectors (the real local embedder) of ``--real`` LongMemEval dev turns,
  replicated with noise of norm ``--noise`` up to the size (each copy keeps cosine ~0.9 to its
  turn), queried with the embedded LongMemEval questions and turns held out of the base set.

Reported per (kind, size): build seconds, search p50/p95 in ms for exact float32 rows, int8 rows (``compact_*``:
what a scope reads first where float32 rows and the graph do not fit the byte bound together, with their recall@k
against float32) and HNSW, HNSW recall@k against exact search, the share of stored vectors that a search for
themselves finds among the 10 nearest (``found_again_at_10``, from session 56), resident bytes per vector (RSS
growth while building / vectors) beside the accounting formula the byte bound uses, and the process's RSS and peak
RSS. ``--grid`` also tries connectivity x expansion_search on the first size; ``--rows-only`` measures the two kinds
of rows alone (no graph is built: a large random one takes minutes). Prints one JSON object per row; ``--out``
writes them all. Real vectors are cached in ``--cache`` (a temporary file; never committed).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from timing import rss_kib

from langmem_tiers.recall.scope_vectors import (
    FETCH_CHUNK,
    HNSW_CONNECTIVITY,
    HNSW_EXPANSION_ADD,
    HNSW_EXPANSION_SEARCH,
    _CompactRows,
    _ExactRows,
    _HnswRows,
    compact_bytes_per_vector,
    exact_bytes_per_vector,
    hnsw_bytes_per_vector,
)

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "longmemeval" / "longmemeval_s_dev.json"
DIM = 384


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def normalized(x: Any) -> Any:
    return (x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)).astype(np.float32)


def real_vectors(count: int, queries: int, cache: Path) -> tuple[Any, Any]:
    """MiniLM vectors of ``count`` LongMemEval turns, and of the questions plus held-out turns."""
    if cache.exists():
        data = np.load(cache)
        return data["base"], data["queries"]
    from langmem_tiers.embedders.local import LocalEmbedder

    items = json.loads(DATA.read_text())
    turns = list(dict.fromkeys(t["content"] for item in items for s in item["haystack_sessions"] for t in s))
    rng = np.random.default_rng(0)
    order = rng.permutation(len(turns))
    base_texts = [turns[i] for i in order[:count]]
    held = [turns[i] for i in order[count:count + max(queries - len(items), 0)]]
    embedder = LocalEmbedder()
    t = time.perf_counter()
    base = normalized(np.asarray(embedder.embed(base_texts), dtype=np.float32))
    query = normalized(np.asarray(embedder.embed([i["question"] for i in items] + held), dtype=np.float32))
    print(json.dumps({"embedded_turns": count + len(held), "questions": len(items),
                      "embed_s": round(time.perf_counter() - t, 1)}), flush=True)
    np.savez(cache, base=base, queries=query)
    return base, query


def dataset(kind: str, size: int, real: tuple[Any, Any] | None, noise: float, queries: int) -> tuple[Any, Any]:
    rng = np.random.default_rng(size)
    if kind == "random":
        return (normalized(rng.standard_normal((size, DIM), dtype=np.float32)),
                normalized(rng.standard_normal((queries, DIM), dtype=np.float32)))
    assert real is not None
    base, query = real
    out = np.empty((size, base.shape[1]), dtype=np.float32)
    for start in range(0, size, 65536):  # replicated in blocks: never a second full-size temporary
        n = min(65536, size - start)
        block = base[np.arange(start, start + n) % len(base)]
        if start + n > len(base):
            jitter = rng.standard_normal(block.shape, dtype=np.float32) * (noise / np.sqrt(block.shape[1]))
            first = max(len(base) - start, 0)  # the base turns themselves stay exact copies
            jitter[:first] = 0.0
            block = block + jitter
        out[start:start + n] = normalized(block)
    return out, query[:queries]


def fill(rows: Any, data: Any) -> float:
    t = time.perf_counter()
    for start in range(0, len(data), FETCH_CHUNK):
        chunk = data[start:start + FETCH_CHUNK]
        rows.add(np.arange(start + 1, start + 1 + len(chunk), dtype=np.int64), chunk)
    return time.perf_counter() - t


def timed_search(rows: Any, queries: Any, k: int) -> tuple[list[list[int]], list[float]]:
    found, ms = [], []
    for q in queries:
        t = time.perf_counter()
        hits = rows.search(q, k)
        ms.append((time.perf_counter() - t) * 1000)
        found.append([r for r, _ in hits])
    return found, ms


def recall_at(approx: list[list[int]], exact: list[list[int]], k: int) -> float:
    return statistics.mean(len(set(a[:k]) & set(e[:k])) / k for a, e in zip(approx, exact))


def exact_truth(data: Any, queries: Any, k: int) -> tuple[list[list[int]], list[float], float]:
    """Exact top-k ids (from the exact row store, as recall runs it) and its timings."""
    t = time.perf_counter()
    rows = _ExactRows()
    rows.ids, rows.matrix = np.arange(1, len(data) + 1, dtype=np.int64), data  # what an exact entry holds
    build = time.perf_counter() - t
    found, ms = timed_search(rows, queries, k)
    return found, ms, build


def exact_fields(kind: str, size: int, data: Any, queries: Any, k: int,
                 exact: tuple[list[list[int]], list[float], float]) -> dict[str, Any]:
    """A row's head: what was searched, and the exact float32 rows' build, search times and bytes."""
    _, ms, build = exact
    return {"kind": kind, "size": size, "dim": data.shape[1], "k": k, "queries": len(queries),
            "exact_build_s": round(build, 3), "exact_ms_p50": round(statistics.median(ms), 3),
            "exact_ms_p95": round(pct(ms, 0.95), 3), "exact_bytes_per_vector": exact_bytes_per_vector(data.shape[1])}


def compact_rows(data: Any, queries: Any, k: int, truth: list[list[int]]) -> dict[str, Any]:
    """int8 rows filled as a scope's read fills them (one matrix), searched as recall searches them."""
    rows = _CompactRows()
    t = time.perf_counter()
    rows.add(np.arange(1, len(data) + 1, dtype=np.int64), data)
    build = time.perf_counter() - t
    found, ms = timed_search(rows, queries, k)
    return {"compact_build_s": round(build, 3), "compact_ms_p50": round(statistics.median(ms), 3),
            "compact_ms_p95": round(pct(ms, 0.95), 3), f"compact_recall_at_{k}": round(recall_at(found, truth, k), 4),
            "compact_bytes_per_vector": compact_bytes_per_vector(data.shape[1])}


def quality(found: list[list[int]], truth: list[list[int]], data: Any, queries: Any, k: int,
            base: int | None) -> dict[str, float]:
    """Beyond recall: how much less similar the returned vectors are than the exact top k (mean cosine), and
    for replicated real vectors the recall of distinct turns (a noisy copy of a turn stands for it)."""
    def mean_sim(ids: list[int], q: Any) -> float:
        return float(np.mean(data[np.asarray(ids[:k]) - 1] @ q)) if ids else 0.0

    def turns(ids: list[int]) -> set[int]:
        assert base is not None
        return {(i - 1) % base for i in ids[:k]}

    out = {"similarity_gap": round(float(np.mean([mean_sim(t, q) - mean_sim(f, q)
                                                  for f, t, q in zip(found, truth, queries)])), 5)}
    if base is not None:
        out[f"turn_recall_at_{k}"] = round(statistics.mean(
            len(turns(f) & turns(t)) / max(len(turns(t)), 1) for f, t in zip(found, truth)), 4)
    return out


def found_again(graph: Any, data: Any, sample: int = 2000) -> float:
    """The share of stored vectors (``sample`` of them, evenly spaced) that a search for themselves finds among
    the 10 nearest: a node stored but unreachable by search (usearch's concurrent add, session 56) is never found."""
    picks = np.unique(np.linspace(0, len(data) - 1, min(sample, len(data))).astype(np.int64))
    return round(statistics.mean(int(i) + 1 in {r for r, _ in graph.search(data[i], 10)} for i in picks), 5)


def measure(kind: str, size: int, data: Any, queries: Any, k: int, connectivity: int, expansion_add: int,
            searches: list[int], exact: tuple[list[list[int]], list[float], float],
            base: int | None = None) -> list[dict[str, Any]]:
    """One HNSW build, searched with each ``expansion_search`` of ``searches``: one row each."""
    truth = exact[0]
    before = rss_kib()[0] * 1024
    graph = _HnswRows(data.shape[1], connectivity, expansion_add, searches[0])
    build_s = fill(graph, data)
    grown = rss_kib()[0] * 1024 - before
    rows = []
    for expansion_search in searches:
        graph.expansion_search = expansion_search  # what the entry asks for (wider beyond HNSW_LARGE)
        found, ms = timed_search(graph, queries, k)
        now_kib, peak_kib = rss_kib()
        rows.append({
            **exact_fields(kind, size, data, queries, k, exact),
            "connectivity": connectivity, "expansion_add": expansion_add,
            "expansion_search": int(graph.index.expansion_search),
            "hnsw_build_s": round(build_s, 2), "hnsw_build_per_s": round(size / build_s),
            "hnsw_ms_p50": round(statistics.median(ms), 3), "hnsw_ms_p95": round(pct(ms, 0.95), 3),
            f"recall_at_{k}": round(recall_at(found, truth, k), 4),
            "recall_at_10": round(recall_at(found, truth, 10), 4),
            "found_again_at_10": found_again(graph, data),
            "hnsw_rss_bytes_per_vector": round(grown / size),
            "hnsw_accounted_bytes_per_vector": hnsw_bytes_per_vector(data.shape[1], connectivity),
            "rss_mb": round(now_kib / 1024), "peak_rss_mb": round(peak_kib / 1024),
            **quality(found, truth, data, queries, k, base if base is not None and size > base else None),
        })
    del graph
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--kinds", default="random,real")
    parser.add_argument("--k", type=int, default=50, help="vectors asked per search (the engine's want)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--real", type=int, default=3000, help="LongMemEval turns embedded for the real kind")
    parser.add_argument("--noise", type=float, default=0.5, help="norm of the noise added to replicated turns")
    parser.add_argument("--cache", default=None, help="where the real vectors are kept between runs")
    parser.add_argument("--grid", action="store_true", help="try connectivity x expansion_search on the first size")
    parser.add_argument("--connectivity", type=int, default=HNSW_CONNECTIVITY)
    parser.add_argument("--searches", default=str(HNSW_EXPANSION_SEARCH), help="expansion_search values (a,b,...)")
    parser.add_argument("--out", default=None, help="write every row to this JSON file")
    parser.add_argument("--rows-only", action="store_true", help="exact float32 and int8 rows only, no graph")
    args = parser.parse_args()
    print(json.dumps({"machine": f"{platform.machine()} {os.cpu_count()} cores, python {platform.python_version()}",
                      "load_avg": os.getloadavg(), "date": time.strftime("%Y-%m-%d %H:%M")}), flush=True)
    kinds = args.kinds.split(",")
    real = None
    if "real" in kinds:
        cache = Path(args.cache or Path(tempfile.gettempdir()) / f"lt-vector-index-real-{args.real}.npz")
        real = real_vectors(args.real, args.queries, cache)
    rows: list[dict[str, Any]] = []

    def emit(new: list[dict[str, Any]]) -> None:
        for row in new:
            print(json.dumps(row), flush=True)
        rows.extend(new)
        if args.out:  # after each build: a long run keeps what it measured
            Path(args.out).write_text(json.dumps(rows, indent=2))

    sizes = [int(s) for s in args.sizes.split(",")]
    for kind in kinds:
        for n, size in enumerate(sizes):
            data, queries = dataset(kind, size, real, args.noise, args.queries)
            exact = exact_truth(data, queries, args.k)
            compact = compact_rows(data, queries, args.k, exact[0])
            builds = [(args.connectivity, HNSW_EXPANSION_ADD, [int(x) for x in args.searches.split(",")])]
            if args.grid and n == 0:
                builds = [(m, ea, [64, 128, 256]) for m in (8, 16, 32) for ea in (32, HNSW_EXPANSION_ADD)]
            base = len(real[0]) if kind == "real" and real is not None else None
            for m, ea, searches in [] if args.rows_only else builds:
                built = measure(kind, size, data, queries, args.k, m, ea, searches, exact, base)
                emit([row | compact for row in built])
            if args.rows_only:
                emit([exact_fields(kind, size, data, queries, args.k, exact) | compact])
            del data, exact


if __name__ == "__main__":
    main()
