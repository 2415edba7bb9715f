"""TieredStore TTL with LangGraph's semantics, on an injected clock (no sleeps).

LangGraph's own InMemoryStore has no TTL in the installed version (``supports_ttl = False``; a put with
a ttl raises), so it cannot be the oracle for expiry. The differential run here uses ``ExpiringOracle``:
InMemoryStore plus LangGraph's documented TTL semantics (``BaseStore``/``TTLConfig`` docstrings, as
PostgresStore implements them): ``ttl`` in minutes from the put, an expired item is gone for every read,
a get or search that returns an item refreshes its expiry to ``now + ttl`` unless ``refresh_ttl`` is off.
Everything else (values, order, filters, pagination, namespaces) is still InMemoryStore's.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_langmem_tiers import TieredStore
from langgraph.store.base import GetOp, PutOp, SearchOp

from langmem_tiers import ConfigError, Namespace
from tests.support.clock import T0, FakeClock
from tests.test_langgraph_store import KEYS, SENTENCES, Oracle, _filter, _plain, _prefix, _value

NS = ("memories", "ada")


class ExpiringOracle(Oracle):
    """InMemoryStore with LangGraph's TTL semantics added (see the module docstring)."""

    supports_ttl = True

    def __init__(self, clock: FakeClock) -> None:
        super().__init__()
        self.clock = clock
        self.expiry: dict[tuple[tuple[str, ...], str], tuple[float, float]] = {}  # -> (expires_at, ttl)

    def batch(self, ops: Any) -> list[Any]:
        ops, now = list(ops), self.clock()
        for (ns, key), (at, _) in list(self.expiry.items()):
            if now >= at:
                self._data.get(ns, {}).pop(key, None)
                self._vectors.get(ns, {}).pop(key, None)
                del self.expiry[(ns, key)]
        self._prune()
        plain = [PutOp(op.namespace, op.key, op.value, op.index) if isinstance(op, PutOp) else op for op in ops]
        out = super().batch(plain)
        for op, result in zip(ops, out):
            returned = [result] if isinstance(op, GetOp) and result is not None else \
                result if isinstance(op, SearchOp) else []
            if getattr(op, "refresh_ttl", False):
                for item in returned:
                    where = (tuple(item.namespace), item.key)
                    if where in self.expiry:
                        self.expiry[where] = (now + self.expiry[where][1] * 60, self.expiry[where][1])
        for op in ops:
            if isinstance(op, PutOp):
                self.expiry.pop((op.namespace, op.key), None)
                if op.value is not None and op.ttl is not None:
                    self.expiry[(op.namespace, op.key)] = (now + op.ttl * 60, op.ttl)
        return out


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(tmp_path: Path, clock: FakeClock) -> Iterator[TieredStore]:
    with TieredStore.open(tmp_path, embedder=False, user_index=1) as s:
        s.memory.clock = clock
        yield s


def _ns_id(store: TieredStore, user: str) -> int:
    """The journal session of a user's store items."""
    ns_id = store.memory.journal.namespace_id(Namespace.of("langgraph-store", user), create=False)
    assert ns_id is not None
    return ns_id


def _expires_at(store: TieredStore, namespace: tuple[str, ...], key: str) -> float | None:
    """The ``expires_at`` of the item's current record, read from the journal."""
    records = [r for r in store.memory.journal.scoped_records([_ns_id(store, namespace[1])], ["store"])
               if r.valid_to is None and r.metadata["store"]["key"] == key
               and tuple(r.metadata["store"]["namespace"]) == namespace]
    assert len(records) == 1
    value = records[0].metadata.get("expires_at")
    return None if value is None else float(value)


def test_an_item_with_a_ttl_expires_for_every_read(store: TieredStore, clock: FakeClock) -> None:
    assert store.supports_ttl is True
    store.put(NS, "code", {"content": "the door code is 5521"}, ttl=2)
    store.put(NS, "tea", {"content": "Ada drinks green tea"})
    store.put(("memories", "ada", "work"), "desk", {"content": "desk 12"}, ttl=1)
    # The expiry is the core's: absolute unix seconds by the memory's clock, in the record's metadata.
    assert _expires_at(store, NS, "code") == T0 + 120
    assert _expires_at(store, NS, "tea") is None
    clock.now += 119
    assert store.get(NS, "code", refresh_ttl=False) is not None
    clock.now += 1  # exactly at expires_at: expired (the core's rule)
    assert store.get(NS, "code") is None
    assert store.get(("memories", "ada", "work"), "desk") is None
    assert [i.key for i in store.search(())] == ["tea"]
    assert [i.key for i in store.search(NS, query="door code 5521")] == ["tea"]
    assert store.list_namespaces() == [NS]
    # The user's chat memory never recalls an expired item either.
    chat = store.memory.for_session("chat", user_id="ada")
    assert not [h for h in chat.search("door code 5521", 10, scope="user") if "5521" in h.text]
    # A put after expiry starts the item afresh: no created_at carried over from the expired one.
    store.put(NS, "code", {"content": "the door code is 9000"})
    item = store.get(NS, "code")
    assert item is not None
    assert item.value == {"content": "the door code is 9000"}
    assert _expires_at(store, NS, "code") is None
    assert item.created_at == item.updated_at


def test_reads_refresh_the_ttl(store: TieredStore, clock: FakeClock) -> None:
    store.put(NS, "code", {"content": "the door code is 5521"}, ttl=1)
    store.put(NS, "pin", {"content": "the bike lock pin is 4417"}, ttl=1)
    clock.now += 50
    assert store.get(NS, "code") is not None  # refresh_on_read defaults to True (LangGraph)
    assert _expires_at(store, NS, "code") == T0 + 50 + 60
    clock.now += 50  # 100 s after the put: alive only because of the refresh
    assert store.get(NS, "code", refresh_ttl=False) is not None
    assert store.get(NS, "pin") is None
    # A search refreshes what it returns.
    assert [i.key for i in store.search(NS)] == ["code"]
    assert _expires_at(store, NS, "code") == T0 + 100 + 60
    clock.now += 59
    assert [i.key for i in store.search(NS, query="door code")] == ["code"]
    clock.now += 59
    assert store.get(NS, "code") is not None
    # A refresh that would move the expiry by under a second writes nothing (bursts of reads).
    version = _version(store)
    store.get(NS, "code")
    assert _version(store) == version
    clock.now += 61
    assert store.get(NS, "code") is None


def _version(store: TieredStore) -> int:
    with store.memory.journal.read() as rx:
        return rx.state(_ns_id(store, "ada")).version


def test_no_refresh_when_refresh_on_read_is_off(tmp_path: Path, clock: FakeClock) -> None:
    with TieredStore.open(tmp_path, embedder=False, user_index=1, ttl={"refresh_on_read": False}) as store:
        store.memory.clock = clock
        store.put(NS, "code", {"content": "the door code is 5521"}, ttl=1)
        store.put(NS, "pin", {"content": "the bike lock pin is 4417"}, ttl=1)
        clock.now += 50
        assert store.get(NS, "code") is not None
        assert [i.key for i in store.search(NS)] == ["code", "pin"]
        assert _expires_at(store, NS, "code") == T0 + 60  # reads did not move it
        assert store.get(NS, "pin", refresh_ttl=True) is not None  # the per-call override still refreshes
        clock.now += 10
        assert store.get(NS, "code") is None
        assert store.get(NS, "pin") is not None


def test_default_ttl_applies_to_puts_without_one(tmp_path: Path, clock: FakeClock) -> None:
    with TieredStore.open(tmp_path, embedder=False, user_index=1,
                          ttl={"default_ttl": 2, "refresh_on_read": False}) as store:
        store.memory.clock = clock
        store.put(NS, "default", {"content": "expires with the default"})
        store.put(NS, "own", {"content": "expires with its own ttl"}, ttl=5)
        store.put(NS, "never", {"content": "never expires"}, ttl=None)  # an explicit None: no expiry
        store.batch([PutOp(NS, "raw", {"content": "a raw PutOp carries its own ttl"})])  # ttl=None there
        assert _expires_at(store, NS, "default") == T0 + 120
        assert _expires_at(store, NS, "own") == T0 + 300
        clock.now += 120
        assert [i.key for i in store.search(NS)] == ["own", "never", "raw"]
        clock.now += 180
        assert [i.key for i in store.search(NS)] == ["never", "raw"]
        # A for_user view keeps the store's TTL configuration.
        view = store.for_user("ada")
        assert view.ttl_config == store.ttl_config
        view.put(NS, "viewed", {"content": "x"})
        assert _expires_at(store, NS, "viewed") == clock.now + 120


def test_the_sweep_erases_expired_items_with_history_and_vectors(tmp_path: Path, local_embedder: Any,
                                                                 clock: FakeClock) -> None:
    from langmem_tiers import MemoryConfig

    config = MemoryConfig(background_index=False)
    with TieredStore.open(tmp_path, embedder=local_embedder, config=config, user_index=1,
                          ttl={"sweep_interval_minutes": 10}) as store:
        store.memory.clock = clock
        store.put(NS, "code", {"content": "the door code is 5521"})
        store.put(NS, "code", {"content": "the door code is 7734"}, ttl=1)  # history: the 5521 version
        store.put(NS, "tea", {"content": "Ada drinks green tea"})
        store.flush()
        journal, recall = store.memory.journal, store.memory.recall
        assert recall is not None
        assert recall.store is not None
        ns_id = _ns_id(store, "ada")
        records = journal.scoped_records([ns_id], ["store"])
        doomed = [r.id for r in records if "door code" in r.text]
        kept = [r.id for r in records if "tea" in r.text]
        assert len(doomed) == 2
        assert len(kept) == 1
        assert len(recall.store.get([recall.vector_id(i) for i in doomed])) == 2
        clock.now += 61
        assert store.get(NS, "code") is None
        assert journal.records(doomed) != []  # filtered out, not erased yet: the sweep is not due
        clock.now += 600  # the sweep interval passed: the next batch sweeps
        assert [i.key for i in store.search(NS)] == ["tea"]
        assert journal.records(doomed) == []  # every version, history included
        assert [r.id for r in journal.records(kept)] == kept
        assert recall.store.get([recall.vector_id(i) for i in doomed]) == []
        assert len(recall.store.get([recall.vector_id(i) for i in kept])) == 1
        assert not journal.keyword_search("5521 7734", [ns_id], 10)
        assert store.memory.stats().index_pending == 0
        # sweep_ttl() erases on demand and says how many items went.
        store.put(NS, "otp", {"content": "one-time password 8812"}, ttl=1)
        assert store.sweep_ttl() == 0
        clock.now += 60
        assert store.sweep_ttl() == 1
        assert [i.key for i in store.search(())] == ["tea"]


def test_the_core_sweep_and_cleanup_erase_expired_store_items(tmp_path: Path, clock: FakeClock) -> None:
    from langmem_tiers import MemoryConfig

    with TieredStore.open(tmp_path, embedder=False, user_index=1,
                          config=MemoryConfig(expiry_sweep_s=60)) as store:
        store.memory.clock = clock
        chat = store.memory.for_session("chat", user_id="ada")
        chat.add("user", "hello")  # the user's first write: the first core sweep (nothing to erase)
        store.put(NS, "code", {"content": "the door code is 5521"}, ttl=1)
        store.put(NS, "code", {"content": "the door code is 7734"}, ttl=1)
        store.put(("memories", "bob"), "code", {"content": "Bob's code 1234"}, ttl=1)
        journal = store.memory.journal
        ada_ids = [r.id for r in journal.scoped_records([_ns_id(store, "ada")], ["store"])]
        bob_ids = [r.id for r in journal.scoped_records([_ns_id(store, "bob")], ["store"])]
        assert len(ada_ids) == 2
        assert len(bob_ids) == 1
        clock.now += 61
        chat.add("user", "still there?")  # the periodic sweep of ada's memories covers her store items
        assert journal.records(ada_ids) == []
        assert [r.id for r in journal.records(bob_ids)] == bob_ids  # another user's sweep is his own
        bob = store.memory.for_session("chat", user_id="bob")
        found = bob.cleanup(dry_run=True)
        assert [h.record_id for h in found] == bob_ids
        bob.cleanup(dry_run=False)
        assert journal.records(bob_ids) == []


def test_bad_ttl_values_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="default_ttl"):
        TieredStore.open(tmp_path / "a", embedder=False, ttl={"default_ttl": -1})
    with pytest.raises(ConfigError, match="unknown TTLConfig key"):
        TieredStore.open(tmp_path / "b", embedder=False, ttl={"default_tll": 5})  # type: ignore[typeddict-unknown-key]
    with pytest.raises(ConfigError, match="refresh_on_read"):
        TieredStore.open(tmp_path / "c", embedder=False, ttl={"refresh_on_read": "yes"})  # type: ignore[typeddict-item]
    assert not (tmp_path / "a").exists() or not any((tmp_path / "a").iterdir())  # refused before opening
    with TieredStore.open(tmp_path / "d", embedder=False) as store:
        for bad in (0, -5, float("nan"), float("inf"), "5", True):
            with pytest.raises(ConfigError, match="ttl"):
                store.put(("prefs",), "k", {"a": 1}, ttl=bad)  # type: ignore[arg-type]
        assert store.search(()) == []  # nothing half-written


async def test_async_ttl(store: TieredStore, clock: FakeClock) -> None:
    await store.aput(NS, "code", {"content": "the door code is 5521"}, ttl=1)
    clock.now += 30
    assert await store.aget(NS, "code") is not None  # refreshed to now + 60
    clock.now += 45
    assert [i.key for i in await store.asearch(NS, refresh_ttl=False)] == ["code"]
    clock.now += 15
    assert await store.aget(NS, "code") is None
    await store.aput(NS, "code", {"content": "again"}, ttl=1)
    clock.now += 60
    assert await store.asweep_ttl() == 1


@pytest.mark.parametrize("seed", [11, 12])
def test_random_operations_with_ttls_match_the_expiring_oracle(store: TieredStore, clock: FakeClock,
                                                               seed: int) -> None:
    _run_random_ttl(store, ExpiringOracle(clock), clock, seed)


def test_random_operations_with_ttls_on_a_postgresql_journal(clock: FakeClock) -> None:
    from tests.support.postgres import postgres_url

    with postgres_url() as url, TieredStore.open(url, embedder=False, user_index=1) as store:
        store.memory.clock = clock
        _run_random_ttl(store, ExpiringOracle(clock), clock, seed=11)


def _run_random_ttl(store: TieredStore, oracle: ExpiringOracle, clock: FakeClock, seed: int) -> None:
    rng = random.Random(seed)
    seen: dict[str, int] = {}
    # Few namespaces and keys, so reads often meet items whose expiry a refresh moved (or did not).
    spots = [("memories", "ada"), ("memories", "bob"), ("prefs", "ada", "work")]
    for step in range(120):
        clock.now += rng.choice([0, 0, 5, 20, 45, 70])  # whole seconds (see the refresh slack)
        kind = rng.choices(["put", "delete", "get", "search", "list", "query", "sweep"],
                           [40, 8, 20, 15, 6, 5, 3])[0]
        seen[kind] = seen.get(kind, 0) + 1
        ns, key = rng.choice(spots), rng.choice(KEYS[:3])
        refresh = rng.choice([True, False])
        if kind == "put":
            value, ttl = _value(rng), rng.choice([None, None, 0.5, 1, 2])
            store.put(ns, key, value, ttl=ttl)
            oracle.put(ns, key, value, ttl=ttl)
            continue
        if kind == "delete":
            store.delete(ns, key)
            oracle.delete(ns, key)
            continue
        if kind == "sweep":
            store.sweep_ttl()  # erasing expired items changes no read
            continue
        if kind == "get":
            ours, theirs = store.get(ns, key, refresh_ttl=refresh), oracle.get(ns, key, refresh_ttl=refresh)
        elif kind == "search":
            prefix, flt = _prefix(rng), _filter(rng)
            limit, offset = rng.choice([1, 3, 10, 100]), rng.choice([0, 0, 1, 4])
            ours = store.search(prefix, filter=flt, limit=limit, offset=offset, refresh_ttl=refresh)
            theirs = oracle.search(prefix, filter=flt, limit=limit, offset=offset, refresh_ttl=refresh)
        elif kind == "list":
            ours, theirs = store.list_namespaces(), oracle.list_namespaces()
        else:
            prefix, query = _prefix(rng), rng.choice(SENTENCES).split()[-1]
            ours = sorted(_plain(store.search(prefix, query=query, limit=100, refresh_ttl=refresh)))
            theirs = sorted(_plain(oracle.search(prefix, query=query, limit=100, refresh_ttl=refresh)))
        assert _plain(ours) == _plain(theirs), f"seed {seed} step {step}: {kind} {ns} {key}"
    assert seen.get("put", 0) > 20
    assert seen.get("get", 0) > 8
    clock.now += 30
    assert _plain(store.search((), limit=1000, refresh_ttl=False)) == \
        _plain(oracle.search((), limit=1000, refresh_ttl=False))
    assert store.list_namespaces(limit=1000) == oracle.list_namespaces(limit=1000)
