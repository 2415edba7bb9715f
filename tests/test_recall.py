"""Recall: real local embedder + embedded Chroma for a few tests, keyword-only elsewhere."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from langmem_tiers import TieredMemory, WordCounter
from langmem_tiers.journal.base import Scope

from .conftest import SMALL_CONFIG as CONFIG

TOPICS = [
    ("My dog Rex loves chasing tennis balls in the park every morning", "Rex is a happy dog"),
    ("I am allergic to peanuts so please avoid them in recipes", "Noted, no peanuts"),
    ("Our flight to Tokyo leaves on the 3rd of June at 9am", "Have a nice trip to Japan"),
    ("The quarterly budget review moved to Thursday afternoon", "I will update the calendar"),
    ("filler one two three four five six seven eight nine ten", "ok filler"),
    ("more filler words to push older turns out of the window now", "ok more filler"),
    ("yet another filler turn with plenty of words in it for size", "ok"),
]


def converse(memory: TieredMemory, pad: int = 12, tag: str = "") -> None:
    for user, assistant in TOPICS:
        memory.add("user", user + " " + " ".join(f"{tag}pad{i}" for i in range(pad)))
        memory.add("assistant", assistant)


def expire_outbox_backoff(memory: TieredMemory) -> None:
    """Skip the outbox's retry backoff (1 s, 2 s, ...) instead of sleeping through it."""
    with memory.journal._txn() as db:  # type: ignore[attr-defined]
        db.execute("UPDATE outbox SET retry_at=0")


def open_vector(path: Path, embedder: Any, session_id: str = "s1", **kw: Any) -> TieredMemory:
    return TieredMemory.open(path, session_id=session_id, embedder=embedder, counter=WordCounter(), config=CONFIG, **kw)


def test_search_finds_evicted_turn_by_paraphrase(tmp_path: Path, local_embedder: Any) -> None:
    with open_vector(tmp_path, local_embedder) as memory:
        converse(memory)
        memory.flush()
        assert memory.stats().index_pending == 0
        hits = memory.search("the puppy and its toys", k=3)
        assert hits
        assert "Rex" in hits[0].text
        assert hits[0].parts["vector_rank"] == 1.0
        hits = memory.search("food intolerance", k=2)
        assert "peanuts" in hits[0].text
        assert hits[0].message_ids  # traced to the peanut turn (the turn, or a memory extracted from it)
        assert set(hits[0].message_ids) <= {m.id for m in memory.messages()[2:4]}


def test_scope_session_vs_user(make_memory: Any, tmp_path: Path) -> None:
    a = make_memory("a", user_id="u1")
    b = make_memory("b", user_id="u1")
    c = make_memory("c", user_id="u2")
    for memory in (a, b, c):
        converse(memory, tag=memory.namespace.session_id)  # distinct texts: near-duplicates are merged
        memory.flush()
    assert {h.namespace.session_id for h in a.search("Tokyo flight", k=10)} == {"a"}
    assert {h.namespace.session_id for h in a.search("Tokyo flight", k=10, scope="user")} == {"a", "b"}
    assert {h.namespace.session_id for h in c.search("Tokyo flight", k=10, scope="user")} == {"c"}


ids = st.text(
    st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), min_size=1, max_size=12
) | st.sampled_from(["..", "../x", "a/b", "a'b", 'a"b', "x%", "*", "Ünïcødé", "会话", " ", "a\\b", "$eq"])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ids, ids, ids)
def test_namespaces_are_isolated_keyword_only(s1: str, s2: str, user: str) -> None:
    if s1 == s2:
        return
    with (
        tempfile.TemporaryDirectory() as folder, TieredMemory.open(
            folder, session_id=s1, user_id=user, embedder=False, counter=WordCounter(), config=CONFIG
        ) as m1,
        TieredMemory.open(
            folder, session_id=s2, user_id=user + "x", embedder=False, counter=WordCounter(), config=CONFIG
        ) as m2,
    ):
        converse(m1)
        m1.flush()
        m2.add("user", "hello there")
        assert m1.search("Tokyo flight", k=5)
        assert m2.search("Tokyo flight", k=5) == []
        assert m2.search("Tokyo flight", k=5, scope="user") == []
        assert all(h.namespace.session_id == s1 for h in m1.search("dog", k=5, scope="user"))


@settings(
    max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(ids, ids)
def test_namespaces_are_isolated_in_chroma(local_embedder: Any, s1: str, s2: str) -> None:
    if s1 == s2:
        return
    with tempfile.TemporaryDirectory() as folder:
        with open_vector(Path(folder), local_embedder, session_id=s1) as m1:
            converse(m1)
            m1.flush()
            store = m1.recall.store
            assert store is not None
        with open_vector(Path(folder), local_embedder, session_id=s2) as m2:
            m2.add("user", "hello there")
            assert m2.search("the puppy and its toys", k=5) == []
            where = m2.recall.where(Scope("session", m2.namespace))
            assert m2.recall.store.count(where) == 0


def test_remember_kinds_and_pinned_in_context(make_memory: Any) -> None:
    memory = make_memory()
    pref = memory.remember("User prefers metric units", kind="preference")
    memory.remember("User's name is Ada Lovelace", kind="fact", pinned=True, tags=["identity"])
    memory.remember("Met at the Paris conference about units", kind="event")
    memory.add("user", "hello")
    hits = memory.search("units", k=5, kinds=["preference"])
    assert [h.record_id for h in hits] == [pref]
    assert {h.kind for h in memory.search("units", k=5)} == {"preference", "event"}
    assert memory.search("Ada", k=5, where={"tags": "identity"})[0].pinned
    ctx = memory.context()
    assert "Pinned facts:\n- User's name is Ada Lovelace" in ctx.messages[0].text
    with pytest.raises(ValueError):
        memory.remember("x", kind="turn")
    with pytest.raises(ValueError):
        memory.remember("   ")


def test_outbox_retry_with_failing_embedder(tmp_path: Path, local_embedder: Any) -> None:
    from langmem_tiers.embedders.callable import CallableEmbedder

    service = {"down": True}

    def flaky(texts: list[str]) -> list[list[float]]:
        if service["down"]:
            raise ConnectionError("embedding service down")
        return local_embedder.embed(texts)

    embedder = CallableEmbedder(flaky, dimension=local_embedder.dimension, key="test:flaky-minilm")
    with open_vector(tmp_path, embedder) as memory:
        converse(memory)
        memory.flush()
        stats = memory.stats()
        assert stats.index_pending > 0
        assert "embedding service down" in (stats.last_index_error or "")
        # Keyword recall still works while vectors are pending.
        assert memory.search("Tokyo", k=1)
        service["down"] = False
        expire_outbox_backoff(memory)
        memory.flush()
        assert memory.stats().index_pending == 0
        assert memory.stats().last_index_error is None
        assert "Rex" in memory.search("the puppy and its toys", k=1)[0].text


def test_one_text_the_embedder_rejects_never_blocks_the_others(tmp_path: Path, local_embedder: Any) -> None:
    """A poison record fails on its own; the rest of its batch (other users' facts too) gets vectors."""
    from langmem_tiers.embedders.callable import CallableEmbedder

    def picky(texts: list[str]) -> list[list[float]]:
        if any("POISON" in t for t in texts):
            raise ValueError("input too long for this model")
        return local_embedder.embed(texts)

    embedder = CallableEmbedder(picky, dimension=local_embedder.dimension, key="test:picky-minilm")
    with open_vector(tmp_path, embedder) as memory:
        memory.remember("POISON " + "x " * 50, kind="note")
        converse(memory)
        other = memory.for_session("s2", user_id="someone-else")
        other.remember("Someone else likes green tea", kind="preference")
        memory.flush()
        assert memory.stats().index_pending == 1  # only the poison record waits
        assert "input too long" in (memory.stats().last_index_error or "")
        assert memory.search("the puppy and its toys", k=1)[0].parts["vector_rank"] is not None
        assert other.stats().index_pending == 0
        other.close()


def test_outbox_retry_with_failing_chroma(tmp_path: Path, local_embedder: Any, collection_name: str) -> None:
    from langmem_tiers.recall.vector_store import ChromaStore

    class FlakyStore(ChromaStore):
        down = True

        def upsert(self, *args: Any, **kwargs: Any) -> Any:
            if self.down:
                raise ConnectionError("chroma down")
            return super().upsert(*args, **kwargs)

    store = FlakyStore.persistent(tmp_path / "vectors", collection=collection_name)
    with open_vector(tmp_path, local_embedder, chroma=store) as memory:
        converse(memory)
        memory.flush()
        assert memory.stats().index_pending > 0
        assert "chroma down" in (memory.stats().last_index_error or "")
        store.down = False
        expire_outbox_backoff(memory)
        memory.flush()
        assert memory.stats().index_pending == 0
        where = memory.recall.where(Scope("session", memory.namespace))
        assert store.count(where) == memory.stats().records


def test_reindex_matches_incremental(tmp_path: Path, local_embedder: Any) -> None:
    queries = ["the puppy and its toys", "allergy", "travel plans", "meeting schedule"]
    with open_vector(tmp_path, local_embedder) as memory:
        converse(memory)
        memory.flush()
        before = [[(h.record_id, h.text) for h in memory.search(q, k=3)] for q in queries]
        assert memory.reindex() == memory.stats().records
        after = [[(h.record_id, h.text) for h in memory.search(q, k=3)] for q in queries]
        assert before == after


def test_clear_drops_every_store(tmp_path: Path, local_embedder: Any) -> None:
    with open_vector(tmp_path, local_embedder) as memory, open_vector(tmp_path, local_embedder, "other") as other:
        converse(memory)
        converse(other)
        memory.remember("User likes tea", kind="preference")
        memory.flush()
        other.flush()
        where = memory.recall.where(Scope("session", memory.namespace))
        assert memory.recall.store.count(where) > 0
        memory.clear()
        stats = memory.stats()
        assert (stats.messages, stats.records, stats.window_messages, stats.summary_cursor) == (0, 0, 0, 0)
        assert memory.summary == ""
        assert memory.journal.keyword_search("Tokyo", [memory._ns_id], 10) == []
        assert memory.recall.store.count(where) == 0
        assert memory.search("Tokyo flight", k=5) == []
        # The other session is untouched.
        assert other.stats().messages == 2 * len(TOPICS)
        assert other.search("Tokyo flight", k=1)
