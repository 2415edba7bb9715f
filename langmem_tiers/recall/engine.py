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
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from langmem_tiers.embedders.base import Embedder
from langmem_tiers.errors import ConfigError
from langmem_tiers.flow import Blocking, Embed, Flow
from langmem_tiers.journal.base import Journal, Namespace, Record, Scope
from langmem_tiers.recall.fusion import FusionParams, fuse, jaccard
from langmem_tiers.recall.hits import RecallHit
from langmem_tiers.recall.session_vectors import SessionVectors
from langmem_tiers.recall.vector_store import ChromaStore

log = logging.getLogger(__name__)

SCOPES = ("session", "user", "agent")


@dataclass(frozen=True)
class SearchFilters:
    """Optional filters of a recall query (all combined with AND)."""

    kinds: tuple[str, ...] | None = None
    where: Mapping[str, Any] | None = None
    since: float | None = None
    until: float | None = None
    exclude_message_ids: frozenset[int] = frozenset()


class RecallIndex:
    """Keyword + vector recall over one journal and (optionally) one Chroma collection."""

    def __init__(self, journal: Journal, store: ChromaStore | None, embedder: Embedder | None, *,
                 params: FusionParams | None = None, candidates: int = 50, dedupe_threshold: float = 0.85,
                 batch_size: int = 64) -> None:
        if (store is None) != (embedder is None):
            raise ConfigError("vector recall needs both a Chroma store and an embedder (or neither)")
        self.journal = journal
        self.store = store
        self.embedder = embedder
        self.params = params or FusionParams()
        self.candidates = candidates
        self.dedupe_threshold = dedupe_threshold
        self.batch_size = batch_size
        self.last_error: str | None = None
        self._uid: str = getattr(journal, "uid", "")
        self._session_vectors = (
            SessionVectors(journal, store, self.vector_id, self._record_id) if store is not None else None
        )

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

        Failures leave rows pending with a growing retry delay; ``force`` (``flush()``,
        ``reindex()``) retries them now and stops at the first failure.
        """
        done = 0
        batches = 0
        while max_batches is None or batches < max_batches:
            items = yield Blocking(lambda: self.journal.outbox(self.batch_size, due_only=not force))
            if not items:
                break
            batches += 1
            ids = [i.record_id for i in items]
            if self.store is None or self.embedder is None:
                yield Blocking(lambda: self.journal.outbox_done(items))  # keyword-only: nothing to push
                done += len(ids)
                continue
            store = self.store
            try:
                deletes = [i.record_id for i in items if i.op == "delete"]
                upserts = [i.record_id for i in items if i.op == "upsert"]
                if deletes:
                    yield Blocking(lambda: store.delete(ids=[self.vector_id(r) for r in deletes]))
                records = (yield Blocking(lambda: self.journal.records(upserts))) if upserts else []
                if records:
                    vectors = yield Embed([r.text for r in records])
                    ns_of = yield Blocking(lambda: self._ns_ids(records))
                    yield Blocking(lambda: store.upsert(
                        [self.vector_id(r.id) for r in records], vectors, None,
                        [self._metadata(r, ns_of[r.namespace]) for r in records]))
                    if self._session_vectors is not None:
                        self._session_vectors.invalidate(records)
            except Exception as e:  # any outage: keep the rows, retry later
                self.last_error = f"{type(e).__name__}: {e}"
                log.warning("recall indexing failed, %d rows stay pending: %s", len(ids), self.last_error)
                yield Blocking(lambda: self.journal.outbox_failed(items, self.last_error or ""))
                break
            yield Blocking(lambda: self.journal.outbox_done(items))
            self.last_error = None
            done += len(ids)
        return done

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
                    now: float | None = None, expand: bool = False) -> Flow[list[RecallHit]]:
        if scope.kind not in SCOPES:
            raise ConfigError(f"scope ({scope.kind!r}) must be one of {', '.join(SCOPES)}")
        if k <= 0 or not query.strip():
            return []
        yield from self.index_flow()
        namespaces = yield Blocking(lambda: self.journal.namespaces(scope))
        ns_ids = [n for n, _ in namespaces]
        if not ns_ids:
            return []
        # Records of turns the window holds are excluded below: ask for that many more.
        want = max(self.candidates, 4 * k) + len(filters.exclude_message_ids)
        kinds = list(filters.kinds) if filters.kinds else None
        keyword = yield Blocking(lambda: self.journal.keyword_search(query, ns_ids, want, kinds))
        keyword_ids = [str(h.record_id) for h in keyword]
        vector_ids: list[str] = []
        if self.store is not None and self.embedder is not None:
            store = self.store
            try:
                (vector,) = yield Embed([query])
                if scope.kind == "session" and self._session_vectors is not None:
                    # Exact search over the session's own vectors (see session_vectors.py).
                    cache = self._session_vectors
                    found = yield Blocking(lambda: cache.search(ns_ids[0], scope.namespace, vector, want))
                    vector_ids = [str(rid) for rid in found]
                else:
                    where = self.where_ns(ns_ids, kinds)
                    hits = yield Blocking(lambda: store.query(vector, want, where))
                    vector_ids = [str(rid) for h in hits if (rid := self._record_id(h.id)) is not None]
            except Exception as e:  # vector side down: answer from keywords alone
                self.last_error = f"{type(e).__name__}: {e}"
                log.warning("vector recall failed, using keyword recall only: %s", self.last_error)
        candidates = list(dict.fromkeys([*vector_ids, *keyword_ids]))
        records = yield Blocking(lambda: self.journal.records([int(c) for c in candidates]))
        by_id = {str(r.id): r for r in records
                 if scope.matches(r.namespace) and (not filters.kinds or r.kind in filters.kinds)}
        now = time.time() if now is None else now
        fused = fuse(
            [c for c in keyword_ids if c in by_id], [c for c in vector_ids if c in by_id],
            ages={c: max(now - r.created_at, 0.0) for c, r in by_id.items()},
            importances={c: r.importance for c, r in by_id.items()},
            pinned={c for c, r in by_id.items() if r.pinned}, params=self.params,
        )
        out: list[RecallHit] = []
        for cid, parts in fused:
            r = by_id[cid]
            if not _passes(r, filters):
                continue
            # One hit per turn: a long turn is indexed as several chunks, and a turn that grew after it
            # was answered has an earlier record too; the best one speaks for the turn.
            if r.message_ids and any(set(h.message_ids) & set(r.message_ids) for h in out):
                continue
            if any(jaccard(r.text, h.text) >= self.dedupe_threshold for h in out):
                continue
            out.append(_hit(r, parts.total, asdict(parts)))
            if len(out) >= k:
                break
        if expand and out:
            out += yield from self._linked(out, scope, filters)
        return out

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
            for r in records if scope.matches(r.namespace) and _passes(r, filters)
        ]

    def pinned(self, scope: Scope) -> list[Record]:
        ns_ids = [n for n, _ in self.journal.namespaces(scope)]
        return self.journal.scoped_records(ns_ids, pinned_only=True)


def _passes(r: Record, f: SearchFilters) -> bool:
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


def _hit(r: Record, score: float, parts: Mapping[str, Any]) -> RecallHit:
    return RecallHit(
        record_id=r.id, kind=r.kind, text=r.text, score=score,
        parts={k: (float(v) if v is not None else None) for k, v in parts.items()},
        namespace=r.namespace, message_ids=r.message_ids, created_at=r.created_at,
        importance=r.importance, pinned=r.pinned, tags=r.tags, metadata=r.metadata,
    )

