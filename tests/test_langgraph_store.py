"""TieredStore against LangGraph's own InMemoryStore as the oracle (a differential contract suite).

The same operations run on both stores and every deterministic result must be equal: get, delete,
search without a query (items and their order, filters, pagination), list_namespaces (prefix, suffix,
wildcards, depth, pagination), batches. Search with a query compares membership only (the ranking is
our hybrid recall's, not InMemoryStore's cosine). Real parts: SQLite journal, embedded Chroma and the
real local embedding model.

One documented difference is normalized in the oracle: InMemoryStore keeps a namespace after its last
item is deleted (and creates one when a get reads it), so list_namespaces and its namespace order show
namespaces without items; PostgresStore and TieredStore list namespaces that hold items. The oracle
drops empty namespaces after each batch.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.embeddings import Embeddings
from langchain_langmem_tiers import TieredStore
from langchain_langmem_tiers.store import StoreNamespaceError, _matches
from langgraph.store.base import GetOp, InvalidNamespaceError, Item, ListNamespacesOp, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore, _compare_values

from langmem_tiers import InvalidMessageError

USERS = ("ada", "bob")
ROOTS = ("memories", "prefs")
SUBS = (None, "work", "home")
KEYS = ("k1", "k2", "k3", "k4", "k5")
SENTENCES = (
    "Ada drinks green tea every morning",
    "Bob moved to Lisbon last spring",
    "The team prefers Python for backend services",
    "Deploys happen on Tuesdays after standup",
    "The cat is called Miso and hates the vacuum",
    "Quarterly report is due at the end of March",
)


class Oracle(InMemoryStore):
    """InMemoryStore listing only namespaces that hold items (see the module docstring)."""

    def batch(self, ops: Any) -> list[Any]:
        out = super().batch(ops)
        self._prune()
        return out

    async def abatch(self, ops: Any) -> list[Any]:
        out = await super().abatch(ops)
        self._prune()
        return out

    def _prune(self) -> None:
        for ns in [ns for ns, items in self._data.items() if not items]:
            del self._data[ns]
            self._vectors.pop(ns, None)


class MiniLM(Embeddings):
    """The real local embedder as LangChain Embeddings, so InMemoryStore searches with the same model."""

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [list(map(float, v)) for v in self.embedder.embed(texts)]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


@pytest.fixture
def store(tmp_path: Path, local_embedder: Any) -> Iterator[TieredStore]:
    with TieredStore.open(tmp_path, embedder=local_embedder, user_index=1) as s:
        yield s


def _plain(result: Any) -> Any:
    """Results without timestamps and scores: what both stores must agree on."""
    if isinstance(result, Item):
        return (result.namespace, result.key, result.value)
    if isinstance(result, list):
        return [_plain(r) for r in result]
    return result


def _namespace(rng: random.Random) -> tuple[str, ...]:
    sub = rng.choice(SUBS)
    ns = (rng.choice(ROOTS), rng.choice(USERS))
    return (*ns, sub) if sub else ns


def _value(rng: random.Random) -> dict[str, Any]:
    value: dict[str, Any] = {"content": rng.choice(SENTENCES), "n": rng.randint(0, 5),
                             "tag": rng.choice(["a", "b"]), "meta": {"level": rng.choice([1, 2])}}
    value["score"] = rng.choice([0.5, 1.5, 2.25])  # always there: InMemoryStore raises on $gt of a missing field
    if rng.random() < 0.2:
        value["tags"] = rng.sample(["x", "y", "z"], 2)
    return value


def _filter(rng: random.Random) -> dict[str, Any] | None:
    return rng.choice([
        None, {"tag": "a"}, {"n": {"$gte": 3}}, {"n": {"$lt": 2}, "tag": "b"}, {"n": {"$ne": 4}},
        {"meta": {"level": 2}}, {"score": {"$gt": 1}}, {"tags": ["x", "y"]}, {"n": {"$eq": 0}},
        {"content": SENTENCES[1]}, {"n": {"$gte": 1, "$lte": 3}},
    ])


def _prefix(rng: random.Random) -> tuple[str, ...]:
    return rng.choice([(), ("memories",), ("prefs",), _namespace(rng)[:2], _namespace(rng)])


def _run_random(store: TieredStore, oracle: InMemoryStore, seed: int, steps: int) -> dict[str, int]:
    rng = random.Random(seed)
    seen: dict[str, int] = {}
    for step in range(steps):
        kind = rng.choices(["put", "delete", "get", "search", "list", "query"], [45, 12, 15, 15, 8, 5])[0]
        seen[kind] = seen.get(kind, 0) + 1
        ns, key = _namespace(rng), rng.choice(KEYS)
        if kind == "put":
            value = _value(rng)
            store.put(ns, key, value)
            oracle.put(ns, key, value)
            continue
        if kind == "delete":
            store.delete(ns, key)
            oracle.delete(ns, key)
            continue
        if kind == "get":
            ours, theirs = store.get(ns, key), oracle.get(ns, key)
        elif kind == "search":
            prefix, flt = _prefix(rng), _filter(rng)
            limit, offset = rng.choice([1, 3, 10, 100]), rng.choice([0, 0, 1, 4])
            ours = store.search(prefix, filter=flt, limit=limit, offset=offset)
            theirs = oracle.search(prefix, filter=flt, limit=limit, offset=offset)
        elif kind == "list":
            options: dict[str, Any] = rng.choice([
                {}, {"prefix": ("memories",)}, {"prefix": ("memories", "*", "work")}, {"suffix": ("work",)},
                {"suffix": ("*",)}, {"prefix": ("prefs", "bob")}, {"max_depth": 1}, {"max_depth": 2},
                {"prefix": ("memories",), "max_depth": 2}, {"limit": 2, "offset": 1},
            ])
            ours, theirs = store.list_namespaces(**options), oracle.list_namespaces(**options)
        else:
            # A query ranks by our recall; with a limit above the item count both return every match.
            prefix, flt = _prefix(rng), _filter(rng)
            query = rng.choice(SENTENCES).split()[-1]
            ours_set = {(i.namespace, i.key) for i in store.search(prefix, query=query, filter=flt, limit=100)}
            theirs_set = {(i.namespace, i.key) for i in oracle.search(prefix, query=query, filter=flt, limit=100)}
            assert ours_set == theirs_set, f"seed {seed} step {step}: query {query!r} {prefix} {flt}"
            continue
        assert _plain(ours) == _plain(theirs), f"seed {seed} step {step}: {kind} {ns} {key}"
    return seen


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_operations_match_in_memory_store(store: TieredStore, seed: int) -> None:
    oracle = Oracle()
    seen = _run_random(store, oracle, seed, steps=70)
    assert seen.get("put", 0) > 20
    assert seen.get("delete", 0) > 3
    assert seen.get("search", 0) > 5
    # The final states agree item for item, across users and namespaces, and so does a reopened store.
    assert store.list_namespaces(limit=1000) == oracle.list_namespaces(limit=1000)
    assert _plain(store.search((), limit=1000)) == _plain(oracle.search((), limit=1000))


def test_random_operations_on_a_postgresql_journal() -> None:
    """The same contract on the PostgreSQL journal (keyword recall: vectors would need a Chroma server)."""
    from tests.support.postgres import postgres_url

    with postgres_url() as url:
        oracle = Oracle()
        with TieredStore.open(url, embedder=False, user_index=1) as store:
            _run_random(store, oracle, seed=4, steps=60)
        with TieredStore.open(url, embedder=False, user_index=1) as reopened:
            assert _plain(reopened.search((), limit=1000)) == _plain(oracle.search((), limit=1000))
            assert reopened.list_namespaces() == oracle.list_namespaces()


def test_without_a_user_index_every_namespace_is_accepted(tmp_path: Path) -> None:
    """Namespaces of any shape (no user position) behave as in InMemoryStore: one private scope."""
    oracle = Oracle()
    with TieredStore.open(tmp_path, embedder=False) as store:
        for s in (store, oracle):
            s.put(("docs",), "a", {"text": "alpha"})
            s.put(("docs", "v1", "drafts"), "b", {"text": "beta", "n": 1})
            s.put(("cache",), "a", {"text": "gamma", "n": 2})
            s.put(("docs",), "a", {"text": "alpha two"})
        for call in (lambda s: s.search(()), lambda s: s.search(("docs",), filter={"n": 1}),
                     lambda s: s.list_namespaces(), lambda s: s.list_namespaces(max_depth=1),
                     lambda s: s.get(("docs",), "a")):
            assert _plain(call(store)) == _plain(call(oracle))
        assert store.memory.sessions(scope=None) == [store.memory.namespace]  # nothing under any user


def test_batch_reads_run_before_writes_and_the_last_put_wins(store: TieredStore) -> None:
    ada = ("memories", "ada")
    oracle = Oracle()
    ops: list[Any] = [
        # (A list after a get of a missing namespace would differ: InMemoryStore's get creates it.)
        PutOp(ada, "k", {"content": "first"}), ListNamespacesOp(), GetOp(ada, "k"),
        PutOp(ada, "k", {"content": "second"}), SearchOp(("memories",)), PutOp(("prefs", "ada"), "p", {"content": "x"}),
    ]
    assert _plain(store.batch(ops)) == _plain(oracle.batch(ops))
    follow: list[Any] = [GetOp(ada, "k"), PutOp(ada, "k", None), GetOp(ada, "k"), SearchOp(("memories", "ada"))]
    assert _plain(store.batch(follow)) == _plain(oracle.batch(follow))
    assert _plain(store.search(())) == _plain(oracle.search(()))
    assert store.get(ada, "k") is None


def test_query_search_returns_every_match_with_recall_scores(tmp_path: Path, local_embedder: Any) -> None:
    oracle = Oracle(index={"dims": local_embedder.dimension, "embed": MiniLM(local_embedder)})
    with TieredStore.open(tmp_path, embedder=local_embedder, user_index=1) as store:
        for i, sentence in enumerate(SENTENCES):
            for s in (store, oracle):
                s.put(("memories", USERS[i % 2]), f"m{i}", {"content": sentence, "n": i})
        store.put(("memories", "ada"), "quiet", {"content": "Lisbon trams are yellow", "n": 9}, index=False)
        oracle.put(("memories", "ada"), "quiet", {"content": "Lisbon trams are yellow", "n": 9}, index=False)
        store.flush()
        for prefix, flt in ((("memories",), None), (("memories", "ada"), None), (("memories",), {"n": {"$gte": 2}})):
            ours = store.search(prefix, query="where does Bob live now", filter=flt, limit=50)
            theirs = oracle.search(prefix, query="where does Bob live now", filter=flt, limit=50)
            assert {(i.namespace, i.key) for i in ours} == {(i.namespace, i.key) for i in theirs}
        ranked = store.search(("memories",), query="Which city did Bob move to?", limit=50)
        assert ranked[0].value["content"] == SENTENCES[1]  # the one sentence about it, by keywords and vectors
        scores = [i.score for i in ranked if i.score is not None]
        assert scores == sorted(scores, reverse=True)
        assert len(scores) >= 2
        # index=False: stored and listed, never ranked by a query (InMemoryStore: no vector, no score).
        quiet = next(i for i in ranked if i.key == "quiet")
        assert quiet.score is None
        assert ranked.index(quiet) >= len(scores)
        # Pages of a ranked search tile the whole result.
        pages = [store.search(("memories",), query="Bob Lisbon", limit=3, offset=o) for o in (0, 3, 6)]
        whole = store.search(("memories",), query="Bob Lisbon", limit=9)
        assert [(i.namespace, i.key) for p in pages for i in p] == [(i.namespace, i.key) for i in whole]


def test_index_fields_choose_the_indexed_text(tmp_path: Path) -> None:
    with TieredStore.open(tmp_path, embedder=False, index={"fields": ["title"]}) as store:
        store.put(("docs",), "a", {"title": "Lisbon trams", "body": "penguins"})
        store.put(("docs",), "b", {"title": "penguins", "body": "Lisbon"}, index=["body"])
        # Neither indexed text says "penguins": both come back, unranked, in store order.
        assert [(i.key, i.score) for i in store.search(("docs",), query="penguins")] == [("a", None), ("b", None)]
        ranked = store.search(("docs",), query="Lisbon")
        assert {i.key for i in ranked} == {"a", "b"}
        assert all(i.score is not None for i in ranked)
        assert {f.text for f in store.memory.facts()} == {"Lisbon trams", "Lisbon"}  # the selected fields


@settings(max_examples=300, deadline=None)
@given(
    value=st.dictionaries(st.sampled_from(["a", "b", "c"]),
                          st.one_of(st.integers(-3, 3), st.floats(-3, 3, allow_nan=False), st.text("xy", max_size=2),
                                    st.lists(st.integers(0, 2), max_size=2),
                                    st.dictionaries(st.sampled_from(["x", "y"]), st.integers(0, 2), max_size=2))),
    flt=st.dictionaries(st.sampled_from(["a", "b", "c"]), st.one_of(
        st.integers(-3, 3), st.text("xy", max_size=2), st.lists(st.integers(0, 2), max_size=2),
        st.dictionaries(st.sampled_from(["x", "y"]), st.integers(0, 2), max_size=2),
        st.dictionaries(st.sampled_from(["$eq", "$ne", "$gt", "$gte", "$lt", "$lte"]), st.integers(-3, 3),
                        min_size=1, max_size=2)), max_size=2),
)
def test_filters_mean_what_they_mean_in_memory_store(value: dict[str, Any], flt: dict[str, Any]) -> None:
    try:
        expected = all(_compare_values(value.get(k), v) for k, v in flt.items())
    except (TypeError, ValueError):
        # InMemoryStore raises comparing a value that is no number ($gt on a string or a missing field);
        # ours treats it as not matching. Only that case may differ.
        assert not _matches(value, flt)
        return
    assert _matches(value, flt) == expected


def test_isolation_between_users(tmp_path: Path, local_embedder: Any) -> None:
    from langmem_tiers import TieredMemory

    with TieredStore.open(tmp_path, embedder=local_embedder, user_index=1) as store:
        store.put(("memories", "ada"), "code", {"content": "Ada's locker code is 4417"})
        store.put(("memories", "bob"), "code", {"content": "Bob's locker code is 9021"})
        store.put(("memories", "bob", "work"), "desk", {"content": "Bob sits at desk 12"})
        store.flush()
        mine = store.search(("memories", "ada"), query="locker code", limit=100)
        assert [i.value["content"] for i in mine] == ["Ada's locker code is 4417"]

        ada = store.for_user("ada")
        assert [i.key for i in ada.search((), limit=100)] == ["code"]
        assert [i.key for i in ada.search(("memories",), query="locker code 9021 desk")] == ["code"]
        assert ada.list_namespaces() == [("memories", "ada")]
        for attempt in (lambda: ada.get(("memories", "bob"), "code"),
                        lambda: ada.put(("memories", "bob"), "code", {"content": "overwritten"}),
                        lambda: ada.delete(("memories", "bob"), "code"),
                        lambda: ada.search(("memories", "bob"))):
            with pytest.raises(StoreNamespaceError, match="belongs to user 'bob'"):
                attempt()
        assert store.get(("memories", "bob"), "code").value["content"] == "Bob's locker code is 9021"

        # The items are memories of their user: a chat session of bob recalls bob's, never ada's.
        bob_chat = store.memory.for_session("chat-1", user_id="bob")
        recalled = [h.text for h in bob_chat.search("locker code", 10, scope="user")]
        assert any("9021" in t for t in recalled)
        assert not any("4417" in t for t in recalled)
        # forget("user") erases the user's store items with the rest of the user's memory.
        ada_chat = store.memory.for_session("chat-1", user_id="ada")
        assert ada_chat.forget("user") >= 1
        assert store.get(("memories", "ada"), "code") is None
        assert store.search(("memories", "ada"), query="locker code") == []
        assert store.list_namespaces(prefix=("memories",)) == [("memories", "bob"), ("memories", "bob", "work")]
        # A new put for ada starts her store session afresh.
        store.put(("memories", "ada"), "code", {"content": "new code 1234"})
        assert store.get(("memories", "ada"), "code").value == {"content": "new code 1234"}
    with TieredMemory.open(tmp_path, session_id="x", user_id="bob", embedder=False) as bob:
        assert {f.kind for f in bob.facts()} == {"store"}


def test_put_supersedes_delete_erases_and_reopen_keeps_everything(tmp_path: Path, local_embedder: Any) -> None:
    ns = ("memories", "ada")
    with TieredStore.open(tmp_path, embedder=local_embedder, user_index=1) as store:
        store.put(ns, "city", {"content": "Ada lives in Porto"})
        store.put(ns, "tea", {"content": "Ada drinks green tea"})
        first = store.get(ns, "city")
        store.put(ns, "city", {"content": "Ada lives in Lisbon"})
        store.put(("memories", "ada", "work"), "desk", {"content": "desk 12"})
        store.put(ns, "gone", {"content": "a secret: swordfish"})
        store.put(ns, "gone", {"content": "a secret: marlin"})
        store.delete(ns, "gone")
        store.flush()
        before = store.search((), limit=100)
    with TieredStore.open(tmp_path, embedder=local_embedder, user_index=1) as store:
        city = store.get(ns, "city")
        assert city.value == {"content": "Ada lives in Lisbon"}
        assert city.created_at == first.created_at
        assert city.updated_at > first.updated_at
        assert _plain(store.search((), limit=100)) == _plain(before)
        assert [i.key for i in before] == ["city", "tea", "desk"]
        handle = store.memory.for_session("chat", user_id="ada")
        history = [f.text for f in handle.facts(include_superseded=True)]
        assert '{"content": "Ada lives in Porto"}' in history  # the old version is history, not current
        assert '{"content": "Ada lives in Porto"}' not in [f.text for f in handle.facts()]
        assert not any("swordfish" in t or "marlin" in t for t in history)  # a delete erases every version
        recalled = [h.text for h in handle.search("secret swordfish marlin", 10, scope="user")]
        assert recalled
        assert not any("swordfish" in t or "marlin" in t for t in recalled)
        assert [i.key for i in store.search(ns, query="Where does Ada live?")][:1] == ["city"]


async def test_async_methods_match_the_oracle(store: TieredStore) -> None:
    oracle = Oracle()
    rng = random.Random(7)
    for _ in range(25):
        ns, key, value = _namespace(rng), rng.choice(KEYS), _value(rng)
        await store.aput(ns, key, value)
        await oracle.aput(ns, key, value)
        if rng.random() < 0.3:
            await store.adelete(ns, key)
            await oracle.adelete(ns, key)
        ns, key = _namespace(rng), rng.choice(KEYS)
        assert _plain(await store.aget(ns, key)) == _plain(await oracle.aget(ns, key))
    for flt in (None, {"tag": "a"}, {"n": {"$gt": 2}}):
        assert _plain(await store.asearch(("memories",), filter=flt, limit=100)) == \
            _plain(await oracle.asearch(("memories",), filter=flt, limit=100))
    assert await store.alist_namespaces(max_depth=2) == await oracle.alist_namespaces(max_depth=2)
    found = await store.asearch((), query="green tea", limit=100)
    assert {(i.namespace, i.key) for i in found} == {(i.namespace, i.key) for i in await oracle.asearch((), limit=100)}


BAD_NAMESPACES: Sequence[tuple[str, Any]] = [
    ("empty", ()), ("reserved root", ("langgraph", "ada")), ("period", ("memories", "a.b")),
    ("empty label", ("memories", "")), ("not a string", ("memories", 7)), ("NUL", ("memories", "a\x00")),
]


@pytest.mark.parametrize(("why", "namespace"), BAD_NAMESPACES, ids=[w for w, _ in BAD_NAMESPACES])
def test_bad_namespaces_are_refused_as_in_memory_store_refuses_them(tmp_path: Path, why: str, namespace: Any) -> None:
    with TieredStore.open(tmp_path, embedder=False, user_index=1) as store:
        with pytest.raises(InvalidNamespaceError):
            InMemoryStore().put(namespace, "k", {"a": 1})
        with pytest.raises(InvalidNamespaceError):
            store.put(namespace, "k", {"a": 1})
        with pytest.raises(InvalidNamespaceError):  # a raw batch skips BaseStore's checks: ours still refuses
            store.batch([PutOp(namespace, "k", {"a": 1})])
        assert store.list_namespaces() == []


def test_other_bad_input_gets_typed_errors(tmp_path: Path) -> None:
    from langmem_tiers import ConfigError

    with TieredStore.open(tmp_path, embedder=False, user_index=1) as store:
        with pytest.raises(StoreNamespaceError, match="no user id at position 1"):
            store.put(("memories",), "k", {"a": 1})
        with pytest.raises(StoreNamespaceError, match="512"):
            store.put(("memories", "u" * 600), "k", {"a": 1})
        with pytest.raises(InvalidMessageError, match="must be a dict"):
            store.put(("memories", "ada"), "k", ["not", "a", "dict"])  # type: ignore[arg-type]
        with pytest.raises(InvalidMessageError, match="JSON"):
            store.put(("memories", "ada"), "k", {"x": math.nan})
        with pytest.raises(InvalidMessageError, match="JSON"):
            store.put(("memories", "ada"), "k", {"x": object()})
        with pytest.raises(ConfigError, match="ttl"):
            store.put(("memories", "ada"), "k", {"a": 1}, ttl=-5)
        with pytest.raises(ConfigError, match="limit"):
            store.search(("memories", "ada"), limit=-1)
        store.put(("memories", "ada"), "k", {"n": 1})
        with pytest.raises(ConfigError, match="unknown filter operator"):
            store.search(("memories",), filter={"n": {"$near": 1}})
        with pytest.raises(ConfigError, match="user_index"):
            TieredStore(store.memory, user_index=-1)
        with pytest.raises(ConfigError, match="index"):
            TieredStore(store.memory, index={"embed": "openai:text-embedding-3-small"})
        assert store.supports_ttl is True  # TTL semantics: tests/test_langgraph_store_ttl.py
        # Nothing was half-written by the refusals.
        assert [(i.namespace, i.key, i.value) for i in store.search(())] == [(("memories", "ada"), "k", {"n": 1})]
    with pytest.raises(ConfigError, match="dims"):
        TieredStore.open(tmp_path / "other", embedder=False, index={"dims": 384})


def test_values_come_back_as_json(tmp_path: Path) -> None:
    with TieredStore.open(tmp_path, embedder=False) as store:
        store.put(("docs",), "t", {"pair": (1, 2), "nested": {"deep": [1, {"x": None}]}, "s": "é\u2603"})
        assert store.get(("docs",), "t").value == json.loads(json.dumps(
            {"pair": [1, 2], "nested": {"deep": [1, {"x": None}]}, "s": "é\u2603"}))


def test_two_stores_on_one_journal_see_each_others_writes(tmp_path: Path) -> None:
    """Each store caches a user's items by the session's version stamp: a write through another
    store (another replica on a shared journal) is seen at once, and a put onto a key the other
    store changed supersedes the version that is current in the journal, not the one it last saw."""
    ns = ("memories", "ada")
    with TieredStore.open(tmp_path, embedder=False, user_index=1) as a:
        b = TieredStore(a.memory, user_index=1)
        a.put(ns, "k", {"v": 1})
        assert b.get(ns, "k").value == {"v": 1}
        b.put(ns, "k", {"v": 2})
        assert a.get(ns, "k").value == {"v": 2}
        b.put(ns, "k", {"v": 3})
        a.put(ns, "k", {"v": 4})  # a's snapshot is two writes behind
        assert b.get(ns, "k").value == a.get(ns, "k").value == {"v": 4}
        handle = a.memory.for_session("chat", user_id="ada")
        assert [f.text for f in handle.facts()] == ['{"v": 4}']  # one current version
        assert len(handle.facts(include_superseded=True)) == 4
        created = a.get(ns, "k").created_at
        b.delete(ns, "k")
        assert a.get(ns, "k") is None
        assert handle.facts(include_superseded=True) == []
        a.put(ns, "k", {"v": 5})
        assert b.get(ns, "k").created_at > created  # deleted and put again: a new item


def test_docstring_examples_run() -> None:
    """The examples the reference shows for the store run as written."""
    import doctest

    import langchain_langmem_tiers.store as module

    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0


def test_a_store_on_a_users_memory_keeps_its_own_scope(tmp_path: Path) -> None:
    """A store built on a memory opened for a user's chat session stores nothing in that user's scope
    unless a namespace names the user (user_index)."""
    from langmem_tiers import TieredMemory

    with TieredMemory.open(tmp_path, session_id="chat", user_id="ada", agent_id="bot", embedder=False) as chat:
        store = TieredStore(chat)
        store.put(("docs",), "a", {"text": "shared note"})
        assert store.get(("docs",), "a").value == {"text": "shared note"}
        assert chat.facts() == []  # not ada's
        assert TieredStore(chat).search(()) == store.search(())  # another store object reads the same
        users = TieredStore(chat, user_index=0)
        users.put(("ada", "prefs"), "theme", {"value": "dark"})
        assert [f.kind for f in chat.facts()] == ["store"]  # a namespace naming ada: ada's memory
        store.close()
        users.close()


def test_a_batch_with_a_bad_value_writes_nothing(tmp_path: Path) -> None:
    with TieredStore.open(tmp_path, embedder=False) as store:
        with pytest.raises(InvalidMessageError, match="JSON"):
            store.batch([PutOp(("docs",), "a", {"ok": 1}), PutOp(("docs",), "b", {"bad": math.inf})])
        assert store.search(()) == []
        assert store.memory.facts() == []
