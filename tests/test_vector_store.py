"""The vector store contract against real stores: Chroma embedded (PersistentClient), a `chroma run`
server, and SqliteVectorStore (vectors in one SQLite file)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from langmem_tiers.errors import ConfigError, RecallError
from langmem_tiers.recall.sqlite_vectors import SqliteVectorStore
from langmem_tiers.recall.vector_store import ChromaStore, VectorHit, VectorStore, _parse_server

chromadb = pytest.importorskip("chromadb")

from chromadb.config import Settings  # noqa: E402

from tests.support.chroma_server import chroma_server, free_port, unique_collection  # noqa: E402

StoreFactory = Callable[[], VectorStore]


@pytest.fixture(scope="module")
def persistent_client(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return chromadb.PersistentClient(
        path=str(tmp_path_factory.mktemp("chroma-embedded")), settings=Settings(anonymized_telemetry=False)
    )


@pytest.fixture(scope="module")
def chroma_http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    with chroma_server(tmp_path_factory.mktemp("chroma-server")) as address:
        yield address


@pytest.fixture(params=["embedded", "server", "sqlite"])
def new_store(request: pytest.FixtureRequest, tmp_path: Path) -> StoreFactory:
    """Each call opens a new, uniquely named collection (a new folder for SQLite) on the backend under test."""
    if request.param == "sqlite":
        return lambda: SqliteVectorStore(tmp_path / unique_collection())
    if request.param == "embedded":
        client = request.getfixturevalue("persistent_client")
        return lambda: ChromaStore.from_client(client, collection=unique_collection())
    host, port = request.getfixturevalue("chroma_http")
    return lambda: ChromaStore.http(f"http://{host}:{port}", collection=unique_collection())


def _meta(user: str, agent: str, session: str, **extra: str) -> dict[str, str]:
    return {"user_id": user, "agent_id": agent, "session_id": session, **extra}


# Hostile ids: quotes, slashes, dot-dot, unicode, operators-looking text.
USERS = ["alice", "o'brien \"q\"", "../../etc/passwd", "ユーザー/東京", "$and", "a\\b"]
AGENTS = ["agent-1", "agent/2"]
SESSIONS = ["s1", "s 2 ..", "🚀"]


def namespace_where(user_id: str, agent_id: str, session_id: str | None, scope: str) -> dict[str, Any]:
    """A Chroma filter on the string ids these tests store as metadata (the engine filters by ``ns`` ids)."""
    keys = {"user": ["user_id"], "agent": ["user_id", "agent_id"],
            "session": ["user_id", "agent_id", "session_id"]}[scope]
    values = {"user_id": user_id, "agent_id": agent_id, "session_id": session_id}
    clauses: list[dict[str, Any]] = [{k: {"$eq": values[k]}} for k in keys]
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


def _fill(store: VectorStore) -> list[tuple[str, str, str, str]]:
    rows = [(f"{u}|{a}|{s}|row", u, a, s) for u in USERS for a in AGENTS for s in SESSIONS]
    # Every row has the same vector, so only the filter can separate namespaces.
    store.upsert(
        [r[0] for r in rows],
        [[1.0, 0.0, 0.0]] * len(rows),
        [f"doc of {r[0]}" for r in rows],
        [_meta(r[1], r[2], r[3]) for r in rows],
    )
    return rows


@pytest.mark.parametrize("scope", ["session", "agent", "user"])
def test_namespace_isolation_with_hostile_ids(new_store: StoreFactory, scope: str) -> None:
    store = new_store()
    rows = _fill(store)
    assert store.count() == len(rows)
    for u in USERS:
        for a in AGENTS:
            for s in SESSIONS:
                where = namespace_where(u, a, s, scope)
                want = {
                    r[0] for r in rows
                    if r[1] == u
                    and (scope == "user" or r[2] == a)
                    and (scope != "session" or r[3] == s)
                }
                hits = store.query([1.0, 0.0, 0.0], 100, where)
                assert {h.id for h in hits} == want
                assert store.count(where) == len(want)
                for h in hits:
                    assert h.metadata["user_id"] == u
                    assert h.document == f"doc of {h.id}"


def test_query_orders_by_cosine_and_reports_similarity(new_store: StoreFactory) -> None:
    store = new_store()
    m = _meta("u", "a", "s")
    store.upsert(["far", "near", "opposite"], [[0.0, 1.0], [1.0, 0.1], [-1.0, 0.0]], ["f", "n", "o"], [m] * 3)
    hits = store.query([2.0, 0.0], 3, namespace_where("u", "a", "s", "session"))
    assert [h.id for h in hits] == ["near", "far", "opposite"]
    assert isinstance(hits[0], VectorHit)
    assert hits[0].similarity == pytest.approx(1.0 - hits[0].distance)
    assert hits[0].similarity == pytest.approx(1 / (1.01**0.5), abs=1e-4)
    assert hits[1].similarity == pytest.approx(0.0, abs=1e-4)
    assert hits[2].similarity == pytest.approx(-1.0, abs=1e-4)
    assert store.query([1.0, 0.0], 0, namespace_where("u", "a", "s", "session")) == []


def test_upsert_replaces_and_get_roundtrips(new_store: StoreFactory) -> None:
    store = new_store()
    store.upsert(["x/../y", "é"], [[1.0, 0.0], [0.0, 1.0]], ["one", "two"],
                 [_meta("u", "a", "s", kind="fact"), _meta("u", "a", "")])
    store.upsert(["x/../y"], [[0.0, 1.0]], ["one again"], [_meta("u", "a", "s", kind="event")])
    got = store.get(["é", "missing", "x/../y"], include_embeddings=True)
    assert [g.id for g in got] == ["é", "x/../y"]
    assert got[1].document == "one again"
    assert got[1].metadata["kind"] == "event"
    assert got[1].embedding == pytest.approx([0.0, 1.0])
    assert got[0].metadata["session_id"] == ""
    assert store.count() == 2
    assert store.get([]) == []


def test_delete_by_ids_and_by_namespace(new_store: StoreFactory) -> None:
    store = new_store()
    rows = _fill(store)
    victim = USERS[1]
    store.delete(where=namespace_where(victim, "agent/2", None, "agent"))
    assert store.count(namespace_where(victim, "agent/2", None, "agent")) == 0
    assert store.count(namespace_where(victim, "agent-1", None, "agent")) == len(SESSIONS)
    store.delete(ids=[rows[0][0]])
    assert store.get([rows[0][0]]) == []
    # ids restricted by a filter only delete the ids inside the namespace
    other = next(r for r in rows if r[1] == USERS[2])
    store.delete(ids=[other[0]], where=namespace_where(USERS[3], "agent-1", None, "agent"))
    assert len(store.get([other[0]])) == 1
    assert store.count() == len(rows) - len(SESSIONS) - 1


@pytest.mark.parametrize("where", [None, {}])
def test_unfiltered_query_and_delete_are_refused(new_store: StoreFactory, where: Any) -> None:
    store = new_store()
    store.upsert(["a"], [[1.0, 0.0]], ["doc"], [_meta("u", "a", "s")])
    with pytest.raises(ConfigError, match="where"):
        store.query([1.0, 0.0], 5, where)
    with pytest.raises(ConfigError):
        store.delete(where=where) if where is not None else store.delete()
    with pytest.raises(ValueError):  # ConfigError is a ValueError too
        store.count({}) if where == {} else store.query([1.0, 0.0], 5, {})
    assert store.count() == 1


def test_store_failures_are_typed_errors(new_store: StoreFactory) -> None:
    store = new_store()
    store.upsert(["a"], [[1.0, 0.0, 0.0]], ["doc"], [_meta("u", "a", "s")])
    with pytest.raises(RecallError) as info:
        store.upsert(["b"], [[1.0, 0.0]], ["doc"], [_meta("u", "a", "s")])
    if isinstance(store, ChromaStore):
        assert info.value.__cause__ is not None  # Chroma's own error, chained
    # An operator the store does not know: Chroma fails inside (RecallError), SQLite refuses the filter.
    with pytest.raises(RecallError if isinstance(store, ChromaStore) else ConfigError, match="bogus"):
        store.query([1.0, 0.0], 3, {"user_id": {"$bogus": "u"}})
    assert store.get(["b"]) == []  # nothing of the refused upsert was written
    assert store.count() == 1


def test_upsert_argument_checks(new_store: StoreFactory) -> None:
    store = new_store()
    with pytest.raises(ValueError, match="one embedding"):
        store.upsert(["a", "b"], [[1.0]], ["d"], [_meta("u", "a", "s")])
    with pytest.raises(ValueError, match="unique"):
        store.upsert(["a", "a"], [[1.0], [1.0]], ["d", "d"], [_meta("u", "a", "s")] * 2)
    with pytest.raises(TypeError):
        store.upsert("a", [[1.0]], ["d"], [_meta("u", "a", "s")])
    for vectors in ([[1.0, 0.0], [0.0]], [[1.0, 0.0], [float("inf"), 1.0]], [[], []], [["x", 1.0], [0.0, 1.0]]):
        with pytest.raises(ValueError, match="embeddings"):
            store.upsert(["a", "b"], vectors, None, [_meta("u", "a", "s")] * 2)
    assert store.count() == 0  # nothing of a refused upsert was written
    store.upsert([], [], [], [])


def test_reopen_sees_the_same_rows(tmp_path: Path) -> None:
    name = unique_collection()
    first = ChromaStore.persistent(tmp_path, collection=name)
    first.upsert(["a"], [[1.0, 0.0]], ["doc"], [_meta("u", "a", "s")])
    again = ChromaStore.from_client(first.client, collection=name)
    assert again.count(namespace_where("u", "a", None, "user")) == 1


def test_non_cosine_collection_is_refused(persistent_client: Any) -> None:
    name = unique_collection()
    persistent_client.create_collection(
        name, embedding_function=None, configuration={"hnsw": {"space": "l2"}}
    )
    with pytest.raises(ConfigError, match="cosine"):
        ChromaStore.from_client(persistent_client, collection=name)


def test_bad_collection_name_is_a_recall_error(persistent_client: Any) -> None:
    with pytest.raises(RecallError):
        ChromaStore.from_client(persistent_client, collection="x")


def test_http_factory_forms(chroma_http: tuple[str, int]) -> None:
    host, port = chroma_http
    name = unique_collection()
    ChromaStore.http(f"http://{host}:{port}/", collection=name).upsert(
        ["a"], [[1.0, 0.0]], ["d"], [_meta("u", "a", "s")]
    )
    assert ChromaStore.http(host, port, collection=name).count() == 1
    assert ChromaStore.http(f"{host}:{port}", collection=name).count() == 1


def test_http_unreachable_server_is_a_recall_error() -> None:
    with pytest.raises(RecallError):
        ChromaStore.http(f"http://127.0.0.1:{free_port()}", collection=unique_collection())


@pytest.mark.parametrize(("given", "want"), [
    ("http://127.0.0.1:8000", ("127.0.0.1", 8000, False)),
    ("https://chroma.example.com", ("chroma.example.com", None, True)),
    ("localhost", ("localhost", None, False)),
    ("localhost:9000", ("localhost", 9000, False)),
    ("http://[::1]:8001/", ("::1", 8001, False)),
])
def test_parse_server(given: str, want: tuple[str, int | None, bool]) -> None:
    assert _parse_server(given) == want


@pytest.mark.parametrize("bad", ["", "ftp://h:1", "http://h:1/api", "h:port", "http://h:99999"])
def test_parse_server_refuses(bad: str) -> None:
    with pytest.raises(ConfigError):
        _parse_server(bad)


def test_with_the_real_local_embedder(persistent_client: Any) -> None:
    pytest.importorskip("sentence_transformers")
    from langmem_tiers.embedders import LocalEmbedder

    emb = LocalEmbedder()
    store = ChromaStore.from_client(persistent_client, collection=unique_collection())
    docs = ["I drink green tea every morning.", "My car is a red Volvo.", "The meeting moved to Tuesday."]
    store.upsert(["t", "c", "m"], emb.embed(docs), docs, [_meta("u", "a", "s")] * 3)
    store.upsert(["other"], emb.embed(["Green tea is my morning drink."]), ["x"], [_meta("v", "a", "s")])
    (query,) = emb.embed(["what does the user drink?"])
    hits = store.query(query, 2, namespace_where("u", "a", None, "user"))
    assert hits[0].id == "t"
    assert "other" not in {h.id for h in hits}


def test_rows_without_documents_work_everywhere(new_store: StoreFactory) -> None:
    # What the engine stores now: ids, vectors and an integer namespace; the text stays in the journal.
    store = new_store()
    metas = [{"journal": "j1", "record_id": i, "ns": i % 3, "kind": "turn", "created_at": 1.5 * i,
              "importance": 0.5, "pinned": i == 4} for i in range(6)]
    store.upsert([f"j1:{i}" for i in range(6)], [[1.0, float(i)] for i in range(6)], None, metas)
    hits = store.query([1.0, 0.0], 10, {"ns": {"$in": [0, 2]}})
    assert sorted(h.id for h in hits) == ["j1:0", "j1:2", "j1:3", "j1:5"]
    assert all(h.document is None for h in hits)
    assert hits[0].id == "j1:0"
    assert hits[0].metadata == metas[0]
    got = store.get(["j1:4"], include_embeddings=True)
    assert got[0].document is None
    assert got[0].metadata["pinned"] is True
    assert got[0].embedding == pytest.approx([1.0, 4.0])
    ids, matrix = store.embeddings(["j1:1", "j1:5"])
    assert sorted(ids) == ["j1:1", "j1:5"]
    assert matrix.shape == (2, 2)
    assert store.count({"$and": [{"ns": {"$in": [1]}}, {"kind": "turn"}]}) == 2
    store.delete(where={"ns": {"$in": [1]}})
    assert store.count() == 4
    # A row stored with a document (as the old engine did) and upserted again without one keeps
    # none, although Chroma's own upsert keeps a document it is not given.
    store.upsert(["x", "y"], [[0.0, 1.0], [0.5, 0.5]], ["old text", "other"], [{"ns": 9}, {"ns": 9}])
    store.upsert(["x", "new"], [[0.0, 2.0], [1.0, 1.0]], None, [{"ns": 9, "v": 2}, {"ns": 9}])
    x, y = store.get(["x", "y"], include_embeddings=True)
    assert x.document is None
    assert x.metadata == {"ns": 9, "v": 2}
    assert x.embedding == pytest.approx([0.0, 2.0])
    assert y.document == "other"
    assert store.count({"ns": 9}) == 3
    with pytest.raises(ValueError, match="one embedding"):
        store.upsert(["a"], [[1.0, 0.0]], ["d", "e"], [{"ns": 1}])
    with pytest.raises(TypeError):
        store.upsert(["a"], [[1.0, 0.0]], "d", [{"ns": 1}])  # type: ignore[arg-type]
