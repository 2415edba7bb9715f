"""Exact vector search over one session's records, from an in-process copy of their vectors.

Chroma's filtered queries scan metadata and grow with the whole collection (about
44 ms at 50k records on 2 cores, `benchmarks/chroma_filter.py`), while an unfiltered query takes 3 ms. A
session is small next to the deployment's collection, so its vectors are fetched
from Chroma once, kept in memory and searched exactly with one matrix product.
The copy is checked against the journal on every query (record count and largest
id, one indexed lookup): new records are fetched incrementally, deletions trigger a
rebuild, and records that had no vector yet when copied are looked up again until
they have one (another process may embed them). User and agent scopes search the
copies of their sessions the same way while they fit the cache together (``MAX_SESSIONS``,
``MAX_BYTES``); beyond that they query Chroma with a filter.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from langmem_tiers.journal.base import Journal, Namespace, Record
from langmem_tiers.recall.vector_store import ChromaStore

MAX_SESSIONS = 1024  # least recently used sessions beyond this are dropped from memory
MAX_BYTES = 256 * 2**20  # and beyond this many bytes of vectors (float32), whichever comes first


@dataclass
class _Vectors:
    namespace: Namespace
    count: int  # the journal's record count when this copy was made
    max_id: int
    ids: Any  # int64 array of record ids with a vector
    matrix: Any  # float32 (n, dim), rows normalized
    missing: frozenset[int] = frozenset()  # records without a vector when copied (not embedded yet)


class SessionVectors:
    """An LRU of per-session vector matrices, rebuilt from Chroma when the journal changes."""

    def __init__(self, journal: Journal, store: ChromaStore, vector_id: Callable[[int], str],
                 record_id: Callable[[str], int | None], max_sessions: int = MAX_SESSIONS,
                 max_bytes: int = MAX_BYTES) -> None:
        self.journal = journal
        self.store = store
        self._vector_id = vector_id
        self._record_id = record_id
        self._max_sessions = max_sessions
        self._max_bytes = max_bytes
        self._cache: OrderedDict[int, _Vectors] = OrderedDict()
        self._lock = threading.Lock()
        self._fetching: dict[int, threading.Lock] = {}

    def search(self, ns_id: int, namespace: Namespace, query: Sequence[float], k: int) -> list[tuple[int, float]]:
        """Record ids and cosine similarities of the ``k`` nearest vectors of one session, nearest first."""
        import numpy as np  # imported where first used: `import langmem_tiers` stays light

        vectors = self._current(ns_id, namespace)
        if len(vectors.ids) == 0 or k <= 0:
            return []
        q = np.asarray(query, dtype=np.float32)
        q /= max(float(np.linalg.norm(q)), 1e-12)
        scores = vectors.matrix @ q
        top = np.argpartition(-scores, min(k, len(scores)) - 1)[:k] if len(scores) > k else np.arange(len(scores))
        top = top[np.argsort(-scores[top])]
        return [(int(vectors.ids[i]), float(scores[i])) for i in top]

    def search_many(self, sessions: Sequence[tuple[int, Namespace]], query: Sequence[float],
                    k: int) -> list[tuple[int, float]] | None:
        """The ``k`` nearest vectors over several sessions (a user's or an agent's), nearest first.

        ``None`` when the sessions would not fit the cache together (the caller then asks the
        vector store with a filter): searching them here would evict each other on every query.
        """
        import numpy as np

        if len(sessions) > self._max_sessions:
            return None
        q = np.asarray(query, dtype=np.float32)
        q /= max(float(np.linalg.norm(q)), 1e-12)
        found: list[tuple[int, float]] = []
        held = 0
        for ns_id, namespace in sessions:
            vectors = self._current(ns_id, namespace)
            held += vectors.matrix.nbytes
            if held > self._max_bytes:
                return None
            if len(vectors.ids) == 0:
                continue
            scores = vectors.matrix @ q
            top = np.argpartition(-scores, k - 1)[:k] if len(scores) > k else np.arange(len(scores))
            found += [(int(vectors.ids[i]), float(scores[i])) for i in top]
        found.sort(key=lambda p: -p[1])
        return found[:k]

    def invalidate(self, records: Sequence[Record]) -> None:
        """Drop the copies of sessions whose older records were (re-)embedded just now.

        A record newer than a copy is found through the journal's count and largest id;
        one that had no vector when copied is looked up again on the next query (so a
        record embedded later by another process is found); one re-embedded after an edit
        in this process drops the copy here.
        """
        with self._lock:
            stale = {n for n, v in self._cache.items()
                     for r in records if r.namespace == v.namespace and r.id <= v.max_id}
            for ns_id in stale:
                del self._cache[ns_id]

    def _current(self, ns_id: int, namespace: Namespace) -> _Vectors:
        # One fetch per session at a time: concurrent cold queries wait for the first one's copy.
        with self._lock:
            fetching = self._fetching.setdefault(ns_id, threading.Lock())
        with fetching:
            return self._refresh(ns_id, namespace)

    def _refresh(self, ns_id: int, namespace: Namespace) -> _Vectors:
        count, max_id = self.journal.record_stats(ns_id)
        with self._lock:
            cached = self._cache.get(ns_id)
            if cached is not None:
                self._cache.move_to_end(ns_id)
        if cached is not None and (cached.count, cached.max_id) == (count, max_id):
            if cached.missing:
                # Records not embedded when copied: another process may have embedded them since.
                found = self._fetch(namespace, sorted(cached.missing), count, max_id)
                if len(found.ids):
                    return self._keep(ns_id, _merge(cached, found, count, max_id))
            return cached
        if cached is not None and max_id > cached.max_id:
            # Other processes keep adding records while this reads: a copy describes exactly the ids it
            # read (ids beyond the counted ``max_id`` wait for the next query), or the next incremental
            # fetch would ask for some ids twice.
            new_ids = [i for i in self.journal.record_ids(ns_id, after=cached.max_id) if i <= max_id]
            if cached.count + len(new_ids) == count:  # only additions since the copy: fetch just those
                wanted = [*sorted(cached.missing - set(new_ids)), *new_ids]
                fresh = self._fetch(namespace, wanted, count, max_id)
                return self._keep(ns_id, _merge(cached, fresh, count, max_id))
        ids = self.journal.record_ids(ns_id)
        return self._keep(ns_id, self._fetch(namespace, ids, len(ids), max(ids, default=0)))

    def _fetch(self, namespace: Namespace, record_ids: Sequence[int], count: int, max_id: int) -> _Vectors:
        import numpy as np

        found, matrix = self.store.embeddings([self._vector_id(r) for r in record_ids])
        ids = np.array([self._record_id(v) for v in found], dtype=np.int64)
        if len(found):
            matrix = matrix / np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
        missing = frozenset(record_ids) - {int(i) for i in ids}
        return _Vectors(namespace, count, max_id, ids, matrix.astype(np.float32, copy=False), missing)

    def _keep(self, ns_id: int, vectors: _Vectors) -> _Vectors:
        with self._lock:
            self._cache[ns_id] = vectors
            self._cache.move_to_end(ns_id)
            total = sum(v.matrix.nbytes for v in self._cache.values())
            while len(self._cache) > 1 and (len(self._cache) > self._max_sessions or total > self._max_bytes):
                evicted, dropped = self._cache.popitem(last=False)
                total -= dropped.matrix.nbytes
                self._fetching.pop(evicted, None)
        return vectors


def _merge(cached: _Vectors, fresh: _Vectors, count: int, max_id: int) -> _Vectors:
    """A copy plus vectors fetched since; ``fresh.missing`` says what is still not embedded."""
    import numpy as np

    if not len(cached.ids) or not len(fresh.ids):
        # An empty side has no known width ((0, 0)): concatenating it with (n, 384) raised, and
        # every query fell back to keyword recall only.
        whole = fresh if len(fresh.ids) else cached
        ids, matrix = whole.ids, whole.matrix
    else:
        ids, matrix = np.concatenate([cached.ids, fresh.ids]), np.concatenate([cached.matrix, fresh.matrix])
    missing = (cached.missing - {int(i) for i in fresh.ids}) | fresh.missing
    return _Vectors(cached.namespace, count, max_id, ids, matrix, frozenset(missing))
