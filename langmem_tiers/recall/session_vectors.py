"""Exact vector search over one session's records, from an in-process copy of their vectors.

Chroma's filtered queries scan metadata and grow with the whole collection (about
44 ms at 50k records on 2 cores, `benchmarks/chroma_filter.py`), while an unfiltered query takes 3 ms. A
session is small next to the deployment's collection, so its vectors are fetched
from Chroma once, kept in memory and searched exactly with one matrix product.
The copy is checked against the journal on every query (record count and largest
id, one indexed lookup): new records are fetched incrementally, deletions trigger a
rebuild. User and agent scopes still query Chroma with a filter.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from langmem_tiers.journal.base import Journal, Namespace, Record
from langmem_tiers.recall.vector_store import ChromaStore

MAX_SESSIONS = 32  # least recently used sessions beyond this are dropped from memory


@dataclass
class _Vectors:
    namespace: Namespace
    count: int  # the journal's record count when this copy was made
    max_id: int
    ids: Any  # int64 array of record ids with a vector
    matrix: Any  # float32 (n, dim), rows normalized


class SessionVectors:
    """An LRU of per-session vector matrices, rebuilt from Chroma when the journal changes."""

    def __init__(self, journal: Journal, store: ChromaStore, vector_id: Callable[[int], str],
                 record_id: Callable[[str], int | None], max_sessions: int = MAX_SESSIONS) -> None:
        self.journal = journal
        self.store = store
        self._vector_id = vector_id
        self._record_id = record_id
        self._max_sessions = max_sessions
        self._cache: OrderedDict[int, _Vectors] = OrderedDict()
        self._lock = threading.Lock()

    def search(self, ns_id: int, namespace: Namespace, query: Sequence[float], k: int) -> list[int]:
        """Record ids of the ``k`` nearest vectors of one session, nearest first."""
        import numpy as np  # imported where first used: `import langmem_tiers` stays light

        vectors = self._current(ns_id, namespace)
        if len(vectors.ids) == 0 or k <= 0:
            return []
        q = np.asarray(query, dtype=np.float32)
        q /= max(float(np.linalg.norm(q)), 1e-12)
        scores = vectors.matrix @ q
        top = np.argpartition(-scores, min(k, len(scores)) - 1)[:k] if len(scores) > k else np.arange(len(scores))
        top = top[np.argsort(-scores[top])]
        return [int(i) for i in vectors.ids[top]]

    def invalidate(self, records: Sequence[Record]) -> None:
        """Drop the copies of sessions whose older records were (re-)embedded just now.

        A record newer than a copy is found through the journal's count and largest id;
        an older one (re-embedded after an edit, or indexed late after an outage) is
        not, so the copy goes. A record re-embedded by another process keeps its old
        vector here until the session's records change again.
        """
        with self._lock:
            stale = {n for n, v in self._cache.items()
                     for r in records if r.namespace == v.namespace and r.id <= v.max_id}
            for ns_id in stale:
                del self._cache[ns_id]

    def _current(self, ns_id: int, namespace: Namespace) -> _Vectors:
        import numpy as np

        count, max_id = self.journal.record_stats(ns_id)
        with self._lock:
            cached = self._cache.get(ns_id)
            if cached is not None:
                self._cache.move_to_end(ns_id)
                if (cached.count, cached.max_id) == (count, max_id):
                    return cached
        if cached is not None and max_id > cached.max_id:
            new_ids = self.journal.record_ids(ns_id, after=cached.max_id)
            if cached.count + len(new_ids) == count:  # only additions since the copy: fetch just those
                fresh = self._fetch(namespace, new_ids, count, max_id)
                if not len(cached.ids) or not len(fresh.ids):
                    # An empty side has no known width ((0, 0)): concatenating it with (n, 384)
                    # raised, and every query fell back to keyword recall only.
                    whole = fresh if len(fresh.ids) else cached
                    merged = _Vectors(namespace, count, max_id, whole.ids, whole.matrix)
                else:
                    merged = _Vectors(namespace, count, max_id, np.concatenate([cached.ids, fresh.ids]),
                                      np.concatenate([cached.matrix, fresh.matrix]))
                return self._keep(ns_id, merged)
        return self._keep(ns_id, self._fetch(namespace, self.journal.record_ids(ns_id), count, max_id))

    def _fetch(self, namespace: Namespace, record_ids: Sequence[int], count: int, max_id: int) -> _Vectors:
        import numpy as np

        found, matrix = self.store.embeddings([self._vector_id(r) for r in record_ids])
        ids = np.array([self._record_id(v) for v in found], dtype=np.int64)
        if len(found):
            matrix = matrix / np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
        return _Vectors(namespace, count, max_id, ids, matrix.astype(np.float32, copy=False))

    def _keep(self, ns_id: int, vectors: _Vectors) -> _Vectors:
        with self._lock:
            self._cache[ns_id] = vectors
            self._cache.move_to_end(ns_id)
            while len(self._cache) > self._max_sessions:
                self._cache.popitem(last=False)
        return vectors
