"""The memory types with the real local embedder and an embedded Chroma: a skill found by meaning
(no shared word, no trigger), expired and working records never come back through vector recall,
and erasing them removes their vectors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from langmem_tiers import TieredMemory, WordCounter
from langmem_tiers.journal.base import Scope

from .conftest import SMALL_CONFIG

pytest.importorskip("chromadb")


def open_vectors(path: Path, embedder: Any, session_id: str = "s1") -> TieredMemory:
    config = SMALL_CONFIG.with_changes(background_index=False)
    return TieredMemory.open(path, session_id=session_id, user_id="ada", embedder=embedder, counter=WordCounter(),
                             config=config)


def vectors_of(memory: TieredMemory) -> set[int]:
    store = memory.recall.store if memory.recall is not None else None
    assert store is not None
    ids = {r.id for ns in memory.sessions("user") for r in memory.journal.scoped_records(
        [memory.journal.namespace_id(ns, create=False) or -1])}
    stored = store.get([memory.recall.vector_id(i) for i in sorted(ids)]) if memory.recall is not None else []
    return {int(v.id.rsplit(":", 1)[1]) for v in stored}


def test_a_skill_is_found_by_meaning_and_expired_ones_never(tmp_path: Path, local_embedder: Any) -> None:
    clock = [1_800_000_000.0]
    with open_vectors(tmp_path, local_embedder) as memory:
        memory.clock = lambda: clock[0]
        soothe = memory.remember("Calm an upset customer: apologise, then offer a refund", kind="skill")
        memory.remember("Rotate the database credentials", kind="skill", triggers=["credential rotation"])
        temporary = memory.remember("Escalate angry shoppers to the duty manager", kind="skill", ttl=60)
        hits = memory.skills_for("the client is furious about a late parcel", k=3)
        assert hits[0].record_id in {soothe, temporary}
        assert {soothe, temporary} <= {h.record_id for h in hits}
        assert all(h.parts["trigger"] == 0.0 for h in hits[:2])  # by meaning alone
        assert hits[0].parts["relevance"] == 1.0

        clock[0] += 60
        hits = memory.skills_for("the client is furious about a late parcel", k=3)
        assert temporary not in {h.record_id for h in hits}
        assert soothe == hits[0].record_id
        found = memory.search("furious shopper escalation", k=10, scope="user")
        assert temporary not in {h.record_id for h in found}


def test_working_records_never_come_back_by_vector_and_erasure_removes_vectors(tmp_path: Path,
                                                                               local_embedder: Any) -> None:
    with open_vectors(tmp_path, local_embedder) as memory:
        entry = memory.working.set("current_task", "book a flight to Lisbon for the conference")
        skill = memory.remember("Compare fares on two sites before booking", kind="skill", triggers=["book flight"])
        event = memory.record_event("booking", "Booked a hotel in Lisbon")
        other = memory.for_session("s2")
        other.add("user", "I need to book a flight to Lisbon")
        found = other.search("flight to Lisbon for the conference", k=10, scope="user")
        assert entry not in {h.record_id for h in found}
        assert {skill, event} <= {h.record_id for h in found}
        context = other.context()
        assert all("current_task" not in m.text for m in context.messages)
        assert vectors_of(memory) >= {entry, skill, event}

        memory.working.delete("current_task")
        memory.forget(skill)
        memory.forget(event)
        assert not vectors_of(memory) & {entry, skill, event}
        memory.working.set("current_task", "pack")
        memory.forget("session")
        store = memory.recall.store if memory.recall is not None else None
        assert store is not None
        ns_id = memory.journal.namespace_id(memory.namespace, create=False)
        assert ns_id is None or store.count(memory.recall.where(Scope("session", memory.namespace))) == 0
