"""The public journal methods both SQL backends share (:class:`SqlJournal`), over :mod:`.sql_core`.

A backend subclasses :class:`SqlJournal` and supplies its connection handling (``_txn``: a
write transaction, ``_autocommit``: single statements, ``_snapshot``: a consistent read),
migrations, keyword search, the outbox claim (its locking) and physical erasure. What a
method does to the data is written here once, so the backends cannot drift apart.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections import OrderedDict
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from langmem_tiers.errors import JournalError, SchemaVersionError, SessionErasedError
from langmem_tiers.journal import sql_core as core
from langmem_tiers.journal.base import (
    DEFAULT_SUMMARY_HISTORY,
    HOLDS_KEYED,
    HOLDS_MEMORY,
    HOLDS_PINNED,
    HOLDS_SKILL,
    SCHEMA_VERSION,
    SKILL_KIND,
    Namespace,
    NewRecord,
    OutboxItem,
    Record,
    Scope,
    ScopeListing,
    SummaryVersion,
    Versions,
    erased_message,
    provenance_after_erasure,
)
from langmem_tiers.journal.encryption import RECORD_METADATA, RECORD_TEXT, FieldCipher, RowCodec, shred_orphans
from langmem_tiers.journal.keyword_budget import KEYWORD_BUDGET
from langmem_tiers.journal.rows import MSG_COLS, RECORD_COLS, RECORD_SELECT, id_tuple, row_message, row_records, to_json
from langmem_tiers.messages import Message

log = logging.getLogger(__name__)

# Names of resolved sessions a handle keeps in memory: to name the one a stale handle lost, and the sessions
# of the records it reads (RECORD_SELECT joins no namespaces). Enough for a user of 10,000 sessions, whose
# searches read records of any of them (~3 MB at 16,384).
NAMES_KEPT = 16384


# Scopes whose newest listing a journal keeps (least recently used out): 10,000 sessions take ~3 MB.
LISTINGS_KEPT = 64
# A scope's stamp (ScopeListing.stamp): read before every listing, over the scope's namespaces rows.
_STAMP = ("SELECT count(*), coalesce(sum(ns), 0), coalesce(max(ns), 0), coalesce(sum(last_record_id), 0), "
          "coalesce(sum(records_deleted), 0), coalesce(sum(records_edited), 0), "
          "coalesce(sum(records_repinned), 0) FROM namespaces")
_STAMP_FIELDS = 7
# The same seven fields where triggers keep them per (user, agent) group (``Sql.SCOPE_STAMPS``): one
# primary-key read per agent of the user instead of a pass over the user's sessions. The third is the
# largest id the group held while it had a namespace, which a change moves as the aggregate's does.
_KEPT_STAMP = ("SELECT coalesce(sum(namespaces), 0), coalesce(sum(ns_sum), 0), coalesce(max(ns_max), 0), "
               "coalesce(sum(last_record_sum), 0), coalesce(sum(deleted_sum), 0), coalesce(sum(edited_sum), 0), "
               "coalesce(sum(repinned_sum), 0) FROM scope_stamps")


def _holds(true: str) -> str:
    """What the namespaces row read holds (``ScopeListing.holds``): the sum of the ``HOLDS_*`` bits.

    One probe a bit, each repeating the condition of a partial index: records_memories (ns, kind) WHERE
    kind <> 'turn' (schema v9) for a memory and for a skill, records_pinned (ns) WHERE pinned, records_key
    (ns, key) WHERE key IS NOT NULL: each lands among the session's few memories, pinned or keyed
    records, never among its turns.
    """
    probes = ((HOLDS_MEMORY, "r.kind <> 'turn'"), (HOLDS_PINNED, f"r.pinned = {true}"),
              (HOLDS_KEYED, "r.key IS NOT NULL"), (HOLDS_SKILL, f"r.kind = '{SKILL_KIND}' AND r.kind <> 'turn'"))
    return "(" + " + ".join(f"CASE WHEN EXISTS (SELECT 1 FROM records r WHERE r.ns = namespaces.ns AND {where}) "
                            f"THEN {bit} ELSE 0 END" for bit, where in probes) + ")"


# Listing generations, unique in the process: an index that was handed listings of two journals
# (two handles on one file) never takes one journal's listing for the other's.
_GENERATIONS = itertools.count(1)


class ListingCache:
    """The newest :class:`ScopeListing` a journal gave per scope, shared by its threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_scope: OrderedDict[tuple[str, ...], ScopeListing] = OrderedDict()

    def get(self, key: tuple[str, ...]) -> ScopeListing | None:
        with self._lock:
            return self._by_scope.get(key)

    def put(self, key: tuple[str, ...], listing: ScopeListing) -> None:
        with self._lock:
            self._by_scope[key] = listing
            self._by_scope.move_to_end(key)
            while len(self._by_scope) > LISTINGS_KEPT:
                self._by_scope.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._by_scope.clear()

    @staticmethod
    def generation() -> int:
        return next(_GENERATIONS)  # itertools.count's next() is atomic under the GIL


def _scope_where(scope: Scope) -> tuple[str, tuple[str, ...]]:
    """The WHERE clause (and its arguments) of a scope's rows in ``namespaces``."""
    own = scope.namespace
    kind = scope.effective_kind
    if kind == "session":
        return " WHERE session_id=? AND user_id=? AND agent_id=?", (own.session_id, own.user_id, own.agent_id)
    if kind == "user":
        return " WHERE user_id=?", (own.user_id,)
    return " WHERE user_id=? AND agent_id=?", (own.user_id, own.agent_id)


def _only_added(before: tuple[int, ...], now: tuple[int, ...]) -> bool:
    """Whether two stamps differ only by records added (the same namespaces, none deleted or edited)."""
    return before[:3] == now[:3] and before[4:] == now[4:] and now[3] > before[3]


def _grown(cached: ScopeListing, stamp: tuple[int, ...], rows: Sequence[Any], generation: int) -> ScopeListing | None:
    """``cached`` with the counters (and what they hold) of the namespaces that gained records (``rows``), or
    ``None`` when those do not account for the stamp's whole growth (a row was missed: read them all)."""
    versions: dict[int, Versions] = dict(cached.versions)
    total = cached.stamp[3]
    for r in rows:
        ns_id = int(r[0])
        old = versions.get(ns_id)
        if old is None:
            return None
        total += int(r[1]) - old[0]
        versions[ns_id] = (int(r[1]), int(r[2]), int(r[3]))
    if total != stamp[3]:
        return None
    return cached.grown(versions, stamp, generation, {int(r[0]): int(r[4]) for r in rows})


def check_version(version: int, where: str) -> None:
    """Refuse a journal written by a newer langmem-tiers."""
    if version > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"journal {where} has schema version {version}, newer than this "
            f"langmem-tiers understands ({SCHEMA_VERSION}): upgrade langmem-tiers"
        )


def finish_migration(db: core.Sql, version: int, new_uid: str) -> None:
    """Record what a migration run leaves behind: a new journal's uid, the current schema version."""
    if version == 0:
        db.execute("INSERT INTO meta VALUES ('uid', ?)", (new_uid,))
    db.execute("INSERT INTO meta VALUES ('schema_version', ?) ON CONFLICT (key) DO UPDATE SET value=excluded.value",
               (str(SCHEMA_VERSION),))


class SqlJournal:
    """The shared half of :class:`SqliteJournal` and :class:`PostgresJournal` (see the module docstring)."""

    url: str
    _cipher: FieldCipher | None
    _names: dict[int, Namespace]
    _names_lock: threading.Lock  # evictions from _names (a PostgreSQL handle serves many threads)
    _listings: ListingCache
    # Matches one keyword query may rank (:mod:`.keyword_budget`); ``None`` ranks every match.
    keyword_budget: int | None = KEYWORD_BUDGET

    # --- what a backend supplies -------------------------------------------------------

    def _txn(self) -> AbstractContextManager[core.Sql]:
        """A write transaction: commits on exit, rolls back on any error."""
        raise NotImplementedError

    def _autocommit(self) -> AbstractContextManager[core.Sql]:
        """A connection for single statements, each its own transaction."""
        raise NotImplementedError

    def _snapshot(self) -> AbstractContextManager[core.Sql]:
        """A read-only transaction over one consistent snapshot."""
        raise NotImplementedError

    # --- encryption ---------------------------------------------------------------------

    @property
    def encrypted(self) -> bool:
        """True when this journal seals user content (it was opened with a keyring)."""
        return self._cipher is not None

    def key_destroyed(self, ns: Namespace) -> bool | None:
        """Whether the key that sealed this namespace's text is gone (``None``: the journal is not encrypted)."""
        return None if self._cipher is None else not self._cipher.has_key(ns)

    def _codec(self, db: core.Sql) -> RowCodec:
        """Seals and opens rows read or written on ``db`` (namespace lookups reuse the connection)."""
        return RowCodec(self._cipher, lambda ns_ids: self._namespaces_of(db, ns_ids))

    def _namespaces_of(self, db: core.Sql, ns_ids: Collection[int]) -> dict[int, Namespace]:
        """The ids of these namespaces, from the cache, those it lacks read in one statement; an erased one
        is absent. (Ids are never reused, and a namespace's ids never change after the migrations, so a
        cached entry is never wrong for a record read: the row proves its namespace was there.)"""
        out: dict[int, Namespace] = {}
        missing: list[int] = []
        for ns_id in ns_ids:
            known = self._names.get(ns_id)
            if known is None:
                missing.append(ns_id)
            else:
                out[ns_id] = known
        if missing:
            members, args = db.in_(missing)
            for ns_id, session_id, user_id, agent_id in db.all(
                    f"SELECT ns, session_id, user_id, agent_id FROM namespaces WHERE ns {members}", args):
                out[int(ns_id)] = ns = Namespace(session_id, user_id, agent_id)
                self._remember(int(ns_id), ns)
        return out

    def _search_namespaces(self, ns_ids: Sequence[int]) -> list[Namespace]:
        """The namespaces a keyword query's blind tokens are derived for; an erased one is skipped. (Those not
        cached are read in one statement: one per namespace cost a cold handle a round trip per session.)"""
        with self._autocommit() as db:
            names = self._namespaces_of(db, ns_ids)
        return [names[n] for n in ns_ids if n in names]

    # --- transactions -------------------------------------------------------------------

    @contextmanager
    def write(self, ns_id: int) -> Iterator[core.SqlWrite]:
        """A write transaction of one session, serialized across threads, processes and hosts;
        commits on exit, rolls back on error.

        Raises:
            SessionErasedError: the namespace was erased meanwhile (its id is never reused).
        """
        with self._txn() as db:
            if not core.lock_session(db, ns_id):
                raise SessionErasedError(erased_message(ns_id, self._names.get(ns_id)))
            tx = core.SqlWrite(db, ns_id, self._codec(db))
            yield tx
            if tx.touched:
                core.bump(db, [ns_id])

    @contextmanager
    def read(self) -> Iterator[core.SqlRead]:
        """Reads from one consistent snapshot."""
        with self._snapshot() as db:
            yield core.SqlRead(db, self._codec(db))

    # --- namespaces ---------------------------------------------------------------------

    def namespace_id(self, ns: Namespace, create: bool = True) -> int | None:
        """The namespace's id; created (with its session state) when missing unless ``create`` is False."""
        key = (ns.user_id, ns.agent_id, ns.session_id)
        select = "SELECT ns FROM namespaces WHERE user_id=? AND agent_id=? AND session_id=?"
        with self._autocommit() as db:
            row = db.one(select, key)
        if row or not create:
            return self._remember(int(row[0]), ns) if row else None
        import time

        with self._txn() as db:
            db.execute("INSERT INTO namespaces (user_id, agent_id, session_id, created_at) VALUES (?,?,?,?) "
                       "ON CONFLICT DO NOTHING", (*key, time.time()))
            row = db.one(select, key)
            if row is None:
                raise JournalError(f"namespace {ns} vanished while it was created (deleted concurrently)")
            db.execute("INSERT INTO state (ns) VALUES (?) ON CONFLICT DO NOTHING", (row[0],))
        return self._remember(int(row[0]), ns)

    def _remember(self, ns_id: int, ns: Namespace) -> int:
        with self._names_lock:
            if len(self._names) >= NAMES_KEPT:
                self._names.pop(next(iter(self._names)))
            self._names[ns_id] = ns
        return ns_id

    def namespaces(self, scope: Scope | None = None) -> list[tuple[int, Namespace]]:
        """Namespaces a scope may see (every one without a scope); anonymous scopes narrow to the session."""
        where, args = _scope_where(scope) if scope is not None else ("", ())
        with self._autocommit() as db:
            rows = db.all(f"SELECT ns, session_id, user_id, agent_id FROM namespaces{where} ORDER BY ns", args)
        return [(int(r[0]), Namespace(r[1], r[2], r[3])) for r in rows]

    def scope_listing(self, scope: Scope) -> ScopeListing:
        """The scope's namespaces and counters: the listing this journal gave last for the scope when its
        stamp shows nothing changed, else a new one, read in one snapshot. The stamp is an aggregate read
        over the scope's namespaces rows (``_STAMP``), or, for a user's or an agent's scope where triggers
        keep it (SQLite, ``_KEPT_STAMP``), one read of a row per agent of the user.

        The stamp holds the namespaces' count, id sum and largest id and the sums of their four
        counters. The counters never go back while a namespace exists, so a record added, deleted,
        edited or pinned or unpinned grows a sum, and a namespace added or deleted changes the count
        or the id sum (ids are never reused), short of deletes and additions that cancel in every one
        of the seven at once. Freshness only rests on it: records are always read from the journal by
        id, so an erased one is never returned because a listing was stale. When only records were
        added, just the namespaces that gained them are read (``last_record_id`` above the listing's
        largest), and the listing is kept only if their counters account for the whole growth of the
        sum (a PostgreSQL transaction may commit a smaller id after a larger one); else every row is read.

        ``holds`` (what each namespace holds: a record that is not a turn, a pinned one, a keyed one, a
        skill) is read with the rows, from the same snapshot as the stamp, and stays right while the
        stamp does: a namespace can only gain a bit by gaining a record (``last_record_id`` grows: the
        grown path probes exactly the namespaces that gained records and keeps the others' bits) or by
        a record's pinned flag set (``records_repinned``, schema v10: every row is read again); it can
        only lose one by a record deleted (``records_deleted``, counted by a trigger on every delete:
        ``delete_records``, ``clear_session``, ``erase_messages``, the expiry sweep) or unpinned
        (``records_repinned``), both read every row again. No statement changes a record's kind or key
        (sealing or re-sealing a key never makes it NULL) or moves it to another session (outside the
        version 4 migration, which runs before any listing). Text edits and supersession leave it as
        it was. Erasing a namespace (``delete_namespaces``) empties this journal's listings, and changes
        the count for others.
        """
        where, args = _scope_where(scope)
        key = (scope.effective_kind, *args)
        with self._snapshot() as db:
            stamp_sql = _KEPT_STAMP if db.SCOPE_STAMPS and scope.effective_kind != "session" else _STAMP
            row = db.one(f"{stamp_sql}{where}", args)
            stamp = tuple(int(v) for v in row) if row else (0,) * _STAMP_FIELDS
            cached = self._listings.get(key)
            if cached is not None and cached.stamp == stamp:
                return cached
            listing = None
            if cached is not None and _only_added(cached.stamp, stamp):
                grown = db.all(f"SELECT ns, last_record_id, records_deleted, records_edited, {_holds(db.TRUE)} "
                               f"FROM namespaces{where} AND last_record_id > ?", (*args, cached.newest))
                listing = _grown(cached, stamp, grown, self._listings.generation())
            if listing is None:
                rows = db.all(f"SELECT ns, session_id, user_id, agent_id, last_record_id, records_deleted, "
                              f"records_edited, {_holds(db.TRUE)} FROM namespaces{where} ORDER BY ns", args)
                listing = ScopeListing.read([(int(r[0]), Namespace(r[1], r[2], r[3]), (int(r[4]), int(r[5]), int(r[6])),
                                              int(r[7])) for r in rows], stamp, self._listings.generation())
        self._listings.put(key, listing)
        return listing

    # --- messages -----------------------------------------------------------------------

    def iter_messages(self, ns_id: int, after: int = 0, batch: int = 500) -> Iterator[Message]:
        """The session's messages after ``after``, in id order, read ``batch`` at a time."""
        cursor = after
        while True:
            with self._autocommit() as db:
                rows = db.all(f"SELECT {MSG_COLS} FROM messages WHERE ns=? AND id>? ORDER BY id LIMIT ?",
                              (ns_id, cursor, batch))
                codec = self._codec(db)
                messages = [row_message(row, codec) for row in rows]
            if not rows:
                return
            yield from messages
            cursor = rows[-1][0]

    def messages_by_id(self, ids: Sequence[int]) -> list[Message]:
        """Messages by id, in id order (any session; for tools and tests, the core does not need it)."""
        if not ids:
            return []
        with self._autocommit() as db:
            members, args = db.in_(list(ids))
            rows = db.all(f"SELECT {MSG_COLS} FROM messages WHERE id {members} ORDER BY id", args)
            codec = self._codec(db)
            return [row_message(r, codec) for r in rows]

    def count_messages(self, ns_id: int | None = None) -> int:
        with self._autocommit() as db:
            row = (db.one("SELECT count(*) FROM messages") if ns_id is None else
                   db.one("SELECT count(*) FROM messages WHERE ns=?", (ns_id,)))
        return int(row[0]) if row else 0

    def clear_session(self, ns_id: int, keep_memories: bool = False) -> list[int]:
        """Delete a session's messages, summary and records; returns the record ids removed.

        The session row stays; ``summary_version`` and ``version`` grow (never reset), so a
        summary computed before the clear is recognized as stale by its version.
        ``keep_memories`` keeps explicit memories that no message produced (``remember()``).
        """
        with self._txn() as db:
            core.lock_session(db, ns_id)
            record_ids = core.delete_ns_content(db, ns_id, keep_memories)
            db.execute("UPDATE state SET window_start=0, summary='', summary_tokens=0, summary_cursor=0, "
                       "summary_version=summary_version+1, failures=0, last_error=NULL, retry_at=0, "
                       "version=version+1 WHERE ns=?", (ns_id,))
            return record_ids

    def erase_messages(self, ns_id: int, message_ids: Sequence[int]) -> list[int]:
        """Erase messages of one session with every record made from them; returns the records removed.

        Every summary version that folded one of them goes in the same transaction; a current
        summary that covered them falls back to the newest remaining version (its cursor before
        the first erased id), or to none, and ``summary_version`` grows: no summary keeps their
        text, and the summarizer re-folds only the evicted turns after that version's cursor.
        """
        ids = sorted(set(message_ids))
        with self._txn() as db:
            if not ids or db.one("SELECT 1 FROM state WHERE ns=?", (ns_id,)) is None:
                return []
            core.lock_session(db, ns_id)
            record_ids, narrowed = provenance_after_erasure(core.records_citing(db, ns_id, ids), ids)
            record_ids.sort()
            core.delete_records(db, record_ids)
            # A memory also said in messages that remain keeps those as its provenance.
            db.many("UPDATE records SET message_ids=? WHERE id=?",
                    [(to_json(list(remaining)), rid) for rid, remaining in narrowed])
            members, args = db.in_(ids)
            db.execute(f"DELETE FROM messages WHERE ns=? AND id {members}", [ns_id, *args])
            db.execute("DELETE FROM summary_versions WHERE ns=? AND summary_cursor >= ?", (ns_id, ids[0]))
            if ids[0] <= core.read_state(db, ns_id, None).summary_cursor:
                clean = db.one("SELECT text, tokens, summary_cursor FROM summary_versions WHERE ns=? "
                               "ORDER BY version DESC LIMIT 1", (ns_id,)) or ("", 0, 0)
                # The clean version's text is copied as stored (sealed the same way, same subject).
                db.execute("UPDATE state SET summary=?, summary_tokens=?, summary_cursor=?, "
                           "summary_version=summary_version+1, failures=0, last_error=NULL, retry_at=0 WHERE ns=?",
                           (*clean, ns_id))
            core.bump(db, [ns_id])
            return record_ids

    def delete_namespaces(self, ns_ids: Sequence[int]) -> list[int]:
        """Delete namespaces with everything they hold; returns the record ids removed.

        In an encrypted journal, the key of every user (or anonymous session) left without a
        session is then destroyed, after the commit: copies of the rows that outlive the
        delete (a WAL, dead tuples, replicas, a backup, a copied file) can no longer be opened.
        """
        removed: list[int] = []
        ordered = sorted(set(ns_ids))  # lock in one order: two deleters never deadlock
        with self._txn() as db:
            members, args = db.in_(ordered)
            db.all(f"SELECT ns FROM state WHERE ns {members} ORDER BY ns{db.FOR_UPDATE}", args)
            erased = [Namespace(r[0], r[1], r[2]) for r in db.all(
                f"SELECT session_id, user_id, agent_id FROM namespaces WHERE ns {members} ORDER BY ns", args)]
            for ns_id in ordered:
                removed += core.delete_ns_content(db, ns_id)
                db.execute("DELETE FROM state WHERE ns=?", (ns_id,))
                db.execute("DELETE FROM namespaces WHERE ns=?", (ns_id,))
        self._forget_held()
        shred_orphans(self._cipher, erased, self._subject_in_use)
        return removed

    def _forget_held(self) -> None:
        """Drop what this process holds in memory about the journal's sessions, once some were erased:
        no listing keeps an erased session's ids. A backend that holds more extends it."""
        self._listings.clear()

    def _subject_in_use(self, ns: Namespace) -> bool:
        """Whether a namespace sealed with ``ns``'s key still exists (its user, or the anonymous session)."""
        sql, args = (("SELECT 1 FROM namespaces WHERE user_id=? LIMIT 1", (ns.user_id,)) if not ns.anonymous else
                     ("SELECT 1 FROM namespaces WHERE user_id='' AND agent_id=? AND session_id=?",
                      (ns.agent_id, ns.session_id)))
        with self._autocommit() as db:
            return db.one(sql, args) is not None

    def summary_history(self, ns_id: int, limit: int = DEFAULT_SUMMARY_HISTORY) -> list[SummaryVersion]:
        """The session's saved summary versions, newest first (at most ``limit``)."""
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise JournalError(f"limit ({limit!r}) must be an integer >= 0")
        with self._autocommit() as db:
            rows = db.all("SELECT version, text, tokens, summary_cursor, created_at FROM summary_versions "
                          "WHERE ns=? ORDER BY version DESC LIMIT ?", (ns_id, limit))
            codec = self._codec(db)
            return [SummaryVersion(int(r[0]), codec.summary(ns_id, str(r[1])), int(r[2]), int(r[3]), float(r[4]))
                    for r in rows]

    # --- records --------------------------------------------------------------------------

    def records(self, ids: Sequence[int]) -> list[Record]:
        """Records by id, in id order (ids that do not exist are left out)."""
        if not ids:
            return []
        with self._autocommit() as db:
            members, args = db.in_(list(ids))
            rows = db.all(f"{RECORD_SELECT} WHERE r.id {members} ORDER BY r.id", args)
            codec = self._codec(db)
            return row_records(rows, codec)

    def beside(self, record_ids: Sequence[int], kind: str, per_side: int
               ) -> dict[int, tuple[list[Record], list[Record]]]:
        out: dict[int, tuple[list[Record], list[Record]]] = {int(i): ([], []) for i in record_ids}
        if not out:
            return out
        # The records themselves in the same statement: a second read by id cost the servers a round trip
        # of every search and context() (the neighbor turns, issue 15 session 63).
        with self._autocommit() as db:
            rows = db.all(*self._beside_sql(list(out), kind, per_side))
            # By id: a record whose session was erased since the statement read it is left out (row_records).
            by_id = {r.id: r for r in row_records([row[2:] for row in rows], self._codec(db))}
        walked = sorted(((int(row[0]), int(row[1]), r) for row in rows if (r := by_id.get(int(row[2]))) is not None),
                        key=lambda w: (w[1], -w[2].id if w[1] == 0 else w[2].id))
        for anchor, side, r in walked:
            out[anchor][side].append(r)  # each walk nearest first: down the ids before, up after
        return out

    def _beside_sql(self, record_ids: Sequence[int], kind: str, per_side: int) -> tuple[str, list[Any]]:
        """:meth:`beside`'s statement: rows of ``(anchor, side, RECORD_COLS...)``, side 0 before, 1 after."""
        # One walk from each record outwards within its session (records_ns_id (ns, id)) per side, all
        # in one statement: a round trip each would cost a PostgreSQL server 2 x len(record_ids) trips.
        walks: list[str] = []
        args: list[Any] = []
        for rid in record_ids:
            for side, op, order in ((0, "<", "DESC"), (1, ">", "ASC")):
                walks.append(f"SELECT * FROM (SELECT ? AS anchor, ? AS side, r.id AS rid FROM records r "
                             f"WHERE r.ns = (SELECT ns FROM records WHERE id = ?) AND r.kind = ? AND r.id {op} ? "
                             f"ORDER BY r.id {order} LIMIT ?) AS w{len(walks)}")
                args += [rid, side, rid, kind, rid, per_side]
        sql = (f"SELECT w.anchor, w.side, {RECORD_COLS} FROM ({' UNION ALL '.join(walks)}) AS w "
               "JOIN records r ON r.id = w.rid")
        return sql, args

    def newest_citations(self, ns_id: int, limit: int) -> list[tuple[int, tuple[int, ...]]]:
        if limit <= 0:
            return []
        with self._autocommit() as db:
            rows = db.all("SELECT id, message_ids FROM records WHERE ns=? ORDER BY id DESC LIMIT ?", (ns_id, limit))
        return [(int(r[0]), id_tuple(str(r[1]))) for r in rows]

    def count_records(self, ns_id: int) -> int:
        return self.record_stats(ns_id)[0]

    def record_stats(self, ns_id: int) -> tuple[int, int]:
        """How many records a session has, and its largest record id (0 when none)."""
        with self._autocommit() as db:
            row = db.one("SELECT count(*), coalesce(max(id), 0) FROM records WHERE ns=?", (ns_id,))
        return (int(row[0]), int(row[1])) if row else (0, 0)

    def record_ids(self, ns_id: int, after: int = 0) -> list[int]:
        with self._autocommit() as db:
            rows = db.all("SELECT id FROM records WHERE ns=? AND id>? ORDER BY id", (ns_id, after))
        return [int(r[0]) for r in rows]

    def record_ids_many(self, ns_ids: Sequence[int], after: Mapping[int, int] | None = None) -> dict[int, list[int]]:
        """Per namespace id: ids of its records above its floor ``after[ns_id]`` (0 when absent), in id order.

        One query: the (namespace, floor) pairs join the records through the ``(ns, id)``
        index, so each namespace costs its new records, not its history.
        """
        wanted = list(dict.fromkeys(int(n) for n in ns_ids))
        found: dict[int, list[int]] = {n: [] for n in wanted}
        if not wanted:
            return found
        floors = after or {}
        with self._autocommit() as db:
            pairs, args = db.floors([(n, int(floors.get(n, 0))) for n in wanted])
            rows = db.all(f"SELECT r.ns, r.id FROM {pairs} JOIN records r ON r.ns = f.ns_id AND r.id > f.above "
                          "ORDER BY r.ns, r.id", args)
        for ns_id, record_id in rows:
            found[int(ns_id)].append(int(record_id))
        return found

    def scope_versions(self, ns_ids: Sequence[int]) -> dict[int, tuple[int, int, int]]:
        """Per namespace id: (largest record id ever inserted there, records deleted so far, record texts
        edited so far); namespaces that do not exist are absent.

        Triggers keep the three counters in the namespaces row (schema v8), so an in-process
        index checks its freshness with one primary-key lookup per namespace, whatever the
        history (``record_stats`` counts the session's records). They hold numbers only: no text.
        """
        if not ns_ids:
            return {}
        with self._autocommit() as db:
            return core.scope_versions(db, ns_ids)

    def scoped_records(self, ns_ids: Sequence[int], kinds: Sequence[str] | None = None,
                       pinned_only: bool = False, unkeyed: Sequence[int] | None = None) -> list[Record]:
        """Records of these namespaces (of these kinds, pinned ones only when asked), in id order; with
        ``unkeyed``, the keyed ones (of those kinds) and, of the unkeyed ones, those with these ids
        (:func:`~langmem_tiers.journal.sql_core.keyed_and_listed`)."""
        if not ns_ids and not unkeyed:
            return []
        with self._autocommit() as db:
            if unkeyed is not None:
                kind_members, kind_args = db.in_(list(kinds)) if kinds else ("", [])
                of_kinds = f"kind {kind_members}" if kinds else ""
                chosen, chosen_args = core.keyed_and_listed(db, ns_ids, unkeyed, of_kinds, kind_args)
                return row_records(db.all(f"{RECORD_SELECT} WHERE r.id IN ({chosen}) ORDER BY r.id", chosen_args),
                                   self._codec(db))
            members, args = db.in_(list(ns_ids))
            kind_members, kind_args = db.in_(list(kinds)) if kinds else ("", [])
            if kinds and "turn" in kinds:
                # "+r.id" keeps the planner off records_ns_id (ns, id), which would walk every record of the
                # scope in id order to skip the filtered ones (1M records: 521 ms against 0.3 ms through
                # records_ns (ns, kind) and a sort of what it finds).
                pinned = f" AND r.pinned = {db.TRUE}" if pinned_only else ""
                sql, order = f"{RECORD_SELECT} WHERE r.ns {members} AND r.kind {kind_members}{pinned}", "+r.id"
                args += kind_args
            elif kinds or pinned_only:
                # The few memories or pinned records, chosen in a subquery over records alone (through
                # records_memories (ns, kind), schema v9, whose condition it repeats, or records_pinned (ns)):
                # joined with namespaces first, SQLite looked up every namespace of the list before probing
                # its records (10,000 lookups for a user of 10,000 sessions: 2.5 ms of a 7.7 ms read).
                chosen = f"SELECT id FROM records WHERE ns {members}"
                if pinned_only:
                    chosen += f" AND pinned = {db.TRUE}"
                if kinds:
                    chosen += f" AND kind {kind_members} AND kind <> 'turn'"
                    args += kind_args
                sql, order = f"{RECORD_SELECT} WHERE r.id IN ({chosen})", "r.id"
            else:
                sql, order = f"{RECORD_SELECT} WHERE r.ns {members}", "r.id"
            rows = db.all(f"{sql} ORDER BY {order}", args)
            codec = self._codec(db)
            return row_records(rows, codec)

    def add_records(self, ns_id: int, records: Sequence[NewRecord]) -> list[int]:
        """Insert records of one session; raises SessionErasedError when it was erased."""
        with self.write(ns_id) as tx:
            return tx.insert_records(records)

    def delete_records(self, ids: Sequence[int]) -> int:
        """Delete records (their links too) and queue their deletes from the vector store; how many existed."""
        with self._txn() as db:
            return core.delete_records(db, ids)

    def update_record(self, record_id: int, *, text: str | None = None, importance: float | None = None,
                      message_ids: tuple[int, ...] | None = None,
                      metadata: Mapping[str, Any] | None = None, pinned: bool | None = None) -> None:
        """Change the given fields of a record (``None`` leaves one as is), bump its session's
        version and queue its upsert (the vector store's metadata follows)."""
        if text is None and importance is None and message_ids is None and metadata is None and pinned is None:
            return
        with self._txn() as db:
            row = db.one(f"SELECT ns FROM records WHERE id=?{db.FOR_UPDATE}", (record_id,))
            if row is None:
                return
            ns_id = int(row[0])
            codec = self._codec(db)
            sets: list[str] = []
            args: list[Any] = []
            for column, value in (
                    ("text", None if text is None else codec.sealed_column(ns_id, RECORD_TEXT, text)),
                    ("terms", None if text is None else codec.index_terms(ns_id, text)),
                    ("importance", importance),
                    ("message_ids", None if message_ids is None else to_json(list(message_ids))),
                    ("metadata", None if metadata is None else
                     codec.sealed_column(ns_id, RECORD_METADATA, to_json(dict(metadata)))),
                    ("pinned", None if pinned is None else bool(pinned))):
                if value is not None:
                    sets.append(f"{column}=?")
                    args.append(value)
            db.execute(f"UPDATE records SET {', '.join(sets)} WHERE id=?", (*args, record_id))
            core.queue(db, [record_id], "upsert", ns_id)
            core.bump(db, [ns_id])

    # --- the index outbox ---------------------------------------------------------------

    def outbox(self, limit: int, due_only: bool = True) -> list[OutboxItem]:
        """Pending items, unclaimed (the single-process path; many indexers use ``claim_outbox``)."""
        with self._autocommit() as db:
            now, now_args = db.now()
            due = f"WHERE retry_at <= {now} " if due_only else ""
            rows = db.all(f"SELECT record_id, op, attempts, seq FROM outbox {due}ORDER BY record_id LIMIT ?",
                          (*(now_args if due_only else ()), limit))
        return [OutboxItem(int(r[0]), str(r[1]), int(r[2]), int(r[3])) for r in rows]

    def outbox_done(self, items: Sequence[OutboxItem]) -> None:
        """Drop items whose ``seq`` still matches; release the lease of the others (queued again meanwhile)."""
        if not items:
            return
        with self._txn() as db:
            core.outbox_done(db, items)

    def outbox_failed(self, items: Sequence[OutboxItem], error: str) -> None:
        """Per item: attempts + 1, retry after a growing delay, lease released (stale items: lease released only)."""
        if not items:
            return
        with self._txn() as db:
            core.outbox_failed(db, items, error)

    def outbox_count(self, ns_ids: Sequence[int] | None = None) -> int:
        """Pending items, of these namespaces only when given."""
        with self._autocommit() as db:
            if ns_ids is None:
                row = db.one("SELECT count(*) FROM outbox")
            else:
                members, args = db.in_(list(ns_ids))
                row = db.one(f"SELECT count(*) FROM outbox WHERE ns {members}", args)
        return int(row[0]) if row else 0

    @property
    def read_only(self) -> bool:
        """True when this journal was opened for reading only (a SQLite journal can be)."""
        return False

    def mark_vectors(self) -> bool:
        """Record, once, that this journal's records are indexed in a vector store (see :meth:`has_vectors`);
        True when this call recorded it. A read-only journal is not marked: it cannot be written."""
        if self.read_only or self.has_vectors():  # a write only the first time: every open with vectors calls this
            return False
        with self._txn() as db:
            if db.one("SELECT 1 FROM meta WHERE key = 'vectors'") is not None:
                return False  # another handle recorded it meanwhile
            db.execute("INSERT INTO meta VALUES ('vectors', '1') ON CONFLICT (key) DO NOTHING")
            return True

    def has_vectors(self) -> bool:
        """Whether a handle with a vector store ever opened this journal: then a handle without one must leave
        the outbox alone (a deletion it marked done would never reach the vectors)."""
        with self._autocommit() as db:
            return db.one("SELECT 1 FROM meta WHERE key = 'vectors'") is not None

    def outbox_error(self, ns_ids: Sequence[int] | None = None) -> str | None:
        """One last indexing error still pending, of these namespaces only when given."""
        sql = "SELECT last_error FROM outbox WHERE last_error IS NOT NULL"
        args: list[Any] = []
        with self._autocommit() as db:
            if ns_ids is not None:
                members, args = db.in_(list(ns_ids))
                sql += f" AND ns {members}"
            row = db.one(sql + " LIMIT 1", args)
        return None if row is None else str(row[0])

    def pending_records(self, ns_ids: Sequence[int], limit: int) -> list[Record]:
        """Records of these namespaces whose upsert is still queued (not yet in the vector store).

        The newest ``limit`` of them, in id order: a query searches them exactly (their
        vectors are computed on the spot) until the indexer catches up.
        """
        if not ns_ids or limit <= 0:
            return []
        with self._autocommit() as db:
            # Mostly the indexer has kept up and nothing of anyone's awaits it: one probe of the outbox
            # spares binding the scope's ids twice below (~3-5 ms for a user of 10,000 sessions).
            if db.one("SELECT 1 FROM outbox WHERE op = 'upsert' LIMIT 1") is None:
                return []
            members, args = db.in_(list(ns_ids))
            # Driven from the outbox (its ns column, kept in step with the records' on merges): joined
            # from the records side, SQLite walked every record of the scope to find the few queued
            # ones (3.3 ms per query at 100k records in one session, every context() with recall).
            rows = db.all(f"{RECORD_SELECT} WHERE r.id IN (SELECT o.record_id FROM outbox o WHERE o.op = 'upsert' "
                          f"AND o.ns {members} ORDER BY o.record_id DESC LIMIT ?) AND r.ns {members} "
                          "ORDER BY r.id DESC", [*args, limit, *args])
            codec = self._codec(db)
            return row_records(reversed(rows), codec)

    def requeue_all(self, *, keywords: bool = True) -> int:
        """Queue every record for upsert afresh (``reindex``), and rebuild the keyword index unless
        ``keywords=False``; the number of pending items."""
        with self._txn() as db:
            seq, seq_args = db.new_seq()
            db.execute(f"INSERT INTO outbox (record_id, op, seq, ns) SELECT id, 'upsert', {seq}, ns FROM records "
                       "WHERE true ON CONFLICT (record_id) DO UPDATE SET op='upsert', attempts=0, last_error=NULL, "
                       "retry_at=0, seq=excluded.seq, ns=excluded.ns", seq_args)
            if keywords:
                self._rebuild_keyword_index(db)
            row = db.one("SELECT count(*) FROM outbox")
            return int(row[0]) if row else 0

    def _rebuild_keyword_index(self, db: core.Sql) -> None:
        """Rebuild what the keyword index derives from the records (nothing where the engine keeps it)."""

    # --- links ----------------------------------------------------------------------------

    def links(self, record_ids: Sequence[int]) -> list[tuple[int, int, str, float]]:
        if not record_ids:
            return []
        with self._autocommit() as db:
            members, args = db.in_(list(record_ids))
            rows = db.all(f"SELECT a, b, relation, strength FROM links WHERE a {members} OR b {members}",
                          [*args, *args])
        return [(int(r[0]), int(r[1]), str(r[2]), float(r[3])) for r in rows]

    def add_link(self, a: int, b: int, relation: str, strength: float) -> None:
        with self._txn() as db:
            db.execute("INSERT INTO links VALUES (?,?,?,?) "
                       "ON CONFLICT (a, b, relation) DO UPDATE SET strength=excluded.strength",
                       (a, b, relation, strength))
