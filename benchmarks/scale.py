"""Scale: add(), context() and search() latency as the store grows (issue 7; not a timed test).

    .venv/bin/python benchmarks/scale.py --sizes 1000,10000,100000          # about 10 minutes here
    .venv/bin/python benchmarks/scale.py --sizes 1000,1000000 --no-vectors  # the 1M journal, keyword recall
    .venv/bin/python benchmarks/scale.py --sizes 100000 --servers           # PostgreSQL + Chroma server

For each size N, N filler messages spread over N/100 sessions (100 messages each, as
user/assistant turns) are written straight through the journal in large transactions,
with one recall record per turn, as eviction would have left them. Filler records get
random unit vectors in Chroma: this measures latency at that index size, not recall
quality (the evaluation harness measures quality). Then one live session is driven
through the public API: add() per message (durable), context() with recall for a new
question, and search() with k=10 at session and user scope. With ``--servers`` the journal is a
throwaway PostgreSQL cluster and the vectors a ``chroma run`` server, both on 127.0.0.1 (started
with the test suite's helpers in tests/support).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from langmem_tiers import MemoryConfig, TieredMemory
from langmem_tiers.journal.base import Namespace, NewRecord
from langmem_tiers.messages import Message

VOCAB = [f"{w}{i}" for i in range(60) for w in ("alpha", "bravo", "delta", "kilo", "lima", "oscar", "tango")]
COMMON = "the a we said about and then it was for my our trip meeting plan".split()


def line(rng: random.Random) -> str:
    words = [rng.choice(VOCAB) if rng.random() < 0.4 else rng.choice(COMMON) for _ in range(18)]
    return " ".join(words).capitalize() + "."


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def fill(memory: TieredMemory, size: int, rng: random.Random, vectors: bool) -> None:
    journal = memory.journal
    store = memory.recall.store if memory.recall else None
    dim = memory.recall.embedder.dimension if memory.recall and memory.recall.embedder else 0
    per_session = 100
    numpy_rng = np.random.default_rng(size)
    for s in range(max(size // per_session, 1)):
        ns = Namespace(f"filler-{s}", f"user-{s % 50}")
        ns_id = journal.namespace_id(ns)
        assert ns_id is not None
        texts = [line(rng) for _ in range(per_session)]
        messages = [Message("user" if i % 2 == 0 else "assistant", t) for i, t in enumerate(texts)]
        with journal.write(ns_id) as tx:
            stored = tx.insert_messages(messages, [len(t.split()) for t in texts], "filler")
            last = stored[-1].id or 0
            tx.set_window_start(last + 1)
            tx.set_summary("filler summary", 2, last)
            record_ids = tx.insert_records([
                NewRecord("turn", f"user: {stored[i].text}\nassistant: {stored[i + 1].text}",
                          (stored[i].id or 0, stored[i + 1].id or 0), created_at=time.time())
                for i in range(0, per_session, 2)])
        if vectors and store is not None and memory.recall is not None:
            raw = numpy_rng.standard_normal((len(record_ids), dim))
            vecs = (raw / np.linalg.norm(raw, axis=1, keepdims=True)).tolist()
            recs = journal.records(record_ids)
            store.upsert([memory.recall.vector_id(r.id) for r in recs], vecs, [r.text for r in recs],
                         [memory.recall._metadata(r) for r in recs])
        journal.outbox_done(journal.outbox(2 * len(record_ids)))


def measure(size: int, vectors: bool, samples: int, journal_url: str | None = None,
            chroma: str | None = None) -> dict[str, Any]:
    rng = random.Random(size)
    config = MemoryConfig(context_tokens=4000, window_tokens=2000, summary_tokens=400, recall_tokens=800)
    folder = Path(tempfile.mkdtemp(prefix="lt-scale-"))
    with TieredMemory.open(journal_url or folder, session_id="live", user_id="user-0", config=config,
                           embedder=None if vectors else False, chroma=chroma) as memory:
        t0 = time.perf_counter()
        fill(memory, size, rng, vectors)
        fill_s = time.perf_counter() - t0
        if memory.recall and memory.recall.embedder:
            memory.recall.embedder.embed(["warm up the model"])
        add_ms, context_ms, search_ms, user_ms = [], [], [], []
        for i in range(samples):
            t = time.perf_counter()
            memory.add("user" if i % 2 == 0 else "assistant", line(rng))
            add_ms.append((time.perf_counter() - t) * 1000)
        memory.flush()
        for _ in range(samples):
            question = f"What did we say about {rng.choice(VOCAB)} and {rng.choice(VOCAB)}?"
            t = time.perf_counter()
            memory.context(question)
            context_ms.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            memory.search(question, k=10)
            search_ms.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            memory.search(question, k=10, scope="user")
            user_ms.append((time.perf_counter() - t) * 1000)
        total = memory.journal.count_messages()
    return {
        "stored_messages": total, "vectors": vectors, "fill_s": round(fill_s, 1),
        "add_ms_p50": round(statistics.median(add_ms), 2), "add_ms_p95": round(pct(add_ms, 0.95), 2),
        "context_ms_p50": round(statistics.median(context_ms), 2), "context_ms_p95": round(pct(context_ms, 0.95), 2),
        "search_ms_p50": round(statistics.median(search_ms), 2), "search_ms_p95": round(pct(search_ms, 0.95), 2),
        "user_scope_search_ms_p50": round(statistics.median(user_ms), 2),
        "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "journal": "postgresql" if journal_url else "sqlite",
        "vectors_in": "chroma server" if chroma else "embedded chroma",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--no-vectors", action="store_true")
    parser.add_argument("--servers", action="store_true", help="PostgreSQL journal + Chroma server")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    if args.servers:
        import contextlib
        import sys

        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from tests.support.chroma_server import chroma_server
        from tests.support.postgres import postgres_server

        with contextlib.ExitStack() as stack:
            url = stack.enter_context(postgres_server())
            host, port = stack.enter_context(chroma_server(Path(tempfile.mkdtemp(prefix="lt-chroma-"))))
            run(args, url, f"http://{host}:{port}")
    else:
        run(args, None, None)


def run(args: argparse.Namespace, journal_url: str | None, chroma: str | None) -> None:
    rows = []
    print(json.dumps({"machine": f"{platform.machine()} {os.cpu_count()} cores, python {platform.python_version()}",
                      "date": time.strftime("%Y-%m-%d")}))
    for size in (int(s) for s in args.sizes.split(",")):
        if journal_url:  # a fresh schema per size: drop what the previous size left
            _reset_postgres(journal_url)
        row = measure(size, vectors=not args.no_vectors, samples=args.samples, journal_url=journal_url,
                      chroma=chroma)
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


def _reset_postgres(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP SCHEMA IF EXISTS langmem_tiers CASCADE")


if __name__ == "__main__":
    main()
