"""Why session recall does not use Chroma's filtered query: its cost grows with the collection.

    .venv/bin/python benchmarks/chroma_filter.py [--records 50000]

Fills one embedded Chroma collection with random unit vectors over 1,000 sessions, then times
a k=50 query unfiltered, filtered to one session (string and int metadata), and filtered to half
the collection. `langmem_tiers.recall.scope_vectors` exists because of these numbers.

Then the library's own query (``ChromaStore.query``, which recall falls back to while a scope's index is
read or when it does not fit the cache) on a copy of the rows, with the filters recall builds (a journal and
a list of namespace ids): every session, half of them, one. It asks for the collection's nearest unfiltered
first and keeps those the filter admits, so a filter that admits most of the collection costs about an
unfiltered query; one that admits few falls back to Chroma's filter (the first time at the price of both).
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=50000)
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    import chromadb
    from chromadb.config import Settings

    client = chromadb.PersistentClient(path=tempfile.mkdtemp(), settings=Settings(anonymized_telemetry=False))
    col = client.get_or_create_collection("bench", embedding_function=None,
                                          configuration={"hnsw": {"space": "cosine"}})
    from langmem_tiers.recall.vector_store import ChromaStore

    store = ChromaStore.from_client(client, collection="bench-store")  # the same rows, through the library
    rng = np.random.default_rng(0)
    for start in range(0, args.records, 5000):
        n = min(5000, args.records - start)
        v = rng.standard_normal((n, 384))
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        ids = range(start, start + n)
        col.upsert(ids=[str(i) for i in ids], embeddings=v.tolist(), documents=["x"] * n,
                   metadatas=[{"session": f"s{i % 1000}", "ns": i % 1000, "half": i % 2} for i in ids])
        store.upsert([str(i) for i in ids], v.tolist(), None, [{"journal": "j", "ns": i % 1000} for i in ids])
    q = rng.standard_normal(384)
    q = (q / np.linalg.norm(q)).tolist()
    for name, where in [("unfiltered", None), ("one session (string)", {"session": "s1"}),
                        ("one session (int)", {"ns": 1}), ("half the collection", {"half": 1})]:
        t = time.perf_counter()
        for _ in range(args.repeat):
            col.query(query_embeddings=[q], n_results=50, where=where)
        print(f"{name:22} {(time.perf_counter() - t) / args.repeat * 1000:7.1f} ms  ({args.records} records)")
    for name, sessions in [("every session", 1000), ("half the sessions", 500), ("one session", 1)]:
        scope = {"$and": [{"journal": {"$eq": "j"}}, {"ns": {"$in": list(range(sessions))}}]}  # as recall's
        first = time.perf_counter()
        store.query(q, 50, scope)
        first_ms = (time.perf_counter() - first) * 1000
        t = time.perf_counter()
        for _ in range(args.repeat):
            store.query(q, 50, scope)
        print(f"ChromaStore.query, {name:17} {(time.perf_counter() - t) / args.repeat * 1000:7.1f} ms "
              f"(first {first_ms:.1f} ms)")


if __name__ == "__main__":
    main()
