"""SqliteVectorStore beyond the shared contract (tests/test_vector_store.py): its filters, the exact scan in
chunks, erasure on disk, several processes on one folder, and how an embedded folder chooses its store."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from langmem_tiers import MemoryConfig, TieredMemory, WordCounter
from langmem_tiers.embedders.callable import CallableEmbedder
from langmem_tiers.errors import ConfigError, RecallError
from langmem_tiers.memory.opening import CHROMA_DIR, VECTORS_DIR, open_vectors
from langmem_tiers.recall import sqlite_vectors
from langmem_tiers.recall.sqlite_vectors import DATABASE_FILE, SqliteVectorStore
from langmem_tiers.recall.vector_store import ChromaStore

SECRET = "gravel-otter-4471"
ROWS = [{"ns": i % 4, "kind": ["turn", "fact"][i % 2], "created_at": float(i), "pinned": i % 3 == 0,
         "tag": f"t{i % 5}"} for i in range(40)]


def _filled(folder: Path) -> SqliteVectorStore:
    store = SqliteVectorStore(folder)
    rng = np.random.default_rng(1)
    store.upsert([f"r{i}" for i in range(len(ROWS))], rng.standard_normal((len(ROWS), 8)).tolist(), None, ROWS)
    return store


# (filter, the rows it selects): Chroma's where language, as far as this store speaks it.
FILTERS: list[tuple[dict[str, Any], Any]] = [
    ({"ns": 2}, lambda m: m["ns"] == 2),
    ({"ns": {"$ne": 2}}, lambda m: m["ns"] != 2),
    ({"ns": {"$in": [0, 3]}}, lambda m: m["ns"] in (0, 3)),
    ({"ns": {"$nin": [0, 3]}}, lambda m: m["ns"] not in (0, 3)),
    ({"created_at": {"$gt": 10.0, "$lte": 20.0}}, lambda m: 10.0 < m["created_at"] <= 20.0),
    ({"created_at": {"$gte": 35}}, lambda m: m["created_at"] >= 35),
    ({"created_at": {"$lt": 3}}, lambda m: m["created_at"] < 3),
    ({"pinned": True}, lambda m: m["pinned"]),
    ({"kind": {"$eq": "fact"}}, lambda m: m["kind"] == "fact"),
    ({"$and": [{"ns": {"$in": [1, 2]}}, {"kind": "turn"}]}, lambda m: m["ns"] in (1, 2) and m["kind"] == "turn"),
    ({"$or": [{"tag": "t1"}, {"$and": [{"ns": 0}, {"pinned": False}]}]},
     lambda m: m["tag"] == "t1" or (m["ns"] == 0 and not m["pinned"])),
]


@pytest.mark.parametrize(("where", "want"), FILTERS)
def test_filters_select_what_chroma_would(tmp_path: Path, where: dict[str, Any], want: Any) -> None:
    with _filled(tmp_path) as store:
        expected = {f"r{i}" for i, m in enumerate(ROWS) if want(m)}
        assert expected  # every case selects something, and not everything
        assert len(expected) < len(ROWS)
        assert {h.id for h in store.query([1.0] * 8, 100, where)} == expected
        assert store.count(where) == len(expected)


@pytest.mark.parametrize("where", [{"ns": {"$regex": "x"}}, {"ns": {"$in": 3}}, {"bad name": 1}, {"$and": []},
                                   {"ns": {"$eq": [1]}}, {"$or": [{}]}, {"ns": {}}])
def test_filters_it_does_not_speak_are_refused(tmp_path: Path, where: dict[str, Any]) -> None:
    with _filled(tmp_path) as store:
        with pytest.raises(ConfigError):
            store.query([1.0] * 8, 5, where)
        with pytest.raises(ConfigError):
            store.delete(where=where)
        assert store.count() == len(ROWS)


def test_metadata_it_cannot_filter_on_is_refused_before_writing(tmp_path: Path) -> None:
    with SqliteVectorStore(tmp_path) as store:
        for bad in ({"ns": [1, 2]}, {"no spaces": 1}, {"ns": None}, {"ns": float("nan")}):
            with pytest.raises(ValueError):
                store.upsert(["a", "b"], [[1.0, 0.0], [0.0, 1.0]], None, [{"ns": 1}, bad])
        for vectors in ([[1.0, 0.0], [0.0]], [[1.0, 0.0], [float("inf"), 1.0]], [[], []]):
            with pytest.raises(ValueError, match="embeddings"):
                store.upsert(["a", "b"], vectors, None, [{"ns": 1}, {"ns": 1}])
        assert store.count() == 0


def test_the_exact_scan_in_chunks_finds_the_true_nearest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_vectors, "SCAN_ROWS", 7)  # many chunks, and a top-k spread across them
    rng = np.random.default_rng(5)
    matrix = rng.standard_normal((300, 16)).astype(np.float32)
    with SqliteVectorStore(tmp_path) as store:
        store.upsert([f"v{i}" for i in range(300)], matrix.tolist(), None, [{"ns": i % 2} for i in range(300)])
        query = rng.standard_normal(16).astype(np.float32)
        sims = (matrix @ query) / (np.linalg.norm(matrix, axis=1) * np.linalg.norm(query))
        even = [i for i in np.argsort(-sims) if i % 2 == 0][:25]
        hits = store.query(query.tolist(), 25, {"ns": 0})
        assert [h.id for h in hits] == [f"v{i}" for i in even]
        assert [h.similarity for h in hits] == pytest.approx([float(sims[i]) for i in even], abs=1e-5)


def test_a_scan_in_progress_holds_up_no_other_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A query's scan, stopped halfway through its rows: another thread reads, writes and deletes meanwhile
    (a read connection of its own, the writer's), the scan then ends without the row added after it began
    nor the one deleted, and the next query sees both changes."""
    monkeypatch.setattr(sqlite_vectors, "SCAN_ROWS", 4)
    halfway, resume = threading.Event(), threading.Event()
    with SqliteVectorStore(tmp_path) as store:
        store.upsert([f"v{i}" for i in range(12)], np.eye(12, dtype=np.float32).tolist(), None, [{"ns": 1}] * 12)
        real = np.frombuffer
        seen = []

        def pausing(*args: Any, **kwargs: Any) -> Any:
            seen.append(1)
            if len(seen) == 2 and threading.current_thread() is not threading.main_thread():
                halfway.set()
                assert resume.wait(30)
            return real(*args, **kwargs)

        monkeypatch.setattr(np, "frombuffer", pausing)
        found: list[Any] = []
        scan = threading.Thread(target=lambda: found.extend(store.query([1.0] + [0.0] * 11, 12, {"ns": 1})))
        scan.start()
        assert halfway.wait(30)
        got: list[str] = []

        def meanwhile() -> None:
            got.extend(v.id for v in store.get(["v3"]))
            store.upsert(["v12"], [[1.0] + [0.0] * 11], None, [{"ns": 1}])
            store.delete(["v0"])

        other = threading.Thread(target=meanwhile)
        other.start()
        other.join(10)
        held_up = other.is_alive()  # waiting for the paused scan
        resume.set()
        other.join(30)
        scan.join(30)
        assert not held_up
        assert got == ["v3"]
        assert not scan.is_alive()
        # The rows of when the scan began, but the one deleted before it read the winners' ids: never served.
        assert sorted(h.id for h in found) == sorted(f"v{i}" for i in range(1, 12))
        after = [h.id for h in store.query([1.0] + [0.0] * 11, 13, {"ns": 1})]
        assert after[0] == "v12"
        assert "v0" not in after
        assert len(after) == 12


def test_a_namespace_filter_reads_through_the_namespace_index(tmp_path: Path) -> None:
    with _filled(tmp_path):
        con = sqlite3.connect(tmp_path / DATABASE_FILE)
        sql, params = sqlite_vectors._compile({"ns": {"$in": [1, 2]}})
        plan = " ".join(str(r) for r in con.execute(f"EXPLAIN QUERY PLAN SELECT id FROM vectors WHERE {sql}", params))
        con.close()
        assert "vectors_ns" in plan


def test_delete_then_compact_leaves_no_byte_of_the_rows(tmp_path: Path) -> None:
    victim = np.array([0.123456789, -7.5, 3.25, 1e-3], dtype=np.float32)
    with SqliteVectorStore(tmp_path) as store:
        store.upsert(["keep", "gone"], [[1.0, 2.0, 3.0, 4.0], victim.tolist()], ["kept text", f"{SECRET} said"],
                     [{"ns": 1}, {"ns": 2, "note": SECRET}])
        store.delete(where={"ns": 2})
        assert store.get(["gone"]) == []
        assert store.residue([SECRET])[SECRET] >= 1  # the insert's page image, in the write-ahead log
        store.compact()
        assert store.residue([SECRET]) == {SECRET: 0}
        assert store.residue(["kept text"])["kept text"] >= 1  # the scan does see what is there
        for path in store.files():
            data = path.read_bytes()
            assert victim.tobytes() not in data, path
        assert store.count() == 1


def test_another_process_writes_the_same_folder(tmp_path: Path) -> None:
    with SqliteVectorStore(tmp_path) as store:
        store.upsert(["here"], [[1.0, 0.0]], None, [{"ns": 1}])
        code = (
            "import sys; from langmem_tiers.recall.sqlite_vectors import SqliteVectorStore\n"
            "with SqliteVectorStore(sys.argv[1]) as s:\n"
            "    s.upsert(['there'], [[0.0, 1.0]], None, [{'ns': 1}])\n"
            "    print(s.count())\n"
        )
        out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "2"
        assert [h.id for h in store.query([0.0, 1.0], 2, {"ns": 1})] == ["there", "here"]


def test_a_closed_store_refuses_work(tmp_path: Path) -> None:
    store = SqliteVectorStore(tmp_path)
    store.close()
    store.close()
    with pytest.raises(RecallError, match="closed"):
        store.count()
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="is a file"):
        SqliteVectorStore(tmp_path / "file")


# -- how an embedded folder chooses its store ------------------------------------------------------

DIM = 16


def _vectors(texts: list[str]) -> list[list[float]]:
    return [np.random.default_rng(abs(hash(t)) % 2**32).standard_normal(DIM).tolist() for t in texts]


def _open(path: Path, embedded_vectors: str | None = None, session: str = "s",
          model: str = "test:hash16") -> TieredMemory:
    config = MemoryConfig(embedded_vectors=embedded_vectors)  # type: ignore[arg-type]
    return TieredMemory.open(path, session_id=session, user_id="u", config=config, counter=WordCounter(),
                             embedder=CallableEmbedder(_vectors, dimension=DIM, key=model))


def test_a_folder_keeps_the_store_it_was_made_with(tmp_path: Path) -> None:
    with _open(tmp_path / "new") as memory:
        assert isinstance(memory.recall.store, ChromaStore)  # type: ignore[union-attr]
    with _open(tmp_path / "disk", "sqlite") as memory:
        assert isinstance(memory.recall.store, SqliteVectorStore)  # type: ignore[union-attr]
        assert "sqlite" in memory.stats().recall_mode
        memory.remember("the user keeps bees")
        memory.flush()
    assert not (tmp_path / "disk" / CHROMA_DIR).exists()
    with _open(tmp_path / "disk") as memory:  # reopened without saying: what the folder holds
        assert isinstance(memory.recall.store, SqliteVectorStore)  # type: ignore[union-attr]
        assert memory.recall.store.count() == 1  # type: ignore[union-attr]
    with pytest.raises(ConfigError, match="erasures would no longer reach them"):
        _open(tmp_path / "disk", "chroma")
    with pytest.raises(ConfigError, match="erasures would no longer reach them"):
        _open(tmp_path / "new", "sqlite")
    (tmp_path / "new" / VECTORS_DIR).mkdir()
    (tmp_path / "new" / VECTORS_DIR / DATABASE_FILE).write_bytes(b"")
    with pytest.raises(ConfigError, match="both stores"):
        _open(tmp_path / "new")


@pytest.mark.parametrize("engine", ["chroma", "sqlite"])
def test_a_folder_holds_one_embedding_models_vectors(tmp_path: Path, engine: str) -> None:
    """Another model's vectors would be searched with this model's queries (one SQLite store), or sit in a
    collection no erasure reaches while recall misses every record (Chroma): the open is refused."""
    with _open(tmp_path, engine) as memory:
        for i in range(4):
            memory.add("user" if i % 2 == 0 else "assistant", f"the kayak trip number {i}")
        memory.flush()
        records = memory.recall.store.count()  # type: ignore[union-attr]
    assert records > 0
    with pytest.raises(ConfigError, match="vectors of two models cannot be searched together"):
        _open(tmp_path, engine, model="test:other16")
    with _open(tmp_path, engine) as memory:  # the first model still opens, its vectors all there
        assert memory.recall.store.count() == records  # type: ignore[union-attr]
    # What the message says to do: remove the vectors, open with the new model, reindex.
    shutil.rmtree(tmp_path / (CHROMA_DIR if engine == "chroma" else VECTORS_DIR))
    with _open(tmp_path, engine, model="test:other16") as memory:
        memory.reindex()
        memory.flush()
        assert memory.recall.store.count() == records  # type: ignore[union-attr]
    with pytest.raises(ConfigError, match="vectors of two models cannot be searched together"):
        _open(tmp_path, engine)


def test_embedded_vectors_is_checked(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="embedded_vectors"):
        MemoryConfig(embedded_vectors="faiss")  # type: ignore[arg-type]
    emb = CallableEmbedder(_vectors, dimension=DIM, key="test:hash16")
    with pytest.raises(ConfigError, match="pass one or the other"):
        open_vectors(tmp_path, emb, "http://127.0.0.1:9", "sqlite")
    with pytest.raises(ConfigError, match="PostgreSQL journal"):
        open_vectors(None, emb, None, "sqlite")


def test_forget_physical_leaves_nothing_in_the_vector_files(tmp_path: Path) -> None:
    with _open(tmp_path, "sqlite") as memory:
        memory.add("user", f"my locker code is {SECRET}")
        memory.add("assistant", "noted")
        for i in range(6):
            memory.add("user", f"small talk {i}")
        memory.flush()
        store = memory.recall.store  # type: ignore[union-attr]
        assert isinstance(store, SqliteVectorStore)
        (hit,) = [h for h in memory.search(SECRET, k=5) if SECRET in h.text]
        (stored,) = store.get([memory.recall.vector_id(hit.record_id)], include_embeddings=True)  # type: ignore[union-attr]
        vector = np.asarray(stored.embedding, dtype=np.float32).tobytes()
        memory.forget(hit.record_id, physical=True)
        assert store.get([stored.id]) == []
        assert all(SECRET not in h.text for h in memory.search(SECRET, k=5))
        report = memory.erase_report([SECRET])
        vectors = next(s for s in report.stores if s.store == "vectors")
        assert vectors.counts == {SECRET: 0}
        for path in store.files():
            assert vector not in path.read_bytes(), path
        assert store.count() == len(memory.journal.record_ids(memory._ns_id))  # the rest stay


def test_moving_a_folder_to_sqlite_is_remove_then_reindex(tmp_path: Path) -> None:
    """What the refusal tells a user to do works: the journal re-embeds every record into the new store."""
    with _open(tmp_path) as memory:
        for i in range(3):
            memory.remember(f"fact number {i} about {SECRET}")
        memory.flush()
        held = memory.recall.store.count()  # type: ignore[union-attr]
    assert held == 3
    shutil.rmtree(tmp_path / CHROMA_DIR)
    with _open(tmp_path, "sqlite") as memory:
        assert memory.reindex() >= held
        assert memory.recall.store.count() == held  # type: ignore[union-attr]
        hits = memory.search("fact number 2", k=1)
        assert hits[0].parts["vector_rank"] is not None
