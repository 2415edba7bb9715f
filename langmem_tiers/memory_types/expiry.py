"""Expiry of memories: ``remember(..., ttl=)`` / ``expire()``, judged against an injected clock.

**Clock semantics.** A memory with ``ttl`` seconds gets ``metadata["expires_at"] =
clock() + ttl``: an absolute time in unix seconds (UTC), so every process and replica
reading the journal agrees on it (up to their clocks' skew). ``clock`` is the memory's
``clock`` attribute (default :func:`time.time`; tests inject a fake one, no sleeps). A
memory is expired when ``clock() >= expires_at``: from that instant it is never
delivered by ``context()`` (pinned, profile, skills, working state, recall), never
returned by ``search()``, ``skills_for()``, ``facts()`` or ``working.get()``, and it is
erased (like ``forget(record_id)``: journal row, keyword index, vector) by
``cleanup(dry_run=False)`` and by the periodic sweep.

**The sweep.** Without a thread of its own: the first write (``add``, ``remember``,
``working.set``, ...) after ``MemoryConfig.expiry_sweep_s`` seconds (by the clock) since the
last sweep of that user in this process erases the user's expired memories of the core's
memory kinds (``fact``, ``preference``, ``event``, ``skill``, ``note``, ``relation``), working
entries and LangGraph store items (kind ``"store"``, ``TieredStore`` puts with a ``ttl``): it
reads those rows of the user, never the conversation turns (which do not expire). A store item's
superseded versions go with its expired current version (a store item expires whole, as a
delete erases it whole).
A memory of a kind of your own is filtered out when it expires like any other, and erased by
``cleanup(dry_run=False)``, which reads every kind. Handles made with ``for_session`` share
one :class:`ExpirySweep`, so an app server sweeps each user once per interval, not once per
handle. Between sweeps expired rows stay in the journal but are filtered out of everything
(as above).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from langmem_tiers.flow import Blocking, Flow
from langmem_tiers.journal.base import Journal, Namespace, Record
from langmem_tiers.memory_types.fields import EXPIRES_AT, WORKING_KIND

MAX_TRACKED_USERS = 4096  # users whose last sweep time is remembered (LRU): bounded memory
STORE_ITEM_KIND = "store"
"""The record kind of LangGraph store items (``langchain_langmem_tiers.TieredStore``), swept like memories."""
R = TypeVar("R", bound=Record)


def expires_at(metadata: Mapping[str, Any]) -> float | None:
    """The expiry of a record's metadata, or None (a value that is not a number never expires it)."""
    value = metadata.get(EXPIRES_AT)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def is_expired(metadata: Mapping[str, Any], now: float) -> bool:
    """True once ``now`` reached the record's ``expires_at``.

    Example:
        >>> is_expired({"expires_at": 100.0}, 99.0), is_expired({"expires_at": 100.0}, 100.0), is_expired({}, 1e12)
        (False, True, False)
    """
    when = expires_at(metadata)
    return when is not None and now >= when


def live(records: Iterable[R], now: float) -> list[R]:
    """The records that have not expired at ``now``."""
    return [r for r in records if not is_expired(r.metadata, now)]


def sweepable(records: Iterable[R], now: float) -> list[R]:
    """What a sweep erases: expired records, working rows a newer value superseded (``set``
    deletes them at once; a process that died in between leaves them), and every version of a
    store item whose current version expired (among ``records``: pass them all at once)."""
    records = list(records)
    expired_items = {(r.namespace, r.key) for r in records if r.kind == STORE_ITEM_KIND and r.key and r.valid_to is None
                     and is_expired(r.metadata, now)}
    return [r for r in records if is_expired(r.metadata, now)
            or (r.kind == WORKING_KIND and r.valid_to is not None)
            or (r.kind == STORE_ITEM_KIND and (r.namespace, r.key) in expired_items)]


def erase_expired_flow(journal: Journal, recall: Any, ns_ids: Sequence[int], now: float,
                       kinds: Sequence[str] | None = None) -> Flow[int]:
    """Erase the :func:`sweepable` records of these namespaces (of ``kinds`` only, when given):
    journal rows and keyword entries at once, vectors through the outbox, flushed here. Returns
    how many expired records went."""
    records = yield Blocking(lambda: journal.scoped_records(ns_ids, kinds))
    doomed = sweepable(records, now)
    if not doomed:
        return 0
    yield Blocking(lambda: journal.delete_records(sorted({r.id for r in doomed})))
    if recall is not None:
        yield from recall.flush_flow()
    return sum(1 for r in doomed if is_expired(r.metadata, now))


class ExpirySweep:
    """When each user was last swept in this process (see the module docstring)."""

    def __init__(self) -> None:
        self._last: OrderedDict[tuple[str, str], float] = OrderedDict()
        self._lock = threading.Lock()

    def due(self, namespace: Namespace, now: float, interval_s: float) -> bool:
        """True (and the sweep is marked as done now) when this user's sweep is due.

        The first write of a user in this process sweeps; then one every ``interval_s``.
        ``interval_s`` 0 turns the periodic sweep off. An anonymous session is its own scope.
        """
        if interval_s <= 0:
            return False
        who = (namespace.user_id, "") if not namespace.anonymous else ("", namespace.session_id)
        with self._lock:
            last = self._last.get(who)
            if last is not None and now - last < interval_s:
                return False
            self._last[who] = now
            self._last.move_to_end(who)
            while len(self._last) > MAX_TRACKED_USERS:
                self._last.popitem(last=False)
            return True
