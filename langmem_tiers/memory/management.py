"""Managing what is stored: erasure (``forget``, ``clear``, ``compact``, ``erase_report``), retention
(``cleanup``), merging near-duplicates (``consolidate``), links, pins and ``reindex``.

Each operation is one flow (:mod:`langmem_tiers.flow`), so the sync and ``a``-prefixed methods run the
same code: journal I/O as ``Blocking`` effects, vector work through the recall engine's flows (the
embedder's async path under asyncio).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING

from langmem_tiers.erasure import EraseReport, erase_report
from langmem_tiers.errors import ConfigError
from langmem_tiers.flow import Blocking, Flow
from langmem_tiers.journal.base import Record, Scope
from langmem_tiers.memory import reads
from langmem_tiers.memory.writes import indexed_flow
from langmem_tiers.memory_types import expiry
from langmem_tiers.recall.fusion import jaccard, retention
from langmem_tiers.recall.hits import RecallHit

if TYPE_CHECKING:
    from langmem_tiers.memory.tiered import TieredMemory

log = logging.getLogger(__name__)

SCOPES = ("session", "user", "agent")


def forget_flow(m: TieredMemory, target: int | str, physical: bool) -> Flow[int]:
    """Erase one record (a turn with its messages) or a whole scope; vectors follow through the outbox."""
    m._check_open()
    recall = m._require_recall()
    if isinstance(target, bool) or not isinstance(target, (int, str)):
        raise ConfigError(f"forget() takes a record id or a scope name; got {target!r}")
    ns_ids: list[int] = []
    if isinstance(target, int):
        removed: int = yield Blocking(lambda: _forget_record(m, target))
    else:
        if target not in SCOPES:
            raise ConfigError(f"scope ({target!r}) must be 'session', 'user' or 'agent'")
        yield from m._background.wait_flow()  # a background summary of this handle finishes first
        scope = Scope(target, m.namespace)
        ns_ids = yield Blocking(lambda: [n for n, _ in m.journal.namespaces(scope)])
        # This handle keeps its erased id: the next write meets SessionErasedError and starts
        # the session afresh then (not now: that would write the erased ids straight back).
        removed = yield Blocking(lambda: len(m.journal.delete_namespaces(ns_ids)))
    try:
        yield from recall.flush_flow()
        store = recall.store
        if store is not None and ns_ids:
            # Belt and braces: vectors of the scope are removed even if the journal lost track of them.
            yield Blocking(lambda: store.delete(where=recall.where_ns(ns_ids)))
    except Exception as e:  # the erase committed: the outbox retries the vector deletes
        log.warning("forget committed; vector deletes stay queued until the store answers: %s", e)
    if physical:
        yield from compact_flow(m)
    return removed


def _forget_record(m: TieredMemory, record_id: int) -> int:
    mine = Scope("user", m.namespace)
    found = [r for r in m.journal.records([record_id]) if mine.matches(r.namespace)]
    if not found:
        return 0
    record = found[0]
    if record.kind != "turn" or not record.message_ids:
        # A memory (explicit or extracted) goes alone: the turns it was extracted from stay.
        return m.journal.delete_records([record.id])
    # A turn: its messages go, with every record made from them and a summary that covered them.
    ns_id = m.journal.namespace_id(record.namespace, create=False)
    if ns_id is None:
        return m.journal.delete_records([record.id])
    return len(m.journal.erase_messages(ns_id, record.message_ids))


def clear_flow(m: TieredMemory, keep_memories: bool) -> Flow[None]:
    """Erase this session (after this handle's background summary), and its vectors."""
    m._check_open()
    yield from m._background.wait_flow()
    yield Blocking(lambda: m.journal.clear_session(m._ns_id, keep_memories=keep_memories))
    if m.recall is not None:
        yield from m.recall.flush_flow()


def compact_flow(m: TieredMemory) -> Flow[None]:
    """Rewrite the journal's and the vector store's files so deleted data is physically gone."""
    m._check_open()
    yield Blocking(m.journal.compact)
    store = m.recall.store if m.recall is not None else None
    if store is not None:
        try:
            yield Blocking(store.compact)
        except Exception as e:
            log.warning("the vector store could not be compacted: %s", e)


def erase_report_of(m: TieredMemory, texts: Sequence[str]) -> EraseReport:
    m._check_open()
    store = m.recall.store if m.recall is not None else None
    return erase_report(m.journal, store, texts, namespace=m.namespace)


def reindex_flow(m: TieredMemory) -> Flow[int]:
    """Queue every record for the keyword index and the vectors again, and index them now."""
    recall = m._require_recall()
    count: int = yield Blocking(m.journal.requeue_all)
    yield from recall.flush_flow()
    return count


def cleanup_flow(m: TieredMemory, max_age: float | None, min_importance: float | None,
                 kinds: Sequence[str] | None, dry_run: bool, expired: bool) -> Flow[list[RecallHit]]:
    """This user's records that are old, weak or expired; erased unless ``dry_run``."""
    recall = m._require_recall()
    now = time.time()
    clock_now = m.clock()
    records: list[Record] = yield Blocking(lambda: reads.user_records(m, kinds))
    doomed = []
    swept = {r.id for r in expiry.sweepable(records, clock_now)} if expired else set()
    for r in records:
        if r.id in swept:
            doomed.append(r)
            continue
        if r.pinned:
            continue
        age = now - r.created_at
        old = max_age is not None and age > max_age
        weak = min_importance is not None and retention(
            r.importance, age, recall.params.stability_seconds, False) < min_importance
        if old or weak:
            doomed.append(r)
    if not dry_run and doomed:
        yield Blocking(lambda: m.journal.delete_records([r.id for r in doomed]))
        m.metrics.observe_expired(sum(1 for r in doomed if expiry.is_expired(r.metadata, clock_now)))
        yield from recall.flush_flow()
    return [RecallHit(r.id, r.kind, r.text, 0.0, {}, r.namespace, r.message_ids, r.created_at,
                      r.importance, r.pinned, r.tags, r.metadata) for r in doomed]


def consolidate_flow(m: TieredMemory, threshold: float, kinds: Sequence[str]) -> Flow[int]:
    """Merge this user's current near-duplicate memories into the first of each group."""
    recall = m._require_recall()
    # Only current memories: a superseded one is history, never merged away.
    records: list[Record] = yield Blocking(lambda: [
        r for r in reads.user_records(m, list(kinds))
        if r.valid_to is None])
    merged_away: list[int] = []
    for i, keep in enumerate(records):
        if keep.id in merged_away:
            continue
        group = [r for r in records[i + 1:] if r.id not in merged_away and r.kind == keep.kind
                 and r.namespace == keep.namespace and jaccard(keep.text, r.text) >= threshold]
        if not group:
            continue
        yield Blocking(partial(_merge, m, keep, group))
        merged_away += [r.id for r in group]
    if merged_away:
        yield Blocking(lambda: m.journal.delete_records(merged_away))
        yield from recall.flush_flow()
    return len(merged_away)


def _merge(m: TieredMemory, keep: Record, group: Sequence[Record]) -> None:
    """The kept record takes the highest importance, the union of tags and provenance."""
    sources = [*keep.metadata.get("merged_from", []), *(r.id for r in group)]
    m.journal.update_record(
        keep.id, importance=max([keep.importance, *(r.importance for r in group)]),
        message_ids=tuple(sorted({*keep.message_ids, *(i for r in group for i in r.message_ids)})),
        metadata={**keep.metadata, "merged_from": sources,
                  "tags": sorted({*keep.tags, *(t for r in group for t in r.tags)})},
    )


def link_flow(m: TieredMemory, a: int, b: int, relation: str, strength: float) -> Flow[None]:
    if not isinstance(relation, str) or not relation:
        raise ConfigError(f"relation ({relation!r}) must be a non-empty string")
    if not 0 < strength <= 1:
        raise ConfigError(f"strength ({strength!r}) must be in (0, 1]")
    mine = Scope("user", m.namespace)
    found = {r.id for r in (yield Blocking(lambda: m.journal.records([a, b]))) if mine.matches(r.namespace)}
    if found != {a, b}:
        raise ConfigError(f"link() needs two records of this user; unknown: {sorted({a, b} - found)}")
    yield Blocking(lambda: m.journal.add_link(a, b, relation, strength))


def pin_flow(m: TieredMemory, record_id: int, pinned: bool) -> Flow[bool]:
    m._check_open()
    if not isinstance(pinned, bool):
        raise ConfigError(f"pinned ({pinned!r}) must be True or False")
    record = yield from reads.own_record_flow(m, record_id)
    if record is None:
        raise ConfigError(f"record {record_id!r} is not a live record of this user: pass an id that "
                          "remember(), search() or facts() returned for this user")
    if record.pinned == pinned:
        return False
    # update_record bumps the session's version (caches keyed on it reload) and queues the upsert.
    yield Blocking(lambda: m.journal.update_record(record.id, pinned=pinned))
    yield from indexed_flow(m)
    return True
