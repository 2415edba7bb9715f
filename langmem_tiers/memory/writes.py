"""The write path: validating messages and memories, planning the window in the append transaction,
and what follows every write (indexing, the expiry sweep). A summary of what an append evicted is
:mod:`.summary_schedule`'s.

Functions over one :class:`~langmem_tiers.memory.tiered.TieredMemory` (``m``); the flows run under
either driver of :mod:`langmem_tiers.flow`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from langmem_tiers.errors import InvalidMessageError, SessionErasedError
from langmem_tiers.flow import Blocking, Flow
from langmem_tiers.journal.base import NewRecord, WindowEntry, WriteTxn
from langmem_tiers.memory_types import expiry, fields
from langmem_tiers.messages import Message, make_message
from langmem_tiers.recall.units import completed_turn_records
from langmem_tiers.redact import redact_message
from langmem_tiers.semantic.supersede import MemoryPlan, plan_memories
from langmem_tiers.window import plan_window

if TYPE_CHECKING:
    from langmem_tiers.memory.tiered import TieredMemory

log = logging.getLogger(__name__)

MEMORY_KINDS = ("fact", "preference", "event", "skill", "note", "relation")
MESSAGE_FIELDS = frozenset({"name", "tool_calls", "tool_call_id", "metadata", "created_at", "key"})
_NO_END = 2**62  # an upper bound for message ids in "messages after X" reads
# Keyword matches an unkeyed extracted memory is deduped against (dedupe_matches): a near duplicate
# ranks first or nearly; more only costs a longer read per summary fold.
DEDUPE_MATCHES = 16


# --- messages -----------------------------------------------------------------

def build(m: TieredMemory, role: str, content: Any, extra: Mapping[str, Any]) -> Message:
    """One message from ``add()``'s arguments."""
    unknown = set(extra) - MESSAGE_FIELDS
    if unknown:
        raise InvalidMessageError(f"unknown message field(s): {', '.join(sorted(unknown))}")
    return make_message(role, content, max_chars=m.config.max_message_chars, **extra)


def validate(m: TieredMemory, messages: Iterable[Message | Mapping[str, Any]]) -> list[Message]:
    """Every message checked (and redacted) before anything is written: a batch is stored whole or not at all."""
    m._check_open()
    out = []
    for msg in messages:
        if isinstance(msg, Message):
            msg = make_message(msg.role, msg.content, name=msg.name, tool_calls=msg.tool_calls,
                               tool_call_id=msg.tool_call_id, metadata=msg.metadata, created_at=msg.created_at,
                               key=msg.key, max_chars=m.config.max_message_chars)
        elif isinstance(msg, Mapping):
            msg = make_message(msg.get("role"), msg.get("content"), name=msg.get("name"),
                               tool_calls=msg.get("tool_calls") or (), tool_call_id=msg.get("tool_call_id"),
                               metadata=msg.get("metadata"), created_at=msg.get("created_at"),
                               key=msg.get("key"), max_chars=m.config.max_message_chars)
        else:
            raise InvalidMessageError(f"expected a Message or a dict, got {type(msg).__name__}")
        out.append(redact_message(msg, m.redactor) if m.redactor else msg)
    if not out:
        raise InvalidMessageError("add_messages needs at least one message")
    return out


@dataclass(frozen=True)
class Appended:
    """What one append did: the stored messages (in the order given), whether turns left the window, and
    whether it wrote recall records (a turn answered or closed), which the index then has to embed."""

    stored: list[Message]
    evicted: bool = False
    recallable: bool = False


def append_flow(m: TieredMemory, messages: list[Message]) -> Flow[Appended]:
    """Append in one transaction."""
    tokens = [m.counter.count_message(msg) for msg in messages]
    try:
        result: Appended = yield Blocking(lambda: _append(m, messages, tokens))
    except SessionErasedError:
        # This session was erased through another handle: start it afresh under a new id
        # (ids are never reused, so this handle can never write into another tenant's session).
        log.info("session %s was erased by another handle; starting it afresh", m.namespace)
        yield Blocking(m._reopen_session)
        result = yield Blocking(lambda: _append(m, messages, tokens))
    return result


def _append(m: TieredMemory, messages: list[Message], tokens: list[int]) -> Appended:
    with m.journal.write(m._ns_id) as tx:
        keys = [msg.key for msg in messages if msg.key]
        if not keys:
            return _append_rows(m, tx, messages, tokens)
        # Idempotent append: a message whose key is stored already (a retry) is returned, not stored again.
        known = tx.messages_by_key(keys)
        fresh: list[tuple[Message, int]] = []
        for msg, t in zip(messages, tokens):
            if not msg.key or (msg.key not in known and all(f.key != msg.key for f, _ in fresh)):
                fresh.append((msg, t))
        done = _append_rows(m, tx, [f for f, _ in fresh], [t for _, t in fresh]) if fresh else Appended([])
        by_key = {**known, **{s.key: s for s in done.stored if s.key}}
        unkeyed = iter([s for s in done.stored if not s.key])
        return replace(done, stored=[by_key[msg.key] if msg.key else next(unkeyed) for msg in messages])


def _append_rows(m: TieredMemory, tx: WriteTxn, messages: list[Message], tokens: list[int]) -> Appended:
    cfg = m.config
    state = tx.state()
    entries = tx.window_entries(state.window_start)
    # Tool results answer calls of the current turn (since the last user message) only.
    turn_start = max((e.id for e in entries if e.role == "user"), default=state.window_start)
    open_calls = tx.open_tool_calls(turn_start)
    for msg in messages:
        if msg.role == "user":
            open_calls = set()
        open_calls |= {c.id for c in msg.tool_calls}
        if msg.role == "tool" and msg.tool_call_id not in open_calls:
            raise InvalidMessageError(
                f"tool result for unknown call {msg.tool_call_id!r}: add the assistant message with "
                "that tool call first (in the same add_messages batch or earlier in this turn)"
            )
    open_turn = tx.messages_between(turn_start - 1, _NO_END) if m.recall is not None else []
    stored = tx.insert_messages(messages, tokens, m.counter.key)
    # Every answered or closed turn becomes recallable now, not when it is evicted.
    records = completed_turn_records(open_turn, stored, unit=cfg.recall_unit) if m.recall is not None else []
    if records:
        tx.insert_records(records)
    entries += [WindowEntry(s.id or 0, s.role, t) for s, t in zip(stored, tokens)]
    plan = plan_window(entries, cfg.window_tokens, cfg.window_low_tokens)
    if plan.evicts:
        tx.set_window_start(plan.window_start)
    return Appended(stored, bool(plan.evicts), bool(records))


# --- explicit memories ----------------------------------------------------------

def memory_record(text: Any, kind: Any, importance: Any, pinned: Any, tags: Any, metadata: Any) -> NewRecord:
    """An explicit memory from ``remember()``'s arguments, checked like a message's text."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidMessageError(f"a memory needs non-empty text; got {text!r:.80}")
    if not isinstance(kind, str) or not kind or kind == "turn":
        raise InvalidMessageError(f"kind ({kind!r}) must be a non-empty string other than 'turn', e.g. "
                                  f"{', '.join(MEMORY_KINDS)}")
    if isinstance(importance, bool) or not isinstance(importance, (int, float)) or not 0 <= importance <= 1:
        raise InvalidMessageError(f"importance ({importance!r}) must be a number between 0 and 1")
    make_message("user", text)  # same text rules as messages (NUL, surrogates)
    if isinstance(tags, str) or not all(isinstance(t, str) for t in tags):
        raise InvalidMessageError(f"tags must be a list of strings; got {tags!r:.80}")
    meta = make_message("user", "x", metadata=metadata).metadata
    return NewRecord(kind=kind, text=text, importance=float(importance), pinned=bool(pinned),
                     tags=tuple(tags), metadata=meta, created_at=time.time())


def remember_flow(m: TieredMemory, record: NewRecord) -> Flow[int]:
    """Store one explicit memory (superseding the user's memory with its key), then index and sweep."""
    if m.redactor is not None:
        record = replace(record, text=m.redactor(record.text))
    m._require_recall()
    try:
        record_id: int = yield Blocking(lambda: _store_memory(m, record))
    except SessionErasedError:  # erased through another handle: start the session afresh, as add() does
        yield Blocking(m._reopen_session)
        record_id = yield Blocking(lambda: _store_memory(m, record))
    yield from indexed_flow(m)
    yield from sweep_flow(m)
    return record_id


def _store_memory(m: TieredMemory, record: NewRecord) -> int:
    if record.key is None:
        return m.journal.add_records(m._ns_id, [record])[0]
    ns_ids = m._user_ns_ids()
    with m.journal.write(m._ns_id) as tx:
        # Not deduped: only the memories with its key take part (unkeyed=(): none of the others is read).
        plan = plan_memories([record], tx.current_memories(ns_ids, unkeyed=()), m.namespace, dedupe=False)
        return apply_plan(tx, plan)[0]


def dedupe_matches(m: TieredMemory, memories: Sequence[NewRecord], ns_ids: Sequence[int]) -> list[int]:
    """The records the unkeyed ones of a fold's extracted ``memories`` are deduped against: the user's
    memories of their kinds that best match their words, ``DEDUPE_MATCHES`` per memory, found by one
    keyword search of all their texts. A near duplicate shares most of a memory's words
    (``DUPLICATE_OVERLAP``), so it ranks among them; the user's other memories, which grow with the
    history, are never read. (A search per memory made the first 5,000 messages of benchmarks/add_path.py
    cost 4.5 s, against 3.4 reading every memory and 4.2 with one search per fold: results files
    add-path-50k-*session-51.json.) A keyed memory is planned against every memory with a key."""
    unkeyed = [memory for memory in memories if memory.key is None]
    if not unkeyed:
        return []
    text = "\n".join(memory.text for memory in unkeyed)
    kinds = sorted({memory.kind for memory in unkeyed})
    return [hit.record_id for hit in m.journal.keyword_search(text, ns_ids, DEDUPE_MATCHES * len(unkeyed), kinds)]


def apply_plan(tx: WriteTxn, plan: MemoryPlan) -> list[int]:
    """Run a :class:`MemoryPlan` inside a write transaction; returns the inserted ids."""
    ids = tx.insert_records([i.record for i in plan.inserts]) if plan.inserts else []
    by_time: dict[float, list[int]] = {}
    for record_id, valid_to in plan.supersede:
        by_time.setdefault(valid_to, []).append(record_id)
    for insert, record_id in zip(plan.inserts, ids):
        if insert.superseded_at is not None:
            by_time.setdefault(insert.superseded_at, []).append(record_id)
    for valid_to, record_ids in sorted(by_time.items()):
        tx.supersede(record_ids, valid_to)
    for merge in plan.merges:
        tx.merge_memory(merge.record_id, merge.importance, merge.message_ids)
    return ids


# --- after every write ----------------------------------------------------------

def indexed_flow(m: TieredMemory) -> Flow[None]:
    """After a write: new records are embedded off the caller's path (background indexer), or inline
    when ``background_index`` is off or recall is keyword-only (nothing to embed: the outbox rows are
    simply done, unless the journal has vectors elsewhere: then they wait for a handle with them). An
    indexing failure is logged: the rows stay in the outbox."""
    recall = m.recall
    if recall is None:
        return
    if m.config.background_index and recall.vectors:
        recall.wake_indexer()
        return
    try:
        yield from recall.index_flow()
    except Exception:  # committed already: indexing failures stay in the outbox
        log.exception("indexing after a write failed; the rows stay pending")


def sweep_flow(m: TieredMemory) -> Flow[int]:
    """The periodic expiry sweep, when due for this user (see :mod:`langmem_tiers.memory_types.expiry`)."""
    if m.recall is None or not m._sweep.due(m.namespace, m.clock(), m.config.expiry_sweep_s):
        return 0
    try:
        kinds = [*MEMORY_KINDS, fields.WORKING_KIND, expiry.STORE_ITEM_KIND]
        ns_ids = yield Blocking(lambda: m._user_ns_ids(kinds))
        erased: int = yield from expiry.erase_expired_flow(m.journal, m.recall, ns_ids, m.clock(), kinds)
        m.metrics.observe_expired(erased)
    except Exception:  # a write committed before the sweep: never report it as failed
        log.exception("the expiry sweep failed; expired memories stay filtered out until the next one")
        return 0
    return erased
