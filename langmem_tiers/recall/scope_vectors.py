"""Vector search over one scope's records (a session, or a user's or agent's sessions) from an in-process index.

Chroma's filtered queries scan metadata and grow with the whole collection (about 44 ms at 50k
records on 2 cores, ``benchmarks/chroma_filter.py``), while an unfiltered query takes 3 ms. So the
vectors of a scope are fetched from Chroma once, kept in memory and searched here:

* **One entry per scope**, keyed by the scope's set of namespace ids: a session scope is one id, a
  user scope all the user's sessions (a user with one session: the same key, one entry). Searching a
  user's 1,000 sessions is one search over one entry. A scope that grew (the user opened a new
  session) takes over the cached entry of its largest cached sub-scope instead of fetching all again.
* **Small entries are exact**: a float32 matrix searched with one product, up to ``HNSW_FROM``
  vectors (the evaluation's haystacks all stay here: their results are exactly what they were).
  Larger entries are an HNSW graph from ``usearch`` (cosine, int8, parameters chosen by
  ``benchmarks/vector_index.py`` on real MiniLM vectors): about 0.6 KB per vector instead of 1.5 KB,
  and a search that does not grow with the scope. An entry stays HNSW once it became one.
* **A graph is built in the background, never inside a query.** Adding vectors to an int8 HNSW graph
  runs at ~860 vectors/s for real MiniLM vectors on a loaded 2-core machine (~120/s for random
  ones): a cold query of a 50k-vector scope that built its graph inline took 216 s. So when a scope
  of more than ``HNSW_FROM`` vectors needs an entry, a daemon thread builds it (one build per scope,
  ``max_builds`` at a time so several large users do not starve the CPU) while ``search`` returns
  ``None`` and the caller answers from the vector store's query (correct; Chroma's filtered query grows with
  the whole collection, ~180 ms a ``context()`` of a user of 100k messages against ~13 from the graph, which
  ``ChromaStore.query`` avoids where most of the collection's nearest are the scope's). Where the
  scope's exact rows and its graph fit the byte bound together (up to ~300k vectors alone in the default
  bound; beyond, up to ~600k, as int8 rows, a quarter of the bytes, ranked as int8 vectors:
  :class:`_CompactRows`), the build reads the vectors as rows, installs them, and queues the graph's build
  from them: the scope answers from every row (one product) once its vectors are read, not once its graph
  is built. The finished entry
  is admitted under the same byte bound and rules as any other, as of the journal versions read when
  its build started: the first query that uses it applies what changed meanwhile (additions,
  deletions, edits) through the incremental paths below before it answers, so a record erased during
  the build is never served. An exact entry that grows past ``HNSW_FROM`` keeps answering while its
  graph is built from its own rows, and is replaced when the graph is ready. A failed build (Chroma
  down) is logged and tried again by a query at least ``build_retry_s`` later. Exact entries are
  built inside the query as before (a product of at most ``HNSW_FROM`` rows needs no build, and the
  evaluation's results stay bit-identical). :meth:`ScopeVectors.close` stops the builders: no
  journal or Chroma call of a build starts after it returns.
* **One freshness check per query** for the whole entry: ``Journal.scope_versions`` gives per
  namespace the largest record id ever inserted, the records deleted and the texts edited so far.
  Records above the entry's last id are fetched incrementally; when the deleted count moved, the
  namespace's current ids are diffed against the entry's and the gone ones removed (an erased
  record never comes back from the index, and a million-vector entry is never rebuilt for one
  deletion); when the edited count moved, the namespace's vectors are fetched again and changed
  rows replaced. Records that had no vector yet when fetched are looked up again on every query
  (another process may embed them); :meth:`ScopeVectors.invalidate` marks records this process
  re-embedded. An entry describes exactly the ids it read: ids above the checked version wait for
  the next query, so no id is ever fetched twice (Chroma refuses a request that repeats one).
* **Vectors this process just embedded are not read back from Chroma.** The indexer hands each
  batch it pushed to :meth:`ScopeVectors.offer`, with each namespace's count of edited texts read
  before it read those texts again. A fetch takes an offered vector instead of asking Chroma while
  that count is unchanged (so the text it was computed from is still the record's text), once: a
  new scope's first query otherwise read all its vectors back (58 of 130 ms of a LongMemEval
  question's query, issue 15), and a live session's query read back every turn indexed since the
  last. At most ``OFFER_MAX`` wait; ids a fetch does not want (erased since) are never served.
* **A byte bound for all entries together** (``MemoryConfig.vector_cache_mb``), least recently used
  first (a graph being built counts once it is installed). A scope whose vectors alone would
  exceed it gets no entry (``search`` returns ``None``: the caller queries Chroma with a filter),
  and a new entry evicts others only when it was asked for more often than each of them (a
  frequency count halved every ``DECAY_EVERY`` lookups): with many active scopes that do not fit
  together, the hot ones stay and the others use Chroma's filtered query, instead of every query
  fetching a scope's vectors again (thrash).

The store is any :class:`~langmem_tiers.recall.vector_store.VectorStore`: "Chroma" above stands for it (with
:class:`~langmem_tiers.recall.sqlite_vectors.SqliteVectorStore` the declined scope's query is an exact scan).

Nothing is written to disk: erased vectors leave memory with the next query of their scope, and
the process's copy dies with it.
"""

from __future__ import annotations

import atexit
import importlib.util
import logging
import threading
import time
import weakref
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langmem_tiers.journal.base import Journal, ScopeListing, Versions
from langmem_tiers.recall.vector_store import VectorStore

log = logging.getLogger(__name__)

# Entries of more vectors than this are HNSW graphs; up to it, exact matrices. benchmarks/vector_index.py
# (real MiniLM vectors, k=50, 16-core device): exact 0.08 ms vs HNSW 0.15 ms at 10k, 0.30 vs 0.16 ms at
# 20k, 0.67 vs 0.27 ms at 50k, 19.7 vs 0.3-1 ms at 1M; so up to 20k exact costs nothing next to the
# query's embedding (~13 ms), gives exact results and needs no build, and every evaluation haystack
# stays below it. Beyond, exact grows with the scope and HNSW does not.
HNSW_FROM = 20_000
# usearch parameters, chosen with benchmarks/vector_index.py on MiniLM vectors of LongMemEval turns (16-core
# device run; recall is the same on any machine): at 100k, connectivity 16 / expansion_add 64 /
# expansion_search 128 finds 0.960 of the exact top 50 in 0.28 ms, where int8 rounding alone caps it at
# ~0.968 (connectivity 32: 0.965 for +200 bytes a vector; expansion 256: 0.967 in 0.47 ms). At 1M
# (turns replicated with noise: near-duplicates, a hard case) 128 finds 0.74 of the distinct turns and
# 512 finds 0.91-0.94 in ~1 ms, so entries beyond HNSW_LARGE search wider.
HNSW_CONNECTIVITY = 16
HNSW_EXPANSION_ADD = 64
HNSW_EXPANSION_SEARCH = 128
HNSW_LARGE = 200_000
HNSW_EXPANSION_SEARCH_LARGE = 512
# MemoryConfig.vector_cache_mb's default: 1M 384-d vectors as int8 HNSW are 557 MiB by the formula below
# (measured RSS: 580-636 bytes a vector at 100k-1M), plus 8 MiB of known ids: 640 MiB leaves ~13%.
DEFAULT_MAX_BYTES = 640 * 2**20
# Vectors read from Chroma per request. Over HTTP each arrives as JSON text (held twice, as bytes and
# as text), then as 384 Python floats and a float64 array before it is float32 here: with 4096 a request,
# a build of 50k vectors raised the serving process's peak RSS by 370 MB for a 29 MB graph (freed floats
# fragment the heap); 512: 135 MB, 128: 91 MB. Fetching 20k vectors takes the same time at 128 as at
# 4096 (~2 s over HTTP, ~0.7 s embedded), so small requests cost nothing (issue 15, tenth step).
FETCH_CHUNK = 128
DECAY_EVERY = 1024  # lookups between halvings of the admission counts
HOT_WINDOW = 256  # an entry used within this many lookups is not pushed out by a scope asked for less often
EDIT_RECHECK_S = 1.0  # while an edited namespace still has rows to index: re-read it at most this often
SAME_VECTOR = 0.99  # cosine above which a re-fetched vector is the one an HNSW entry holds (int8 rounding)
BUILD_RETRY_S = 30.0  # a failed background build (Chroma down) is tried again by a query this much later
# Background builds at a time. A graph's adds run on one thread (see _HnswRows.add), and a read is CPU work in
# this process too (embedded Chroma, or a server's JSON decoded): a second build would take a 2-core host's other
# core from the queries.
MAX_BUILDS = 1
# Vectors added to a graph per call in a build: a closed index stops it within one slice (256 random
# vectors take ~2 s on the loaded 2-core machine, real ones ~0.3 s).
GRAPH_SLICE = 256
CLOSE_WAIT_S = 30.0  # close() waits this long at most for a build to stop
# Offered vectors (the indexer's fresh ones) held until a fetch takes them, oldest dropped first: a
# LongMemEval haystack's turns, or minutes of a busy process's writes (12 MiB at 384-d).
OFFER_MAX = 8192
# A scope that takes over a cached graph adds the vectors it lacks inside the query: only a few (a new
# session). Beyond this many, the scope's graph is built in the background instead.
ADOPT_MAX_ADD = 2048


def hnsw_bytes_per_vector(dim: int, connectivity: int = HNSW_CONNECTIVITY) -> int:
    """Resident bytes of one vector in an int8 HNSW entry: the vector, its base-layer links, key and
    bookkeeping (measured: about 650 bytes at 384-d; benchmarks/vector_index.py), and its known id."""
    return dim + 8 * connectivity + 64 + 8


def exact_bytes_per_vector(dim: int) -> int:
    """Bytes of one vector in an exact entry: float32 row, its id, and its known id."""
    return 4 * dim + 16


def compact_bytes_per_vector(dim: int) -> int:
    """Bytes of one vector in a compact rows entry (:class:`_CompactRows`): int8 row, its id, its known id."""
    return dim + 16


class _ExactRows:
    """A float32 matrix of normalized rows and their record ids; replaced, never changed in place."""

    dtype = "float32"  # of the rows held (:meth:`held`)

    def __init__(self) -> None:
        import numpy as np

        self.ids: Any = np.empty(0, dtype=np.int64)
        self.matrix: Any = np.empty((0, 0), dtype=self.dtype)

    def held(self, matrix: Any) -> Any:
        """Unit float32 rows as this matrix holds them."""
        return matrix

    def unit(self, rows: Any) -> Any:
        """Held rows as unit float32 vectors."""
        return rows

    def empty_like(self) -> _ExactRows:
        """A new, empty matrix of the same kind."""
        return type(self)()

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def nbytes(self) -> int:
        return int(self.ids.nbytes + self.matrix.nbytes)

    def add(self, ids: Any, matrix: Any) -> None:
        import numpy as np

        if not len(ids):
            return
        matrix = self.held(matrix)
        if len(self.ids):
            self.remove(ids)  # a re-fetched id replaces its row
        if not len(self.ids):
            # An empty side has no known width ((0, 0)): concatenating it with (n, 384) raises.
            self.ids, self.matrix = ids, matrix
        else:
            self.ids, self.matrix = np.concatenate([self.ids, ids]), np.concatenate([self.matrix, matrix])

    def remove(self, ids: Any) -> None:
        import numpy as np

        if len(self.ids) and len(ids):
            keep = ~np.isin(self.ids, ids)
            if not keep.all():
                self.ids, self.matrix = self.ids[keep], self.matrix[keep]

    def vectors(self, ids: Sequence[int]) -> dict[int, Any]:
        """The rows of these ids that this matrix holds (unit vectors), by id."""
        import numpy as np

        if not len(self.ids) or not len(ids):
            return {}
        rows = np.flatnonzero(np.isin(self.ids, np.asarray(ids, dtype=np.int64)))
        return dict(zip(self.ids[rows].tolist(), self.unit(self.matrix[rows]), strict=True)) if len(rows) else {}

    def search(self, q: Any, k: int) -> list[tuple[int, float]]:
        import numpy as np

        if not len(self.ids):
            return []
        scores = self.matrix @ q
        top = np.argpartition(-scores, min(k, len(scores)) - 1)[:k] if len(scores) > k else np.arange(len(scores))
        top = top[np.argsort(-scores[top])]
        return [(int(self.ids[i]), float(scores[i])) for i in top]


class _CompactRows(_ExactRows):
    """Rows held as int8 (each unit row times 127, rounded): a quarter of float32's bytes, for a scope whose
    float32 rows and graph do not fit the byte bound together (beyond ~300k vectors in the default bound, up
    to ~600k). Every row is compared (usearch's int8 kernels), so nothing is missed as a graph may miss it, but
    the ranking is the int8 vectors': within ~0.01 of the float32 similarities, which reorders near ties
    (590k random vectors: 0.89 of float32's top 50, in 42 ms p50 against float32's 93;
    ``benchmarks/vector_index.py --sizes 590000 --kinds random --rows-only``, BENCHMARKS.md, issue 15, session 61)."""

    dtype = "int8"

    def held(self, matrix: Any) -> Any:
        import numpy as np

        if matrix.dtype == np.int8:
            return matrix
        return np.clip(np.rint(matrix * 127.0), -127, 127).astype(np.int8)

    def unit(self, rows: Any) -> Any:
        import numpy as np

        out = rows.astype(np.float32)
        return out / np.maximum(np.linalg.norm(out, axis=-1, keepdims=True), 1e-12)

    def search(self, q: Any, k: int) -> list[tuple[int, float]]:
        import numpy as np

        if not len(self.ids):
            return []
        exact_search, cosine = _usearch_exact()
        found = exact_search(self.matrix, self.held(np.asarray(q, dtype=np.float32)), min(k, len(self.ids)),
                             cosine, exact=True)
        # usearch's cosine distance is 1 - similarity; its keys are row positions.
        return [(int(self.ids[i]), 1.0 - float(d)) for i, d in zip(found.keys, found.distances, strict=True)]


class _Gathered:
    """Fetched rows for an exact entry, gathered into one preallocated matrix: ``_ExactRows.add`` copies
    the whole matrix on every call, so a scope read in chunks of ``FETCH_CHUNK`` cost time quadratic in
    its size (2.3 s of copies for 60k vectors, against one add)."""

    def __init__(self, capacity: int, into: _ExactRows) -> None:
        import numpy as np

        self.capacity = capacity
        self.into = into  # the rows they are for: their dtype (a compact entry's never exist as float32 together)
        self.ids = np.empty(capacity, dtype=np.int64)
        self.matrix: Any = None  # allocated at the first rows: their width
        self.count = 0

    def __len__(self) -> int:
        return self.count

    def put(self, ids: Any, matrix: Any) -> None:
        import numpy as np

        end = self.count + len(ids)
        if end > self.capacity:  # more rows than ids asked for: never, short of a store's bug; stay correct
            raise ValueError(f"the vector store returned {end} rows for {self.capacity} ids")
        if self.matrix is None:
            self.matrix = np.empty((self.capacity, matrix.shape[1]), dtype=self.into.dtype)
        self.ids[self.count:end] = ids
        self.matrix[self.count:end] = self.into.held(matrix)
        self.count = end

    def rows(self) -> tuple[Any, Any]:
        """The ids and rows put so far (as ``into`` holds them): the arrays themselves, cut to the rows put (ids the
        store lacked leave no unused rows behind, which the byte bound would not see)."""
        if self.count < self.capacity:
            self.ids.resize(self.count, refcheck=False)
            self.matrix.resize((self.count, self.matrix.shape[1]), refcheck=False)
        return self.ids, self.matrix


def _usearch_index() -> Any:
    """usearch's ``Index`` class, imported after onnxruntime when that is installed: with the wheels of
    this project's lock, importing onnxruntime after usearch crashes the process (a segmentation fault
    in onnxruntime's module init; the other order is fine), and the local embedder imports onnxruntime
    on first use, which may come after a graph was built."""
    if importlib.util.find_spec("onnxruntime") is not None:
        import onnxruntime  # noqa: F401  (imported for its load order only)
    from usearch.index import Index

    return Index


def _usearch_exact() -> tuple[Any, Any]:
    """usearch's exact search function and its cosine metric, imported in the order :func:`_usearch_index` says."""
    _usearch_index()
    from usearch.compiled import MetricKind
    from usearch.index import search

    return search, MetricKind.Cos


class _HnswRows:
    """An int8 cosine HNSW graph (usearch) keyed by record id."""

    def __init__(self, dim: int, connectivity: int, expansion_add: int, expansion_search: int) -> None:
        index_class = _usearch_index()

        self.dim = dim
        self.connectivity = connectivity
        self.expansion_search = expansion_search
        # Any: usearch's search-expansion setter is untyped (mypy sees the property read-only).
        self.index: Any = index_class(ndim=dim, metric="cos", dtype="i8", connectivity=connectivity,
                           expansion_add=expansion_add, expansion_search=expansion_search)

    def __len__(self) -> int:
        return int(self.index.size)

    @property
    def nbytes(self) -> int:
        return len(self) * (hnsw_bytes_per_vector(self.dim, self.connectivity) - 8)

    def add(self, ids: Any, matrix: Any) -> None:
        import numpy as np

        if not len(ids):
            return
        keys = np.asarray(ids, dtype=np.uint64)
        present = np.asarray(self.index.contains(keys), dtype=bool).reshape(-1)
        if present.any():
            # A re-fetched id replaces its vector only when it changed (an edit re-reads a whole
            # namespace: re-linking a million unchanged vectors would take minutes). The stored int8
            # vector is within ~0.003 of the original's direction; an edited text moves far more.
            stored = self._stored(keys[present])
            changed = np.einsum("ij,ij->i", stored, matrix[present]) < SAME_VECTOR
            replace = keys[present][changed]
            if len(replace):
                self.index.remove(replace)
            take = ~present
            take[np.flatnonzero(present)[changed]] = True
            keys, matrix = keys[take], matrix[take]
        if len(keys):
            # One thread: usearch's concurrent add() (its default, a thread per core) leaves some nodes
            # stored but unreachable by search (unum-cloud/USearch#735, open for 2.26): those records never
            # came back from vector recall. benchmarks/hnsw_threads.py: 0.06-0.76% of vectors lost their own
            # nearest hit when added on every core, none on one, for about twice the build time (BENCHMARKS.md,
            # issue 15, session 56). Builds run in the background; Chroma answers the scope meanwhile.
            self.index.add(keys, matrix, threads=1)

    def remove(self, ids: Any) -> None:
        import numpy as np

        if len(ids) and len(self):
            keys = np.asarray(ids, dtype=np.uint64)
            present = keys[np.asarray(self.index.contains(keys), dtype=bool).reshape(-1)]
            if len(present):
                self.index.remove(present)

    def vectors(self, ids: Sequence[int]) -> dict[int, Any]:
        """The vectors of these ids that the graph holds, by id: its int8 copies, as unit float32 vectors."""
        import numpy as np

        if not len(self) or not len(ids):
            return {}
        keys = np.asarray(ids, dtype=np.uint64)
        keys = keys[np.asarray(self.index.contains(keys), dtype=bool).reshape(-1)]
        return {int(key): row for key, row in zip(keys, self._stored(keys))} if len(keys) else {}

    def _stored(self, keys: Any) -> Any:
        """The graph's int8 copies of these (present) keys' vectors, as unit float32 rows."""
        import numpy as np

        stored = np.asarray(self.index.get(keys, dtype=np.float32), dtype=np.float32).reshape(len(keys), -1)
        stored /= np.maximum(np.linalg.norm(stored, axis=1, keepdims=True), 1e-12)
        return stored

    def search(self, q: Any, k: int) -> list[tuple[int, float]]:
        if not len(self):
            return []
        wide = self.expansion_search if len(self) <= HNSW_LARGE else max(self.expansion_search,
                                                                          HNSW_EXPANSION_SEARCH_LARGE)
        if self.index.expansion_search != wide:
            self.index.expansion_search = wide
        found = self.index.search(q, k)
        # usearch's cosine distance is 1 - similarity (of the int8 vectors: within ~0.01 of the exact one).
        return [(int(key), 1.0 - float(d)) for key, d in zip(found.keys, found.distances)]


class _KnownIds:
    """Per namespace, the sorted record ids an entry read from the journal (int64 arrays), and their
    count kept as they are set: an entry's size is asked after every search, and summing a user's
    10,000 sessions' arrays each time cost about 1 ms of a query at 1M records (issue 15). Only what
    the entry does with them (read, set, copy): no other way to change the arrays, so none that skips
    the count."""

    def __init__(self, by_ns: Mapping[int, Any] | None = None) -> None:
        self._by_ns: dict[int, Any] = dict(by_ns or {})
        self.count = sum(len(ids) for ids in self._by_ns.values())

    def get(self, ns_id: int, default: Any = None) -> Any:
        return self._by_ns.get(ns_id, default)

    def __setitem__(self, ns_id: int, ids: Any) -> None:
        old = self._by_ns.get(ns_id)
        self.count += len(ids) - (0 if old is None else len(old))
        self._by_ns[ns_id] = ids

    def values(self) -> Iterable[Any]:
        return self._by_ns.values()

    def copy(self) -> _KnownIds:
        return _KnownIds(self._by_ns)


@dataclass(eq=False)
class _Entry:
    key: frozenset[int]
    versions: dict[int, Versions]  # per namespace, as of the last sync
    known: _KnownIds  # per namespace: the sorted record ids read from the journal (int64)
    rows: _ExactRows | _HnswRows = field(default_factory=_ExactRows)
    missing: set[int] = field(default_factory=set)  # known ids without a vector when fetched (not embedded yet)
    stale: set[tuple[int, int]] = field(default_factory=set)  # (ns, id) re-embedded in this process since fetched
    edit_checked: dict[int, float] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    used_at: int = 0  # the lookup clock when last searched
    # The ScopeListing generation the entry is in step with (0: none known): a query with that same
    # listing skips the sync, one with a listing grown from it syncs only the sessions that grew.
    synced: int = 0

    @property
    def nbytes(self) -> int:
        return self.rows.nbytes + 8 * self.known.count


class _StoppedError(Exception):
    """The index was closed while a build ran."""


class _NoGuard:
    """A query's journal and Chroma calls: nothing to guard (the caller closes the index after them)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None

    def check(self) -> None:
        return None


_NO_GUARD = _NoGuard()


class _BuildGuard(_NoGuard):
    """A build's journal and Chroma calls: each holds the index's I/O lock and starts only while it is
    open, so once :meth:`ScopeVectors.close` took the lock no build touches the closing store."""

    def __init__(self, owner: ScopeVectors) -> None:
        self.owner = owner

    def __enter__(self) -> None:
        self.owner._io_lock.acquire()
        if self.owner._closed:
            self.owner._io_lock.release()
            raise _StoppedError

    def __exit__(self, *exc: object) -> None:
        self.owner._io_lock.release()

    def check(self) -> None:
        if self.owner._closed:
            raise _StoppedError


@dataclass(eq=False)
class _Build:
    """A graph being built for a scope on a background thread. ``entry`` is registered while it is
    filled, so :meth:`ScopeVectors.invalidate` reaches it."""

    key: frozenset[int]
    entry: _Entry
    replaces: _Entry | None = None  # a promotion: the exact entry that answers until the graph is ready
    seed: _ExactRows | None = None  # a promotion: its rows when the build started
    exact_first: bool = False  # a new scope read into exact rows, installed, then promoted (see _admit)


@dataclass
class _Declined:
    versions: dict[int, Versions]
    count: int  # the scope's record count when declined


class ScopeVectors:
    """Per-scope vector indexes (exact or HNSW) kept in step with the journal, bounded in bytes.

    Args:
        journal / store: where the records and their vectors live.
        vector_id / record_id: the engine's mapping between record ids and Chroma ids.
        max_bytes: the bound for all entries together (``MemoryConfig.vector_cache_mb``).
        hnsw_from: entries of more vectors than this become HNSW graphs (tests lower it).
        connectivity / expansion_add / expansion_search: the HNSW parameters.
        max_builds: background graph builds at a time.
        build_retry_s: the least time before a failed build is tried again.
    """

    def __init__(self, journal: Journal, store: VectorStore, vector_id: Callable[[int], str],
                 record_id: Callable[[str], int | None], *, max_bytes: int = DEFAULT_MAX_BYTES,
                 hnsw_from: int = HNSW_FROM, connectivity: int = HNSW_CONNECTIVITY,
                 expansion_add: int = HNSW_EXPANSION_ADD, expansion_search: int = HNSW_EXPANSION_SEARCH,
                 max_builds: int = MAX_BUILDS, build_retry_s: float = BUILD_RETRY_S) -> None:
        self.journal = journal
        self.store = store
        self._vector_id = vector_id
        self._record_id = record_id
        self.max_bytes = max_bytes
        self.hnsw_from = hnsw_from
        self._hnsw = (connectivity, expansion_add, expansion_search)
        self._has_usearch = importlib.util.find_spec("usearch") is not None
        self._cache: OrderedDict[frozenset[int], _Entry] = OrderedDict()
        self._declined: dict[frozenset[int], _Declined] = {}
        self._asks: dict[frozenset[int], int] = {}
        self._clock = 0  # lookups so far
        self._lock = threading.Lock()  # the cache, the admission counts and every entry's ``stale``
        self._building: dict[frozenset[int], threading.Lock] = {}
        self.max_builds = max(1, max_builds)
        self.build_retry_s = build_retry_s
        self._builds: dict[frozenset[int], _Build] = {}  # queued or running, one per scope
        self._queue: deque[_Build] = deque()
        self._failed: dict[frozenset[int], float] = {}  # scope -> monotonic time its last build failed
        self._workers: list[threading.Thread] = []
        self._idle = threading.Condition(self._lock)  # a build ended
        self._io_lock = threading.Lock()  # held by each journal or Chroma call of a build
        self._closed = False
        # record id -> (namespace id, its edit count when the text was read, float32 unit vector)
        self._offered: OrderedDict[int, tuple[int, int, Any]] = OrderedDict()
        _LIVE.add(self)  # stopped at interpreter exit

    # --- search -------------------------------------------------------------------

    def search(self, scope: ScopeListing | Iterable[int], query: Sequence[float], k: int
               ) -> list[tuple[int, float]] | None:
        """Record ids and cosine similarities of the ``k`` nearest vectors of a scope, nearest first.

        ``scope``: the scope's listing (``Journal.scope_listing``: its namespaces and their counters,
        read already), or its namespace ids (their counters are read here). ``None`` when the scope
        gets no entry here (its vectors would not fit the byte bound, or hotter scopes hold it): ask
        Chroma with a filter.
        """
        import numpy as np

        listing, key = (scope, scope.key) if isinstance(scope, ScopeListing) else (None, frozenset(scope))
        if not key or k <= 0:
            return []
        q = np.asarray(query, dtype=np.float32)
        q /= max(float(np.linalg.norm(q)), 1e-12)
        self._count_ask(key)
        # The one freshness check of this query (the listing's counters were read with it).
        versions = listing.versions if listing is not None else self.journal.scope_versions(sorted(key))
        entry = self._entry(key, versions, len(q))
        if entry is None:
            return None
        with entry.lock:
            if listing is None:
                self._sync(entry, versions)
                entry.synced = 0
            elif entry.synced != listing.generation or entry.stale or entry.missing:
                grown_from_synced = entry.synced and entry.synced == listing.base
                in_step = self._sync(entry, versions, only=listing.changed if grown_from_synced else None)
                entry.synced = listing.generation if in_step else 0
            found = entry.rows.search(q, k)
            if isinstance(entry.rows, _ExactRows) and len(entry.rows) > self.hnsw_from and self._has_usearch:
                self._promote(entry)  # grew past HNSW_FROM: it answers exactly until its graph is ready
        self._bound(entry)
        return found

    def vectors_of(self, scope: ScopeListing, ids: Sequence[int]) -> dict[int, Any]:
        """The unit vectors this process holds for ``ids`` in the scope's entry, by id (those it lacks
        are left out; none when the scope has no entry). As the scope's last :meth:`search` left the
        entry: call it after one, in the same request (the diversity switch does)."""
        with self._lock:
            entry = self._cache.get(scope.key)
        if entry is None:
            return {}
        with entry.lock:
            return entry.rows.vectors(ids)

    def search_each(self, ns_ids: Sequence[int], query: Sequence[float], k: int) -> list[tuple[int, float]] | None:
        """The ``k`` nearest over a few sessions searched one by one (their session entries), merged.

        For a handful of sessions picked per query (the second stage of user-scope recall): their
        union is a new set every time and would fill the cache with one-off entries.
        """
        found: list[tuple[int, float]] = []
        for ns_id in ns_ids:
            hits = self.search([ns_id], query, k)
            if hits is None:
                return None
            found += hits
        found.sort(key=lambda p: -p[1])
        return found[:k]

    def invalidate(self, records: Iterable[tuple[int, int]]) -> None:
        """Mark ``(namespace id, record id)`` pairs this process (re-)embedded just now: an entry that
        holds an older vector of one fetches it again on its next query (a record newer than an entry
        is found through the journal's versions; one that had no vector when fetched is looked up
        again anyway). Cheap: the indexer calls it after every batch."""
        pairs = set(records)
        if not pairs:
            return
        with self._lock:
            for entry in [*self._cache.values(), *(b.entry for b in self._builds.values())]:
                entry.stale.update(p for p in pairs if p[0] in entry.key)

    def offer(self, vectors: Iterable[tuple[int, int, Sequence[float]]], edits: dict[int, int]) -> None:
        """The indexer's batch, just pushed to Chroma: ``(namespace id, record id, vector)`` triples and
        each namespace's count of edited texts (``Journal.scope_versions``) read before the indexer read
        those texts the last time. Entries holding an older vector fetch these again (as
        :meth:`invalidate`); every fetch takes them from here instead of Chroma while the namespace's
        edit count is still ``edits[ns]``: no text of it changed since, so the vector is the current
        one (a later edit's vector, from any process, is read from Chroma)."""
        import numpy as np

        triples = [(int(n), int(r), v) for n, r, v in vectors if int(n) in edits]
        if not triples:
            return
        matrix = np.asarray([v for _, _, v in triples], dtype=np.float32)
        matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
        with self._lock:
            for (ns_id, record_id, _), row in zip(triples, matrix):
                self._offered.pop(record_id, None)
                self._offered[record_id] = (ns_id, edits[ns_id], row)
            while len(self._offered) > OFFER_MAX:
                self._offered.popitem(last=False)
        self.invalidate((n, r) for n, r, _ in triples)

    def withdraw(self, record_ids: Iterable[int]) -> None:
        """Drop offered vectors of records just deleted from Chroma (an erased record's vector does not
        wait in memory for a fetch that would never take it)."""
        with self._lock:
            for record_id in record_ids:
                self._offered.pop(int(record_id), None)

    def _take_offered(self, ids: Any, versions: Mapping[int, Versions]) -> tuple[Any, Any]:
        """The offered vectors of ``ids`` still current (their namespace's edit count unchanged), taken
        out of the offer: ``(record ids, float32 matrix)``, both empty when none."""
        import numpy as np

        taken: list[tuple[int, Any]] = []
        with self._lock:
            if self._offered:
                # Matched in numpy: a large scope's build asks for a million ids against a few thousand offered.
                keys = np.fromiter(self._offered, dtype=np.int64, count=len(self._offered))
                for record_id in keys[np.isin(keys, ids)].tolist():
                    offered = self._offered.pop(record_id)
                    if versions.get(offered[0], (0, 0, -1))[2] == offered[1]:
                        taken.append((record_id, offered[2]))
        if not taken:
            return np.empty(0, dtype=np.int64), None
        return np.array([r for r, _ in taken], dtype=np.int64), np.stack([v for _, v in taken])

    def stats(self) -> dict[str, int]:
        """Entries held, their vectors and bytes, and vectors offered not taken yet (benchmarks, tests)."""
        with self._lock:
            entries = list(self._cache.values())
        return {"entries": len(entries), "vectors": sum(len(e.rows) for e in entries),
                "hnsw_entries": sum(isinstance(e.rows, _HnswRows) for e in entries),
                "bytes": sum(e.nbytes for e in entries), "max_bytes": self.max_bytes,
                "building": len(self._builds), "offered": len(self._offered)}

    def wait_builds(self, timeout: float | None = None) -> bool:
        """Wait until no background build is queued or running (benchmarks and tests); ``False`` on timeout."""
        with self._idle:
            return self._idle.wait_for(lambda: not self._builds, timeout)

    def close(self, timeout: float = CLOSE_WAIT_S) -> None:
        """Drop queued builds and stop running ones: when this returns no build calls the journal or
        Chroma again (one in flight is waited for), so both may be closed, and the builder threads
        have ended (they stop within one ``GRAPH_SLICE`` of graph work; ``timeout`` bounds the wait).
        Idempotent."""
        with self._lock:
            self._closed = True
            for build in self._queue:
                self._builds.pop(build.key, None)
            self._queue.clear()
            self._idle.notify_all()
            workers = list(self._workers)
        with self._io_lock:
            pass  # a build's journal or Chroma call in flight has ended; the next one raises _StoppedError
        deadline = time.monotonic() + timeout
        for worker in workers:
            if worker is not threading.current_thread():
                worker.join(max(0.0, deadline - time.monotonic()))

    # --- entries --------------------------------------------------------------------

    def _count_ask(self, key: frozenset[int]) -> None:
        with self._lock:
            self._asks[key] = self._asks.get(key, 0) + 1
            self._clock += 1
            if self._clock % DECAY_EVERY == 0:
                self._asks = {k: n // 2 for k, n in self._asks.items() if n // 2 or k in self._cache}

    def _touch(self, key: frozenset[int]) -> _Entry | None:
        """The cached entry of a scope, marked as just used (the caller holds ``_lock``)."""
        entry = self._cache.get(key)
        if entry is not None:
            self._cache.move_to_end(key)
            entry.used_at = self._clock
        return entry

    def _entry(self, key: frozenset[int], versions: Mapping[int, Versions], dim: int) -> _Entry | None:
        with self._lock:
            entry = self._touch(key)
            if entry is not None:
                return entry
            if key in self._builds or self._closed or \
                    time.monotonic() - self._failed.get(key, -self.build_retry_s) < self.build_retry_s:
                return None  # its graph is being built (or failed just now): Chroma answers meanwhile
            building = self._building.setdefault(key, threading.Lock())
        # One admission per scope at a time: concurrent cold queries wait for the first one's entry
        # (whose lock they then wait on while it is filled).
        with building:
            with self._lock:
                entry = self._touch(key)
                if entry is not None:
                    return entry
            entry = self._admit(key, versions, dim)
            with self._lock:
                self._building.pop(key, None)
                if entry is not None:
                    entry.used_at = self._clock
                    self._cache[key] = entry
            return entry

    def _admit(self, key: frozenset[int], versions: Mapping[int, Versions], dim: int) -> _Entry | None:
        """A new (empty, or taken over) entry for a scope, or ``None`` when it should not be held."""
        declined = self._declined.get(key)
        if declined is not None:
            # Without reading the journal again: at least this many records remain.
            count = declined.count - sum(max(0, versions.get(n, (0, 0, 0))[1] - v[1])
                                         for n, v in declined.versions.items())
        else:
            count = sum(len(ids) for ids in self.journal.record_ids_many(sorted(key)).values())
        need = self._bytes_for(count, dim)
        if need > self.max_bytes or (count > self.hnsw_from and not self._has_usearch):
            if declined is None:
                log.info("a scope of %d vectors (~%d MiB) exceeds the vector cache (%d MiB%s): Chroma answers it",
                         count, need >> 20, self.max_bytes >> 20,
                         "" if self._has_usearch else "; usearch is not installed")
                self._declined[key] = _Declined(dict(versions), count)
            return None
        adopted = self._adopt(key, count)
        if adopted is not None:
            self._declined.pop(key, None)
            return adopted
        large = count > self.hnsw_from
        with self._lock:
            # A graph is admitted now and installed when built: nothing is evicted before then.
            if not self._make_room(key, need, versions, count, evict=not large):
                return None
            self._declined.pop(key, None)
            if large:
                # Read as exact rows first when they and the graph fit the bound beside the other entries:
                # installed as soon as they are read, they answer (one product) while the graph is built from
                # them, instead of Chroma's filtered query for the whole build (~180 ms against ~13 for a
                # context() at 100k messages; BENCHMARKS.md, issue 15, session 60).
                # Where float32 rows and the graph do not fit together, int8 rows may (_CompactRows): a
                # user of 1M messages with vectors in SQLite otherwise waited ~2 s a context() for the store's
                # exact scan for the minutes of the build, 67 ms from its rows (session 61).
                room = self.max_bytes - self._held_bytes(key) - count * hnsw_bytes_per_vector(dim, self._hnsw[0])
                rows, per = _ExactRows(), exact_bytes_per_vector(dim)
                if count * per > room and count * compact_bytes_per_vector(dim) <= room:
                    rows, per = _CompactRows(), compact_bytes_per_vector(dim)
                exact_first = count * per <= room
                self._enqueue(_Build(key, _Entry(key, {}, _KnownIds(), rows), exact_first=exact_first))
                how = f"{rows.dtype} rows, then a graph" if exact_first else "a graph"
                log.info("reading the vectors of a scope of %d vectors in the background (%s); Chroma answers "
                         "it meanwhile", count, how)
                return None
        return _Entry(key, {}, _KnownIds())

    def _make_room(self, key: frozenset[int], need: int, versions: Mapping[int, Versions], count: int, *,
                   evict: bool) -> bool:
        """With ``self._lock`` held: whether ``need`` bytes for ``key`` fit once the least recently used
        entries leave (``evict``: they leave now); declined when one of them is hot (no thrash)."""
        held = self._held_bytes(key)
        victims: list[frozenset[int]] = []
        for k, e in self._cache.items():  # least recently used first
            if held + need <= self.max_bytes:
                break
            if k != key:
                victims.append(k)
                held -= e.nbytes
        asks = self._asks.get(key, 0)
        if any(self._clock - self._cache[v].used_at < HOT_WINDOW and self._asks.get(v, 0) >= asks
               for v in victims):
            # A scope it would push out is in use and asked for at least as often: keep it (no thrash).
            self._declined[key] = _Declined(dict(versions), count)
            return False
        if evict:
            for v in victims:
                del self._cache[v]
        return True

    def _held_bytes(self, key: frozenset[int]) -> int:
        """With ``self._lock`` held: the bytes of every cached entry but ``key``'s."""
        return sum(e.nbytes for k, e in self._cache.items() if k != key)

    def _adopt(self, key: frozenset[int], count: int) -> _Entry | None:
        """The cached entry of the largest sub-scope of ``key``, taken over (HNSW) or shared (exact
        rows are never changed in place); the sync adds the namespaces it lacks, inside the query: so
        only when they are few (a graph grows by at most ``ADOPT_MAX_ADD``, an exact entry by at most
        ``hnsw_from``: beyond, it is promoted in the background); otherwise ``None``."""
        with self._lock:
            subs = [e for k, e in self._cache.items() if k < key and len(e.rows)]
            if not subs:
                return None
            best = max(subs, key=lambda e: len(e.rows))
            lacking = count - len(best.rows)
            if lacking > (ADOPT_MAX_ADD if isinstance(best.rows, _HnswRows) else self.hnsw_from):
                return None
            if isinstance(best.rows, _HnswRows):
                del self._cache[best.key]  # a graph is not copied: the smaller scope builds again if asked
            stale = set(best.stale)
        with best.lock:
            rows = best.rows
            taken = _Entry(key, dict(best.versions), best.known.copy(), rows, set(best.missing), stale,
                           dict(best.edit_checked))
            if isinstance(rows, _ExactRows):
                taken.rows = rows.empty_like()
                taken.rows.ids, taken.rows.matrix = rows.ids, rows.matrix
            else:
                # A query that took the old entry before it left the cache starts from empty, in its own rows.
                best.rows, best.versions, best.known, best.missing = _ExactRows(), {}, _KnownIds(), set()
            return taken

    # --- background builds -------------------------------------------------------------

    def _promote(self, entry: _Entry, after: _Build | None = None) -> None:
        """With ``entry.lock`` held: queue the build of a graph from an exact entry's rows (once per
        scope; not again within ``build_retry_s`` of a failure). The exact entry keeps answering.
        ``after``: the build that read the entry (an exact-first build), still registered for its scope."""
        with self._lock:
            key = entry.key
            rows = entry.rows
            if not isinstance(rows, _ExactRows) or self._builds.get(key, after) is not after or self._closed or \
                    self._cache.get(key) is not entry or \
                    time.monotonic() - self._failed.get(key, -self.build_retry_s) < self.build_retry_s:
                return
            seed = rows.empty_like()
            seed.ids, seed.matrix = rows.ids, rows.matrix  # never changed in place
            # Its state as of these rows, copied: the first query after the swap syncs it from there.
            twin = _Entry(key, dict(entry.versions), entry.known.copy(),
                          missing=set(entry.missing), stale=set(entry.stale),
                          edit_checked=dict(entry.edit_checked))
            self._enqueue(_Build(key, twin, replaces=entry, seed=seed))
        log.info("an exact scope entry of more than %d vectors %s: its graph is built from its rows in the background",
                 self.hnsw_from, "grew past them" if after is None else "was read")

    def _enqueue(self, build: _Build) -> None:
        """With ``self._lock`` held: queue a build; start a worker when fewer than ``max_builds`` run.

        A scope's first read goes ahead of the graphs queued to be built from exact rows (promotions):
        their scopes answer from those rows meanwhile, a scope not read yet only through Chroma's filter.
        """
        self._builds[build.key] = build
        if build.seed is None:
            at = next((i for i, queued in enumerate(self._queue) if queued.seed is not None), len(self._queue))
            self._queue.insert(at, build)
        else:
            self._queue.append(build)
        if len(self._workers) < self.max_builds:
            # A daemon: a build never keeps the process alive. It leaves the list itself, under this lock.
            worker = threading.Thread(target=self._work, name="langmem-tiers-scope-graph", daemon=True)
            self._workers.append(worker)
            worker.start()

    def _work(self) -> None:
        """A worker thread: builds queued scopes one by one and ends when none is left (or on close)."""
        while True:
            with self._lock:
                if self._closed or not self._queue:
                    self._workers.remove(threading.current_thread())
                    return
                build = self._queue.popleft()
            installed = False
            try:
                self._build(build, _BuildGuard(self))
                installed = self._install(build)
                if installed and build.exact_first and len(build.entry.rows) > self.hnsw_from:
                    # Its graph next, queued before this build ends: wait_builds() waits for the graph too.
                    with build.entry.lock:
                        self._promote(build.entry, after=build)
            except _StoppedError:
                pass
            except Exception as e:  # e.g. Chroma down: no entry; a later query tries again
                with self._lock:
                    self._failed[build.key] = time.monotonic()
                log.warning("building the vector graph of a scope of %d namespaces failed (tried again in "
                            "%.0f s; Chroma answers it meanwhile): %s: %s", len(build.key), self.build_retry_s,
                            type(e).__name__, e)
            finally:
                with self._lock:
                    if self._builds.get(build.key) is build:
                        del self._builds[build.key]
                    if installed:
                        self._failed.pop(build.key, None)
                    self._idle.notify_all()

    def _build(self, build: _Build, guard: _NoGuard) -> None:
        """Fill a build's entry (on a worker thread): a promotion's graph from its seed rows; a new
        scope's from Chroma, as of the journal versions read now, at the start."""
        entry = build.entry
        with entry.lock:
            if build.seed is not None:
                graph = _HnswRows(build.seed.matrix.shape[1], *self._hnsw)
                _add_sliced(graph, build.seed.ids, build.seed.matrix, guard)
                entry.rows = graph
                return
            with guard:
                versions = self.journal.scope_versions(sorted(build.key))
            self._sync(entry, versions, guard, graph=not build.exact_first)

    def _install(self, build: _Build) -> bool:
        """Put a built entry in the cache: a promotion in place of its exact entry (if that is still
        cached); a new scope under the byte bound and admission rules. The next query syncs it."""
        entry = build.entry
        with self._lock:
            if self._closed:
                return False
            if build.replaces is not None:
                if self._cache.get(build.key) is not build.replaces:
                    return False  # evicted or declined meanwhile: the graph is not wanted
                entry.used_at = build.replaces.used_at
                self._cache[build.key] = entry  # keeps its place in the recency order
            else:
                if build.key in self._cache or not self._make_room(
                        build.key, entry.nbytes, entry.versions, len(entry.rows), evict=True):
                    return False
                entry.used_at = self._clock
                self._cache[build.key] = entry
        self._bound(entry)
        return True

    def _bytes_for(self, count: int, dim: int) -> int:
        per = exact_bytes_per_vector(dim) if count <= self.hnsw_from else hnsw_bytes_per_vector(dim, self._hnsw[0])
        return count * per

    def _bound(self, entry: _Entry) -> None:
        """Keep all entries within the byte bound after ``entry`` grew: the least recently used go
        first; an entry that alone exceeds the bound is dropped (its scope then goes to Chroma)."""
        with self._lock:
            if self._cache.get(entry.key) is not entry:
                return
            if entry.nbytes > self.max_bytes:
                del self._cache[entry.key]
                self._declined[entry.key] = _Declined(dict(entry.versions), len(entry.rows))
                log.info("a scope grew past the vector cache (%d MiB): Chroma answers it", self.max_bytes >> 20)
                return
            total = sum(e.nbytes for e in self._cache.values())
            for k in list(self._cache):
                if total <= self.max_bytes:
                    break
                if k != entry.key:
                    total -= self._cache.pop(k).nbytes

    # --- keeping an entry current ---------------------------------------------------------

    def _sync(self, entry: _Entry, versions: Mapping[int, Versions], guard: _NoGuard = _NO_GUARD,
              only: frozenset[int] | None = None, graph: bool = False) -> bool:
        """Bring an entry (its lock held) to ``versions``, read just before; ``only``: the namespaces that
        may have changed since the entry's last sync (every one when ``None``). ``guard`` wraps every
        journal and Chroma call of a background build (and is how a build learns the index closed);
        ``graph``: a build that makes the entry a graph once it holds more than ``hnsw_from`` vectors.
        False when an edit's new vector is still awaited (the entry is not yet in step with ``versions``)."""
        import numpy as np

        empty = np.empty(0, dtype=np.int64)
        in_step = True
        changed = [(ns_id, entry.versions.get(ns_id, (0, 0, 0)), versions.get(ns_id, (0, 0, 0)))
                   for ns_id in sorted(entry.key if only is None else only & entry.key)]
        changed = [(ns_id, old, now) for ns_id, old, now in changed if now != old]
        # Deleted since (or the namespace is gone): its current ids are diffed against the entry's.
        diffed = [ns_id for ns_id, old, now in changed if now[1] != old[1] or now[0] < old[0]]
        # Only additions: the ids above the entry's last one. Ids above the version read wait for the
        # next query: an entry describes exactly the ids it read, so none is ever fetched twice.
        grown = {ns_id: old[0] for ns_id, old, now in changed if ns_id not in diffed and now[0] > old[0]}
        with guard:
            current = self.journal.record_ids_many(diffed) if diffed else {}
            added = self.journal.record_ids_many(list(grown), after=grown) if grown else {}
        wanted: list[Any] = []  # record ids to fetch: new, edited, and below the missing and stale ones
        for ns_id, old, now in changed:
            known = entry.known.get(ns_id, empty)
            if ns_id in current:
                ids = _ids_upto(current[ns_id], now[0])
                gone = np.setdiff1d(known, ids, assume_unique=True)
                if len(gone):
                    entry.rows.remove(gone)  # an erased record leaves the index; nothing is rebuilt
                    entry.missing.difference_update(int(i) for i in gone)
                wanted.append(np.setdiff1d(ids, known, assume_unique=True))
                entry.known[ns_id] = ids
            elif ns_id in added:
                new = _ids_upto(added[ns_id], now[0])
                wanted.append(new)
                entry.known[ns_id] = np.concatenate([known, new]) if len(known) else new
            edited = now[2]
            if now[2] != old[2]:
                # A text was edited: its new vector is in Chroma only once an indexer re-embedded it, so
                # while the namespace has rows to index it is read again (at most every EDIT_RECHECK_S).
                with guard:
                    pending = self.journal.outbox_count([ns_id]) > 0
                stamp = time.monotonic()
                if not pending or stamp - entry.edit_checked.get(ns_id, -EDIT_RECHECK_S) >= EDIT_RECHECK_S:
                    entry.edit_checked[ns_id] = stamp
                    wanted.append(entry.known.get(ns_id, empty))
                if pending:
                    edited = old[2]
                    in_step = False
            entry.versions[ns_id] = (now[0], now[1], edited)
        with self._lock:
            stale, entry.stale = entry.stale, set()
        for ns_id in {n for n, _ in stale}:
            # Only ids the entry still knows: a record erased since must not come back from Chroma
            # (which drops its vector only when the outbox gets to it).
            marked = np.fromiter((r for n, r in stale if n == ns_id), dtype=np.int64)
            wanted.append(marked[np.isin(marked, entry.known.get(ns_id, empty))])
        if entry.missing:
            wanted.append(np.fromiter(sorted(entry.missing), dtype=np.int64))
        ids = np.unique(np.concatenate(wanted)) if wanted else empty
        if len(ids):
            self._fetch(entry, ids, versions, guard, graph)
        return in_step and not entry.missing

    def _fetch(self, entry: _Entry, ids: Any, versions: Mapping[int, Versions], guard: _NoGuard = _NO_GUARD,
               graph: bool = False) -> None:
        """Read ``ids``' vectors into the entry: those the indexer offered and still current (see
        :meth:`offer`), the rest from Chroma in chunks (an HNSW entry never holds them all as float32);
        the ids Chroma lacks stay missing. ``versions`` are the journal's, read before this sync. Rows
        for an exact entry are gathered and added at once (:class:`_Gathered`)."""
        import numpy as np

        found_all: set[int] = set()
        gathered = None if graph or not isinstance(entry.rows, _ExactRows) else _Gathered(len(ids), entry.rows)

        def take(got: Any, rows: Any) -> None:
            if gathered is not None:
                gathered.put(got, rows)
            else:
                self._add_rows(entry, got, rows, guard, graph)
                found_all.update(got.tolist())

        try:
            got, matrix = self._take_offered(ids, versions)
            if len(got):
                take(got, matrix)
                ids = ids[~np.isin(ids, got)]
            for start in range(0, len(ids), FETCH_CHUNK):
                chunk = ids[start:start + FETCH_CHUNK]
                with guard:
                    found, matrix = self.store.embeddings([self._vector_id(int(r)) for r in chunk])
                if not len(found):
                    continue
                got = np.array([self._record_id(v) for v in found], dtype=np.int64)
                matrix = matrix / np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
                take(got, matrix.astype(np.float32, copy=False))
            if gathered is not None and len(gathered):
                # Only now are they in the entry: a failure before leaves every gathered id missing.
                gathered_ids, gathered_rows = gathered.rows()
                entry.rows.add(gathered_ids, gathered_rows)
                found_all.update(gathered_ids.tolist())
        finally:
            # Whatever was not read (Chroma lacks it, or failed midway) is looked up again next query.
            entry.missing = (entry.missing | {int(i) for i in ids}) - found_all

    def _add_rows(self, entry: _Entry, ids: Any, matrix: Any, guard: _NoGuard, graph: bool) -> None:
        """Add unit rows to an entry. Only a background build asked for a ``graph`` turns an exact entry
        into one: in a query it grows exact and is promoted in the background."""
        if graph and isinstance(entry.rows, _ExactRows) \
                and len(entry.rows) + len(ids) > self.hnsw_from and self._has_usearch:
            rows = _HnswRows(matrix.shape[1], *self._hnsw)
            _add_sliced(rows, entry.rows.ids, entry.rows.matrix, guard)
            entry.rows = rows
        if graph and isinstance(entry.rows, _HnswRows):
            _add_sliced(entry.rows, ids, matrix, guard)
        else:
            entry.rows.add(ids, matrix)


# Every index, stopped when the interpreter exits: a daemon thread still inside usearch or Chroma's
# native code when Python finalizes aborts the process ("terminate called without an active
# exception", seen when benchmarks/scale.py ended during a build). atexit runs before daemon threads
# are stopped, so the builders end cleanly first.
_LIVE: weakref.WeakSet[ScopeVectors] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for index in list(_LIVE):
        index.close()


def _add_sliced(graph: _HnswRows, ids: Any, matrix: Any, guard: _NoGuard) -> None:
    """Add to a graph in slices, so that a build stops within one slice of the index closing."""
    for start in range(0, len(ids), GRAPH_SLICE):
        guard.check()
        graph.add(ids[start:start + GRAPH_SLICE], matrix[start:start + GRAPH_SLICE])


def _ids_upto(ids: Iterable[int], last: int) -> Any:
    import numpy as np

    out = np.fromiter(ids, dtype=np.int64)
    return out[out <= last]
