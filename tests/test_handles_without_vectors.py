"""A handle opened without vectors (``embedder=False``, ``--no-vectors``, a machine without the local model)
on a journal whose records are indexed in a vector store leaves the outbox to handles with vectors.

It used to mark the outbox rows done: a record it erased kept its vector in the store for good, and a record
it added never got one.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from langmem_tiers import MemoryConfig, TieredMemory, WordCounter

SECRET = "locker code 4471-otter"


def _open(target: str | Path, embedder: Any, config: MemoryConfig, chroma: str | None = None) -> TieredMemory:
    """``embedder``: the real local model, or ``False`` for a handle without vectors."""
    return TieredMemory.open(target, session_id="s", user_id="u", config=config, counter=WordCounter(),
                             embedder=embedder, chroma=chroma if embedder is not False else None)


def _stored_vectors(memory: TieredMemory) -> int:
    assert memory.recall is not None
    assert memory.recall.store is not None
    return memory.recall.store.count(memory.recall.where_ns([memory._ns_id]))


def _check(open_memory: Any) -> None:
    with open_memory(True) as memory:
        memory.remember(f"my {SECRET}")
        memory.remember("the user keeps bees")
        memory.flush()
        assert _stored_vectors(memory) == 2
    with open_memory(False) as memory:  # keyword recall only: it finds the memory, and erases it
        (hit,) = [h for h in memory.search("locker code", k=5) if SECRET in h.text]
        memory.forget(hit.record_id, physical=True)
        memory.remember("the user's dog is called Miso")
        memory.flush()
        assert memory.journal.outbox_count([memory._ns_id]) == 2  # the deletion and the new memory wait
        (vectors,) = [s for s in memory.erase_report([SECRET]).stores if s.store == "vectors"]
        assert vectors.counts is None
        assert "2 outbox rows" in vectors.note
    with open_memory(True) as memory:
        memory.flush()  # the next handle with vectors applies both
        assert memory.journal.outbox_count([memory._ns_id]) == 0
        assert _stored_vectors(memory) == 2  # the bees and the dog; the erased memory's vector is gone
        assert memory.recall is not None
        assert memory.recall.store is not None
        gone = memory.recall.vector_id(hit.record_id)
        assert memory.recall.store.get([gone]) == []


@pytest.mark.parametrize("engine", ["chroma", "sqlite"])
def test_an_embedded_folder(tmp_path: Path, engine: str, local_embedder: Any) -> None:
    config = MemoryConfig(embedded_vectors=engine)  # type: ignore[arg-type]
    _check(lambda vectors: _open(tmp_path, local_embedder if vectors else False, config))


def test_a_journal_that_never_had_vectors_still_drains_its_outbox(tmp_path: Path) -> None:
    with _open(tmp_path, False, MemoryConfig()) as memory:
        memory.remember("the user keeps bees")
        memory.forget(memory.search("bees", k=1)[0].record_id)
        memory.flush()
        assert memory.journal.outbox_count() == 0  # nothing would ever apply them: done at once, as before
        assert not memory.journal.has_vectors()
        assert [s.store for s in memory.erase_report(["bees"]).stores] == ["journal"]


@pytest.mark.parametrize("engine", ["chroma", "sqlite"])
def test_vectors_turned_on_later_index_the_history(tmp_path: Path, engine: str, local_embedder: Any) -> None:
    config = MemoryConfig(embedded_vectors=engine)  # type: ignore[arg-type]
    with _open(tmp_path, False, config) as memory:  # e.g. before the local model was installed
        memory.remember("the user keeps bees")
        memory.remember("the user's dog is called Miso")
    with _open(tmp_path, local_embedder, config) as memory:
        assert memory.journal.outbox_count() == 2  # queued when the first handle with vectors opened
        memory.flush()
        assert _stored_vectors(memory) == 2


def test_a_journal_whose_vectors_predate_the_mark_is_not_embedded_again(tmp_path: Path, local_embedder: Any) -> None:
    with _open(tmp_path, local_embedder, MemoryConfig()) as memory:
        memory.remember("the user keeps bees")
        memory.flush()
    con = sqlite3.connect(tmp_path / "journal.sqlite3")
    with con:
        con.execute("DELETE FROM meta WHERE key = 'vectors'")  # as a journal written before the mark existed
    con.close()
    with _open(tmp_path, local_embedder, MemoryConfig()) as memory:
        assert memory.journal.has_vectors()
        assert memory.journal.outbox_count() == 0
        assert _stored_vectors(memory) == 1


def test_a_read_only_journal_with_a_vector_store_opens(tmp_path: Path, local_embedder: Any) -> None:
    from langmem_tiers.journal.sqlite import SqliteJournal
    from langmem_tiers.recall.engine import RecallIndex
    from langmem_tiers.recall.sqlite_vectors import SqliteVectorStore

    with _open(tmp_path / "m", False, MemoryConfig()) as memory:
        memory.remember("the user keeps bees")
    journal = SqliteJournal(tmp_path / "m" / "journal.sqlite3", read_only=True)
    with SqliteVectorStore(tmp_path / "v") as store:
        try:
            RecallIndex(journal, store, local_embedder)  # nothing to mark on a journal it cannot write
            assert not journal.has_vectors()
        finally:
            journal.close()


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    pytest.importorskip("chromadb")
    from tests.support.chroma_server import chroma_server
    from tests.support.postgres import postgres_url

    with postgres_url() as url, chroma_server(tmp_path_factory.mktemp("chroma")) as (host, port):
        yield url, f"http://{host}:{port}"


@pytest.mark.server
def test_a_replica_without_vectors_on_postgresql_and_a_chroma_server(servers: tuple[str, str],
                                                                    local_embedder: Any) -> None:
    url, chroma = servers
    _check(lambda vectors: _open(url, local_embedder if vectors else False, MemoryConfig(), chroma))
