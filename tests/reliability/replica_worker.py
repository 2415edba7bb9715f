"""One replica of the three-replica test: PostgreSQL journal + a Chroma server, several users.

Run: ``python tests/reliability/replica_worker.py INDEX PG_URL CHROMA_URL COLLECTION OUT [--resume]``.

The replica opens one ``TieredMemory`` per user (``TieredMemory.open(pg_url, chroma=...)``) and
plays a fixed script: turns of two keyed messages, a search now and then, and at a fixed turn
``forget("user")`` for one user. Every call is logged to ``OUT/events-INDEX.jsonl`` (one line,
written through at once, so a SIGKILL loses nothing that was logged):

* ``intent`` before an add (its key), ``ack`` after it returned (key, message id, start and end);
* ``forget`` before and ``forgot`` after a ``forget("user")`` (start, end);
* ``search`` with the number of hits that belonged to another user (must be 0).

Every fifth add "loses" its answer (a simulated network failure after the commit) and is sent
again with the same key. With ``--resume`` (after the parent killed the replica) the replica
first re-sends every add it intended but never saw acknowledged, with the same key, then goes on
with the rest of its script. A :class:`CountingStore` logs every id the replica upserted into
Chroma to ``OUT/upserts-INDEX.jsonl``, so the parent can count rows indexed twice.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from langmem_tiers import MemoryConfig, TieredMemory, WordCounter  # noqa: E402
from langmem_tiers.recall.vector_store import ChromaStore  # noqa: E402
from tests.reliability.workers import hashed_embedder  # noqa: E402

USERS = ("ann", "bob", "cyd", "dee", "eve")
TURNS = 18
FORGETS = {0: (8, "dee"), 2: (11, "eve")}  # replica -> (turn, user it forgets before that turn)
TOPICS = ("copper", "harbor", "violet", "ledger", "quantum", "meadow")
LEASE_S = 10.0  # the outbox lease (default 120 s): short, so the test outlives a killed replica's claims
CONFIG = MemoryConfig(context_tokens=400, window_tokens=80, window_low_ratio=0.6, summary_tokens=40,
                      recall_tokens=100, summary_retry_base_s=0, summary_retry_max_s=0, index_batch_size=8)


def key_of(replica: int, turn: int, role: str) -> str:
    """Fixed width, so no key is a substring of another (the parent scans texts for keys)."""
    return f"k{replica}x{turn:03d}{role[0]}"


def user_of(replica: int, turn: int) -> str:
    return USERS[(turn * 3 + replica) % len(USERS)]


def text_of(replica: int, turn: int, role: str) -> str:
    user = user_of(replica, turn)
    topic = TOPICS[(turn + replica) % len(TOPICS)]
    verb = "asks about" if role == "user" else "answers about"
    return f"{key_of(replica, turn, role)} own{user} {verb} the {topic} plan"


class CountingStore(ChromaStore):
    """A Chroma server store that logs the ids it upserted (after the server answered)."""

    log_path: Path | None = None

    def upsert(self, ids: Sequence[str], embeddings: Sequence[Sequence[float]], documents: Sequence[str] | None,
               metadatas: Sequence[Any]) -> None:
        super().upsert(ids, embeddings, documents, metadatas)
        if self.log_path is not None:
            with open(self.log_path, "a", encoding="utf-8") as f:
                f.write(json.dumps({"ids": list(ids), "pid": os.getpid()}) + "\n")


class Log:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._f = open(path, "a", encoding="utf-8", buffering=1)

    def write(self, **event: Any) -> None:
        self._f.write(json.dumps(event) + "\n")
        self._f.flush()

    def close(self) -> None:
        self._f.close()


def read_events(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:  # the last line of a killed replica may be cut
            continue
    return out


def open_store(chroma_url: str, collection: str, log_path: Path) -> CountingStore:
    store = CountingStore.http(chroma_url, collection=collection)
    assert isinstance(store, CountingStore)
    store.log_path = log_path
    return store


def open_memories(pg_url: str, store: ChromaStore, replica: int) -> dict[str, TieredMemory]:
    memories = {}
    for user in USERS:
        memory = TieredMemory.open(pg_url, session_id=f"chat-r{replica}", user_id=user, chroma=store,
                                   embedder=hashed_embedder(), counter=WordCounter(), config=CONFIG)
        assert memory.recall is not None
        memory.recall.lease_s = LEASE_S
        memories[user] = memory
    return memories


def add(memories: dict[str, TieredMemory], log: Log, replica: int, turn: int, role: str, *,
        lose_answer: bool) -> None:
    user, key = user_of(replica, turn), key_of(replica, turn, role)
    log.write(ev="intent", key=key, user=user)
    t0 = time.time()
    first = memories[user].add(role, text_of(replica, turn, role), key=key)
    retried = False
    if lose_answer:  # the answer was lost on the way back: the caller sends the same add again
        again = memories[user].add(role, text_of(replica, turn, role), key=key)
        retried = True
        same = again.id == first.id
        first = again
    log.write(ev="ack", key=key, user=user, id=first.id, t0=t0, t1=time.time(), retried=retried,
              same_id=same if retried else None)


def search(memories: dict[str, TieredMemory], log: Log, replica: int, turn: int) -> None:
    user = user_of(replica, turn)
    topic = TOPICS[turn % len(TOPICS)]
    hits = memories[user].search(f"the {topic} plan", k=8, scope="user")
    foreign = [h.record_id for h in hits if h.namespace.user_id != user or f"own{user}" not in h.text]
    context = memories[user].context(query=f"{topic} plan")
    leaked = sum(1 for m in context.messages for other in USERS if other != user and f"own{other}" in m.text)
    log.write(ev="search", user=user, hits=len(hits), foreign=len(foreign) + leaked)


def run(replica: int, pg_url: str, chroma_url: str, collection: str, out: Path, resume: bool) -> None:
    events_path = out / f"events-{replica}.jsonl"
    earlier = read_events(events_path) if resume else []
    acked = {e["key"] for e in earlier if e.get("ev") == "ack"}
    intended = [e["key"] for e in earlier if e.get("ev") == "intent"]
    forgotten = {e["user"] for e in earlier if e.get("ev") == "forgot"}
    log = Log(events_path)
    store = open_store(chroma_url, collection, out / f"upserts-{replica}.jsonl")
    memories = open_memories(pg_url, store, replica)
    try:
        if resume:
            log.write(ev="resumed", pending=[k for k in intended if k not in acked])
        else:
            (out / f"ready-{replica}").touch()
            deadline = time.monotonic() + 120
            while not (out / "go").exists():
                if time.monotonic() > deadline:
                    raise TimeoutError("the parent never said go")
                time.sleep(0.02)
        n_adds = 0
        for turn in range(TURNS):
            plan = FORGETS.get(replica)
            if plan is not None and plan[0] == turn and plan[1] not in forgotten:
                log.write(ev="forget", user=plan[1], t=time.time())
                t0 = time.time()
                removed = memories[plan[1]].forget("user")
                log.write(ev="forgot", user=plan[1], t0=t0, t1=time.time(), removed=removed)
            for role in ("user", "assistant"):
                if key_of(replica, turn, role) in acked:
                    continue  # acknowledged before the kill; an unacknowledged one is re-sent with its key
                n_adds += 1
                add(memories, log, replica, turn, role, lose_answer=n_adds % 5 == 0)
            if turn % 4 == 3:
                search(memories, log, replica, turn)
            time.sleep(0.03)  # spread the script so replicas interleave and the kill lands mid-run
        for memory in memories.values():
            memory.flush()
        log.write(ev="done")
    finally:
        for memory in memories.values():
            memory.close()
        store.close()
        log.close()


if __name__ == "__main__":
    args = sys.argv[1:]
    run(int(args[0]), args[1], args[2], args[3], Path(args[4]), resume="--resume" in args)
