"""TieredMemory.pin: the journal flag, context()'s pinned memories, scope refusals, and the vector
store's metadata following (real local embedder and embedded Chroma)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from langmem_tiers import TieredMemory, WordCounter
from langmem_tiers.errors import ConfigError
from langmem_tiers.journal.base import Namespace

from .conftest import SMALL_CONFIG


def test_pin_and_unpin_change_what_context_sends(make_memory: Callable[..., TieredMemory]) -> None:
    memory = make_memory("s1", user_id="ada")
    rid = memory.remember("Ada is allergic to peanuts", kind="fact")
    assert memory.context().pinned == ()
    assert memory.pin(rid) is True
    assert memory.pin(rid) is False  # already pinned: nothing changed
    assert memory.context().pinned == ("Ada is allergic to peanuts",)
    [record] = memory.journal.records([rid])
    assert record.pinned
    # Pinned memories belong to the user: another session of hers sees it too.
    assert memory.for_session("s2").context().pinned == ("Ada is allergic to peanuts",)
    assert memory.pin(rid, pinned=False) is True
    assert memory.context().pinned == ()
    assert not memory.journal.records([rid])[0].pinned


async def test_apin_matches(make_memory: Callable[..., TieredMemory]) -> None:
    memory = make_memory("s1", user_id="ada")
    rid = memory.remember("Ada lives in Lisbon")
    version = memory.version()
    assert await memory.apin(rid) is True
    assert memory.version() > version  # caches keyed on the session version reload
    assert (await memory.acontext()).pinned == ("Ada lives in Lisbon",)


def test_pin_refuses_records_out_of_scope_and_bad_input(make_memory: Callable[..., TieredMemory]) -> None:
    ada = make_memory("s1", user_id="ada")
    bob = ada.for_session("s1", user_id="bob")
    anonymous = ada.for_session("anon-1", user_id=None)
    anonymous_other = TieredMemory(ada.journal, Namespace.of("anon-2"), config=ada.config,
                                   counter=ada.counter, recall=ada.recall, owns_journal=False)
    bobs = bob.remember("Bob's locker code is 4711")
    anons = anonymous_other.remember("anonymous note")
    for memory, rid in ((ada, bobs), (anonymous, anons), (ada, 10**9)):
        with pytest.raises(ConfigError, match="not a live record of this user"):
            memory.pin(rid)
    assert not ada.journal.records([bobs])[0].pinned
    assert not ada.journal.records([anons])[0].pinned
    with pytest.raises(ConfigError, match="must be True or False"):
        ada.pin(ada.remember("x"), pinned="yes")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="record_id"):
        ada.pin("1")  # type: ignore[arg-type]
    anonymous_other.close()


def test_pinned_memories_survive_cleanup(make_memory: Callable[..., TieredMemory]) -> None:
    memory = make_memory("s1", user_id="ada")
    keep, drop = memory.remember("keep me", importance=0.01), memory.remember("drop me", importance=0.01)
    memory.pin(keep)
    doomed = memory.cleanup(min_importance=0.5, dry_run=False)
    assert [h.record_id for h in doomed] == [drop]
    assert [r.id for r in memory.journal.records([keep, drop])] == [keep]


def test_the_vector_store_metadata_follows(tmp_path: Path, local_embedder: Any) -> None:
    pytest.importorskip("chromadb")
    config = SMALL_CONFIG.with_changes(background_index=False)
    with TieredMemory.open(tmp_path, session_id="s1", user_id="ada", embedder=local_embedder, counter=WordCounter(),
                           config=config) as memory:
        rid = memory.remember("Ada's favourite tea is genmaicha")
        assert memory.recall is not None
        assert memory.recall.store is not None
        vector_id = memory.recall.vector_id(rid)
        [before] = memory.recall.store.get([vector_id])
        assert before.metadata.get("pinned") is False
        memory.pin(rid)
        assert memory.stats().index_pending == 0
        [after] = memory.recall.store.get([vector_id])
        assert after.metadata.get("pinned") is True
