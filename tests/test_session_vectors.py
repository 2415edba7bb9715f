"""The in-process copy of a session's vectors agrees with Chroma as records come and go."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from langmem_tiers import MemoryConfig, TieredMemory, WordCounter
from langmem_tiers.embedders.callable import CallableEmbedder

DIM = 32


def _vectors(texts: list[str]) -> list[list[float]]:
    out = []
    for text in texts:
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
        v = np.random.default_rng(seed).standard_normal(DIM)
        out.append((v / np.linalg.norm(v)).tolist())
    return out


def _open(path: Path, session: str = "s") -> TieredMemory:
    config = MemoryConfig(context_tokens=400, window_tokens=60, summary_tokens=20, recall_tokens=100)
    return TieredMemory.open(path, session_id=session, user_id="u", config=config, counter=WordCounter(),
                             embedder=CallableEmbedder(_vectors, dimension=DIM, key="test:hash32"))


def _exact(memory: TieredMemory, query: str, k: int) -> list[int]:
    """Brute force over what Chroma holds for this session."""
    assert memory.recall is not None
    assert memory.recall.store is not None
    ids = [r.id for r in memory.journal.scoped_records([memory._ns_id])]
    found, matrix = memory.recall.store.embeddings([memory.recall.vector_id(i) for i in ids])
    scores = matrix @ np.asarray(_vectors([query])[0], dtype=np.float32)
    order = np.argsort(-scores)[:k]
    return [int(found[i].rsplit(":", 1)[1]) for i in order]


def test_session_search_is_exact_and_follows_changes(tmp_path: Path) -> None:
    with _open(tmp_path) as memory, memory.for_session("other") as other:
        for i in range(20):
            memory.add("user", f"fact number {i} about topic {i % 5}")
            memory.add("assistant", f"noted fact {i}")
            other.add("user", f"other session fact {i}")
        memory.flush()
        other.flush()
        cache = memory.recall._session_vectors  # type: ignore[union-attr]
        assert cache is not None
        ns = memory._ns_id
        query = _vectors(["fact number 3 about topic 3"])[0]
        top5 = [r for r, _ in cache.search(ns, memory.namespace, query, 5)]
        assert top5 == _exact(memory, "fact number 3 about topic 3", 5)
        # Additions are picked up incrementally, deletions by a rebuild, other sessions never leak in.
        for i in range(20, 26):
            memory.add("user", f"fact number {i} about topic {i % 5}")
        memory.flush()
        top8 = [r for r, _ in cache.search(ns, memory.namespace, query, 8)]
        assert top8 == _exact(memory, "fact number 3 about topic 3", 8)
        first = memory.journal.record_ids(ns)[0]
        memory.forget(first)
        after = [r for r, _ in cache.search(ns, memory.namespace, query, 50)]
        assert first not in after
        assert after == _exact(memory, "fact number 3 about topic 3", 50)
        other_ids = set(other.journal.record_ids(other._ns_id))
        assert not other_ids & set(after)


def test_a_record_embedded_later_by_another_process_is_found(tmp_path: Path) -> None:
    """Handle A copies the session's vectors before a record is embedded; handle B (standing in for
    another process: its own journal connection and recall index on the same Chroma store)
    embeds it; A's next query must see it, though A's record count and largest id did not move."""
    a = _open(tmp_path)
    assert a.recall is not None
    b = TieredMemory.open(tmp_path, session_id="s", user_id="u", config=a.config, counter=WordCounter(),
                          embedder=a.recall.embedder, chroma=a.recall.store)
    try:
        a.add("user", "alpha beta gamma")
        a.add("assistant", "ok")
        a.flush()
        a.search("alpha", k=1, scope="session")  # A's copy is current
        a.add("user", "delta epsilon zeta unique words")
        a.add("assistant", "noted")
        a.search("delta epsilon zeta unique words", k=5, scope="session")  # copied while not embedded yet
        assert b.recall is not None
        b.flush()  # B embeds the new turn; A is not told
        hits = a.search("delta epsilon zeta unique words", k=5, scope="session")
        mine = next(h for h in hits if "delta" in h.text)
        assert mine.parts["vector_rank"] is not None
    finally:
        b.close()
        a.close()


def test_records_added_while_a_copy_is_read_are_fetched_once(tmp_path: Path) -> None:
    """Another process adds a turn between the copy's record count and its id list (a race the
    four-process PostgreSQL test hit): the next incremental fetch must not ask Chroma for an id twice
    (Chroma refuses the whole request, and recall silently fell back to keywords)."""
    a = _open(tmp_path)
    assert a.recall is not None
    b = TieredMemory.open(tmp_path, session_id="s", user_id="u", config=a.config, counter=WordCounter(),
                          embedder=a.recall.embedder, chroma=a.recall.store)
    try:
        for i in range(3):
            a.add("user", f"first fact {i} about rivers")
            a.add("assistant", f"noted river {i}")
        a.flush()
        cache = a.recall._session_vectors
        assert cache is not None
        real_stats = cache.journal.record_stats

        def stats_then_race(ns_id: int) -> tuple[int, int]:
            stats = real_stats(ns_id)
            b.add("user", "raced fact about mountains")  # lands after the count, before the id list
            b.add("assistant", "noted mountains")  # not embedded yet: the copy lists it as missing
            return stats

        cache.journal.record_stats = stats_then_race  # type: ignore[method-assign]
        try:
            a.search("rivers", k=3, scope="session")
        finally:
            cache.journal.record_stats = real_stats  # type: ignore[method-assign]
        a.add("user", "later fact about deserts")
        a.add("assistant", "noted deserts")
        a.flush()
        hits = a.search("raced fact about mountains", k=8, scope="session")
        assert a.recall.last_error is None
        assert any("mountains" in h.text and h.parts["vector_rank"] is not None for h in hits)
        assert all(h.parts["vector_rank"] is not None for h in hits)
    finally:
        b.close()
        a.close()
