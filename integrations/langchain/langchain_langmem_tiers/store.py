"""TieredStore: a LangGraph ``BaseStore`` kept in the tier core's journal, searched by its hybrid recall.

``create_agent(..., store=TieredStore.open(path))``, LangGraph's ``get_store()`` and LangMem's memory
tools read and write it like any store; the items are explicit memories of the core, so they survive
restarts, are found by keyword + vector recall, and are erased with the user (``forget("user")``).

How a store item maps onto the core:

* **User.** ``user_index`` names the namespace position that holds the user id (``1`` for LangMem's
  ``("memories", "{langgraph_user_id}")``, ``0`` for ``(user_id, "memories")``). Every item of a user lives
  in one journal session of that user, ``Namespace(session_id="langgraph-store", user_id=<user>)``; a
  user's chat sessions recall the items (``recall_scope="user"``) and ``forget("user")`` erases them.
  Without ``user_index`` every item lives in one session without a user: its own private scope, which no
  user's recall reaches. A namespace that has no element at ``user_index`` is refused on write.
  :meth:`TieredStore.for_user` gives a view that reads and writes one user's items only.
* **Item.** One record of kind ``"store"`` per current item: its text is what the index fields select
  (LangGraph's convention: ``index={"fields": [...]}``, default ``["$"]``, the whole value as JSON; a
  ``put(..., index=[...])`` overrides per item, ``index=False`` stores without ranking by query); its
  metadata holds the namespace, key and value; its record key (``"store_" + sha256(namespace, key)``) is
  the keyed-memory mechanism of ``TieredMemory.remember(..., key=...)``.
* **Put with an existing key** supersedes: the new version is the current record, the old one keeps
  ``valid_to`` as history (``TieredMemory.facts(include_superseded=True)``); ``get`` and ``search`` see only
  current versions. Both happen in one journal transaction (insert + supersede, the journal protocol's
  keyed-memory operations; ``remember()`` would read every current memory of the user per put).
  The store works on ``TieredMemory.journal``, the core's public low-level API for adapters that keep
  their own records (:class:`langmem_tiers.Journal`; see ``docs/core/integration.md``), and on one
  ``TieredMemory.for_namespace`` handle per user for recall and indexing. The last
  committed put wins, whatever the clocks say. ``created_at`` is the first put, ``updated_at`` the latest
  (as PostgresStore).
* **Delete** erases the item and its history (journal, keyword index and vectors): a delete is an
  erasure, never a tombstone.
* **Search** without ``query``: items in InMemoryStore's order (namespaces by when they last became
  non-empty, items by first put). With ``query``: the items our hybrid recall finds, best first, with its
  fused score as ``SearchItem.score``, then the other matching items without a score (as InMemoryStore
  fills with items that have no vector), so a large enough ``limit`` returns every matching item.
  ``filter`` is equality on value fields and ``$eq/$ne/$gt/$gte/$lt/$lte``, as InMemoryStore.
* **Batches** run reads before writes, and the last put of a key wins (InMemoryStore and PostgresStore
  alike).
* **TTL** (``supports_ttl = True``; LangGraph's semantics, ``ttl`` in minutes): ``open(..., ttl=TTLConfig)``
  sets ``default_ttl`` (applied by ``put`` when it passes no ``ttl``), ``refresh_on_read`` (default True)
  and ``sweep_interval_minutes``. A put with a ttl stores ``expires_at = clock() + ttl * 60`` in the
  record's metadata, the core's expiry (:mod:`langmem_tiers.integration`, judged by the memory's
  ``clock``): an expired item is never returned by get, search or list_namespaces; a get or search that
  returns an item with a ttl (and ``refresh_ttl``) moves its expiry to ``clock() + ttl * 60`` (a move of
  under a second is skipped, so a burst of reads writes once). Expired items, with their history, are
  erased by :meth:`TieredStore.sweep_ttl`, by the first batch after ``sweep_interval_minutes`` (no thread
  of its own), by the user's ``TieredMemory`` expiry sweep and by ``cleanup(dry_run=False)``.

Example:
    >>> import tempfile
    >>> with TieredStore.open(tempfile.mkdtemp(), embedder=False, user_index=1) as store:
    ...     store.put(("memories", "ada"), "tea", {"content": "Ada drinks green tea"})
    ...     [i.value["content"] for i in store.search(("memories", "ada"), query="tea")]
    ['Ada drinks green tea']
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    ensure_embeddings,
    get_text_at_path,
)
from langmem_tiers import (
    EXPIRES_AT,
    STORE_ITEM_KIND,
    ConfigError,
    InvalidMessageError,
    MemoryClosedError,
    MemoryConfig,
    Namespace,
    NewRecord,
    Record,
    SessionErasedError,
    TieredMemory,
    WordCounter,
    expires_at,
    is_expired,
)
from langmem_tiers import InvalidNamespaceError as CoreNamespaceError
from langmem_tiers.embedders import Embedder

log = logging.getLogger(__name__)

STORE_SESSION = "langgraph-store"
"""The session id of a user's store items in the journal."""
STORE_KIND = STORE_ITEM_KIND
"""The record kind of store items (``TieredMemory.search(kinds=["store"])`` finds them)."""
DEFAULT_MAX_USERS = 1024
"""Users whose item snapshot (and session handle) a store keeps in memory (least recently used out)."""
_META = "store"  # the record metadata entry holding the item
_OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")
_TTL_KEYS = ("default_ttl", "refresh_on_read", "sweep_interval_minutes")
_REFRESH_SLACK_S = 1.0  # a refresh moving the expiry by less than this is skipped (one write per burst)


class StoreNamespaceError(InvalidNamespaceError, CoreNamespaceError):
    """A namespace the store refuses: LangGraph's ``InvalidNamespaceError`` and the core's at once."""


@dataclass(frozen=True)
class _Entry:
    """One current item, as read from its record."""

    record_id: int
    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    created_at: float
    updated_at: float
    indexed: bool
    position: tuple[float, int]  # (first put time, first record id): the item's place in its namespace
    ns_position: tuple[float, int]  # when the namespace last became non-empty: its place among namespaces
    expires_at: float | None = None  # metadata["expires_at"]: unix seconds, by the memory's clock
    ttl: float | None = None  # minutes, as put; what a refresh on read adds to the clock

    def expired(self, now: float) -> bool:
        return self.expires_at is not None and is_expired({EXPIRES_AT: self.expires_at}, now)

    def item(self, score: float | None = None, *, search: bool = False) -> Item:
        created, updated = _when(self.created_at), _when(self.updated_at)
        if search:
            return SearchItem(self.namespace, self.key, dict(self.value), created, updated, score=score)
        return Item(value=dict(self.value), key=self.key, namespace=self.namespace, created_at=created,
                    updated_at=updated)


@dataclass
class _Snapshot:
    """One user's items at one journal version (the session's version stamp)."""

    ns_id: int | None
    version: int
    items: dict[tuple[str, ...], dict[str, _Entry]] = field(default_factory=dict)
    versions: dict[str, list[int]] = field(default_factory=dict)  # record key -> every version's record id

    @classmethod
    def of(cls, ns_id: int, version: int, records: Iterable[Record]) -> _Snapshot:
        """The items of a session's store records (current ones are items, the others history)."""
        snapshot = cls(ns_id, version)
        for record in records:
            meta = record.metadata.get(_META)
            if record.kind != STORE_KIND or not record.key or not isinstance(meta, Mapping):
                continue
            if record.valid_to is None:
                entry = _entry(record.id, record.created_at, meta, expires_at(record.metadata))
                snapshot.add(entry, record.key)
            else:
                snapshot.versions.setdefault(record.key, []).append(record.id)
        return snapshot

    def entries(self, now: float) -> Iterable[_Entry]:
        """The items that have not expired at ``now``."""
        for by_key in self.items.values():
            yield from (e for e in by_key.values() if not e.expired(now))

    def records(self) -> int:
        """Records of the items, superseded versions included (recall may return those too)."""
        return sum(len(ids) for ids in self.versions.values())

    def add(self, entry: _Entry, record_key: str) -> None:
        by_key = self.items.setdefault(entry.namespace, {})
        old = by_key.get(entry.key)
        # Two writers racing on one key leave two current records: the newer one is the item.
        if old is None or (entry.updated_at, entry.record_id) >= (old.updated_at, old.record_id):
            by_key[entry.key] = entry
        ids = self.versions.setdefault(record_key, [])
        if entry.record_id not in ids:
            ids.append(entry.record_id)

    def remove(self, namespace: tuple[str, ...], key: str, record_key: str) -> None:
        by_key = self.items.get(namespace, {})
        by_key.pop(key, None)
        if not by_key:
            self.items.pop(namespace, None)
        self.versions.pop(record_key, None)


class TieredStore(BaseStore):
    """A LangGraph ``BaseStore`` on the journal and hybrid recall of a :class:`langmem_tiers.TieredMemory`.

    Open it with :meth:`open` (it then owns its memory and closes it); the constructor takes a memory
    opened elsewhere (its journal and recall are used, its session is not written). See the module
    docstring for how namespaces, keys, values, search and deletes map onto the core.

    Args:
        memory: the memory whose journal and recall index hold the items.
        user_index: the namespace position holding the user id, or ``None`` (no user: every item in one
            private scope).
        index: LangGraph's index configuration. ``fields`` choose the text that is indexed (default
            ``["$"]``). ``embed`` and ``dims`` are honored by :meth:`open` (``embed`` becomes the recall
            embedder); the constructor refuses them, since the memory's embedder is fixed already.
        session_id: the journal session id of the store's items (per user).
        max_users: users whose snapshot the store keeps in memory.
        ttl: LangGraph's ``TTLConfig`` (``default_ttl`` minutes, ``refresh_on_read``,
            ``sweep_interval_minutes``); expiry is judged by ``memory.clock`` (see the module docstring).

    Example:
        >>> import tempfile
        >>> store = TieredStore.open(tempfile.mkdtemp(), embedder=False)
        >>> store.put(("prefs",), "theme", {"value": "dark"})
        >>> store.get(("prefs",), "theme").value
        {'value': 'dark'}
        >>> store.close()
    """

    supports_ttl = True

    def __init__(self, memory: TieredMemory, *, user_index: int | None = None,
                 index: IndexConfig | None = None, session_id: str = STORE_SESSION,
                 max_users: int = DEFAULT_MAX_USERS, owns_memory: bool = False,
                 ttl: TTLConfig | None = None) -> None:
        if not isinstance(memory, TieredMemory):
            raise ConfigError(f"memory must be a TieredMemory; got {type(memory).__name__}")
        if user_index is not None and (isinstance(user_index, bool) or not isinstance(user_index, int)
                                       or user_index < 0):
            raise ConfigError(f"user_index ({user_index!r}) must be a namespace position (an integer >= 0) "
                              "or None: e.g. 1 for ('memories', user_id)")
        if isinstance(max_users, bool) or not isinstance(max_users, int) or max_users < 1:
            raise ConfigError(f"max_users ({max_users!r}) must be a positive integer")
        if index is not None and (index.get("embed") is not None or index.get("dims") is not None) \
                and not owns_memory:
            raise ConfigError("index['embed'] and index['dims'] choose the embedder, which a memory opened "
                              "elsewhere has already: use TieredStore.open(path, index=...), or pass only "
                              "index={'fields': [...]}")
        Namespace.of(session_id)  # the same id rules as any session
        self.ttl_config = _ttl_config(ttl)
        self.memory = memory
        self.user_index = user_index
        self.session_id = session_id
        self.fields = _fields(index)
        self.max_users = max_users
        self._owns_memory = owns_memory
        self._bound_user: str | None = None
        self._lock = threading.RLock()
        self._snapshots: OrderedDict[str | None, _Snapshot] = OrderedDict()
        self._handles: OrderedDict[str | None, TieredMemory] = OrderedDict()
        self._closed = False
        self._last_sweep: list[float | None] = [None]  # shared with for_user views: one sweep per interval

    @classmethod
    def open(cls, path: str | Path, *, config: MemoryConfig | None = None,
             embedder: Embedder | bool | None = None, chroma: Any = None,
             user_index: int | None = None, index: IndexConfig | None = None,
             session_id: str = STORE_SESSION, max_users: int = DEFAULT_MAX_USERS,
             ttl: TTLConfig | None = None) -> TieredStore:
        """Open (or create) a store on a folder (SQLite journal + embedded Chroma) or a ``postgresql://`` URL.

        Args:
            path / config / embedder / chroma: as :meth:`langmem_tiers.TieredMemory.open` (``embedder=False``:
                keyword recall only).
            index: LangGraph's index configuration: ``fields`` (the indexed text), ``embed`` (a LangChain
                ``Embeddings``, an embedding function or a provider string; it becomes the recall embedder,
                so do not pass ``embedder`` too) and ``dims`` (checked against the embedder).
            user_index / session_id / max_users / ttl: see the class.

        Raises:
            ConfigError: ``index["embed"]`` together with ``embedder``, or ``dims`` that do not match the
                embedder's vectors.
        """
        index = dict(index) if index is not None else None  # type: ignore[assignment]
        _ttl_config(ttl)  # refused before anything is opened
        if index is not None and index.get("embed") is not None:
            if embedder not in (None, True):
                raise ConfigError("pass either embedder= or index['embed'], not both: they both choose the "
                                  "embedding model")
            from langchain_langmem_tiers.adapters import LangChainEmbedder

            embedder = LangChainEmbedder(ensure_embeddings(index["embed"]), dimension=index.get("dims"))
        # Store sessions hold memories, never messages: nothing is counted, so no tokenizer is loaded.
        memory = TieredMemory.open(path, session_id=session_id, config=config, embedder=embedder,
                                   chroma=chroma, counter=WordCounter())
        try:
            dims = index.get("dims") if index is not None else None
            recall_embedder = memory.recall.embedder if memory.recall is not None else None
            if dims is not None and (recall_embedder is None or recall_embedder.dimension != dims):
                have = recall_embedder.dimension if recall_embedder is not None else "keyword only"
                raise ConfigError(f"index['dims'] ({dims!r}) does not match the embedder ({have}): drop "
                                  "dims or pass the embedder that makes vectors of that size")
            return cls(memory, user_index=user_index, index=index, session_id=session_id, max_users=max_users,
                       owns_memory=True, ttl=ttl)
        except BaseException:
            memory.close()
            raise

    def for_user(self, user_id: str) -> TieredStore:
        """A view of this store that reads and writes ``user_id``'s items only.

        A namespace naming another user is refused (:class:`StoreNamespaceError`); a search or listing
        whose prefix does not name a user sees this user's items only. Needs ``user_index``.
        """
        if self.user_index is None:
            raise ConfigError("for_user() needs a store opened with user_index (the namespace position of "
                              "the user id)")
        user = _user_id(user_id)
        view = TieredStore(self.memory, user_index=self.user_index, index={"fields": list(self.fields)},
                           session_id=self.session_id, max_users=self.max_users, ttl=self.ttl_config)
        view._bound_user = user
        view._last_sweep = self._last_sweep
        return view

    # --- BaseStore ---------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ops in order: reads (get, search, list) see the store as it was before the batch's writes,
        which run after them, the last put of a ``(namespace, key)`` winning."""
        ops = list(ops)
        self._check_open()
        for op in ops:
            self._validate(op)
        results: list[Result] = []
        writes: dict[tuple[tuple[str, ...], str], PutOp] = {}
        with self._lock:
            self._sweep_if_due()
            now = self.memory.clock()  # one instant per batch: expiry is judged once
            for op in ops:
                if isinstance(op, GetOp):
                    results.append(self._get(op, now))
                elif isinstance(op, SearchOp):
                    results.append(self._search(op, now))
                elif isinstance(op, ListNamespacesOp):
                    results.append(self._list_namespaces(op, now))
                else:
                    assert isinstance(op, PutOp)
                    writes.pop((op.namespace, op.key), None)
                    writes[(op.namespace, op.key)] = op
                    results.append(None)
            for op in writes.values():
                self._put(op, now)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Async :meth:`batch`: the sync batch in a worker thread."""
        # The journal, recall and embedder calls block: one worker thread runs the sync batch, so the
        # event loop never waits on disk or the embedding model.
        return await asyncio.to_thread(self.batch, list(ops))

    def sweep_ttl(self) -> int:
        """Erase every expired item this store (or view) can see, with its history (journal, keyword
        index and vectors, as a delete). Returns how many items went."""
        self._check_open()
        with self._lock:
            now = self.memory.clock()
            self._last_sweep[0] = now
            erased = 0
            for user in self._users(()):
                items = self._snapshot(user).items.values()
                for entry in [e for by_key in items for e in by_key.values() if e.expired(now)]:
                    self._erase(user, self._snapshot(user), entry.namespace, entry.key)
                    erased += 1
            return erased

    async def asweep_ttl(self) -> int:
        """Async :meth:`sweep_ttl`."""
        return await asyncio.to_thread(self.sweep_ttl)

    def _sweep_if_due(self) -> None:
        """The periodic sweep of ``sweep_interval_minutes``, run by the first batch once it is due."""
        interval = (self.ttl_config or {}).get("sweep_interval_minutes")
        if not interval:
            return
        last, now = self._last_sweep[0], self.memory.clock()
        if last is None:
            self._last_sweep[0] = now  # the interval counts from the store's first batch
        elif now - last >= interval * 60:
            try:
                self.sweep_ttl()
            except Exception:  # expired items stay filtered out; the next due batch retries
                log.exception("the TTL sweep of the store failed")

    # --- lifecycle -----------------------------------------------------------------

    def flush(self) -> None:
        """Index every pending item now (vectors are otherwise computed in the background)."""
        self._check_open()
        self.memory.flush()

    def close(self) -> None:
        """Release the session handles, and the memory when :meth:`open` opened it. Idempotent."""
        if self._closed:
            return
        self._closed = True
        with self._lock:
            for handle in self._handles.values():
                handle.close()
            self._handles.clear()
            self._snapshots.clear()
        if self._owns_memory:
            self.memory.close()

    def __enter__(self) -> TieredStore:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise MemoryClosedError("this TieredStore is closed; open it again")

    # --- validation ----------------------------------------------------------------

    def _validate(self, op: Op) -> None:
        if isinstance(op, (GetOp, PutOp)):
            _check_labels(op.namespace, "namespace")
            if not isinstance(op.key, str):
                raise InvalidMessageError(f"key ({op.key!r:.80}) must be a string: pass str(key)")
            if isinstance(op, PutOp):
                if op.value is not None:
                    _check_put_namespace(op.namespace)
                    _json_value(op.value)  # before any op of the batch runs: nothing is half-written
                if op.ttl is not None:
                    _check_minutes(op.ttl, "ttl")
                if op.index is not None and op.index is not False and (
                        isinstance(op.index, str) or not all(isinstance(f, str) for f in op.index)):
                    raise ConfigError(f"index ({op.index!r:.80}) must be False, None or a list of field "
                                      "paths")
            self._user_of(op.namespace, writing=isinstance(op, PutOp))
        elif isinstance(op, SearchOp):
            _check_labels(op.namespace_prefix, "namespace_prefix")
            if op.filter is not None and not isinstance(op.filter, Mapping):
                raise ConfigError(f"filter must be a dict of value fields; got {type(op.filter).__name__}")
            _check_page(op.limit, op.offset)
            if op.query is not None and not isinstance(op.query, str):
                raise ConfigError(f"query must be a string or None; got {type(op.query).__name__}")
            self._prefix_user(op.namespace_prefix)
        elif isinstance(op, ListNamespacesOp):
            for condition in op.match_conditions or ():
                _check_labels(condition.path, f"{condition.match_type} path", wildcards=True)
                if condition.match_type not in ("prefix", "suffix"):
                    raise ConfigError(f"match_type ({condition.match_type!r}) must be 'prefix' or 'suffix'")
            depth = op.max_depth
            if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 1):
                raise ConfigError(f"max_depth ({op.max_depth!r}) must be a positive integer or None")
            _check_page(op.limit, op.offset)
        else:
            raise ConfigError(f"unknown store operation {type(op).__name__}: use GetOp, PutOp, SearchOp or "
                              "ListNamespacesOp")

    def _user_of(self, namespace: tuple[str, ...], *, writing: bool) -> str | None:
        """The user a namespace belongs to (``None`` without ``user_index``)."""
        if self.user_index is None:
            return None
        if len(namespace) <= self.user_index:
            raise StoreNamespaceError(
                f"namespace {namespace!r} has no user id at position {self.user_index} (user_index): "
                f"{'every item belongs to a user, ' if writing else ''}put the user id there, e.g. "
                f"{_example(self.user_index)}"
            )
        user = _user_id(namespace[self.user_index])
        if self._bound_user is not None and user != self._bound_user:
            raise StoreNamespaceError(f"namespace {namespace!r} belongs to user {user!r}, and this store "
                                      f"view serves user {self._bound_user!r} only: use a view of that user")
        return user

    def _prefix_user(self, prefix: Sequence[str]) -> str | None:
        """The user a prefix names, or ``None`` when it names none (it may then span users)."""
        if self.user_index is None or len(prefix) <= self.user_index or prefix[self.user_index] == "*":
            return None
        return self._user_of(tuple(prefix), writing=False)

    def _users(self, prefix: Sequence[str]) -> list[str | None]:
        """Whose items a read with this prefix may see."""
        if self.user_index is None:
            return [None]
        named = self._prefix_user(prefix)
        if named is not None:
            return [named]
        if self._bound_user is not None:
            return [self._bound_user]
        journal = self.memory.journal
        named_users = {ns.user_id for _, ns in journal.namespaces()
                       if ns.session_id == self.session_id and not ns.agent_id and ns.user_id}
        return [*sorted(named_users)]

    # --- reads ---------------------------------------------------------------------

    def _get(self, op: GetOp, now: float) -> Item | None:
        user = self._user_of(op.namespace, writing=False)
        entry = self._snapshot(user).items.get(op.namespace, {}).get(op.key)
        if entry is None or entry.expired(now):
            return None
        if op.refresh_ttl:
            self._refresh(user, entry, now)
        return entry.item()

    def _refresh(self, user: str | None, entry: _Entry, now: float) -> None:
        """Move an item's expiry to ``now + ttl`` (LangGraph's refresh on read): a metadata update of
        its current record."""
        if entry.ttl is None or entry.expires_at is None:
            return
        new = now + entry.ttl * 60
        if new - entry.expires_at < _REFRESH_SLACK_S:
            return
        journal = self.memory.journal
        record = next(iter(journal.records([entry.record_id])), None)
        if record is None or record.valid_to is not None:
            return  # superseded or deleted meanwhile: the newer version has its own expiry
        snapshot = self._snapshot(user)
        handle = self._handle(user)
        metadata = {**record.metadata, EXPIRES_AT: new}
        self._write(user, snapshot, lambda: journal.update_record(entry.record_id, metadata=metadata),
                    lambda s: s.add(replace(entry, expires_at=new), record.key or ""))
        handle.index_soon()  # the vector store's copy of the metadata follows through the outbox

    def _search(self, op: SearchOp, now: float) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        found: list[tuple[str | None, _Entry]] = []
        for user in self._users(prefix):
            found += [(user, e) for e in self._snapshot(user).entries(now)
                      if e.namespace[:len(prefix)] == prefix and _matches(e.value, op.filter)]
        found.sort(key=lambda ue: _order(ue[1]))
        wanted = op.offset + op.limit
        scored: dict[int, float] = {}
        if op.query and op.query.strip() and found:
            for user in dict.fromkeys(u for u, _ in found):
                candidates = {e.record_id for u, e in found if u == user and e.indexed}
                if candidates:
                    scored.update(self._recall(user, op.query, candidates, wanted))
        ranked = sorted((e for _, e in found if e.record_id in scored), key=lambda e: -scored[e.record_id])
        rest = [e for _, e in found if e.record_id not in scored]
        page = [*ranked, *rest][op.offset:wanted]
        if op.refresh_ttl:
            users = {e.record_id: u for u, e in found}
            for e in page:
                self._refresh(users[e.record_id], e, now)
        return [e.item(scored.get(e.record_id), search=True) for e in page]  # type: ignore[misc]

    def _recall(self, user: str | None, query: str, candidates: set[int], wanted: int) -> dict[int, float]:
        """Recall scores of ``candidates`` (record ids) for ``query``: enough hits that ``wanted`` of them
        are candidates, or every hit recall has."""
        handle = self._handle(user)
        total = self._snapshot(user).records()
        k = min(max(wanted, 10), max(total, 1))
        while True:
            hits = handle.search(query, k, scope="session", kinds=[STORE_KIND])
            scores = {h.record_id: h.score for h in hits if h.record_id in candidates}
            if len(scores) >= wanted or len(hits) < k or k >= total:
                return scores
            k = min(k * 4, total)

    def _list_namespaces(self, op: ListNamespacesOp, now: float) -> list[tuple[str, ...]]:
        prefix: tuple[str, ...] = ()
        for condition in op.match_conditions or ():
            if condition.match_type == "prefix":
                prefix = tuple(condition.path)
        names: set[tuple[str, ...]] = set()
        for user in self._users(prefix):
            names |= {e.namespace for e in self._snapshot(user).entries(now)}
        matching = [ns for ns in names if all(_namespace_matches(c, ns) for c in op.match_conditions or ())]
        if op.max_depth is not None:
            matching = list({ns[:op.max_depth] for ns in matching})
        return sorted(matching)[op.offset:op.offset + op.limit]

    def _snapshot(self, user: str | None) -> _Snapshot:
        """The user's current items, reread only when the session's version stamp moved."""
        journal = self.memory.journal
        ns_id = journal.namespace_id(Namespace.of(self.session_id, user), create=False)
        if ns_id is None:
            self._snapshots.pop(user, None)
            return _Snapshot(None, 0)
        with journal.read() as rx:
            version = rx.state(ns_id).version
        cached = self._snapshots.get(user)
        if cached is not None and cached.ns_id == ns_id and cached.version == version:
            self._snapshots.move_to_end(user)
            return cached
        snapshot = _Snapshot.of(ns_id, version, journal.scoped_records([ns_id], [STORE_KIND]))
        self._keep(self._snapshots, user, snapshot)
        return snapshot

    # --- writes --------------------------------------------------------------------

    def _erase(self, user: str | None, snapshot: _Snapshot, namespace: tuple[str, ...], key: str) -> None:
        """Erase an item and its history: journal rows and keyword entries, then the vectors."""
        record_key = _record_key(namespace, key)
        ids = snapshot.versions.get(record_key, [])
        if ids:
            handle = self._handle(user)
            self._write(user, snapshot, lambda: handle.journal.delete_records(ids),
                        lambda s: s.remove(namespace, key, record_key))
            handle.flush()  # the vectors of the erased versions go now, not at the next indexing

    def _put(self, op: PutOp, now: float) -> None:
        user = self._user_of(op.namespace, writing=op.value is not None)
        snapshot = self._snapshot(user)
        record_key = _record_key(op.namespace, op.key)
        if op.value is None:
            self._erase(user, snapshot, op.namespace, op.key)
            return
        value = _json_value(op.value)
        text, indexed = _index_text(value, self.fields if op.index is None else op.index)
        handle = self._handle(user)
        journal = self.memory.journal
        namespace = Namespace.of(self.session_id, user)
        meta: dict[str, Any] = {}
        record_id, created = -1, 0.0
        expiry: dict[str, float] = {}
        if op.ttl is not None:
            expiry[EXPIRES_AT] = now + op.ttl * 60  # the core's expiry field: its sweep and cleanup see it

        def write() -> None:
            # One transaction of the session: the new version and the supersession of the current one.
            # The snapshot says which record that is when nothing else wrote since it was read (the
            # session's version stamp); otherwise the session's current memories are read here.
            nonlocal meta, record_id, created
            ns_id = journal.namespace_id(namespace)
            assert ns_id is not None
            with journal.write(ns_id) as tx:
                current = snapshot
                if snapshot.ns_id != ns_id or tx.state().version != snapshot.version:
                    current = _Snapshot.of(ns_id, -1, tx.current_memories([ns_id]))
                meta = _item_meta(op.namespace, op.key, value, indexed, current, now, op.ttl)
                existing = current.items.get(op.namespace, {}).get(op.key)
                created = time.time()
                record = NewRecord(kind=STORE_KIND, text=text, metadata={_META: meta, **expiry},
                                   created_at=created, key=record_key)
                (record_id,) = tx.insert_records([record])
                if existing is not None:
                    tx.supersede([existing.record_id], created)

        try:
            self._write(user, snapshot, write,
                        lambda s: s.add(_entry(record_id, created, meta, expiry.get(EXPIRES_AT)), record_key))
        except SessionErasedError:
            # The user was erased (forget) after the snapshot was read: the put starts the session afresh.
            self._snapshots.pop(user, None)
            snapshot = _Snapshot(None, 0)
            self._write(user, snapshot, write, lambda s: None)
        handle.index_soon()  # vectors are computed off the caller's path when configured, as remember() does

    def _write(self, user: str | None, before: _Snapshot, write: Any, apply: Any) -> None:
        """Run one journal write (one version step of the session) and keep the cached snapshot current:
        patched in place when only this write happened since it was read, reread otherwise."""
        write()
        journal = self.memory.journal
        ns_id = journal.namespace_id(Namespace.of(self.session_id, user), create=False)
        if ns_id is None or (ns_id != before.ns_id and before.ns_id is not None):
            self._snapshots.pop(user, None)
            return
        with journal.read() as rx:
            version = rx.state(ns_id).version
        if before.ns_id == ns_id and version == before.version + 1 and self._snapshots.get(user) is before:
            before.version = version
            apply(before)
        else:
            self._snapshots.pop(user, None)

    def _handle(self, user: str | None) -> TieredMemory:
        """The journal session of the user's items (created on first use; no connection of its own)."""
        handle = self._handles.get(user)
        if handle is None:
            namespace = Namespace.of(self.session_id, user)
            if self.memory.namespace == namespace:
                handle = self.memory  # the store's own session: no second handle
            else:
                # Not for_session(): it would give a session without a user the memory's user and agent.
                handle = self.memory.for_namespace(namespace)
            self._keep(self._handles, user, handle)
        self._handles.move_to_end(user)
        return handle

    def _keep(self, cache: OrderedDict[str | None, Any], user: str | None, value: Any) -> None:
        cache[user] = value
        cache.move_to_end(user)
        while len(cache) > self.max_users:
            _, old = cache.popitem(last=False)
            if isinstance(old, TieredMemory) and old is not self.memory:
                old.close()


# --- pure helpers ------------------------------------------------------------------


def _entry(record_id: int, created: float, meta: Mapping[str, Any], expires: float | None = None) -> _Entry:
    position = tuple(meta["since"]) if meta.get("since") else (created, record_id)
    ns_position = tuple(meta["ns_since"]) if meta.get("ns_since") else position
    return _Entry(
        record_id=record_id, namespace=tuple(meta["namespace"]), key=meta["key"], value=dict(meta["value"]),
        created_at=float(meta.get("created_at", created)), updated_at=created,
        indexed=bool(meta.get("indexed")), position=(float(position[0]), int(position[1])),
        ns_position=(float(ns_position[0]), int(ns_position[1])),
        expires_at=expires, ttl=float(meta["ttl"]) if meta.get("ttl") is not None else None,
    )


def _item_meta(namespace: tuple[str, ...], key: str, value: dict[str, Any], indexed: bool,
               current: _Snapshot, now: float, ttl: float | None) -> dict[str, Any]:
    """What a new version's record keeps besides its text: the item, its ttl (minutes), and its place
    in the store order (carried over from the current version and from the namespace's other items; an
    expired item is gone, so a put after its expiry starts afresh)."""
    meta: dict[str, Any] = {"namespace": list(namespace), "key": key, "value": value, "indexed": indexed}
    if ttl is not None:
        meta["ttl"] = ttl
    live = {k: e for k, e in current.items.get(namespace, {}).items() if not e.expired(now)}
    existing = live.get(key)
    if existing is not None:
        meta["created_at"] = existing.created_at
        meta["since"] = list(existing.position)
    if live:
        meta["ns_since"] = list(min(e.ns_position for e in live.values()))
    return meta


def _order(entry: _Entry) -> tuple[Any, ...]:
    return (entry.ns_position, entry.namespace, entry.position, entry.key)


def _when(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, timezone.utc)


def _record_key(namespace: tuple[str, ...], key: str) -> str:
    """The keyed-memory key of an item: lowercase snake_case, unique per (namespace, key)."""
    raw = json.dumps([list(namespace), key], ensure_ascii=False).encode("utf-8", "surrogatepass")
    return "store_" + hashlib.sha256(raw).hexdigest()[:40]


def _fields(index: Mapping[str, Any] | None) -> tuple[str, ...]:
    fields = (index or {}).get("fields") or ["$"]
    if isinstance(fields, str) or not all(isinstance(f, str) and f for f in fields):
        raise ConfigError(f"index['fields'] ({fields!r:.80}) must be a list of field paths, e.g. ['content'] "
                          "or ['$'] for the whole value")
    return tuple(fields)


def _index_text(value: Mapping[str, Any], fields: Sequence[str] | Literal[False]) -> tuple[str, bool]:
    """The record text of an item and whether it is ranked by queries.

    The selected fields' texts, one per line (LangGraph embeds one vector per field and keeps the best;
    we index one text per item). An item with nothing selected still needs a record text: its JSON,
    marked as not indexed, so queries never rank it.
    """
    texts = [t for f in fields for t in get_text_at_path(value, f)] if fields is not False else []
    text = "\n".join(t for t in texts if t.strip())
    if text:
        return text, True
    return json.dumps(value, sort_keys=True, ensure_ascii=False), False


def _json_value(value: Any) -> dict[str, Any]:
    """The value as the JSON object it is stored as (what ``get`` returns), or a typed refusal."""
    if not isinstance(value, Mapping):
        raise InvalidMessageError(f"a store value must be a dict; got {type(value).__name__}: wrap it, e.g. "
                                  "{'content': ...}")
    try:
        stored = dict(json.loads(json.dumps(value, ensure_ascii=False, allow_nan=False)))
    except (TypeError, ValueError) as e:
        raise InvalidMessageError(f"a store value must be JSON (string keys; no NaN or infinity): {e}") from e
    _check_strings(stored)
    return stored


def _check_strings(value: Any) -> None:
    """The journal's text rules for every string of a value (PostgreSQL text holds no NUL)."""
    if isinstance(value, dict):
        for k, v in value.items():
            _check_strings(k)
            _check_strings(v)
    elif isinstance(value, list):
        for v in value:
            _check_strings(v)
    elif isinstance(value, str):
        if "\x00" in value:
            raise InvalidMessageError(f"a store value holds a NUL character in {value!r:.60}: remove it")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as e:
            raise InvalidMessageError(f"a store value holds invalid unicode (a lone surrogate) in "
                                      f"{value!r:.60}") from e


def _user_id(value: Any) -> str:
    try:
        return Namespace.of("store", value).user_id
    except CoreNamespaceError as e:
        raise StoreNamespaceError(f"the user id in a namespace is refused: {e}") from e


def _example(user_index: int) -> str:
    return repr(tuple(["memories"] * user_index + ["<user_id>"]))


def _check_labels(namespace: Any, what: str, *, wildcards: bool = False) -> None:
    if not isinstance(namespace, tuple):
        raise StoreNamespaceError(f"{what} must be a tuple of strings; got {type(namespace).__name__} "
                                  f"{namespace!r:.80}")
    for label in namespace:
        if not isinstance(label, str):
            raise StoreNamespaceError(f"{what} {namespace!r:.80} has a {type(label).__name__} label "
                                      f"{label!r:.40}: namespace labels must be strings")
        if not label:
            raise StoreNamespaceError(f"{what} {namespace!r:.80} has an empty label: labels must be "
                                      "non-empty")
        if "." in label or "\x00" in label:
            raise StoreNamespaceError(f"{what} {namespace!r:.80} has the label {label!r:.40}: labels cannot "
                                      "contain periods ('.') or NUL bytes")


def _check_put_namespace(namespace: tuple[str, ...]) -> None:
    if not namespace:
        raise StoreNamespaceError("namespace cannot be empty: give at least one label, e.g. ('memories',)")
    if namespace[0] == "langgraph":
        raise StoreNamespaceError(f"namespace {namespace!r:.80} starts with 'langgraph', which LangGraph "
                                  "reserves: use another root label")


def _check_minutes(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value <= 0:
        raise ConfigError(f"{name} ({value!r:.40}) must be a positive number of minutes (LangGraph's unit), "
                          "or None for no expiry")
    return float(value)


def _ttl_config(ttl: Any) -> TTLConfig | None:
    """LangGraph's ``TTLConfig``, checked (unknown keys and bad values refused, never ignored)."""
    if ttl is None:
        return None
    if not isinstance(ttl, Mapping):
        raise ConfigError(f"ttl must be a TTLConfig dict or None; got {type(ttl).__name__}")
    unknown = sorted(set(ttl) - set(_TTL_KEYS))
    if unknown:
        raise ConfigError(f"unknown TTLConfig key(s) {', '.join(map(repr, unknown))}: use "
                          f"{', '.join(_TTL_KEYS)}")
    for name in ("default_ttl", "sweep_interval_minutes"):
        if ttl.get(name) is not None:
            _check_minutes(ttl[name], f"ttl[{name!r}]")
    refresh = ttl.get("refresh_on_read", True)
    if not isinstance(refresh, bool):
        raise ConfigError(f"ttl['refresh_on_read'] ({refresh!r:.40}) must be True or False")
    return TTLConfig(**ttl)  # type: ignore[typeddict-item]


def _check_page(limit: Any, offset: Any) -> None:
    for name, v in (("limit", limit), ("offset", offset)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ConfigError(f"{name} ({v!r}) must be an integer >= 0")


def _namespace_matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs = zip(namespace, path)
    else:
        pairs = zip(reversed(namespace), reversed(path))
    return all(p == "*" or n == p for n, p in pairs)


def _matches(value: Mapping[str, Any], filter: Mapping[str, Any] | None) -> bool:
    return not filter or all(_compare(value.get(k), want) for k, want in filter.items())


def _compare(have: Any, want: Any) -> bool:
    """InMemoryStore's (and PostgreSQL JSONB's) filter semantics: nested dicts match field by field,
    lists element by element, a dict of ``$`` operators compares."""
    if isinstance(want, Mapping):
        if any(isinstance(k, str) and k.startswith("$") for k in want):
            return all(_operator(have, op, arg) for op, arg in want.items())
        return isinstance(have, Mapping) and all(_compare(have.get(k), v) for k, v in want.items())
    if isinstance(want, (list, tuple)):
        return isinstance(have, (list, tuple)) and len(have) == len(want) and all(
            _compare(h, w) for h, w in zip(have, want))
    return bool(have == want)


def _operator(have: Any, op: str, arg: Any) -> bool:
    if op == "$eq":
        return bool(have == arg)
    if op == "$ne":
        return bool(have != arg)
    if op not in _OPERATORS:
        raise ConfigError(f"unknown filter operator {op!r}: use one of {', '.join(_OPERATORS)}")
    a, b = _number(have), _number(arg)
    if a is None or b is None:
        return False  # InMemoryStore raises on a value that is no number; a filter here simply fails
    return {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[op]


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or v is None:
        return float(v) if isinstance(v, bool) else None
    try:
        number = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number
