"""Crash child: ingests a scripted conversation until the parent SIGKILLs it.

Run as ``python child_ingest.py PATH --run N --mode kw|chroma|sqlite [--seed S] [--verify-only]``
(``sqlite``: vectors in SqliteVectorStore instead of embedded Chroma).

Protocol on stdout (one line each, flushed):

* ``CHECK <json>``: startup check after reopening (chroma and sqlite modes: outbox drained into the
  vector store, vector rows vs journal records, whether ``reindex()`` was needed,
  whether recall answers).
* ``READY``: ingestion starts; the parent picks its random kill moment after this.
* ``PHASE add|flush``: what the child is about to do (so the parent knows where a kill landed).
* ``ACK <id> <tag>``: ``add_messages`` returned, the message with journal id ``<id>`` and
  content tag ``<tag>`` is acknowledged (committed). Printed only after the call returns.

The conversation: user/assistant turns (some with a tool call and its result in one
atomic batch), with a ``flush()`` every few turns. A small sleep in the summarizer and
the embedder widens the windows in which a kill lands mid-summary or mid-indexing.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import sys
import time

from workers import LEASE_S  # run as a script from this folder
from workers import hashed_vectors as shared_hashed_vectors

SESSION = "crash"
VECTOR_MODES = ("chroma", "sqlite")
USER = "u-crash"
WORDS = ("apple", "river", "quantum", "ledger", "violet", "harbor", "engine", "meadow", "copper", "signal")


def hashed_vectors(texts: list[str]) -> list[list[float]]:
    """The shared test embedder, slowed a little so kills land during indexing too."""
    time.sleep(0.01)
    return shared_hashed_vectors(texts)


def build(path: str, mode: str):  # type: ignore[no-untyped-def]
    from langmem_tiers import MemoryConfig, TieredMemory, WordCounter
    from langmem_tiers.summarizers.extractive import ExtractiveSummarizer

    class SlowSummarizer:
        def __init__(self) -> None:
            self.inner = ExtractiveSummarizer()

        def summarize(self, request):  # type: ignore[no-untyped-def]
            time.sleep(0.01)
            return self.inner.summarize(request)

        async def asummarize(self, request):  # type: ignore[no-untyped-def]
            return self.summarize(request)

    config = MemoryConfig(context_tokens=400, window_tokens=100, window_low_ratio=0.6, summary_tokens=40,
                          recall_tokens=100, summary_retry_base_s=0, summary_retry_max_s=0, index_batch_size=8,
                          index_lease_s=LEASE_S, embedded_vectors="sqlite" if mode == "sqlite" else None)
    embedder: object = False
    if mode in VECTOR_MODES:
        from langmem_tiers.embedders.callable import CallableEmbedder

        embedder = CallableEmbedder(hashed_vectors, dimension=16, key="test:hashed16")
    return TieredMemory.open(path, session_id=SESSION, user_id=USER, config=config, counter=WordCounter(),
                             summarizer=SlowSummarizer(), embedder=embedder)  # type: ignore[arg-type]


def emit(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def startup_check(memory, mode: str, path: str) -> dict:  # type: ignore[no-untyped-def]
    """Drain what the previous (killed) child left pending and check recall answers."""
    from langmem_tiers.journal.base import Scope

    info: dict = {"mode": mode, "messages": memory.journal.count_messages(memory._ns_id)}
    # Rows the killed child had claimed stay leased to it until its lease runs out (a dead holder looks
    # like a slow one); wait that out, so the check does not hang on how fast this child started.
    with sqlite3.connect(f"{path}/journal.sqlite3", timeout=30) as db:
        until = db.execute("SELECT max(claimed_until) FROM outbox").fetchone()[0]
    if until is not None and until > time.time():
        time.sleep(until - time.time() + 0.05)
    memory.flush()
    records = memory.journal.scoped_records([memory._ns_id])
    info["records"] = len(records)
    info["outbox_after_flush"] = memory.journal.outbox_count()
    info["reindexed"] = False
    if mode in VECTOR_MODES:
        recall = memory.recall
        where = recall.where(Scope("session", memory.namespace))
        info["vectors_before"] = recall.store.count(where=where)
        if info["vectors_before"] != len(records):
            # A kill mid-write can leave the vector store behind the journal: the journal is the truth.
            memory.reindex()
            info["reindexed"] = True
        info["vectors"] = recall.store.count(where=where)
        ids = {recall.vector_id(r.id) for r in records}
        info["vector_ids_match"] = {v.id for v in recall.store.get(sorted(ids))} == ids
    if records:
        word = records[-1].text.split()[2] if len(records[-1].text.split()) > 2 else records[-1].text
        info["recall_hits"] = len(memory.search(word, k=3))
    return info


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("path")
    parser.add_argument("--run", type=int, required=True)
    parser.add_argument("--mode", choices=("kw", *VECTOR_MODES), default="kw")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--verify-only", action="store_true")
    parser.add_argument("--max-turns", type=int, default=100_000)
    args = parser.parse_args()
    rng = random.Random(args.seed * 1000 + args.run)
    memory = build(args.path, args.mode)
    emit("CHECK " + json.dumps(startup_check(memory, args.mode, args.path)))
    if args.verify_only:
        memory.close()
        return
    emit("READY")
    for turn in range(args.max_turns):
        tag = f"r{args.run}t{turn}"
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12)))
        batches: list[list[dict]] = [[{"role": "user", "content": f"{tag}u {words}"}]]
        if rng.random() < 0.2:
            call = {"id": f"call-{tag}", "name": "lookup", "arguments": json.dumps({"q": words[:20]})}
            batches.append([
                {"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "tool", "content": f"{tag}t result {words}", "tool_call_id": f"call-{tag}"},
            ])
        batches.append([{"role": "assistant", "content": f"{tag}a noted {words}"}])
        for batch in batches:
            emit("PHASE add")
            stored = memory.add_messages(batch)
            for raw, message in zip(batch, stored):
                emit(f"ACK {message.id} {raw['content'].split()[0] if raw['content'] else tag + 'c'}")
        if rng.random() < 0.25:
            emit("PHASE flush")
            memory.flush()
            emit("PHASE add")
    memory.close()


if __name__ == "__main__":
    main()
