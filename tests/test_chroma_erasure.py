"""Deleted rows are physically gone from an embedded Chroma folder after compact()."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from langmem_tiers.errors import ConfigError
from langmem_tiers.recall.vector_store import SQLITE_FILE, ChromaStore, folder_residue

pytest.importorskip("chromadb")

from tests.support.chroma_server import chroma_server, unique_collection

SECRET = "quokkaflux-7731"  # distinctive: no Chroma file holds it by chance
USER = "user-zanzibar-42"
KEEP = "keepsake-0815"
N = 120


def _vector(i: int) -> list[float]:
    return [1.0, float(i % 7), float(i % 5) + 0.5, 0.25]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ChromaStore]:
    s = ChromaStore.persistent(tmp_path / "chroma", collection=unique_collection())
    yield s
    s.close()


def _fill(store: ChromaStore) -> None:
    # As the old engine wrote: document text and user ids in Chroma ...
    store.upsert([f"{USER}:{i}" for i in range(N)], [_vector(i) for i in range(N)],
                 [f"{SECRET} said turn {i}" for i in range(N)],
                 [{"user_id": USER, "ns": 1, "kind": "turn", "note": f"{SECRET}-{i}"} for i in range(N)])
    # ... and as the engine writes now: ids, vectors and minimal metadata only.
    store.upsert([f"j:{i}" for i in range(N)], [_vector(i + 1) for i in range(N)], None,
                 [{"journal": "j", "record_id": i, "ns": 2, "kind": "fact", "created_at": 1.0 + i,
                   "importance": 0.5, "pinned": False} for i in range(N)])
    store.upsert([f"{KEEP}:{i}" for i in range(3)], [_vector(i) for i in range(3)],
                 [f"{KEEP} text {i}" for i in range(3)],
                 [{"ns": 3, "kind": "fact", "note": KEEP} for _ in range(3)])


def _fts_blocks(folder: Path) -> int:
    con = sqlite3.connect(f"{(folder / SQLITE_FILE).as_uri()}?mode=ro", uri=True)
    try:
        # Rows 1 and 10 are FTS5's averages and structure records; the rest are index segments.
        return int(con.execute("SELECT count(*) FROM embedding_fulltext_search_data WHERE id > 10").fetchone()[0])
    finally:
        con.close()


def test_delete_leaves_residue_and_compact_removes_it(store: ChromaStore) -> None:
    assert store.folder is not None
    _fill(store)
    needles = [SECRET, USER, "j:17", KEEP]
    assert all(n > 0 for n in store.residue(needles).values())
    store.delete(where={"ns": {"$in": [1, 2]}})
    assert store.count() == 3
    # What a delete leaves on disk today: the write-ahead log and free pages still hold the rows.
    left = store.residue(needles)
    assert left[SECRET] > 0
    assert left[USER] > 0
    assert left["j:17"] > 0

    report = store.compact()

    assert report.physical
    assert report.rows_kept == 3
    assert report.segments_removed == 1  # the old HNSW segment, with every erased vector
    assert report.bytes_after < report.bytes_before
    gone = store.residue(needles)
    assert gone[SECRET] == gone[USER] == gone["j:17"] == 0
    assert gone[KEEP] > 0  # live rows are untouched
    assert _fts_blocks(store.folder) > 0  # the kept documents' full-text entries remain
    # Live rows keep their vectors, documents and metadata, and stay searchable.
    kept = store.get([f"{KEEP}:{i}" for i in range(3)], include_embeddings=True)
    assert [k.document for k in kept] == [f"{KEEP} text {i}" for i in range(3)]
    assert kept[1].embedding == pytest.approx(_vector(1))
    assert kept[0].metadata == {"ns": 3, "kind": "fact", "note": KEEP}
    assert [h.id for h in store.query(_vector(2), 1, {"ns": {"$in": [3]}})] == [f"{KEEP}:2"]
    # Writes keep working on the rebuilt collection, and nothing comes back after a reopen.
    store.upsert(["new"], [_vector(4)], None, [{"ns": 3}])
    assert store.count() == 4
    folder = store.folder
    store.close()
    again = ChromaStore.persistent(folder, collection=store.collection_name)
    assert again.count() == 4
    again.close()
    # Loading the index can write stale process memory into HNSW slack again; close() zeroes it.
    assert folder_residue(folder, [SECRET, USER, "j:17"]) == {SECRET: 0, USER: 0, "j:17": 0}


def test_compact_erases_every_full_text_entry_of_deleted_documents(store: ChromaStore) -> None:
    assert store.folder is not None
    store.upsert([f"d{i}" for i in range(40)], [_vector(i) for i in range(40)],
                 [f"{SECRET} document {i}" for i in range(40)], [{"ns": 1} for _ in range(40)])
    store.delete(where={"ns": 1})
    assert _fts_blocks(store.folder) > 0  # trigram segments of the deleted documents
    store.compact()
    assert _fts_blocks(store.folder) == 0
    assert store.count() == 0


def test_documents_none_stores_no_text(store: ChromaStore) -> None:
    store.upsert(["a", "b"], [_vector(1), _vector(2)], None, [{"ns": 5, "kind": "turn"}, {"ns": 5, "kind": "fact"}])
    got = store.get(["a", "b"], include_embeddings=True)
    assert [g.document for g in got] == [None, None]
    assert got[1].metadata == {"ns": 5, "kind": "fact"}
    hits = store.query(_vector(1), 2, {"ns": {"$in": [5]}})
    assert hits[0].id == "a"
    assert hits[0].document is None
    ids, matrix = store.embeddings(["b", "a"])
    assert ids == ["a", "b"] or ids == ["b", "a"]
    assert matrix.shape == (2, 4)
    assert store.count({"kind": "fact"}) == 1
    store.delete(ids=["a"])
    assert store.count() == 1
    assert store.folder is not None
    assert _fts_blocks(store.folder) == 0  # nothing was ever full-text indexed


def test_other_stores_of_the_process_follow_a_compaction(store: ChromaStore) -> None:
    other = ChromaStore.from_client(store.client, collection=store.collection_name)
    store.upsert(["a", "b"], [_vector(1), _vector(2)], None, [{"ns": 1}, {"ns": 2}])
    store.delete(ids=["b"])
    store.compact()
    # ``other`` still holds the dropped collection; it finds the rebuilt one by name.
    assert other.count() == 1
    other.upsert(["c"], [_vector(3)], None, [{"ns": 1}])
    assert store.count() == 2
    other.close()


def test_an_interrupted_compaction_is_recovered_on_open(tmp_path: Path) -> None:
    folder = tmp_path / "chroma"
    name = unique_collection()
    store = ChromaStore.persistent(folder, collection=name)
    store.upsert(["a", "b"], [_vector(1), _vector(2)], None, [{"ns": 1}, {"ns": 1}])
    client, temp = store.client, store._temp_name()
    # Crash while copying: the original is intact, the partial copy is dropped.
    client.create_collection(temp, embedding_function=None, configuration={"hnsw": {"space": "cosine"}}).add(
        ids=["a"], embeddings=[_vector(1)])
    reopened = ChromaStore.from_client(client, collection=name)
    assert reopened.count() == 2
    assert temp not in {c.name for c in client.list_collections()}
    # Crash after dropping the original: the complete copy becomes the collection.
    copy = client.create_collection(temp, embedding_function=None, configuration={"hnsw": {"space": "cosine"}})
    copy.add(ids=["a", "b"], embeddings=[_vector(1), _vector(2)], metadatas=[{"ns": 1}, {"ns": 1}])
    client.delete_collection(name)
    recovered = ChromaStore.from_client(client, collection=name)
    assert sorted(g.id for g in recovered.get(["a", "b"])) == ["a", "b"]
    for s in (reopened, recovered, store):
        s.close()


def test_server_store_reports_what_only_its_operator_can_do(tmp_path: Path) -> None:
    with chroma_server(tmp_path / "server") as (host, port):
        store = ChromaStore.http(f"http://{host}:{port}", collection=unique_collection())
        store.upsert(["a"], [_vector(1)], None, [{"ns": 1}])
        assert not store.embedded
        report = store.compact()
        assert not report.physical
        assert report.rows_kept == 1
        assert "chroma vacuum" in " ".join(report.remains)
        with pytest.raises(ConfigError, match="server"):
            store.residue([SECRET])
        store.close()


def test_residue_counts_matches_across_read_chunks(store: ChromaStore, monkeypatch: pytest.MonkeyPatch) -> None:
    import langmem_tiers.recall.vector_store as vs

    assert store.folder is not None
    (store.folder / "probe.bin").write_bytes(b"..qzxqzx..qzx")
    monkeypatch.setattr(vs, "_SCAN_CHUNK", 4)  # matches straddle chunk boundaries
    assert store.residue(["qzx", "xqz"]) == {"qzx": 3, "xqz": 1}
    with pytest.raises(ConfigError):
        store.residue([""])
    with pytest.raises(TypeError):
        store.residue("qzx")
