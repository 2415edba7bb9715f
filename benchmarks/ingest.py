"""Ingest through the public API against the embedding floor, in one run (issue 15, target 3).

    .venv/bin/python benchmarks/ingest.py --chat 2000 \\
        --data ../shared/data/longmemeval/longmemeval_s_dev.json --haystacks 2

Two workloads, each ingested into a fresh embedded store (SQLite + Chroma) with the real local
embedder on the CPU: (a) ``--chat`` short chat lines (user/assistant turns of about 18 words, in
sessions of 100 messages), (b) ``--haystacks`` LongMemEval haystacks (long turns), one session
per dataset session. Ingest is what an application does: ``add()`` per message and ``flush()`` at
the end of each session (the evaluation harness does the same); the background indexer embeds
while adds go on.

The floor is the embedder alone on exactly the texts the core embedded during that ingest (the
recall records: whole turns, long ones cut into chunks by langmem_tiers.recall.units; captured
from the embedder's calls), in one call, at the best batch size: several batch sizes are tried
on the first ``--sweep`` texts, and the best one embeds them all. The core's own calls are also
replayed alone (same batches, same sizes) to split "the embedder as the core calls it" from "the
rest of ingest".

Where the time goes is measured by counters: the benchmark wraps, on the live objects, the
embedder's ``embed`` (and inside it the model's ``tokenize`` and ``encode`` and the long-text
splitter), the Chroma store's ``upsert``, the journal's write transactions and outbox calls, the
token counter, and the chunker; each counter sums wall time over all threads (the background
indexer overlaps adds, so counters can add up to more than the wall time). The wrappers cost a
few microseconds a call.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale import line  # the scale benchmark's filler lines: one vocabulary

from langmem_tiers import MemoryConfig, TieredMemory
from langmem_tiers.embedders.local import LocalEmbedder
from langmem_tiers.recall import units

BATCH_SIZES = (8, 16, 32, 64, 128, 256)


class Counters:
    """Wall seconds and calls per named part, summed over threads."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._lock = threading.Lock()

    def add(self, name: str, seconds: float) -> None:
        with self._lock:
            self.seconds[name] += seconds
            self.calls[name] += 1

    def wrap(self, obj: Any, attr: str, name: str, undo: list[Callable[[], None]]) -> None:
        original = getattr(obj, attr)

        def timed(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.add(name, time.perf_counter() - t)

        setattr(obj, attr, timed)
        undo.append(lambda: setattr(obj, attr, original))

    def wrap_cm(self, obj: Any, attr: str, name: str, undo: list[Callable[[], None]]) -> None:
        """A method returning a context manager: time from the call to the end of the with block."""
        original = getattr(obj, attr)

        @contextlib.contextmanager
        def timed(*args: Any, **kwargs: Any) -> Iterator[Any]:
            t = time.perf_counter()
            try:
                with original(*args, **kwargs) as value:
                    yield value
            finally:
                self.add(name, time.perf_counter() - t)

        setattr(obj, attr, timed)
        undo.append(lambda: setattr(obj, attr, original))


def chat_sessions(messages: int, per_session: int = 100) -> list[list[tuple[str, str]]]:
    rng = random.Random(15)
    out: list[list[tuple[str, str]]] = []
    for start in range(0, messages, per_session):
        n = min(per_session, messages - start)
        out.append([("user" if i % 2 == 0 else "assistant", line(rng)) for i in range(n)])
    return out


def longmemeval_sessions(path: Path, haystacks: int) -> list[list[tuple[str, str]]]:
    from langmem_tiers.eval.datasets import iter_longmemeval

    out: list[list[tuple[str, str]]] = []
    for haystack in iter_longmemeval(path, limit=haystacks):
        out.extend([[(m.role, m.text) for m in session if m.text.strip()] for session in haystack.sessions])
    return [s for s in out if s]


def ingest(sessions: list[list[tuple[str, str]]], embedder: LocalEmbedder) -> dict[str, Any]:
    """Add every message through the API, flush per session; returns timings, counters and the texts embedded."""
    counters = Counters()
    embedded: list[list[str]] = []
    undo: list[Callable[[], None]] = []
    st = embedder._st()
    original_embed = embedder.embed

    def capturing_embed(texts: Sequence[str]) -> list[list[float]]:
        embedded.append(list(texts))
        return original_embed(texts)

    embedder.embed = capturing_embed  # type: ignore[method-assign]
    undo.append(lambda: setattr(embedder, "embed", original_embed))
    counters.wrap(embedder, "embed", "embedder.embed (all of it)", undo)
    counters.wrap(embedder, "_split", "  long-text splitter (tokenizes texts > 254 bytes)", undo)
    counters.wrap(st, "encode", "  model encode (tokenize + forward)", undo)
    if hasattr(st, "tokenize"):
        counters.wrap(st, "tokenize", "    model tokenize", undo)
    counters.wrap(units, "chunk_words", "chunk_words (recall units)", undo)
    config = MemoryConfig(recall_scope="user")
    folder = Path(tempfile.mkdtemp(prefix="lt-ingest-"))
    add_s = flush_s = 0.0
    records = 0
    with TieredMemory.open(folder, session_id="setup", user_id="u", config=config, embedder=embedder) as root:
        journal = root.journal
        counters.wrap_cm(journal, "write", "journal write transactions (add path)", undo)
        for attr in ("claim_outbox", "outbox_done", "records"):
            counters.wrap(journal, attr, "journal outbox/record reads (indexer)", undo)
        assert root.recall is not None
        assert root.recall.store is not None
        counters.wrap(root.recall.store, "upsert", "chroma upsert", undo)
        counters.wrap(root.counter, "count_message", "token counter (tiktoken)", undo)
        t0 = time.perf_counter()
        for i, session in enumerate(sessions):
            memory = root.for_session(f"s{i}", user_id="u")
            t = time.perf_counter()
            for role, text in session:
                memory.add(role, text)
            t1 = time.perf_counter()
            memory.flush()
            add_s += t1 - t
            flush_s += time.perf_counter() - t1
            records += journal.count_records(memory._ns_id)
            memory.close()
        wall = time.perf_counter() - t0
    for u in reversed(undo):
        u()
    return {"wall_s": wall, "add_s": add_s, "flush_s": flush_s, "records": records,
            "messages": sum(len(s) for s in sessions), "embedded": embedded,
            "counters": {k: (round(v, 2), counters.calls[k]) for k, v in sorted(counters.seconds.items())}}


def floor(texts: list[str], calls: list[list[str]], embedder: LocalEmbedder, sweep: int) -> dict[str, Any]:
    """The embedder alone on the same texts: a batch-size sweep, the best one on all, and the core's calls replayed."""
    sample = texts[:sweep]
    by_batch: dict[int, float] = {}
    for bs in BATCH_SIZES:
        emb = LocalEmbedder(embedder._model, batch_size=bs, device=embedder.device)
        t = time.perf_counter()
        emb.embed(sample)
        by_batch[bs] = time.perf_counter() - t
    best = min(by_batch, key=lambda b: by_batch[b])
    emb = LocalEmbedder(embedder._model, batch_size=best, device=embedder.device)
    t = time.perf_counter()
    emb.embed(texts)
    floor_s = time.perf_counter() - t
    t = time.perf_counter()
    for call in calls:
        embedder.embed(call)
    replay_s = time.perf_counter() - t
    return {"sweep_texts": len(sample), "sweep_s_by_batch": {b: round(s, 2) for b, s in by_batch.items()},
            "best_batch": best, "floor_s": floor_s, "replay_s": replay_s}


def report(name: str, sessions: list[list[tuple[str, str]]], embedder: LocalEmbedder, sweep: int) -> dict[str, Any]:
    got = ingest(sessions, embedder)
    calls = got.pop("embedded")
    texts = [t for call in calls for t in call]
    words = sum(len(t.split()) for t in texts)
    fl = floor(texts, calls, embedder, sweep)
    row = {
        "workload": name, "messages": got["messages"], "records": got["records"], "texts_embedded": len(texts),
        "words_per_text": round(words / max(len(texts), 1), 1), "embed_calls": len(calls),
        "texts_per_call": round(len(texts) / max(len(calls), 1), 1),
        "ingest_s": round(got["wall_s"], 2), "add_s": round(got["add_s"], 2), "flush_s": round(got["flush_s"], 2),
        "messages_per_s": round(got["messages"] / got["wall_s"], 1),
        "floor_s": round(fl["floor_s"], 2), "best_batch": fl["best_batch"], "sweep_texts": fl["sweep_texts"],
        "sweep_s_by_batch": fl["sweep_s_by_batch"], "core_calls_replayed_s": round(fl["replay_s"], 2),
        # target 3 reads "ingest at >= 0.9 of the floor": floor time / ingest time, as a speed ratio
        "speed_ratio_floor_over_ingest": round(fl["floor_s"] / got["wall_s"], 3),
        "ingest_over_floor": round(got["wall_s"] / fl["floor_s"], 2),
        "counters_s_calls": got["counters"],
    }
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chat", type=int, default=2000, help="short chat messages to ingest (0: none)")
    parser.add_argument("--data", type=Path, default=None, help="LongMemEval JSON (longmemeval_s_dev.json)")
    parser.add_argument("--haystacks", type=int, default=2)
    parser.add_argument("--sweep", type=int, default=256, help="texts the batch-size sweep embeds")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    embedder = LocalEmbedder(device="cpu")
    embedder.embed(["warm up the model"])
    rows = []
    if args.chat:
        rows.append(report(f"chat lines ({args.chat} messages)", chat_sessions(args.chat), embedder, args.sweep))
    if args.data is not None:
        sessions = longmemeval_sessions(args.data, args.haystacks)
        rows.append(report(f"LongMemEval ({args.haystacks} haystacks)", sessions, embedder, args.sweep))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
