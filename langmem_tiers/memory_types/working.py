"""Working memory: a per-session key/value scratchpad for task state an agent must not lose between turns.

``memory.working.set("plan_step", 3)`` journals the value as a record of kind
``"working"`` in this session (durable, committed before it returns, seen by every
handle and process on the journal); ``context()`` delivers the session's entries as a
small "working state" block within ``MemoryConfig.working_tokens`` (newest first), and
``explain()`` shows it as its own tier.

**Scoped to the session, without a journal change.** Keys of ``remember(key=)`` are
scoped to the user; a working entry is stored in the session's own namespace under the
record key ``"working:" + key``. The ``:`` is refused by every user or extracted key
(:func:`~langmem_tiers.semantic.keys.check_key`), so ``remember(key=...)`` can never
supersede a working entry, and a ``set`` looks only at this session's records: two
sessions of one user each have their own ``plan_step``. Working records are never
recalled (the recall engine drops kind ``"working"``), never listed by ``facts()`` and
never in the profile: other sessions do not see them.

**Writes.** ``set`` inserts the new value and supersedes the previous one in one
serialized write transaction of the session (readers never see two values or none),
then deletes the superseded row (the sweep and ``cleanup()`` erase any a crash left:
:func:`~langmem_tiers.memory_types.expiry.sweepable`).
``delete`` and ``forget`` erase physically, as for any record.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langmem_tiers.errors import InvalidMessageError, SessionErasedError
from langmem_tiers.flow import Blocking, Flow
from langmem_tiers.journal.base import Namespace, NewRecord, Record
from langmem_tiers.memory_types.expiry import expires_at, is_expired
from langmem_tiers.memory_types.fields import EXPIRES_AT, VALUE, WORKING_KIND, check_ttl
from langmem_tiers.messages import make_message
from langmem_tiers.semantic.keys import check_key

if TYPE_CHECKING:
    from langmem_tiers.memory import TieredMemory

log = logging.getLogger(__name__)

KEY_PREFIX = "working:"
MAX_VALUE_CHARS = 32_000  # a scratchpad entry, not a document: it has to fit a small block of the budget
WORKING_HEADER = "Working state of this session (key = value, newest first):"


@dataclass(frozen=True)
class WorkingItem:
    """One current working-memory entry."""

    key: str
    value: Any
    record_id: int
    updated_at: float
    expires_at: float | None = None


@dataclass(frozen=True)
class WorkingLine:
    """One entry as ``context()`` delivers it."""

    record_id: int
    key: str
    text: str


def record_key(key: Any) -> str:
    """The journal key of a working entry (see the module docstring)."""
    return KEY_PREFIX + check_key(key)


def current_items(records: Iterable[Record], namespace: Namespace, now: float) -> list[WorkingItem]:
    """The session's current entries at ``now``, newest first (pure).

    ``records`` may hold other kinds and other sessions' records: only this session's
    working records that nothing superseded and that have not expired count; of two
    rows with one key (a writer that crashed before deleting the old one), the newest wins.
    """
    best: dict[str, Record] = {}
    for r in records:
        if r.kind != WORKING_KIND or r.namespace != namespace or r.valid_to is not None or not r.key \
                or not r.key.startswith(KEY_PREFIX) or is_expired(r.metadata, now):
            continue
        if r.key not in best or r.id > best[r.key].id:
            best[r.key] = r
    ordered = sorted(best.values(), key=lambda r: -r.id)
    return [WorkingItem(r.key[len(KEY_PREFIX):] if r.key else "", r.metadata.get(VALUE), r.id, r.created_at,
                        expires_at(r.metadata)) for r in ordered]


def working_lines(items: Sequence[WorkingItem]) -> list[WorkingLine]:
    """The lines of the "working state" block, in the items' order (newest first).

    Example:
        >>> working_lines([WorkingItem("plan_step", 3, 7, 0.0)])[0].text
        '- plan_step = 3'
    """
    return [WorkingLine(i.record_id, i.key, f"- {i.key} = {_dump(i.value)}") for i in items]


class WorkingMemory:
    """The session's scratchpad: ``memory.working`` (sync methods and ``a``-prefixed async twins).

    Example:
        >>> import tempfile
        >>> from langmem_tiers import TieredMemory
        >>> with TieredMemory.open(tempfile.mkdtemp(), session_id="s1", embedder=False) as memory:
        ...     _ = memory.working.set("plan_step", 2)
        ...     _ = memory.working.set("plan_step", 3)
        ...     memory.working.get("plan_step"), memory.working.items()
        (3, {'plan_step': 3})
    """

    def __init__(self, memory: TieredMemory) -> None:
        # A facet of its TieredMemory (its session id, clock, drivers and indexing), not a store of its own.
        self._memory = memory

    def set(self, key: str, value: Any, ttl: float | None = None) -> int:
        """Store ``value`` (any JSON value) under ``key`` (snake_case) for this session; returns the record id.

        ``ttl``: seconds until the entry expires (see :mod:`langmem_tiers.memory_types.expiry`).
        """
        return self._memory._drivers.run_sync(self._set_flow(key, value, ttl))

    async def aset(self, key: str, value: Any, ttl: float | None = None) -> int:
        """Async :meth:`set`."""
        return await self._memory._drivers.run_async(self._set_flow(key, value, ttl))

    def get(self, key: str, default: Any = None) -> Any:
        """The current value of ``key``, or ``default`` when unset or expired."""
        return self._memory._drivers.run_sync(self._get_flow(key, default))

    async def aget(self, key: str, default: Any = None) -> Any:
        """Async :meth:`get`."""
        return await self._memory._drivers.run_async(self._get_flow(key, default))

    def delete(self, key: str) -> bool:
        """Erase ``key`` (its rows leave the journal and the indexes); True when it was set."""
        return self._memory._drivers.run_sync(self._delete_flow(key))

    async def adelete(self, key: str) -> bool:
        """Async :meth:`delete`."""
        return await self._memory._drivers.run_async(self._delete_flow(key))

    def items(self) -> dict[str, Any]:
        """Every current entry as ``{key: value}``, newest first."""
        return {i.key: i.value for i in self._memory._drivers.run_sync(self._entries_flow())}

    async def aitems(self) -> dict[str, Any]:
        """Async :meth:`items`."""
        return {i.key: i.value for i in await self._memory._drivers.run_async(self._entries_flow())}

    def entries(self) -> list[WorkingItem]:
        """Every current entry with its record id, time set and expiry, newest first."""
        return self._memory._drivers.run_sync(self._entries_flow())

    async def aentries(self) -> list[WorkingItem]:
        """Async :meth:`entries`."""
        return await self._memory._drivers.run_async(self._entries_flow())

    # --- flows ----------------------------------------------------------------

    def _set_flow(self, key: str, value: Any, ttl: float | None) -> Flow[int]:
        m = self._memory
        m._check_open()
        journal_key = record_key(key)
        stored = _redacted(value, m.redactor) if m.redactor is not None else value
        text = f"{key} = {_dump(stored)}"
        if len(text) > MAX_VALUE_CHARS:
            raise InvalidMessageError(f"the value of working key {key!r} takes {len(text)} characters, over the "
                                      f"limit of {MAX_VALUE_CHARS}: keep task state small (store documents with "
                                      "remember() or add())")
        for piece in _strings(stored):  # the text rules of every stored text (NUL, lone surrogates)
            make_message("user", piece or " ")
        metadata: dict[str, Any] = {VALUE: stored}
        if ttl is not None:
            metadata[EXPIRES_AT] = m.clock() + check_ttl(ttl)
        now = time.time()  # record times are wall time; the memory's clock judges expiry only
        record = NewRecord(kind=WORKING_KIND, text=text, metadata=metadata, created_at=now, key=journal_key)
        written: tuple[int, list[int]]
        try:
            written = yield Blocking(lambda: self._write(record, now))
        except SessionErasedError:  # erased through another handle: start the session afresh, as add() does
            yield Blocking(m._reopen_session)
            written = yield Blocking(lambda: self._write(record, now))
        record_id, old = written
        if old:
            yield Blocking(lambda: m.journal.delete_records(old))
        yield from m._indexed_flow()
        yield from m._sweep_flow()
        return record_id

    def _write(self, record: NewRecord, now: float) -> tuple[int, list[int]]:
        m = self._memory
        with m.journal.write(m._ns_id) as tx:
            old = [r.id for r in tx.current_memories([tx.ns_id], unkeyed=())
                   if r.kind == WORKING_KIND and r.key == record.key]
            (record_id,) = tx.insert_records([record])
            tx.supersede(old, now)
            return record_id, old

    def _records(self) -> list[Record]:
        m = self._memory
        return m.journal.scoped_records([m._ns_id], [WORKING_KIND])

    def _entries_flow(self) -> Flow[list[WorkingItem]]:
        m = self._memory
        m._check_open()
        records = yield Blocking(self._records)
        return current_items(records, m.namespace, m.clock())

    def _get_flow(self, key: str, default: Any) -> Flow[Any]:
        check_key(key)
        items = yield from self._entries_flow()
        return next((i.value for i in items if i.key == key), default)

    def _delete_flow(self, key: str) -> Flow[bool]:
        m = self._memory
        journal_key = record_key(key)
        m._check_open()
        records = yield Blocking(self._records)
        mine = [r for r in records if r.key == journal_key]
        was_set = any(i.key == key for i in current_items(mine, m.namespace, m.clock()))
        if mine:
            yield Blocking(lambda: m.journal.delete_records([r.id for r in mine]))
            yield from m._indexed_flow()
        return was_set


def _dump(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(", ", ": "))
    except (TypeError, ValueError) as e:
        raise InvalidMessageError(
            f"a working value must be JSON (str, number, bool, None, lists and dicts of them); got "
            f"{type(value).__name__}: {e}") from e


def _strings(value: Any) -> Iterator[str]:
    """Every string in a JSON value, dict keys included (PostgreSQL's JSON refuses NUL in any of them)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield str(k)
            yield from _strings(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _strings(v)


def _redacted(value: Any, redactor: Any) -> Any:
    """The value with the redactor applied to every string in it (keys of dicts included)."""
    if isinstance(value, str):
        return redactor(value)
    if isinstance(value, Mapping):
        return {redactor(str(k)): _redacted(v, redactor) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redacted(v, redactor) for v in value]
    return value
