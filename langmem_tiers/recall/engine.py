"""Episodic recall: the index outbox, hybrid search and memory management flows.

Records (evicted turns and explicit memories) live in the journal, with an FTS5
keyword index beside them; their vectors live in Chroma. Every change to a
record goes through the journal's outbox, drained in batches by
:meth:`RecallIndex.index_flow`, so a Chroma or embedder outage only delays
vector recall: the rows stay pending and keyword recall keeps working.

Search fuses the keyword and vector rankings with reciprocal rank fusion, shapes
the fused score by recency and importance (see :class:`~langmem_tiers.recall.fusion.FusionParams`),
drops near-duplicates and whatever the window already holds, and always filters
by namespace in both stores.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langmem_tiers.config import MemoryConfig
from langmem_tiers.embedders.base import Embedder
from langmem_tiers.errors import ConfigError
from langmem_tiers.flow import Blocking, Drivers, Embed, Flow, wait_free
from langmem_tiers.journal.base import Journal, Namespace, OutboxItem, Record, Scope
from langmem_tiers.memory_types.expiry import is_expired
from langmem_tiers.memory_types.fields import EXPIRES_AT, WORKING_KIND
from langmem_tiers.recall.fusion import Fusion, FusionParams, NearDuplicates, ScoreParts, word_set
from langmem_tiers.recall.hits import RecallHit
from langmem_tiers.recall.options import RecallOptions
from langmem_tiers.recall.query import analyze, feedback_terms, has_time_expression
from langmem_tiers.recall.request import RequestMemo, ids_to_probe, scope_listing
from langmem_tiers.recall.scope_vectors import DEFAULT_MAX_BYTES, ScopeVectors
from langmem_tiers.recall.vector_store import VectorStore

log = logging.getLogger(__name__)

Ranked = tuple[Record, ScoreParts]  # a search's candidate and its score parts (ranked_flow)

SCOPES = ("session", "user", "agent")
PENDING_EXACT = 64  # the newest pending rows of a scope that a query searches exactly
NEIGHBOR_READ = 4  # records read on each side of a turn to find its neighbor past its own other chunks
WINDOW_LOOK_BACK = 2  # newest records read per window message to find the window's records (chunks, facts)
FRESH_VECTORS = 4096  # vectors of pending rows kept for the indexer to reuse


@dataclass(frozen=True)
class SearchFilters:
    """Optional filters of a recall query (all combined with AND)."""

    kinds: tuple[str, ...] | None = None
    where: Mapping[str, Any] | None = None
    since: float | None = None
    until: float | None = None
    exclude_message_ids: frozenset[int] = frozenset()
    # When expiry is judged (``metadata["expires_at"]``): the memory's clock; None: the wall clock.
    now: float | None = None


class RecallIndex:
    """Keyword + vector recall over one journal and (optionally) one vector store (a Chroma collection, or
    :class:`~langmem_tiers.recall.sqlite_vectors.SqliteVectorStore`)."""

    def __init__(self, journal: Journal, store: VectorStore | None, embedder: Embedder | None, *,
                 params: FusionParams | None = None, candidates: int = 50, dedupe_threshold: float = 0.85,
                 batch_size: int = 64, lease_s: float = 120.0, owns_store: bool = False,
                 options: RecallOptions | None = None, vector_cache_bytes: int = DEFAULT_MAX_BYTES) -> None:
        if (store is None) != (embedder is None):
            raise ConfigError("vector recall needs both a vector store and an embedder (or neither)")
        self.journal = journal
        self.store = store
        self.embedder = embedder
        self.params = params or FusionParams()
        # Query-time switches (issue 19): MemoryConfig's defaults unless given; replaceable between
        # queries (the evaluation's ablations do).
        self.options = options or RecallOptions.from_config(MemoryConfig())
        self.candidates = candidates
        self.dedupe_threshold = dedupe_threshold
        self.batch_size = batch_size
        self.last_error: str | None = None
        self.lease_s = lease_s
        self.owns_store = owns_store  # opened from a folder or URL by TieredMemory.open: closed with it
        # Who claims outbox work: unique per index object, so replicas and handles never share a lease.
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        # Vectors a query computed for rows still pending (keyed by record id and text hash, never the
        # text): the indexer reuses them instead of embedding the same text twice.
        self._fresh: dict[tuple[int, int], Any] = {}
        self._fresh_lock = threading.Lock()
        self._indexer: Any = None  # a BackgroundIndexer once rows were queued
        self._uid: str = getattr(journal, "uid", "")
        # Per-scope vector indexes (exact, or HNSW when large), bounded in bytes: see scope_vectors.py.
        self._scope_vectors = (
            ScopeVectors(journal, store, self.vector_id, self._record_id, max_bytes=vector_cache_bytes)
            if store is not None else None
        )
        # The first handle with vectors marks the journal (from now on, handles without them leave the outbox to
        # handles with them). Records written before, by handles without vectors, have none: they are queued,
        # unless the store holds this journal's vectors already (a journal kept from before the mark). They are
        # embedded on the next write's wake-up or flush(); until then a query embeds the newest pending ones.
        # (A read-only journal is not marked: mark_vectors() says False.)
        if store is not None and journal.mark_vectors() and store.count({"journal": {"$eq": self._uid}}) == 0:
            journal.requeue_all(keywords=False)
        self._vectors_elsewhere = False  # index_flow() of a handle without a store: whether the journal has vectors

    # --- background indexing ---------------------------------------------------

    def wake_indexer(self) -> None:
        """Rows were queued: let the background indexer drain them (started on first use)."""
        if self._indexer is None:
            from langmem_tiers.recall.indexer import BackgroundIndexer

            drivers = Drivers(None, self.embedder)
            self._indexer = BackgroundIndexer(lambda: drivers.run_sync(self.index_flow()))
        self._indexer.wake()

    def flush_flow(self) -> Flow[int]:
        """Index everything pending now, after the background batch in flight (if any) is done."""
        indexer = self._indexer
        if indexer is not None:
            yield wait_free(indexer.working)
        done: int = yield from self.index_flow(force=True)
        if indexer is not None:
            yield wait_free(indexer.working)
        return done

    def close(self) -> None:
        """Stop the background indexer (rows still pending stay in the outbox for the next run) and
        close the vector store when this index opened it (its folder lock is released)."""
        if self._indexer is not None:
            self._indexer.stop()
        if self._scope_vectors is not None:
            self._scope_vectors.close()  # background graph builds stop before the store closes
        if self.owns_store and self.store is not None:
            self.store.close()

    @property
    def vectors(self) -> bool:
        return self.store is not None

    def vector_id(self, record_id: int) -> str:
        return f"{self._uid}:{record_id}"

    def _record_id(self, vector_id: str) -> int | None:
        prefix, _, rid = vector_id.rpartition(":")
        return int(rid) if prefix == self._uid and rid.isdigit() else None

    def where(self, scope: Scope) -> dict[str, Any]:
        """The Chroma filter of a scope, by the journal ids of its namespaces."""
        return self.where_ns([n for n, _ in self.journal.namespaces(scope)])

    def where_ns(self, ns_ids: Sequence[int], kinds: Sequence[str] | None = None) -> dict[str, Any]:
        """The Chroma filter of a set of namespaces (journal ids, never reused), optionally by kind.

        Chroma holds ids, vectors and these few numbers, never the text or the user's ids:
        erasing a user leaves nothing in Chroma that names them.
        """
        clauses: list[dict[str, Any]] = [{"journal": {"$eq": self._uid}},
                                         {"ns": {"$in": list(ns_ids) or [-1]}}]
        if kinds:
            clauses.append({"kind": {"$in": list(kinds)}})
        return {"$and": clauses}

    # --- indexing -------------------------------------------------------------

    def index_flow(self, max_batches: int | None = None, force: bool = False) -> Flow[int]:
        """Drain the outbox into Chroma; returns rows done.

        Work is claimed with a lease, so replicas sharing a journal never index the same row
        twice, and a delete queued while an upsert is in flight waits for it (a stale upsert
        can never put forgotten text back). Failures are per record: one text the embedder
        rejects is retried later on its own and never blocks the rest of its batch.
        ``force`` (``flush()``, ``reindex()``) ignores retry delays.
        """
        done = 0
        batches = 0
        if self.store is None:
            if not self._vectors_elsewhere:  # read until True: the journal's mark never goes back
                self._vectors_elsewhere = yield Blocking(self.journal.has_vectors)
            if self._vectors_elsewhere:
                # Without a vector store here, but with vectors elsewhere (another handle, process or replica):
                # the rows wait for a handle that has them. Marked done here, a deletion would never reach the
                # vectors (the erased text's vector would stay), and an added record would never get one.
                return 0
        while max_batches is None or batches < max_batches:
            items = yield Blocking(lambda: self.journal.claim_outbox(
                self.batch_size, owner=self.owner, lease_s=self.lease_s, due_only=not force))
            if not items:
                break
            batches += 1
            if self.store is None or self.embedder is None:
                # Keyword-only on a journal that never had vectors (checked above): nothing to push, ever.
                yield Blocking(lambda: self.journal.outbox_done(items))
                done += len(items)
                continue
            failed = yield from self._index_batch(items)
            ok = [i for i in items if i.record_id not in failed]
            if ok:
                yield Blocking(lambda: self.journal.outbox_done(ok))
            for error, bad in _group_errors(items, failed).items():
                yield Blocking(lambda: self.journal.outbox_failed(bad, error))
            done += len(ok)
            if failed and len(failed) == len(items) and force:
                break  # nothing went through (store or embedder down): stop instead of spinning
        return done

    def _index_batch(self, items: Sequence[OutboxItem]) -> Flow[dict[int, str]]:
        """Push one claimed batch to Chroma; returns the record ids that failed, with their error."""
        store = self.store
        failed: dict[int, str] = {}
        assert store is not None
        deletes = [i.record_id for i in items if i.op == "delete"]
        upserts = [i.record_id for i in items if i.op == "upsert"]
        try:
            if deletes:
                yield Blocking(lambda: store.delete(ids=[self.vector_id(r) for r in deletes]))
                if self._scope_vectors is not None:
                    self._scope_vectors.withdraw(deletes)
        except Exception as e:  # the store is down: every item waits
            return self._failed_all(items, e)
        records = (yield Blocking(lambda: self.journal.records(upserts))) if upserts else []
        vectors: dict[int, Any] = {}
        try:
            vectors = dict(zip([r.id for r in records], (yield from self._embed_records(records))))
        except Exception as e:
            vectors, failed = yield from self._embed_split(records, f"{type(e).__name__}: {e}")
            if not vectors:
                return self._failed_all(items, e)
        ns_of = (yield Blocking(lambda: self._ns_ids([r for r in records if r.id in vectors]))) if vectors else {}
        # Each namespace's count of edited texts, read before the texts are read again: the in-process
        # index uses the vectors handed to it below only while that count stays (scope_vectors.offer).
        cache = self._scope_vectors
        edits = {n: v[2] for n, v in (yield Blocking(lambda: self.journal.scope_versions(
            list(ns_of.values())))).items()} if cache is not None and ns_of else {}
        # Never push a vector for a record whose row changed or vanished since it was read.
        current = {r.id: r for r in (yield Blocking(lambda: self.journal.records(list(vectors))))}
        fresh = [r for r in records if r.id in vectors and r.id in current and current[r.id].text == r.text
                 and r.namespace in ns_of]
        if fresh:
            try:
                yield Blocking(lambda: store.upsert(
                    [self.vector_id(r.id) for r in fresh], [vectors[r.id] for r in fresh], None,
                    [self._metadata(r, ns_of[r.namespace]) for r in fresh]))
            except Exception as e:
                return self._failed_all(items, e)
            if cache is not None:
                cache.offer([(ns_of[r.namespace], r.id, vectors[r.id]) for r in fresh], edits)
        self.last_error = next(iter(failed.values()), None)
        return failed

    def _embed_split(self, records: Sequence[Record], error: str) -> Flow[tuple[dict[int, Any], dict[int, str]]]:
        """Records that failed together: embed each half, and split again only the half that fails.

        An outage fails both halves at once and stops there (two extra calls); a text the
        embedder rejects is isolated in about log2(batch) steps, and the others get vectors.
        """
        if len(records) <= 1:
            return {}, {r.id: error for r in records}
        mid = len(records) // 2
        halves: list[tuple[Sequence[Record], dict[int, Any] | None, str]] = []
        for half in (records[:mid], records[mid:]):
            try:
                got = yield from self._embed_records(half)
                halves.append((half, dict(zip([r.id for r in half], got)), ""))
            except Exception as e:
                halves.append((half, None, f"{type(e).__name__}: {e}"))
        if all(v is None for _, v, _ in halves):
            return {}, {r.id: halves[0][2] for r in records}
        vectors: dict[int, Any] = {}
        failed: dict[int, str] = {}
        for half, half_vectors, half_error in halves:
            if half_vectors is not None:
                vectors.update(half_vectors)
            else:
                more, bad = yield from self._embed_split(half, half_error)
                vectors.update(more)
                failed.update(bad)
        return vectors, failed

    def _embed_records(self, records: Sequence[Record]) -> Flow[list[Any]]:
        """Vectors of records, reusing those a query already computed for still-pending rows."""
        missing = [r for r in records if self._fresh.get((r.id, hash(r.text))) is None]
        if missing:
            computed = yield Embed([r.text for r in missing])
            for r, v in zip(missing, computed):
                self._remember_vector(r, v)
        return [self._fresh[(r.id, hash(r.text))] for r in records]

    def _remember_vector(self, r: Record, vector: Any) -> None:
        with self._fresh_lock:
            self._fresh[(r.id, hash(r.text))] = vector
            while len(self._fresh) > FRESH_VECTORS:
                self._fresh.pop(next(iter(self._fresh)))

    def _failed_all(self, items: Sequence[OutboxItem], e: Exception) -> dict[int, str]:
        self.last_error = f"{type(e).__name__}: {e}"
        log.warning("recall indexing failed, %d rows stay pending: %s", len(items), self.last_error)
        return {i.record_id: self.last_error for i in items}

    def _ns_ids(self, records: Sequence[Record]) -> dict[Namespace, int]:
        out: dict[Namespace, int] = {}
        for ns in {r.namespace for r in records}:
            ns_id = self.journal.namespace_id(ns, create=False)
            if ns_id is not None:
                out[ns] = ns_id
        return out

    def _metadata(self, r: Record, ns_id: int) -> dict[str, Any]:
        return {"journal": self._uid, "record_id": r.id, "ns": ns_id, "kind": r.kind,
                "created_at": r.created_at, "importance": r.importance, "pinned": r.pinned}

    # --- search ---------------------------------------------------------------

    def search_flow(self, query: str, k: int, scope: Scope, filters: SearchFilters,
                    now: float | None = None, expand: bool = False,
                    memo: RequestMemo | None = None) -> Flow[list[RecallHit]]:
        """The ``k`` best records of a scope for ``query`` (keyword and vector rankings, fused).

        ``memo``: what the same request read before (the scope's namespaces) is taken from it, and
        what this search reads is added to it.
        """
        ranked = yield from self.ranked_flow(query, k, scope, filters, now, memo)
        out = self.select(ranked, k)
        if expand and out:
            out += yield from self._linked(out, scope, filters)
        return out

    def ranked_flow(self, query: str, k: int, scope: Scope, filters: SearchFilters,
                    now: float | None = None, memo: RequestMemo | None = None) -> Flow[list[Ranked]]:
        """Every candidate of a search for ``k`` hits that passes ``filters``, best first, with its score
        parts: what :meth:`select` picks the hits from. ``context()`` keeps it to pick a fact's turn
        from (beside the profile) without searching again."""
        if scope.kind not in SCOPES:
            raise ConfigError(f"scope ({scope.kind!r}) must be one of {', '.join(SCOPES)}")
        if k <= 0 or not query.strip():
            return []
        listing = yield Blocking(lambda: scope_listing(self.journal, scope, memo))
        ns_ids = listing.ids
        if not ns_ids:
            return []
        # The window's turns are never recalled: found among the session's newest records, they are left
        # out before any record is read, and each rank list reaches that much deeper. (passes() still
        # drops any the look-back missed.)
        skip = yield Blocking(lambda: self._window_records(scope, filters.exclude_message_ids))
        want = max(self.candidates, self.options.depth * k) + len(skip)
        kinds = list(filters.kinds) if filters.kinds else None
        loaded: dict[str, Record] = {}  # records read while searching, not read again by _load
        keyword = yield Blocking(lambda: self.journal.keyword_search(query, ns_ids, want, kinds, listing.versions))
        keyword_ids = [str(h.record_id) for h in keyword]
        vector_ids: list[str] = []
        query_vector: Any = None
        indexed = False  # the scope's in-process index answered (it holds the candidates' vectors)
        if self.store is not None and self.embedder is not None:
            store = self.store
            try:
                # Rows of this scope not indexed yet, read before the index is: a row an indexer finishes
                # meanwhile is then in Chroma before the index looks (read after, it was in neither).
                pending = yield Blocking(lambda: self.journal.pending_records(ns_ids, PENDING_EXACT))
                (vector,) = yield Embed([query])
                query_vector = vector
                # The scope's in-process index (one search, whatever the number of sessions); Chroma's
                # filtered query when it declines (the scope does not fit its byte bound). With kinds, in
                # any scope, the index answers only when the kinds hold most of its nearest (see
                # _mostly_of_kinds): a rare kind would be missing from them.
                found: list[tuple[int, float]] | None = None
                cache = self._scope_vectors
                if cache is not None:
                    found = yield Blocking(lambda: cache.search(listing, vector, want))
                    if found and kinds:
                        nearest = found
                        found, loaded = yield Blocking(lambda: self._mostly_of_kinds(nearest, kinds))
                if found is not None:
                    indexed = True
                    scored = [(str(rid), sim) for rid, sim in found]
                else:
                    where = self.where_ns(ns_ids, kinds)
                    hits = yield Blocking(lambda: store.query(vector, want, where))
                    scored = [(str(rid), h.similarity) for h in hits if (rid := self._record_id(h.id)) is not None]
                # The rows not indexed yet: an exact search over just those few.
                if kinds:
                    pending = [r for r in pending if r.kind in kinds]
                if pending:
                    try:
                        pending_vectors = yield from self._embed_records(pending)
                        scored = _merge_exact(scored, pending, pending_vectors, vector)
                    except Exception as e:  # e.g. a text the embedder rejects: keyword recall still finds it
                        log.warning("could not embed %d pending rows for this query: %s", len(pending), e)
                vector_ids = [rid for rid, _ in sorted(scored, key=lambda p: -p[1])[:want]]
            except Exception as e:  # vector side down: answer from keywords alone
                self.last_error = f"{type(e).__name__}: {e}"
                log.warning("vector recall failed, using keyword recall only: %s", self.last_error)
        now = time.time() if now is None else now
        opts = self.options
        analysis = analyze(query, now if filters.now is None else filters.now)
        rounds = _Rounds()  # what each fusion round leaves to the next
        extra: list[tuple[list[str], float]] = []
        if opts.salient_weight > 0 and analysis.salient:
            salient = yield Blocking(lambda: self.journal.keyword_search(" ".join(analysis.salient), ns_ids, want,
                                                                          kinds, listing.versions))
            extra.append(([str(h.record_id) for h in salient], opts.salient_weight))
        by_id = yield from self._load(list(dict.fromkeys([*vector_ids, *keyword_ids, *(c for ids, _ in extra
                                                                                      for c in ids)])),
                                      scope, filters, skip, loaded)
        fused = self._fuse(keyword_ids, vector_ids, extra, by_id, now, analysis, rounds)
        if opts.feedback_weight > 0 and fused:
            top = [by_id[c].text for c, _ in fused[:opts.feedback_docs]]
            more_terms = feedback_terms(query, top)
            if more_terms:
                second = f"{query} {' '.join(more_terms)}"
                feedback = yield Blocking(lambda: self.journal.keyword_search(second, ns_ids, want, kinds,
                                                                               listing.versions))
                extra.append(([str(h.record_id) for h in feedback], opts.feedback_weight))
                fresh_ids = [c for c in extra[-1][0] if c not in by_id]
                if fresh_ids:
                    by_id.update((yield from self._load(fresh_ids, scope, filters, skip)))
                fused = self._fuse(keyword_ids, vector_ids, extra, by_id, now, analysis, rounds)
        leads: list[str] = []  # the first round's best: the neighbor list never reorders them (leads_first)
        if opts.neighbor_weight > 0 and fused and (not kinds or "turn" in kinds):
            leads = [c for c, _ in fused[:opts.neighbor_docs]]
            lead_records = [by_id[c] for c in leads]
            around = yield Blocking(lambda: self._neighbor_turns(lead_records))  # _load leaves out the window's
            extra.append(([str(n.id) for n in around], opts.neighbor_weight))
            fresh = {str(n.id): n for n in around if str(n.id) not in by_id}
            if fresh:
                by_id.update((yield from self._load(list(fresh), scope, filters, skip, fresh)))
            fused = self._fuse(keyword_ids, vector_ids, extra, by_id, now, analysis, rounds)
        if opts.session_weight > 0 and scope.kind != "session" and len(ns_ids) > opts.session_top:
            # Two-stage: the sessions of the best candidates, searched again more deeply.
            best = _best_sessions(fused, by_id, opts.session_top)
            chosen_ids = sorted(n for ns in best if (n := listing.ids_by_name.get(ns)) is not None)
            stage_kw = yield Blocking(lambda: self.journal.keyword_search(query, chosen_ids, want, kinds,
                                                                           listing.versions))
            extra.append(([str(h.record_id) for h in stage_kw], opts.session_weight))
            if query_vector is not None and self._scope_vectors is not None and not kinds:
                stage_cache = self._scope_vectors
                stage_vec = yield Blocking(lambda: stage_cache.search_each(chosen_ids, query_vector, want))
                if stage_vec is not None:
                    extra.append(([str(rid) for rid, _ in stage_vec], opts.session_weight))
            more = [c for ids, _ in extra for c in ids if c not in by_id]
            if more:
                by_id.update((yield from self._load(more, scope, filters, skip)))
            fused = self._fuse(keyword_ids, vector_ids, extra, by_id, now, analysis, rounds)
        if leads:
            fused = leads_first(fused, leads)
        if opts.diversity > 0 and indexed and len(fused) > 1 and self._scope_vectors is not None:
            held, pool = self._scope_vectors, [int(c) for c, _ in fused[:2 * k]]
            vectors = yield Blocking(lambda: held.vectors_of(listing, pool))
            fused = diversified(fused, vectors, opts.diversity, 2 * k, len(leads))
        return [(r, parts) for cid, parts in fused if passes(r := by_id[cid], filters)]

    def select(self, ranked: Sequence[Ranked], k: int) -> list[RecallHit]:
        """The first ``k`` of ``ranked`` as hits, one per turn and no near-duplicates."""
        out: list[RecallHit] = []
        kept = NearDuplicates(self.dedupe_threshold)  # each kept hit's words, split once
        turn_messages: set[int] = set()  # the messages of the turns kept so far
        for r, parts in ranked:
            # One hit per turn: a long turn is indexed as several chunks, and a turn that grew after it
            # was answered has an earlier record too; the best one speaks for the turn.
            if r.kind == "turn" and not turn_messages.isdisjoint(r.message_ids):
                continue
            words = word_set(r.text)
            if not kept.keep(words):
                continue
            if r.kind == "turn":
                turn_messages.update(r.message_ids)
            out.append(_hit(r, parts.total, parts._asdict()))
            if len(out) >= k:
                break
        return out

    def _mostly_of_kinds(self, found: list[tuple[int, float]], kinds: Sequence[str]
                         ) -> tuple[list[tuple[int, float]] | None, dict[str, Record]]:
        """The index's nearest of these kinds, when they are at least half of its nearest; else ``None``
        (Chroma's filtered query answers). Turns are most records of any scope, so a turns-only search
        (the re-query beside the profile, on every context() that shows a fact) stays on the index: at
        1M records Chroma's filtered query takes seconds. A rare kind would leave too few candidates.
        Also the records read to tell (by id), so that loading the candidates does not read them again."""
        records = {str(r.id): r for r in self.journal.records([rid for rid, _ in found])}
        kept = [(rid, sim) for rid, sim in found if (r := records.get(str(rid))) is not None and r.kind in kinds]
        return (kept if 2 * len(kept) >= len(found) else None), records

    def _neighbor_turns(self, top: Sequence[Record]) -> list[Record]:
        """The turn just before and the turn just after each turn of ``top`` in its session, in ``top``'s
        order, each once (a long turn's other chunks, which share its messages, are not its neighbors)."""
        out: dict[int, Record] = {}
        turns = [r for r in top if r.kind == "turn"]
        around = self.journal.beside([r.id for r in turns], "turn", NEIGHBOR_READ)
        for r in turns:
            for side in around[r.id]:
                near = next((n for n in side if set(n.message_ids).isdisjoint(r.message_ids)), None)
                if near is not None:
                    out.setdefault(near.id, near)
        return list(out.values())

    def _window_records(self, scope: Scope, exclude_message_ids: frozenset[int]) -> frozenset[str]:
        """Ids of the records made from the window's messages (``exclude_message_ids``), looked for
        among the newest records of the scope's own session: a turn becomes a record when it completes,
        so those are where they are."""
        if not exclude_message_ids:
            return frozenset()
        # One indexed lookup: scanning the scope's namespaces cost 6 ms for a user of 10,000 sessions.
        ns_id = self.journal.namespace_id(scope.namespace, create=False)
        if ns_id is None:
            return frozenset()
        # + 16: a few memories extracted or remembered since the window's first turn, ahead of it.
        newest = self.journal.newest_citations(ns_id, WINDOW_LOOK_BACK * len(exclude_message_ids) + 16)
        return frozenset(str(rid) for rid, cited in newest if not exclude_message_ids.isdisjoint(cited))

    def _load(self, ids: Sequence[str], scope: Scope, filters: SearchFilters,
              skip: frozenset[str] = frozenset(), loaded: Mapping[str, Record] | None = None
              ) -> Flow[dict[str, Record]]:
        """The candidates' records that belong to the scope (and kinds), by id, but for those in ``skip``
        (the window's); those in ``loaded`` (read earlier in this search) are not read again."""
        have = {c: r for c, r in (loaded or {}).items() if c not in skip}
        ids = [c for c in ids if c not in skip]
        missing = [int(c) for c in ids if c not in have]
        records = (yield Blocking(lambda: self.journal.records(missing))) if missing else []
        every = sorted([*(have[c] for c in ids if c in have), *records], key=lambda r: r.id)  # id order, as read
        return {str(r.id): r for r in every
                if scope.matches(r.namespace) and (not filters.kinds or r.kind in filters.kinds)}

    def _fuse(self, keyword_ids: Sequence[str], vector_ids: Sequence[str],
              extra: Sequence[tuple[Sequence[str], float]], by_id: Mapping[str, Record], now: float,
              analysis: Any, rounds: _Rounds) -> list[tuple[str, ScoreParts]]:
        """The candidates of ``by_id`` fused, best first. A later round of the same search (``rounds``)
        adds the lists appended to ``extra`` since to the fusion it left (:class:`Fusion`: the same
        ranking), unless a candidate read since is in an earlier list (then it fuses anew)."""
        opts = self.options
        fusion = rounds.fusion
        # Read since the last round (every candidate read is in some list, so the fusion holds the rest).
        fresh = list(by_id) if fusion is None else [c for c in by_id if c not in fusion]
        if fusion is not None and fresh:
            earlier = {*keyword_ids, *vector_ids, *(c for ids, _ in extra[:rounds.lists] for c in ids)}
            if not earlier.isdisjoint(fresh):
                fusion = None  # an earlier list gains a candidate: fuse anew
        scored = fresh if fusion is not None else list(by_id)  # whose recency, retention and boost are new
        boosts: dict[str, float] = {}
        for c in scored:
            r = by_id[c]
            boost = 1.0
            if opts.time_boost > 0 and analysis.window is not None \
                    and analysis.window[0] <= r.created_at < analysis.window[1]:
                boost *= 1.0 + opts.time_boost
            if opts.when_boost > 0 and analysis.asks_when:
                if c not in rounds.says_when:
                    rounds.says_when[c] = has_time_expression(r.text)
                if rounds.says_when[c]:
                    boost *= 1.0 + opts.when_boost
            if boost != 1.0:
                boosts[c] = boost
        ages = {c: max(now - by_id[c].created_at, 0.0) for c in scored}
        importances = {c: by_id[c].importance for c in scored}
        pinned = {c for c in scored if by_id[c].pinned}
        if fusion is not None:
            fusion.add([([c for c in ids if c in by_id], w) for ids, w in extra[rounds.lists:]], ages=ages,
                       importances=importances, pinned=pinned, boosts=boosts)
        else:
            fusion = Fusion([c for c in keyword_ids if c in by_id], [c for c in vector_ids if c in by_id],
                            ages=ages, importances=importances, pinned=pinned, params=self.params,
                            extra=[([c for c in ids if c in by_id], w) for ids, w in extra], boosts=boosts)
        rounds.fusion, rounds.lists = fusion, len(extra)
        return fusion.ranked

    def _linked(self, hits: list[RecallHit], scope: Scope, filters: SearchFilters) -> Flow[list[RecallHit]]:
        """One-hop expansion: records linked to a hit, scored ``hit score * strength / 2``."""
        have = {h.record_id for h in hits}
        score_of = {h.record_id: h.score for h in hits}
        links = yield Blocking(lambda: self.journal.links(sorted(have)))
        best: dict[int, tuple[float, int]] = {}
        for a, b, _, strength in links:
            source, other = (a, b) if a in have else (b, a)
            if other in have:
                continue
            score = score_of[source] * strength / 2
            if score > best.get(other, (0.0, 0))[0]:
                best[other] = (score, source)
        records = yield Blocking(lambda: self.journal.records(sorted(best)))
        return [
            _hit(r, best[r.id][0], {"linked_from": float(best[r.id][1]), "total": best[r.id][0]})
            for r in records if scope.matches(r.namespace) and passes(r, filters)
        ]

    def pinned(self, scope: Scope, memo: RequestMemo | None = None) -> list[Record]:
        ns_ids = ids_to_probe(scope_listing(self.journal, scope, memo), pinned_only=True)
        return self.journal.scoped_records(ns_ids, pinned_only=True)


@dataclass
class _Rounds:
    """One search's fusion between its rounds: the fusion so far, how many extra lists it holds, and
    each candidate's date test (``has_time_expression``, made once)."""

    fusion: Fusion | None = None
    lists: int = 0
    says_when: dict[str, bool] = field(default_factory=dict)


def passes(r: Record, f: SearchFilters) -> bool:
    """True when a record may be returned under these filters (namespace aside: see the callers)."""
    # Working-memory entries are delivered as the session's working state, never recalled;
    # an expired memory is never returned (see langmem_tiers.memory_types).
    if r.kind == WORKING_KIND:
        return False
    if EXPIRES_AT in r.metadata and is_expired(r.metadata, time.time() if f.now is None else f.now):
        return False
    if r.message_ids and f.exclude_message_ids and set(r.message_ids) & f.exclude_message_ids:
        return False
    if f.since is not None and r.created_at < f.since:
        return False
    if f.until is not None and r.created_at > f.until:
        return False
    if f.where:
        merged = {**r.metadata, "kind": r.kind, "tags": r.tags}
        for key, value in f.where.items():
            have = merged.get(key)
            if isinstance(have, tuple) and not isinstance(value, (list, tuple)):
                if value not in have:
                    return False
            elif have != value:
                return False
    return True


def leads_first(fused: Sequence[tuple[str, ScoreParts]], leads: Sequence[str]) -> list[tuple[str, ScoreParts]]:
    """The first round's best (``leads``, in its order) ahead of the rest, the rest as ``fused`` ranks
    them: the neighbor list brings turns in behind the leads and never reorders or displaces them, so a
    search for at most ``recall_neighbor_docs`` hits answers as without it (a remembered fact that matched
    every word stays first, a paraphrase found only by its vector too)."""
    lead_set = set(leads)
    by_id = dict(fused)
    return [(c, by_id[c]) for c in leads if c in by_id] + [item for item in fused if item[0] not in lead_set]


def diversified(fused: Sequence[tuple[str, ScoreParts]], vectors: Mapping[int, Any], diversity: float,
                pool: int, fixed: int = 0) -> list[tuple[str, ScoreParts]]:
    """``fused`` with its first ``pool`` reordered by maximal marginal relevance (Carbonell and
    Goldstein 1998): the first ``fixed`` stay; each next place goes to the candidate whose score as a
    share of the best, less ``diversity`` times its highest cosine similarity to those placed, is
    highest. A candidate without a vector is never penalized. The rest follow as ``fused`` ranks them."""
    import numpy as np

    head, rest = list(fused[:pool]), list(fused[pool:])
    if len(head) <= fixed + 1:
        return list(fused)
    best = max(parts.total for _, parts in head) or 1.0
    relevance = np.array([parts.total / best for _, parts in head], dtype=np.float32)
    dim = len(next(iter(vectors.values()))) if vectors else 1
    matrix = np.zeros((len(head), dim), dtype=np.float32)  # no vector: a zero row, similar to nothing
    for i, (cid, _) in enumerate(head):
        if (v := vectors.get(int(cid))) is not None:
            matrix[i] = v
    placed = list(range(fixed))
    nearest = np.zeros(len(head), dtype=np.float32)  # each one's highest similarity to a placed candidate
    for i in placed:
        nearest = np.maximum(nearest, matrix @ matrix[i])
    left = list(range(fixed, len(head)))
    while left:
        pick = left.pop(int(np.argmax(relevance[left] - diversity * nearest[left])))
        placed.append(pick)
        nearest = np.maximum(nearest, matrix @ matrix[pick])
    return [head[i] for i in placed] + rest


def _hit(r: Record, score: float, parts: Mapping[str, Any]) -> RecallHit:
    return RecallHit(
        record_id=r.id, kind=r.kind, text=r.text, score=score,
        parts={k: (float(v) if v is not None else None) for k, v in parts.items()},
        namespace=r.namespace, message_ids=r.message_ids, created_at=r.created_at,
        importance=r.importance, pinned=r.pinned, tags=r.tags, metadata=r.metadata, valid_to=r.valid_to,
    )



def _best_sessions(fused: Sequence[tuple[str, ScoreParts]], by_id: Mapping[str, Record],
                   top: int, per_session: int = 3) -> set[Namespace]:
    """The ``top`` sessions whose best ``per_session`` candidates score highest together."""
    totals: dict[Namespace, list[float]] = {}
    for cid, parts in fused:
        scores = totals.setdefault(by_id[cid].namespace, [])
        if len(scores) < per_session:
            scores.append(parts.total)
    ranked = sorted(totals, key=lambda ns: -sum(totals[ns]))
    return set(ranked[:top])


def _merge_exact(scored: list[tuple[str, float]], pending: Sequence[Record], vectors: Sequence[Any],
                 query: Any) -> list[tuple[str, float]]:
    """Add pending records, scored by exact cosine similarity, to an indexed vector ranking."""
    import numpy as np

    q = np.asarray(query, dtype=np.float32)
    q /= max(float(np.linalg.norm(q)), 1e-12)
    m = np.asarray(vectors, dtype=np.float32)
    m /= np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)
    exact = {str(r.id): float(sim) for r, sim in zip(pending, m @ q)}
    return [*[(rid, sim) for rid, sim in scored if rid not in exact], *exact.items()]


def _group_errors(items: Sequence[OutboxItem], failed: Mapping[int, str]) -> dict[str, list[OutboxItem]]:
    groups: dict[str, list[OutboxItem]] = {}
    for item in items:
        if item.record_id in failed:
            groups.setdefault(failed[item.record_id], []).append(item)
    return groups

