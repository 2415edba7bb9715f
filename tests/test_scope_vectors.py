"""The per-scope vector indexes agree with the vector store as records come and go, exact and HNSW alike,
over both embedded stores (Chroma, and vectors in SQLite)."""

from __future__ import annotations

import hashlib
import logging
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from langmem_tiers import MemoryConfig, TieredMemory, WordCounter
from langmem_tiers.embedders.callable import CallableEmbedder
from langmem_tiers.errors import ConfigError
from langmem_tiers.journal.base import Scope
from langmem_tiers.recall import scope_vectors
from langmem_tiers.recall.scope_vectors import HOT_WINDOW, ScopeVectors, _CompactRows, _ExactRows, _HnswRows

DIM = 32
EMBEDDED_VECTORS: str | None = None  # the store _open() uses (None: Chroma); every test runs on each


@pytest.fixture(autouse=True, params=[None, "sqlite"], ids=["chroma", "sqlite"])
def embedded_vectors(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str | None:
    monkeypatch.setattr(sys.modules[__name__], "EMBEDDED_VECTORS", request.param)
    return request.param  # type: ignore[no-any-return]


def _vectors(texts: list[str]) -> list[list[float]]:
    out = []
    for text in texts:
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
        v = np.random.default_rng(seed).standard_normal(DIM)
        out.append((v / np.linalg.norm(v)).tolist())
    return out


def _open(path: Path, session: str = "s") -> TieredMemory:
    config = MemoryConfig(context_tokens=400, window_tokens=60, summary_tokens=20, recall_tokens=100,
                          embedded_vectors=EMBEDDED_VECTORS)  # type: ignore[arg-type]
    return TieredMemory.open(path, session_id=session, user_id="u", config=config, counter=WordCounter(),
                             embedder=CallableEmbedder(_vectors, dimension=DIM, key="test:hash32"))


def _other_handle(path: Path, a: TieredMemory) -> TieredMemory:
    """A second memory on A's folder with its own journal connection and recall index (standing in for
    another process): on A's Chroma store (one process per embedded Chroma folder), or its own SQLite
    vector store connection."""
    assert a.recall is not None
    return TieredMemory.open(path, session_id="s", user_id="u", config=a.config, counter=WordCounter(),
                             embedder=a.recall.embedder, chroma=a.recall.store if EMBEDDED_VECTORS is None else None)


def _ids_counted(cache: ScopeVectors) -> None:
    """Each entry's count of known ids (kept as they are set, for its size) is what its arrays hold."""
    for entry in cache._cache.values():
        held = sum(len(ids) for ids in entry.known.values())
        assert entry.known.count == held
        assert entry.nbytes == entry.rows.nbytes + 8 * held  # the size the bound sees: every known id, 8 bytes


def _cache(memory: TieredMemory) -> ScopeVectors:
    assert memory.recall is not None
    cache = memory.recall._scope_vectors
    assert cache is not None
    return cache


def _small_index(memory: TieredMemory, **kwargs: Any) -> ScopeVectors:
    """Swap in an index whose entries become HNSW graphs from ``hnsw_from`` vectors (default 16)."""
    assert memory.recall is not None
    assert memory.recall.store is not None
    kwargs.setdefault("hnsw_from", 16)
    cache = ScopeVectors(memory.journal, memory.recall.store, memory.recall.vector_id, memory.recall._record_id,
                         **kwargs)
    memory.recall._scope_vectors = cache
    return cache


def _built(cache: ScopeVectors, ns_ids: list[int]) -> None:
    """A large scope's first search queues its graph and answers ``None`` (Chroma answers); wait for it."""
    assert cache.search(ns_ids, _vectors(["warm up"])[0], 1) is None
    assert cache.wait_builds(timeout=60)


def _held_builds(cache: ScopeVectors) -> tuple[threading.Event, threading.Event, list[frozenset[int]]]:
    """Hold every background build at its start until the test sets ``release``; ``started`` is set
    when one is held, and the scope keys of the builds are listed."""
    started, release = threading.Event(), threading.Event()
    keys: list[frozenset[int]] = []
    real = cache._build

    def held(build: Any, guard: Any) -> None:
        keys.append(build.key)
        started.set()
        assert release.wait(60)
        real(build, guard)

    cache._build = held  # type: ignore[method-assign]
    return started, release, keys


def _fill(memory: TieredMemory, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        memory.add("user", f"planted fact {i} about place {i * 7}")
        memory.add("assistant", f"ok {i}")
    memory.flush()


def _planted(i: int) -> list[float]:
    return _vectors([f"user: planted fact {i} about place {i * 7}\nassistant: ok {i}"])[0]


def _exact(memory: TieredMemory, ns_ids: list[int], query: str, k: int) -> list[int]:
    """Brute force over what Chroma holds for these namespaces."""
    assert memory.recall is not None
    assert memory.recall.store is not None
    ids = [r.id for r in memory.journal.scoped_records(ns_ids)]
    found, matrix = memory.recall.store.embeddings([memory.recall.vector_id(i) for i in ids])
    scores = matrix @ np.asarray(_vectors([query])[0], dtype=np.float32)
    order = np.argsort(-scores)[:k]
    return [int(found[i].rsplit(":", 1)[1]) for i in order]


def _top(cache: ScopeVectors, ns_ids: list[int], query: str, k: int) -> list[int]:
    found = cache.search(ns_ids, _vectors([query])[0], k)
    assert found is not None
    return [r for r, _ in found]


def _the_graph_serves(memory: TieredMemory, cache: ScopeVectors, ns: list[int], victim: int, planted: int) -> None:
    """The scope's one entry is a graph now: every live record found, the forgotten one not, a planted record's
    own text ranks it first."""
    (entry,) = cache._cache.values()
    assert isinstance(entry.rows, _HnswRows)
    found = _top(cache, ns, "anything", 50)
    assert set(found) == set(memory.journal.record_ids(ns[0]))
    assert victim not in found
    query = f"user: planted fact {planted} about place {planted * 7}\nassistant: ok {planted}"
    assert _top(cache, ns, query, 3)[0] == _exact(memory, ns, query, 1)[0]


def _count_fetches(cache: ScopeVectors) -> list[int]:
    """Instrument the real store: the number of ids of each ``embeddings`` call."""
    calls: list[int] = []
    real = cache.store.embeddings

    def counted(ids: Any) -> Any:
        calls.append(len(ids))
        return real(ids)

    cache.store = _Wrapped(cache.store, embeddings=counted)  # type: ignore[assignment]
    return calls


class _Wrapped:
    def __init__(self, inner: Any, **overrides: Any) -> None:
        self._inner = inner
        self.__dict__.update(overrides)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_session_search_is_exact_and_follows_changes(tmp_path: Path) -> None:
    with _open(tmp_path) as memory, memory.for_session("other") as other:
        for i in range(20):
            memory.add("user", f"fact number {i} about topic {i % 5}")
            memory.add("assistant", f"noted fact {i}")
            other.add("user", f"other session fact {i}")
        memory.flush()
        other.flush()
        cache = _cache(memory)
        ns = [memory._ns_id]
        query = "fact number 3 about topic 3"
        assert _top(cache, ns, query, 5) == _exact(memory, ns, query, 5)
        # Additions are picked up incrementally, deletions by a diff, other sessions never leak in.
        for i in range(20, 26):
            memory.add("user", f"fact number {i} about topic {i % 5}")
        memory.flush()
        assert _top(cache, ns, query, 8) == _exact(memory, ns, query, 8)
        first = memory.journal.record_ids(ns[0])[0]
        memory.forget(first)
        after = _top(cache, ns, query, 50)
        assert first not in after
        assert after == _exact(memory, ns, query, 50)
        other_ids = set(other.journal.record_ids(other._ns_id))
        assert not other_ids & set(after)
        assert cache.stats()["hnsw_entries"] == 0  # small entries stay exact


def test_a_record_embedded_later_by_another_process_is_found(tmp_path: Path) -> None:
    """Handle A indexes the session before a record is embedded; handle B (standing in for another
    process: its own journal connection and recall index on the same Chroma store) embeds it; A's
    next query must see it, though no record was added or deleted since."""
    a = _open(tmp_path)
    assert a.recall is not None
    b = _other_handle(tmp_path, a)
    try:
        a.add("user", "alpha beta gamma")
        a.add("assistant", "ok")
        a.flush()
        a.search("alpha", k=1, scope="session")  # A's entry is current
        a.add("user", "delta epsilon zeta unique words")
        a.add("assistant", "noted")
        a.search("delta epsilon zeta unique words", k=5, scope="session")  # read while not embedded yet
        assert b.recall is not None
        b.flush()  # B embeds the new turn; A is not told
        hits = a.search("delta epsilon zeta unique words", k=5, scope="session")
        mine = next(h for h in hits if "delta" in h.text)
        assert mine.parts["vector_rank"] is not None
    finally:
        b.close()
        a.close()


def test_a_scope_read_back_from_chroma_in_many_requests_loses_no_vector(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that did not embed a scope reads its vectors from Chroma ``FETCH_CHUNK`` at a time
    (small requests: a large HTTP response fragments the heap); across those requests every vector
    arrives once, and the entry answers exactly as a brute force over Chroma does."""
    monkeypatch.setattr(scope_vectors, "FETCH_CHUNK", 7)  # 30 records: five requests, the last one short
    with _open(tmp_path) as writer:
        _fill(writer, 30)
    with _open(tmp_path) as reader:  # a fresh index: nothing offered by an indexer of its own
        cache = _cache(reader)
        calls = _count_fetches(cache)
        ns = [reader._ns_id]
        records = reader.journal.record_ids(ns[0])
        assert len(records) == 30
        found = cache.search(ns, _planted(11), 30)
        assert found is not None
        assert sorted(r for r, _ in found) == sorted(records)
        assert calls == [7, 7, 7, 7, 2]
        for i in (0, 6, 7, 13, 29):  # first and last of a request
            assert _top(cache, ns, f"user: planted fact {i} about place {i * 7}\nassistant: ok {i}", 3) == \
                _exact(reader, ns, f"user: planted fact {i} about place {i * 7}\nassistant: ok {i}", 3)
        assert calls == [7, 7, 7, 7, 2]  # later queries read nothing back


def test_records_added_while_an_entry_is_read_are_fetched_once(tmp_path: Path) -> None:
    """Another process adds a turn between the freshness check and the id list (a race the
    four-process PostgreSQL test hit): the next incremental fetch must not ask Chroma for an id twice
    (Chroma refuses the whole request, and recall silently fell back to keywords)."""
    a = _open(tmp_path)
    assert a.recall is not None
    b = _other_handle(tmp_path, a)
    try:
        for i in range(3):
            a.add("user", f"first fact {i} about rivers")
            a.add("assistant", f"noted river {i}")
        a.flush()
        journal = _cache(a).journal
        real_check = journal.scope_listing

        def check_then_race(scope: Any) -> Any:
            listing = real_check(scope)  # the scope's counters: the query's freshness check
            b.add("user", "raced fact about mountains")  # lands after the check, before the id list
            b.add("assistant", "noted mountains")  # not embedded yet: the entry lists it as missing
            return listing

        journal.scope_listing = check_then_race  # type: ignore[method-assign]
        try:
            a.search("rivers", k=3, scope="session")
        finally:
            del journal.scope_listing  # type: ignore[method-assign]
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


def test_user_scope_of_many_sessions_is_one_entry_with_the_exact_top_hits(tmp_path: Path) -> None:
    with _open(tmp_path) as memory:
        handles = [memory.for_session(f"s{i}") for i in range(12)]
        try:
            for i, h in enumerate(handles):
                for j in range(3):
                    h.add("user", f"session {i} says fact {j} about topic {(i + j) % 7}")
                    h.add("assistant", f"noted {i} {j}")
                h.flush()
            memory.add("user", "the live session fact about topic 3")
            memory.add("assistant", "noted")
            memory.flush()
            # A fresh index, as in a process that did not write these sessions (nothing offered).
            cache = _small_index(memory, hnsw_from=20_000)
            ns_ids = [n for n, _ in memory.journal.namespaces(Scope("user", memory.namespace))]
            assert len(ns_ids) == 13
            query = "session 4 says fact 2 about topic 6"
            fetches = _count_fetches(cache)
            assert _top(cache, ns_ids, query, 10) == _exact(memory, ns_ids, query, 10)
            assert cache.stats()["entries"] == 1
            assert len(fetches) == 1  # the whole scope in one read, not one per session
            planted = "user: session 4 says fact 2 about topic 6\nassistant: noted 4 2"  # a record's own vector
            hits = memory.search(planted, k=3, scope="user")
            assert hits[0].text == planted
            assert hits[0].parts["vector_rank"] is not None
            assert cache.stats()["entries"] == 1  # search() asked for the same scope: no second entry
            # A new session of the user: the scope's entry is taken over, only the new session is read.
            with memory.for_session("s-new") as new:
                new.add("user", "a brand new session about topic 9")
                new.add("assistant", "noted")
                new.flush()
            fetches.clear()
            assert cache.stats()["offered"] == 1
            wider = [n for n, _ in memory.journal.namespaces(Scope("user", memory.namespace))]
            assert _top(cache, wider, "a brand new session about topic 9", 5) == \
                _exact(memory, wider, "a brand new session about topic 9", 5)
            # The scope's entry was taken over and only the new session read: its one turn, from this
            # process's indexer (offered), so nothing from Chroma.
            assert cache.stats()["offered"] == 0
            assert fetches == []
            _ids_counted(cache)  # the entry taken over kept its count, and added the new session's
            assert max(e.known.count for e in cache._cache.values()) == 3 * 12 + 1 + 1
        finally:
            for h in handles:
                h.close()


def test_a_scope_listing_syncs_only_what_changed_since_the_entry_was_read(tmp_path: Path) -> None:
    """A user of many sessions asks again and again: with the same listing (nothing changed) the entry is
    not compared session by session, and after one session gained a turn only that session is read."""
    with _open(tmp_path) as memory:
        handles = [memory.for_session(f"s{i}") for i in range(6)]
        try:
            for i, h in enumerate(handles):
                h.add("user", f"session {i} talks about harbor {i}")
                h.add("assistant", f"noted harbor {i}")
                h.flush()
            cache = _small_index(memory, hnsw_from=20_000)
            scope = Scope("user", memory.namespace)
            listing = memory.journal.scope_listing(scope)
            query = "session 2 talks about harbor 2"
            reads: list[list[int]] = []
            real = cache.journal.record_ids_many

            def spied(ns_ids: Any, after: Any = None) -> Any:
                reads.append(sorted(ns_ids))
                return real(ns_ids, after)

            cache.journal = _Wrapped(cache.journal, record_ids_many=spied)  # type: ignore[assignment]
            ns_ids = list(listing.ids)
            assert _top(cache, listing, query, 3) == _exact(memory, ns_ids, query, 3)
            assert reads  # the first search read the scope
            reads.clear()
            assert _top(cache, listing, query, 3) == _exact(memory, ns_ids, query, 3)
            assert reads == []  # the same listing: nothing read, nothing compared
            handles[4].add("user", "session 4 now mentions a lighthouse")
            handles[4].add("assistant", "noted the lighthouse")
            handles[4].flush()
            grown = memory.journal.scope_listing(scope)
            assert grown.changed == frozenset({handles[4]._ns_id})
            found = _top(cache, grown, "session 4 now mentions a lighthouse", 3)
            assert found == _exact(memory, ns_ids, "session 4 now mentions a lighthouse", 3)
            assert reads == [[handles[4]._ns_id]]  # only the session that grew
        finally:
            for h in handles:
                h.close()


def test_hnsw_entry_finds_planted_records_and_applies_deletions(tmp_path: Path) -> None:
    with _open(tmp_path) as memory:
        cache = _small_index(memory)
        for i in range(40):
            memory.add("user", f"planted fact {i} about place {i * 7}")
            memory.add("assistant", f"ok {i}")
        memory.flush()
        ns = [memory._ns_id]
        _built(cache, ns)
        for i in (0, 17, 39):
            query = f"user: planted fact {i} about place {i * 7}\nassistant: ok {i}"
            top = _top(cache, ns, query, 5)
            assert top[0] == _exact(memory, ns, query, 1)[0]
        assert cache.stats()["hnsw_entries"] == 1
        assert set(_top(cache, ns, "anything", 50)) == set(_exact(memory, ns, "anything", 50))
        # A forgotten record never comes back from the index, and the graph is not rebuilt for it.
        (entry,) = cache._cache.values()
        graph = entry.rows
        victim = _top(cache, ns, "user: planted fact 17 about place 119\nassistant: ok 17", 1)[0]
        memory.forget(victim)
        for _ in range(2):
            found = _top(cache, ns, "user: planted fact 17 about place 119\nassistant: ok 17", 50)
            assert victim not in found
            assert len(found) == len(memory.journal.record_ids(ns[0]))
        assert entry.rows is graph
        _ids_counted(cache)
        hits = memory.search("planted fact 17 about place 119", k=5, scope="session")
        assert all(h.record_id != victim for h in hits)


def test_hnsw_entry_picks_up_records_added_by_another_handle(tmp_path: Path) -> None:
    a = _open(tmp_path)
    assert a.recall is not None
    b = _other_handle(tmp_path, a)
    try:
        cache = _small_index(a)
        for i in range(20):
            a.add("user", f"first handle fact {i}")
            a.add("assistant", f"ok {i}")
        a.flush()
        ns = [a._ns_id]
        _built(cache, ns)
        _top(cache, ns, "first handle fact 3", 5)
        (entry,) = cache._cache.values()
        graph = entry.rows
        fetches = _count_fetches(cache)
        b.add("user", "second handle writes about volcanoes")
        b.add("assistant", "noted volcanoes")
        b.flush()
        query = "user: second handle writes about volcanoes\nassistant: noted volcanoes"
        top = _top(cache, ns, query, 3)
        assert top[0] == _exact(a, ns, query, 1)[0]
        assert entry.rows is graph
        assert fetches == [1]
        # An edit re-embedded in this process replaces the record's vector in the graph.
        a.journal.update_record(top[0], text="now it is about glaciers instead")
        a.flush()
        assert _top(cache, ns, "now it is about glaciers instead", 1) == [top[0]]
        # So does one made and re-embedded by the other handle (the journal's edited count moved).
        b.journal.update_record(top[0], text="and now about deserts")
        b.flush()
        fetches.clear()
        assert _top(cache, ns, "and now about deserts", 1) == [top[0]]
        assert entry.rows is graph
        assert len(fetches) == 1  # the namespace read again, one changed vector replaced
    finally:
        b.close()
        a.close()


def test_byte_bound_holds_and_scopes_that_do_not_fit_go_to_chroma(tmp_path: Path) -> None:
    with _open(tmp_path) as memory:
        handles = [memory.for_session(f"s{i}") for i in range(6)]
        try:
            for i, h in enumerate(handles):
                for j in range(10):
                    h.add("user", f"session {i} line {j}")
                    h.add("assistant", f"ok {i} {j}")
                h.flush()
            per_session = 10 * (4 * DIM + 16)  # ten exact rows of 32-d
            cache = _small_index(memory, hnsw_from=1000, max_bytes=2 * per_session)
            ns_ids = [h._ns_id for h in handles]
            for ns in ns_ids:
                cache.search([ns], _vectors(["line 3"])[0], 3)  # None once two sessions fill the bound
                assert cache.stats()["bytes"] <= cache.max_bytes
            assert set(cache._cache) == {frozenset([ns_ids[0]]), frozenset([ns_ids[1]])}
            # Too large alone: declined, and search() still ranks by vectors through Chroma's filter.
            assert cache.search(ns_ids, _vectors(["session 2 line 3"])[0], 5) is None
            hits = memory.search("session 2 line 3", k=3, scope="user")
            assert hits
            assert hits[0].parts["vector_rank"] is not None
            # Two hot scopes hold the cache; a third asked for less often does not push them out,
            # and is answered by Chroma each time instead of fetching its vectors again (no thrash).
            for _ in range(3):
                assert _top(cache, [ns_ids[0]], "x", 3)
                assert _top(cache, [ns_ids[1]], "x", 3)
            fetches = _count_fetches(cache)
            for _ in range(3):
                assert cache.search([ns_ids[5]], _vectors(["x"])[0], 3) is None
            assert fetches == []
            assert set(cache._cache) == {frozenset([ns_ids[0]]), frozenset([ns_ids[1]])}
            # A scope asked for more often than they are takes their place (least recently used first).
            for _ in range(HOT_WINDOW):
                cache.search([ns_ids[5]], _vectors(["x"])[0], 3)
            assert frozenset([ns_ids[5]]) in cache._cache
            assert cache.stats()["bytes"] <= cache.max_bytes
        finally:
            for h in handles:
                h.close()


def test_vector_cache_mb_is_validated_and_bounds_the_index(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="vector_cache_mb"):
        MemoryConfig(vector_cache_mb=0)
    config = MemoryConfig(context_tokens=400, window_tokens=60, summary_tokens=20, recall_tokens=100,
                          vector_cache_mb=3, embedded_vectors=EMBEDDED_VECTORS)  # type: ignore[arg-type]
    with TieredMemory.open(tmp_path, session_id="s", user_id="u", config=config, counter=WordCounter(),
                           embedder=CallableEmbedder(_vectors, dimension=DIM, key="test:hash32")) as memory:
        assert _cache(memory).max_bytes == 3 * 2**20


def _graph_only(vectors: int) -> int:
    """A byte bound that holds a graph of this many vectors but not its exact rows beside it: a new scope
    of that size is built as a graph directly (no exact-first build)."""
    return vectors * scope_vectors.hnsw_bytes_per_vector(DIM)


def _compact_and_graph(vectors: int) -> int:
    """A byte bound that holds int8 rows of this many vectors beside their graph, but not float32 rows: a new
    scope of that size is read as compact rows first."""
    return vectors * (scope_vectors.compact_bytes_per_vector(DIM) + scope_vectors.hnsw_bytes_per_vector(DIM))


_BUILD_BOUNDS = {"exact-rows-first": lambda n: scope_vectors.DEFAULT_MAX_BYTES,
                 "compact-rows-first": _compact_and_graph, "graph-directly": _graph_only}


def test_a_large_scope_is_answered_by_chroma_while_its_graph_builds(tmp_path: Path) -> None:
    """A query never waits for a graph: it gets ``None`` (the engine asks Chroma) until the build ends."""
    with _open(tmp_path) as memory:
        _fill(memory, 30)
        # After the fill (nothing offered, builds read Chroma); a bound too small for exact-first.
        cache = _small_index(memory, max_bytes=_graph_only(30))
        ns = [memory._ns_id]
        started, release, keys = _held_builds(cache)
        assert cache.search(ns, _planted(7), 5) is None
        assert started.wait(60)
        assert cache.search(ns, _planted(7), 5) is None  # still building: answered at once, no second build
        assert cache.stats()["building"] == 1
        assert cache.stats()["entries"] == 0
        planted = "user: planted fact 7 about place 49\nassistant: ok 7"  # a record's own vector
        hits = memory.search(planted, k=3, scope="session")  # through Chroma's filtered query
        assert hits[0].text == planted
        assert hits[0].parts["vector_rank"] is not None
        release.set()
        assert cache.wait_builds(timeout=60)
        assert keys == [frozenset(ns)]
        for i in (0, 7, 29):
            assert _top(cache, ns, f"user: planted fact {i} about place {i * 7}\nassistant: ok {i}", 5)[0] == \
                _exact(memory, ns, f"user: planted fact {i} about place {i * 7}\nassistant: ok {i}", 1)[0]
        assert cache.stats() | {"bytes": 0} == {"entries": 1, "vectors": 30, "hnsw_entries": 1, "bytes": 0,
                                                "max_bytes": cache.max_bytes, "building": 0, "offered": 0}


@pytest.mark.parametrize("first", list(_BUILD_BOUNDS))
def test_a_record_erased_during_a_build_is_never_served(tmp_path: Path, first: str) -> None:
    """The build reads a vector, the record is forgotten before the graph is installed: the first
    query that uses the graph applies the deletion before it answers (exact rows first: the rows, and
    the graph built from them, hold it until then)."""
    with _open(tmp_path) as memory:
        _fill(memory, 30)
        # After the fill: nothing offered, builds read Chroma.
        cache = _small_index(memory, max_bytes=_BUILD_BOUNDS[first](30))
        ns = [memory._ns_id]
        victim = _exact(memory, ns, "user: planted fact 12 about place 84\nassistant: ok 12", 1)[0]
        fetched, release = threading.Event(), threading.Event()
        real = cache.store.embeddings

        def read_then_hold(ids: Any) -> Any:
            found = real(ids)  # the victim's vector is read before it is forgotten
            fetched.set()
            assert release.wait(60)
            return found

        cache.store = _Wrapped(cache.store, embeddings=read_then_hold)  # type: ignore[assignment]
        assert cache.search(ns, _planted(12), 5) is None
        assert fetched.wait(60)
        memory.forget(victim)
        release.set()
        assert cache.wait_builds(timeout=60)
        (entry,) = cache._cache.values()
        assert isinstance(entry.rows, _HnswRows)
        assert entry.rows.index.contains(victim)  # installed as of the build's start
        for _ in range(2):
            found = _top(cache, ns, "user: planted fact 12 about place 84\nassistant: ok 12", 50)
            assert victim not in found
            assert set(found) == set(memory.journal.record_ids(ns[0]))
        assert not entry.rows.index.contains(victim)
        hits = memory.search("planted fact 12 about place 84", k=5, scope="session")
        assert all(h.record_id != victim for h in hits)


def test_a_failed_build_is_retried_by_a_later_query(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with _open(tmp_path) as memory:
        _fill(memory, 30)
        # After the fill: nothing offered, builds read Chroma. One build per try: a graph directly.
        cache = _small_index(memory, build_retry_s=3600, max_bytes=_graph_only(30))
        ns = [memory._ns_id]
        store = cache.store

        def down(ids: Any) -> Any:
            raise ConnectionError("chroma is down")

        cache.store = _Wrapped(store, embeddings=down)  # type: ignore[assignment]
        builds: list[frozenset[int]] = []
        real = cache._build

        def counted(build: Any, guard: Any) -> None:
            builds.append(build.key)
            real(build, guard)

        cache._build = counted  # type: ignore[method-assign]
        with caplog.at_level(logging.WARNING, logger="langmem_tiers.recall.scope_vectors"):
            assert cache.search(ns, _planted(3), 5) is None
            assert cache.wait_builds(timeout=60)
        assert "chroma is down" in caplog.text
        assert cache.stats()["entries"] == 0
        cache.store = store  # Chroma is back
        assert cache.search(ns, _planted(3), 5) is None
        assert cache.wait_builds(timeout=60)
        assert len(builds) == 1  # not tried again within build_retry_s
        cache.build_retry_s = 0.0
        assert cache.search(ns, _planted(3), 5) is None  # the retry starts now
        assert cache.wait_builds(timeout=60)
        assert len(builds) == 2
        query = "user: planted fact 3 about place 21\nassistant: ok 3"
        assert _top(cache, ns, query, 5)[0] == _exact(memory, ns, query, 1)[0]
        assert cache.stats()["hnsw_entries"] == 1


def _rows_first_graph_held(cache: ScopeVectors, ns: list[int]) -> tuple[list[Any], threading.Event]:
    """A new large scope's first search: its rows are read and installed first, then its graph's build from them
    is held until the test sets the returned event. The builds, in order: the read, then the graph."""
    builds: list[Any] = []
    graph_started, release = threading.Event(), threading.Event()
    real = cache._build

    def hold_the_graph(build: Any, guard: Any) -> None:
        builds.append(build)
        if build.seed is not None:  # the graph from the rows: held until released
            graph_started.set()
            assert release.wait(60)
        real(build, guard)

    cache._build = hold_the_graph  # type: ignore[method-assign]
    assert cache.search(ns, _planted(7), 5) is None  # the rows are read in the background
    assert graph_started.wait(60)
    assert [b.exact_first for b in builds] == [True, False]
    return builds, release


def test_a_new_large_scope_answers_exactly_once_read_while_its_graph_builds(tmp_path: Path) -> None:
    """Where its rows and its graph fit the bound together, a new scope past ``hnsw_from`` is read as exact
    rows, installed, and answers from them (the exact top hits) while its graph is built from them; changes
    meanwhile reach both; ``wait_builds`` waits for the graph."""
    with _open(tmp_path) as memory:
        _fill(memory, 30)
        cache = _small_index(memory)  # after the fill: nothing offered, builds read Chroma
        ns = [memory._ns_id]
        builds, release = _rows_first_graph_held(cache, ns)
        (entry,) = cache._cache.values()
        assert isinstance(entry.rows, _ExactRows)
        assert cache.stats()["building"] == 1
        assert _top(cache, ns, "anything", 50) == _exact(memory, ns, "anything", 50)
        hits = memory.search("user: planted fact 7 about place 49\nassistant: ok 7", k=3, scope="session")
        assert hits[0].parts["vector_rank"] == 1
        victim = _exact(memory, ns, "user: planted fact 12 about place 84\nassistant: ok 12", 1)[0]
        memory.forget(victim)
        _fill(memory, 1, start=30)
        assert _top(cache, ns, "anything", 50) == _exact(memory, ns, "anything", 50)
        assert victim not in _top(cache, ns, "anything", 50)
        _ids_counted(cache)
        release.set()
        assert cache.wait_builds(timeout=60)
        _the_graph_serves(memory, cache, ns, victim, planted=30)
        assert len(builds) == 2


def test_a_scope_whose_float32_rows_and_graph_do_not_fit_answers_from_int8_rows_while_building(
        tmp_path: Path) -> None:
    """A bound that holds int8 rows beside the graph but not float32 ones: the scope is read as compact rows
    (a quarter of the bytes), answers from them (each planted record's own text finds it first; every record
    held, a forgotten one gone) while its graph is built from them, and the graph replaces them."""
    with _open(tmp_path) as memory:
        _fill(memory, 30)
        cache = _small_index(memory, max_bytes=_compact_and_graph(30))  # after the fill: builds read the store
        ns = [memory._ns_id]
        builds, release = _rows_first_graph_held(cache, ns)
        assert isinstance(builds[1].seed, _CompactRows)
        (entry,) = cache._cache.values()
        assert isinstance(entry.rows, _CompactRows)
        assert entry.rows.matrix.dtype == np.int8
        assert cache.stats()["bytes"] <= cache.max_bytes
        for i in (0, 7, 29):
            query = f"user: planted fact {i} about place {i * 7}\nassistant: ok {i}"
            assert _top(cache, ns, query, 3)[0] == _exact(memory, ns, query, 1)[0]
        victim = _exact(memory, ns, "user: planted fact 12 about place 84\nassistant: ok 12", 1)[0]
        memory.forget(victim)
        _fill(memory, 1, start=30)
        found = _top(cache, ns, "anything", 50)
        assert set(found) == set(memory.journal.record_ids(ns[0]))
        assert victim not in found
        _ids_counted(cache)
        release.set()
        assert cache.wait_builds(timeout=60)
        _the_graph_serves(memory, cache, ns, victim, planted=30)


def test_compact_rows_rank_as_float32_rows_within_int8_rounding() -> None:
    """int8 rows: the same nearest rows as the float32 product (but for near ties), similarities within
    rounding; a re-added id replaces its row, a removed one is gone; a quarter of the bytes."""
    rng = np.random.default_rng(5)
    matrix = rng.standard_normal((3000, 64)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    ids = np.arange(10, 3010, dtype=np.int64)
    exact, compact = _ExactRows(), _CompactRows()
    for rows in (exact, compact):
        rows.add(ids, matrix)
    assert compact.matrix.dtype == np.int8
    assert compact.nbytes < exact.nbytes / 3
    overlap = []
    for i in range(0, 3000, 300):
        q = matrix[i] + 0.05 * rng.standard_normal(64).astype(np.float32)
        q /= np.linalg.norm(q)
        want, got = exact.search(q, 20), compact.search(q, 20)
        assert got[0][0] == want[0][0] == 10 + i
        overlap.append(len({r for r, _ in want} & {r for r, _ in got}) / 20)
        sims = dict(want)
        assert all(abs(sim - float(matrix[r - 10] @ q)) < 0.02 for r, sim in got)
        assert all(abs(sim - sims[r]) < 0.02 for r, sim in got if r in sims)
    assert min(overlap) >= 0.8
    compact.add(ids[:1], -matrix[:1])  # replaced: now farthest from its old direction
    assert compact.search(matrix[0], 1)[0][0] != 10
    compact.remove(ids[1:2])
    assert 11 not in {r for r, _ in compact.search(matrix[1], 50)}
    assert len(compact) == 2999


def test_a_scope_not_read_yet_goes_ahead_of_graphs_queued_from_exact_rows(tmp_path: Path) -> None:
    """Builds run one at a time: a cold scope's read is queued before a graph whose scope already answers
    from exact rows, so it waits for the running build only."""
    with _open(tmp_path) as memory, memory.for_session("a") as a, memory.for_session("b") as b:
        _fill(memory, 30)
        _fill(a, 10)
        _fill(b, 30)
        cache = _small_index(memory)  # after the fills: nothing offered
        c_ns, a_ns, b_ns = [memory._ns_id], [a._ns_id], [b._ns_id]
        assert _top(cache, a_ns, "anything", 50) == _exact(memory, a_ns, "anything", 50)  # exact, 10 rows
        started, release, keys = _held_builds(cache)
        assert cache.search(c_ns, _planted(1), 5) is None  # c's read runs (held)
        assert started.wait(60)
        _fill(a, 10, start=10)
        assert _top(cache, a_ns, "anything", 50) == _exact(memory, a_ns, "anything", 50)  # a's graph queued
        assert cache.search(b_ns, _planted(1), 5) is None  # b's read queued: ahead of a's graph
        release.set()
        assert cache.wait_builds(timeout=60)
        assert keys[:3] == [frozenset(c_ns), frozenset(b_ns), frozenset(a_ns)]
        for ns in (a_ns, b_ns, c_ns):
            assert set(_top(cache, ns, "anything", 50)) == set(memory.journal.record_ids(ns[0]))
        assert cache.stats()["hnsw_entries"] == 3


def test_a_scope_whose_rows_and_graph_do_not_fit_together_becomes_a_graph_directly(tmp_path: Path) -> None:
    with _open(tmp_path) as memory:
        _fill(memory, 30)
        cache = _small_index(memory, max_bytes=_graph_only(30))
        ns = [memory._ns_id]
        builds: list[Any] = []
        real = cache._build

        def counted(build: Any, guard: Any) -> None:
            builds.append(build)
            real(build, guard)

        cache._build = counted  # type: ignore[method-assign]
        _built(cache, ns)
        assert [b.exact_first for b in builds] == [False]
        (entry,) = cache._cache.values()
        assert isinstance(entry.rows, _HnswRows)
        assert cache.stats()["bytes"] <= cache.max_bytes


def test_an_exact_entry_read_in_chunks_keeps_no_part_of_a_failed_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows of an exact entry are added once the whole read succeeded: a store failing midway leaves every
    id to read again, and the next query reads them all (none lost, none twice)."""
    monkeypatch.setattr(scope_vectors, "FETCH_CHUNK", 4)
    with _open(tmp_path) as memory:
        _fill(memory, 10)
        cache = _small_index(memory, hnsw_from=1000)  # after the fill: nothing offered, the rows come from Chroma
        ns = [memory._ns_id]
        store = cache.store
        calls: list[int] = []

        def fails_second(ids: Any) -> Any:
            calls.append(len(ids))
            if len(calls) == 2:
                raise ConnectionError("chroma went away")
            return store.embeddings(ids)

        cache.store = _Wrapped(store, embeddings=fails_second)  # type: ignore[assignment]
        with pytest.raises(ConnectionError):
            cache.search(ns, _planted(3), 5)
        (entry,) = cache._cache.values()
        assert len(entry.rows) == 0
        assert entry.missing == set(memory.journal.record_ids(ns[0]))
        cache.store = store
        fetches = _count_fetches(cache)
        assert _top(cache, ns, "anything", 50) == _exact(memory, ns, "anything", 50)
        assert sum(fetches) == 10  # every id once
        _ids_counted(cache)


def test_a_growing_exact_entry_answers_while_its_graph_builds(tmp_path: Path) -> None:
    with _open(tmp_path) as memory:
        cache = _small_index(memory)
        _fill(memory, 10)
        ns = [memory._ns_id]
        assert _top(cache, ns, "anything", 50) == _exact(memory, ns, "anything", 50)
        started, release, keys = _held_builds(cache)
        _fill(memory, 10, start=10)  # 20 > hnsw_from: the entry is promoted in the background
        assert _top(cache, ns, "anything", 50) == _exact(memory, ns, "anything", 50)
        assert started.wait(60)
        (exact,) = cache._cache.values()
        assert isinstance(exact.rows, _ExactRows)
        # Changes while the graph builds reach the exact entry now and the graph when it is installed.
        victim = _exact(memory, ns, "user: planted fact 4 about place 28\nassistant: ok 4", 1)[0]
        memory.forget(victim)
        _fill(memory, 1, start=20)
        assert _top(cache, ns, "anything", 50) == _exact(memory, ns, "anything", 50)
        assert victim not in _top(cache, ns, "anything", 50)
        release.set()
        assert cache.wait_builds(timeout=60)
        assert keys == [frozenset(ns)]
        _the_graph_serves(memory, cache, ns, victim, planted=20)


def test_close_stops_a_pending_build_before_it_touches_the_store(tmp_path: Path) -> None:
    with _open(tmp_path) as memory:
        cache = _small_index(memory)
        _fill(memory, 30)
        ns = [memory._ns_id]
        started, release, _ = _held_builds(cache)
        fetches = _count_fetches(cache)
        assert cache.search(ns, _planted(1), 5) is None
        assert started.wait(60)
        workers = list(cache._workers)
        assert workers
        assert all(w.daemon for w in workers)  # a build never keeps the process alive
        cache.close()
        release.set()
        assert cache.wait_builds(timeout=60)
        for w in workers:
            w.join(60)
            assert not w.is_alive()
        assert fetches == []
        assert cache.stats()["entries"] == 0
        assert cache.search(ns, _planted(1), 5) is None  # closed: nothing new is built
        assert cache._workers == []


def test_user_scope_search_of_turns_uses_the_index_and_a_rare_kind_uses_chroma(tmp_path: Path) -> None:
    """context() re-asks for turns only (beside the profile): that stays on the index, found among the
    nearest of every kind; a kind that is few of the nearest (facts among turns) asks Chroma's filter."""
    with _open(tmp_path) as memory:
        other = memory.for_session("s2")
        try:
            for i in range(10):
                other.add("user", f"older session turn {i} about kayaks and rivers {i}")
                other.add("assistant", f"noted {i}")
                memory.add("user", f"live session turn {i} about trains {i}")
                memory.add("assistant", f"ok {i}")
            fact = memory.remember("the user's favourite river is the Douro")
            other.flush()
            memory.flush()
            assert memory.recall is not None
            assert memory.recall.store is not None
            store = memory.recall.store
            asked: list[Any] = []
            query = store.query

            def spy(embedding: Any, k: int, where: Any) -> Any:
                asked.append(where)
                return query(embedding, k, where)

            store.query = spy  # type: ignore[method-assign]
            planted = "user: older session turn 3 about kayaks and rivers 3\nassistant: noted 3"
            turns = memory.search(planted, k=3, scope="user", kinds=["turn"])
            assert turns[0].text == planted
            assert turns[0].parts["vector_rank"] is not None
            assert all(h.kind == "turn" for h in turns)
            assert asked == []  # the index answered
            facts = memory.search("the user's favourite river is the Douro", k=3, scope="user", kinds=["fact"])
            assert [h.record_id for h in facts] == [fact]
            assert facts[0].parts["vector_rank"] is not None
            assert len(asked) == 1  # one fact among 21 records: Chroma's filtered query found it
        finally:
            other.close()



@pytest.mark.parametrize("scope", ["session", "user"])
def test_a_rare_kind_beyond_the_index_nearest_is_found_in_every_scope(tmp_path: Path, scope: str) -> None:
    """A fact among 60 turns, asked for by kind with a question whose nearest candidates (the index's
    first 50) are all turns: the same rule in every scope sends it to Chroma's filter, which finds it."""
    with _open(tmp_path) as memory:
        for i in range(60):
            memory.add("user", f"turn {i} about trains")
            memory.add("assistant", f"ok {i}")
        fact = memory.remember("favourite colour is teal")
        memory.flush()
        vectors = {r.id: np.asarray(_vectors([r.text])[0]) for r in memory.journal.scoped_records([memory._ns_id])}

        def rank_of_fact(question: str) -> int:
            q = np.asarray(_vectors([question])[0])
            return sorted(vectors, key=lambda i: -float(vectors[i] @ q)).index(fact)

        question = next(q for q in (f"zzz unrelated question {j}" for j in range(500)) if rank_of_fact(q) >= 55)
        hits = memory.search(question, k=3, scope=scope, kinds=["fact"])
        assert [h.record_id for h in hits] == [fact]
        assert hits[0].parts["vector_rank"] is not None

def test_vectors_the_indexer_pushed_are_not_read_back_from_chroma(tmp_path: Path) -> None:
    """A scope's first query takes the vectors this process just indexed from the indexer's offer, and a
    live session's next query takes the turns indexed since: no Chroma read, and the same hits."""
    with _open(tmp_path) as memory:
        for i in range(12):
            memory.add("user", f"offered fact {i} about harbor {i * 3}")
            memory.add("assistant", f"noted harbor {i}")
        memory.flush()
        cache = _cache(memory)
        assert cache.stats()["offered"] > 0
        fetches = _count_fetches(cache)
        ns = [memory._ns_id]
        query = "offered fact 5 about harbor 15"
        assert _top(cache, ns, query, 6) == _exact(memory, ns, query, 6)
        memory.add("user", "a later fact about lighthouses")
        memory.add("assistant", "noted lighthouses")
        memory.flush()
        later = "a later fact about lighthouses"
        assert _top(cache, ns, later, 6) == _exact(memory, ns, later, 6)
        assert fetches == []
        assert cache.stats()["offered"] == 0  # each offered vector is taken once


def test_an_offered_vector_is_not_used_once_its_text_was_edited_elsewhere(tmp_path: Path) -> None:
    """Handle A indexes a memory (its vector offered); handle B, standing in for another process, edits
    the text and indexes the new one. A's first query must read the new vector from Chroma: the
    namespace's edit count moved since A read the text, so A's offered vector is stale."""
    a = _open(tmp_path)
    assert a.recall is not None
    b = _other_handle(tmp_path, a)
    try:
        record_id = a.remember("the old text about violins")
        a.flush()
        cache = _cache(a)
        assert cache.stats()["offered"] == 1
        b.journal.update_record(record_id, text="the new text about trombones")
        b.flush()
        fetches = _count_fetches(cache)
        found = cache.search([a._ns_id], _vectors(["the new text about trombones"])[0], 1)
        assert found is not None
        assert found[0][0] == record_id
        assert found[0][1] == pytest.approx(1.0, abs=1e-5)  # the new text's vector, not the offered one
        assert fetches == [1]
    finally:
        b.close()
        a.close()


def test_an_erased_record_leaves_the_offer(tmp_path: Path) -> None:
    """Vectors offered and not taken yet leave memory when their records' deletes reach Chroma."""
    with _open(tmp_path) as memory:
        kept = memory.remember("a fact that stays")
        gone = memory.remember("a fact the user erases")
        memory.flush()
        cache = _cache(memory)
        assert cache.stats()["offered"] == 2
        memory.forget(gone)
        assert cache.stats()["offered"] == 1
        found = cache.search([memory._ns_id], _vectors(["a fact the user erases"])[0], 5)
        assert found is not None
        assert [r for r, _ in found] == [kept]


@pytest.mark.parametrize("kind", ["exact", "compact", "hnsw"])
def test_rows_hand_back_the_vectors_they_hold(kind: str) -> None:
    """``vectors``: the unit vectors of the ids held (int8 copies within rounding), by id; ids not held are
    left out."""
    # Built in the test, not at collection.
    rows: Any = {"exact": _ExactRows, "compact": _CompactRows}.get(kind, lambda: _HnswRows(32, 16, 64, 128))()
    matrix = np.random.default_rng(3).standard_normal((40, 32)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    rows.add(np.arange(100, 140, dtype=np.int64), matrix)
    got = rows.vectors([105, 139, 7])
    assert sorted(got) == [105, 139]
    for rid, vector in got.items():
        assert float(np.linalg.norm(vector)) == pytest.approx(1.0, abs=1e-5)
        assert float(np.dot(vector, matrix[rid - 100])) > 0.99
    assert rows.vectors([]) == {}


def test_a_graph_built_before_the_embedder_loads_does_not_crash_it() -> None:
    """Importing onnxruntime after usearch crashes the process (segmentation fault); the graph's import
    goes through ``_usearch_index``, which loads onnxruntime first. Run in a child: a crash would take the
    test process with it."""
    import subprocess
    import sys

    pytest.importorskip("onnxruntime")
    code = ("from langmem_tiers.recall.scope_vectors import _HnswRows\n"
            "_HnswRows(8, 16, 64, 128)\n"
            "import onnxruntime\n"
            "print('loaded', onnxruntime.get_device())\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "loaded" in done.stdout


def test_every_vector_added_to_a_graph_is_found_again() -> None:
    """usearch's concurrent add() leaves some nodes stored but unreachable by search (unum-cloud/USearch#735):
    on every core, 3,000 random vectors added in a build's slices lost ~5 of them (their own nearest hit was
    another record). The graph adds on one thread: each vector is its own nearest hit."""
    rng = np.random.default_rng(7)
    matrix = rng.standard_normal((3000, 32)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    rows = _HnswRows(32, 16, 64, 128)
    ids = np.arange(1, len(matrix) + 1, dtype=np.int64)
    for start in range(0, len(ids), scope_vectors.GRAPH_SLICE):
        rows.add(ids[start:start + scope_vectors.GRAPH_SLICE], matrix[start:start + scope_vectors.GRAPH_SLICE])
    lost = [int(i) for i, v in zip(ids, matrix) if rows.search(v, 1)[0][0] != i]
    assert lost == []


def test_known_ids_keep_their_count_as_sessions_are_set_and_copied() -> None:
    known = scope_vectors._KnownIds({1: np.arange(3), 2: np.arange(5)})
    assert known.count == 8
    known[2] = np.arange(2)  # a session read again after a deletion
    known[3] = np.arange(4)  # a new session
    assert known.count == 9
    copied = known.copy()
    copied[1] = np.arange(10)
    assert (copied.count, known.count) == (16, 9)
    assert isinstance(copied, scope_vectors._KnownIds)
