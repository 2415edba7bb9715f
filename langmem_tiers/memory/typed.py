"""The typed-memory operations of :mod:`langmem_tiers.memory_types` on one memory: typed fields on
``remember()``, events, expiry, skills and their outcomes."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from langmem_tiers.errors import ConfigError
from langmem_tiers.flow import Blocking, Flow
from langmem_tiers.journal.base import NewRecord, Scope
from langmem_tiers.memory import reads
from langmem_tiers.memory.writes import indexed_flow, memory_record
from langmem_tiers.memory_types import events, fields, skills
from langmem_tiers.recall.hits import RecallHit
from langmem_tiers.semantic.keys import check_key

if TYPE_CHECKING:
    from langmem_tiers.memory.tiered import TieredMemory


def remembered(m: TieredMemory, text: str, kind: str, importance: float, pinned: bool, tags: Sequence[str],
               metadata: Mapping[str, Any] | None, key: str | None, ttl: float | None,
               triggers: Sequence[str] | None, category: str | None) -> NewRecord:
    """The record ``remember()`` stores: checked, with its typed fields and key."""
    record = memory_record(text, kind, importance, pinned, tags, metadata)
    if ttl is not None or triggers is not None or category is not None or kind == fields.SKILL_KIND \
            or fields.EXPIRES_AT in record.metadata:
        record = replace(record, metadata=fields.typed_metadata(
            record.kind, dict(record.metadata), now=m.clock(), ttl=ttl, triggers=triggers, category=category))
    if key is not None:
        record = replace(record, key=check_key(key))
    return record


def event(m: TieredMemory, event_type: str, description: str, outcome: str | None, at: float | None,
          importance: float, ttl: float | None) -> NewRecord:
    """The record ``record_event()`` stores, dated when the event happened."""
    text, metadata, when = events.event_fields(event_type, description, outcome, at, time.time())
    record = memory_record(text, fields.EVENT_KIND, importance, False, (), metadata)
    if ttl is not None:
        record = replace(record, metadata=fields.typed_metadata(fields.EVENT_KIND, dict(record.metadata),
                                                                 now=m.clock(), ttl=ttl))
    return replace(record, created_at=when)


def expire_flow(m: TieredMemory, record_id: int, ttl: float | None) -> Flow[bool]:
    m._check_open()
    until = None if ttl is None else m.clock() + fields.check_ttl(ttl)
    record = yield from reads.own_record_flow(m, record_id)
    if record is None or record.kind == "turn":
        return False
    metadata = {k: v for k, v in record.metadata.items() if k != fields.EXPIRES_AT}
    if until is not None:
        metadata[fields.EXPIRES_AT] = until
    yield Blocking(lambda: m.journal.update_record(record.id, metadata=metadata))
    yield from indexed_flow(m)
    return True


def skills_flow(m: TieredMemory, situation: str, k: int) -> Flow[list[RecallHit]]:
    m._check_open()
    if not isinstance(situation, str):
        raise ConfigError(f"situation must be a string; got {type(situation).__name__}")
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ConfigError(f"k ({k!r}) must be an integer >= 0")
    hits: list[RecallHit] = yield from skills.skills_for_flow(
        m._require_recall(), m.journal, Scope("user", m.namespace), m._user_ns_ids, situation, k, m.clock())
    return hits


def outcome_flow(m: TieredMemory, record_id: int, success: bool) -> Flow[None]:
    m._check_open()
    if not isinstance(success, bool):
        raise ConfigError(f"success ({success!r}) must be True or False")
    record = yield from reads.own_record_flow(m, record_id)
    if record is None or record.kind != fields.SKILL_KIND:
        raise ConfigError(f"record {record_id!r} is not a live skill of this user: pass an id that "
                          "remember(..., kind='skill') or skills_for() returned")
    yield Blocking(lambda: skills.count_outcome(m.journal, record.id, success, m._outcome_lock))
    yield from indexed_flow(m)
