"""Reads of one session and its user: the window snapshot, the user's sessions, the summary history,
search (superseded memories labelled as past), facts and a record of this user by id. Nothing here
writes, except :func:`recount_window` (token counts cached with another tokenizer)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from langmem_tiers.context import WindowMessage
from langmem_tiers.errors import ConfigError
from langmem_tiers.flow import Blocking, Flow
from langmem_tiers.journal.base import Namespace, Record, Scope, SessionState, SummaryVersion
from langmem_tiers.memory_types import expiry, fields
from langmem_tiers.recall.engine import SearchFilters, passes
from langmem_tiers.recall.hits import RecallHit
from langmem_tiers.recall.request import RequestMemo, ids_to_probe, scope_listing
from langmem_tiers.semantic.types import Fact, Triple

if TYPE_CHECKING:
    from langmem_tiers.memory.tiered import TieredMemory

_ALL_VERSIONS = 2**31 - 1  # summary_history() without a limit: every version the journal kept


def snapshot(m: TieredMemory) -> tuple[SessionState, list[WindowMessage], int]:
    """The session state, the window with token counts, and how many evicted messages await the summarizer."""
    with m.journal.read() as rx:
        state = rx.state(m._ns_id)
        rows = rx.window_messages(m._ns_id, state.window_start)
        pending = rx.count_between(m._ns_id, state.summary_cursor, state.window_start)
    window = [WindowMessage(msg, t if key == m.counter.key else m.counter.count_message(msg))
              for msg, t, key in rows]
    return state, window, pending


def user_ns_ids(m: TieredMemory, memo: RequestMemo | None = None,
                kinds: Sequence[str] | None = None, keyed_only: bool = False) -> Sequence[int]:
    """This user's sessions (keys and the profile are scoped to the user; without a user id, to this
    session) where a read of ``kinds`` (of keyed records only, with ``keyed_only``) can find a record:
    only those holding one when the kinds leave turns out
    (:func:`~langmem_tiers.recall.request.ids_to_probe`), every one otherwise. This session is in too
    when the listing lacks it (created a moment ago)."""
    listing = scope_listing(m.journal, Scope("user", m.namespace), memo)
    ids = ids_to_probe(listing, kinds, keyed_only=keyed_only)
    return ids if m._ns_id in listing.key else [*ids, m._ns_id]


def user_records(m: TieredMemory, kinds: Sequence[str] | None, memo: RequestMemo | None = None) -> list[Record]:
    """This user's records of ``kinds`` (every kind: ``None``), read only where they can be
    (:func:`user_ns_ids`): the one read of the user's memories that each caller shares."""
    return m.journal.scoped_records(user_ns_ids(m, memo, kinds), kinds)


def newest_unkeyed(m: TieredMemory, ns_ids: Sequence[int], kinds: Sequence[str], limit: int,
                   memo: RequestMemo | None = None) -> list[Record]:
    """About the newest ``limit`` unkeyed current memories of ``kinds`` in the user's sessions ``ns_ids``:
    read from the most recently written sessions on (the listing's ``last_record_id``), a growing batch
    of sessions at a time, until ``limit`` are found, so the read does not grow with the user's older
    sessions."""
    versions = scope_listing(m.journal, Scope("user", m.namespace), memo).versions
    order = sorted(ns_ids, key=lambda n: -versions[n][0] if n in versions else -(2**62))  # unlisted: just made
    found: list[Record] = []
    start, batch = 0, 16
    while start < len(order) and len(found) < limit:
        found += [r for r in m.journal.scoped_records(order[start:start + batch], kinds)
                  if r.key is None and r.valid_to is None]
        start, batch = start + batch, batch * 4
    return sorted(found, key=lambda r: -r.id)[:limit]


def recount_window(m: TieredMemory) -> None:
    """Recount cached token counts made with another tokenizer (e.g. the model changed)."""
    with m.journal.read() as rx:
        state = rx.state(m._ns_id)
        rows = rx.window_messages(m._ns_id, state.window_start)
    stale = [(msg.id or 0, m.counter.count_message(msg)) for msg, _, key in rows if key != m.counter.key]
    if stale:
        with m.journal.write(m._ns_id) as tx:
            tx.update_tokens(stale, m.counter.key)


def check_page(after: Any, limit: Any) -> None:
    """``messages_page``'s arguments: a message id and a page size."""
    if isinstance(after, bool) or not isinstance(after, int) or after < 0:
        raise ConfigError(f"after ({after!r}) must be a message id (an integer >= 0)")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10_000:
        raise ConfigError(f"limit ({limit!r}) must be an integer between 1 and 10000")


def sessions(m: TieredMemory, scope: str | None) -> list[Namespace]:
    if scope is not None and scope not in ("session", "user", "agent"):
        raise ConfigError(f"scope ({scope!r}) must be 'session', 'user', 'agent' or None")
    return [ns for _, ns in m.journal.namespaces(Scope(scope, m.namespace) if scope else None)]


def summary_history_flow(m: TieredMemory, limit: int | None) -> Flow[list[SummaryVersion]]:
    m._check_open()
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ConfigError(f"limit ({limit!r}) must be an integer >= 0, or None for every kept version")
    wanted = _ALL_VERSIONS if limit is None else limit
    versions: list[SummaryVersion] = yield Blocking(lambda: m.journal.summary_history(m._ns_id, wanted))
    return versions


def search_flow(m: TieredMemory, query: str, k: int, scope: str, kinds: Sequence[str] | None,
                where: Mapping[str, Any] | None, since: float | None,
                until: float | None, expand: bool = False) -> Flow[list[RecallHit]]:
    m._check_open()
    if not isinstance(query, str):
        raise ConfigError(f"query must be a string; got {type(query).__name__}")
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ConfigError(f"k ({k!r}) must be an integer >= 0")
    recall = m._require_recall()
    filters = SearchFilters(kinds=tuple(kinds) if kinds else None, where=where, since=since, until=until,
                            now=m.clock())
    hits: list[RecallHit] = yield from recall.search_flow(query, k, Scope(scope, m.namespace), filters,
                                                          expand=expand)
    return label_past(hits)


def facts_flow(m: TieredMemory, include_superseded: bool, kinds: Sequence[str] | None,
               where: Mapping[str, Any] | None, since: float | None, until: float | None) -> Flow[list[Fact]]:
    m._check_open()
    if kinds is not None and (isinstance(kinds, str) or not all(isinstance(k, str) for k in kinds)):
        raise ConfigError(f"kinds must be a list of kind names, e.g. ['fact', 'preference']; got {kinds!r:.80}")
    if where is not None and not isinstance(where, Mapping):
        raise ConfigError(f"where must be a mapping of metadata field to value; got {where!r:.80}")
    wanted = list(kinds) if kinds else None
    records: list[Record] = yield Blocking(lambda: user_records(m, wanted))
    filters = SearchFilters(where=where, since=since, until=until, now=m.clock())
    return [fact(r) for r in records if r.kind != "turn" and (include_superseded or r.valid_to is None)
            and passes(r, filters)]


def fact(record: Record) -> Fact:
    """A record as the :class:`Fact` that ``facts()`` returns."""
    triple = record.metadata.get("triple")
    confidence = record.metadata.get("confidence")
    return Fact(
        id=record.id, text=record.text, kind=record.kind, key=record.key, valid_from=record.created_at,
        valid_to=record.valid_to, source=record.message_ids or "explicit", importance=record.importance,
        confidence=float(confidence) if isinstance(confidence, int | float) else None,
        triple=Triple(*map(str, triple)) if isinstance(triple, list) and len(triple) == 3 else None,
        tags=tuple(record.tags), metadata=dict(record.metadata),
    )


def own_record_flow(m: TieredMemory, record_id: int) -> Flow[Record | None]:
    """A live record of this user by id, or None."""
    if isinstance(record_id, bool) or not isinstance(record_id, int):
        raise ConfigError(f"record_id ({record_id!r}) must be an integer record id")
    mine = Scope("user", m.namespace)
    found = yield Blocking(lambda: m.journal.records([record_id]))
    now = m.clock()
    return next((r for r in found if mine.matches(r.namespace) and not expiry.is_expired(r.metadata, now)
                 and r.kind != fields.WORKING_KIND), None)


def label_past(hits: Sequence[RecallHit]) -> list[RecallHit]:
    """Superseded memories ranked below the current ones (order otherwise kept), their
    ``metadata["valid_to"]`` set so they are labelled as past wherever they are shown. From the hits'
    ``valid_to`` as the search read the records (reading them again cost the servers a round trip a search)."""
    past = {h.record_id: h.valid_to for h in hits if h.valid_to is not None}
    if not past:
        return list(hits)
    labelled = [replace(h, metadata={**h.metadata, "valid_to": past[h.record_id]})
                if h.record_id in past else h for h in hits]
    return sorted(labelled, key=lambda h: h.record_id in past)
