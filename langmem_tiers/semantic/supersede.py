"""Dedupe and supersession of memories, planned without I/O.

Rules (applied to the candidates in order, each seeing the ones before it):

1. **Dedupe** (extracted memories only; ``remember()`` always stores what it is given): a
   candidate of the same kind as one of the user's current memories, with the same key
   (or both without one) and nearly the same words (Jaccard >= ``DUPLICATE_OVERLAP``) or,
   for a keyed one, the same value (the object of its triple, case and spaces aside), is
   not stored again: the existing memory takes the higher importance and, when it is an
   extracted memory of the same session, the candidate's message ids as extra provenance
   (an explicit memory stays explicit; provenance never crosses sessions, so erasing a
   session's messages never has to look at other sessions' records). A summary fold hands in the
   user's keyed memories and, of the unkeyed ones, a candidate's best keyword matches only
   (``memory/writes.py::dedupe_matches``): a near duplicate ranks among them, and the planning
   costs the same however many memories the user holds.
2. **Supersession by key**: a keyed candidate supersedes the user's current memories with
   that key that became valid before it (``valid_to`` = the candidate's ``created_at``);
   history is kept. A candidate older than a current memory with its key (an old turn
   summarized late) is stored as already superseded by the newer one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from langmem_tiers.journal.base import Namespace, NewRecord, Record
from langmem_tiers.text import WORD

DUPLICATE_OVERLAP = 0.8


@dataclass(frozen=True)
class Insert:
    record: NewRecord
    superseded_at: float | None = None  # stored as history already (an older value than the current one)


@dataclass(frozen=True)
class Merge:
    record_id: int
    importance: float
    message_ids: tuple[int, ...]


@dataclass(frozen=True)
class MemoryPlan:
    inserts: tuple[Insert, ...] = ()
    merges: tuple[Merge, ...] = ()
    supersede: tuple[tuple[int, float], ...] = ()  # (record id, valid_to)

    @property
    def empty(self) -> bool:
        return not (self.inserts or self.merges or self.supersede)


@dataclass
class _Entry:
    """A current memory while planning: stored (``record``) or planned in this batch (``insert``)."""

    kind: str
    key: str | None
    text: str
    created_at: float
    importance: float
    message_ids: tuple[int, ...]
    record: Record | None = None
    insert: int | None = None  # index into the inserts
    superseded_at: float | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def value(self) -> str | None:
        return _value(self.metadata)

    @cached_property
    def words(self) -> frozenset[str]:
        return _words(self.text)  # once per entry, not once per candidate compared with it


def plan_memories(candidates: Sequence[NewRecord], current: Sequence[Record], namespace: Namespace,
                  *, dedupe: bool = True) -> MemoryPlan:
    """What to insert, merge and supersede so that ``candidates`` join the user's ``current`` memories.

    ``current`` are the user's memories that nothing superseded (any session of the user);
    ``namespace`` is the session the candidates are stored in.

    Example:
        >>> ns = Namespace("s", "u")
        >>> old = Record(1, ns, "fact", "I live in Porto", (3,), created_at=10.0, key="location")
        >>> plan = plan_memories([NewRecord("fact", "I moved to Lisbon", (9,), created_at=20.0, key="location")],
        ...                      [old], ns)
        >>> plan.supersede, [i.record.text for i in plan.inserts]
        (((1, 20.0),), ['I moved to Lisbon'])
    """
    entries = [_Entry(r.kind, r.key, r.text, r.created_at, r.importance, r.message_ids, record=r,
                      metadata=r.metadata) for r in current if r.valid_to is None]
    inserts: list[Insert] = []
    merges: dict[int, Merge] = {}
    supersede: dict[int, float] = {}
    for candidate in candidates:
        live = [e for e in entries if e.superseded_at is None]
        twin = _duplicate(candidate, live) if dedupe else None
        if twin is not None:
            importance = max(twin.importance, candidate.importance)
            ids = twin.message_ids
            same_session = twin.record is None or twin.record.namespace == namespace
            if twin.message_ids and same_session:
                ids = tuple(sorted({*twin.message_ids, *candidate.message_ids}))
            twin.importance, twin.message_ids = importance, ids
            if twin.record is not None:
                merges[twin.record.id] = Merge(twin.record.id, importance, ids)
            else:
                assert twin.insert is not None
                inserts[twin.insert] = replace(inserts[twin.insert],
                                               record=replace(inserts[twin.insert].record, importance=importance,
                                                              message_ids=ids))
            continue
        superseded_at: float | None = None
        if candidate.key is not None:
            same_key = [e for e in live if e.key == candidate.key]
            newer = [e.created_at for e in same_key if e.created_at > candidate.created_at]
            for e in same_key:
                if e.created_at <= candidate.created_at:
                    e.superseded_at = candidate.created_at
                    if e.record is not None:
                        supersede[e.record.id] = candidate.created_at
                    else:
                        assert e.insert is not None
                        inserts[e.insert] = replace(inserts[e.insert], superseded_at=candidate.created_at)
            superseded_at = min(newer) if newer else None
        entries.append(_Entry(candidate.kind, candidate.key, candidate.text, candidate.created_at,
                              candidate.importance, candidate.message_ids, insert=len(inserts),
                              superseded_at=superseded_at, metadata=candidate.metadata))
        inserts.append(Insert(candidate, superseded_at))
    return MemoryPlan(tuple(inserts), tuple(merges.values()), tuple(supersede.items()))


def _duplicate(candidate: NewRecord, live: Sequence[_Entry]) -> _Entry | None:
    words = _words(candidate.text)
    value = _value(candidate.metadata)
    for entry in live:
        if entry.kind != candidate.kind or entry.key != candidate.key:
            continue
        other = entry.words
        if words == other or (words and other and len(words & other) / len(words | other) >= DUPLICATE_OVERLAP):
            return entry
        # The same keyed value said in other words ("Ada lives in Lisbon" / "The user's home is
        # Lisbon", both home_city -> Lisbon) is the same memory, not a change.
        if candidate.key is not None and value is not None and value == entry.value:
            return entry
    return None


def _value(metadata: Mapping[str, Any]) -> str | None:
    triple = metadata.get("triple")
    if isinstance(triple, list | tuple) and len(triple) == 3 and isinstance(triple[2], str) and triple[2].strip():
        return " ".join(triple[2].lower().split())
    return None


def _words(text: str) -> frozenset[str]:
    return frozenset(w.lower() for w in WORD.findall(text))
