"""The journal logic both SQL backends share, written once over a small dialect (:class:`Sql`).

Statements are written with ``?`` placeholders and the few constructs whose spelling differs
come from the dialect: membership in a list (:meth:`Sql.in_`), the row lock of a writer
(``FOR UPDATE``, empty under SQLite's single writer), the inserted row's id, the outbox
sequence, the clock of leases and retries, the JSON functions that expand stored id lists.
Everything else (message and record inserts, the session state, cursors and summary
versions, record deletion, the outbox queue and its leases, erasure bookkeeping) is here,
with the write and read transactions the memory runs (:class:`SqlWrite`, :class:`SqlRead`).
The backends keep what really differs: connections, transactions and locking, migrations'
DDL, keyword search (FTS5 bm25; PostgreSQL tsvector matches ranked by the same bm25, ``BM25_SQL``),
physical erasure.

Hand-written SQL, not SQLAlchemy Core, by measurement (``benchmarks/sql_layer_cost.py``,
1000 operations per side, the statements of one ``add()`` and one ``context()`` on the
journal's own schema; this 2-core machine, SQLite 3.40 WAL ``synchronous=FULL``, PostgreSQL
on loopback)::

    backend / layer       op          p50 ms   p95 ms  p50 ratio
    sqlite raw            add          0.738    1.943      1.00x
    sqlite raw            context      0.295    0.339      1.00x
    sqlite sqlalchemy     add          1.604    2.822      2.17x
    sqlite sqlalchemy     context      0.873    0.985      2.96x
    postgres raw          add          1.511    1.860      1.00x
    postgres raw          context      1.282    1.707      1.00x
    postgres sqlalchemy   add          2.239    3.169      1.48x
    postgres sqlalchemy   context      2.270    3.770      1.77x

Core's compiled-statement cache still costs 0.6-1.0 ms per operation here (parameter
processing, result wrapping, its transaction events). Against whole operations (issue 14's
bar: ``add()`` and ``context()`` p50 within 10% on both backends): SQLite ``add()`` p50 is
4.7 ms on a quiet machine (``benchmarks/core_latency.py --sizes 1000 --quick``) and 8-14 ms
under load (``benchmarks/encryption_cost.py --messages 500``), so +0.87 ms is +6% to +19%;
PostgreSQL ``add()`` (12-16 ms) would take +5%; ``context()`` (130-190 ms, recall included)
under 1% on both. SQLite's ``add()``, the call every message makes, misses the bar on a quiet
machine, and what still differs between the backends (FTS5 against tsvector, JSON functions,
row locks, the outbox clock) is SQL that Core would pass through as text anyway. So the
dialect stays hand-written and small; Alembic is not needed for eight frozen migrations.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from langmem_tiers.errors import JournalError
from langmem_tiers.journal.base import (
    DEFAULT_SUMMARY_HISTORY,
    NewRecord,
    OutboxItem,
    Record,
    SessionState,
    WindowEntry,
    legacy_message_keys,
    nfc_merge_plan,
)
from langmem_tiers.journal.encryption import RowCodec
from langmem_tiers.journal.rows import (
    MSG_COLS,
    MSG_KEY,
    MSG_TOKENS,
    MSG_TOKENS_KEY,
    RECORD_SELECT,
    STATE_COLS,
    message_values,
    record_values,
    row_message,
    row_records,
    to_json,
)
from langmem_tiers.messages import Message

# The outbox retry delay after a failure: 1 s, 2 s, 4 s ... up to 256 s (``1 << 8``).
RETRY_DELAY_SQL = "CASE WHEN attempts < 8 THEN 1 << attempts ELSE 256 END"


class Sql:
    """One connection seen through its SQL dialect; the backends subclass it.

    ``raw`` is the driver's connection (``sqlite3.Connection``, ``psycopg.Connection``);
    :meth:`execute` passes a statement written with ``?`` placeholders to it.
    """

    __slots__ = ("raw",)

    # A writer's row lock: empty where the engine has a single writer (SQLite).
    FOR_UPDATE = ""
    FOR_KEY_SHARE = ""
    # The boolean ``true`` as the engine's partial indexes spell it.
    TRUE = "TRUE"
    # The rows of a record's ``message_ids`` (JSON text), as a FROM item ``j``, and one id in it.
    CITED_FROM = ""
    CITED_ID = ""
    # Records carry FTS5 scope terms (SQLite) or not (PostgreSQL filters by namespace alone).
    SCOPE_TERMS = False
    # A user's and an agent's scope stamps kept by triggers in ``scope_stamps`` (SQLite, schema v11), or
    # summed over their namespaces rows at each read (PostgreSQL: see sqlite.py's V11_SQL for why).
    SCOPE_STAMPS = False
    # The ids of the tool calls of messages ``m`` (``m.tool_calls``: JSON), as SELECT ... FROM.
    TOOL_CALL_IDS = ""

    def __init__(self, raw: Any) -> None:
        self.raw = raw

    # --- statements ---------------------------------------------------------------------

    def execute(self, sql: str, args: Sequence[Any] = ()) -> Any:
        """Run one statement; returns the driver's cursor."""
        return self.raw.execute(sql, args)

    def one(self, sql: str, args: Sequence[Any] = ()) -> Any:
        return self.execute(sql, args).fetchone()

    def all(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        return list(self.execute(sql, args).fetchall())

    def many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """One statement over many parameter rows."""
        raise NotImplementedError

    def insert_id(self, sql: str, args: Sequence[Any]) -> int:
        """Run an INSERT of one row; its generated ``id``."""
        raise NotImplementedError

    def in_(self, values: Sequence[Any]) -> tuple[str, list[Any]]:
        """``x IN values`` as the SQL after ``x`` and its arguments (empty: matches nothing)."""
        raise NotImplementedError

    def floors(self, pairs: Sequence[tuple[int, int]]) -> tuple[str, list[Any]]:
        """``(namespace id, floor)`` pairs as a FROM item ``f`` (columns ``ns_id``, ``above``) and its arguments."""
        raise NotImplementedError

    def new_seq(self) -> tuple[str, tuple[Any, ...]]:
        """An outbox ``seq`` for this statement: SQL and its arguments (a counter that never goes back)."""
        raise NotImplementedError

    def now(self) -> tuple[str, tuple[Any, ...]]:
        """The clock that leases and retry times are kept on: SQL and its arguments."""
        raise NotImplementedError

    def duplicate_key(self, error: Exception) -> bool:
        """Whether ``error`` is the unique index of message keys refusing a second message."""
        raise NotImplementedError

    def tool_calls_param(self, calls: list[dict[str, Any]] | None) -> Any:
        """The stored form of a message's tool calls (JSON text or the driver's JSON type)."""
        return to_json(calls) if calls else None


# --- session state and version stamps -------------------------------------------------------

def read_state(db: Sql, ns_id: int, codec: RowCodec | None) -> SessionState:
    """The session's state; its summary opened by ``codec`` (left as stored when ``None``: cursors only)."""
    row = db.one(f"SELECT {STATE_COLS} FROM state WHERE ns=?", (ns_id,))
    if row is None:
        return SessionState()
    summary = str(row[1]) if codec is None else codec.summary(ns_id, str(row[1]))
    return SessionState(int(row[0]), summary, int(row[2]), int(row[3]), int(row[4]), int(row[5]),
                        row[6], float(row[7]), int(row[8]))


def lock_session(db: Sql, ns_id: int) -> bool:
    """Lock the session's state row for this transaction; False when the namespace was erased.

    A namespace row without state (never expected) gets one: a repair, not an error.
    """
    if db.one(f"SELECT ns FROM state WHERE ns=?{db.FOR_UPDATE}", (ns_id,)):
        return True
    if db.one(f"SELECT ns FROM namespaces WHERE ns=?{db.FOR_KEY_SHARE}", (ns_id,)) is None:
        return False
    db.execute("INSERT INTO state (ns) VALUES (?) ON CONFLICT DO NOTHING", (ns_id,))
    return db.one(f"SELECT ns FROM state WHERE ns=?{db.FOR_UPDATE}", (ns_id,)) is not None


def bump(db: Sql, ns_ids: Sequence[int]) -> None:
    """Grow the version stamp of these sessions (in the transaction that changed them), locking
    their rows in id order so two writers never deadlock."""
    if not ns_ids:
        return
    if len(ns_ids) == 1:  # the common case: one session's own write
        db.execute("UPDATE state SET version=version+1 WHERE ns=?", (ns_ids[0],))
        return
    members, args = db.in_(sorted(set(ns_ids)))
    db.execute("UPDATE state SET version=version+1 WHERE ns IN "
               f"(SELECT ns FROM state WHERE ns {members} ORDER BY ns{db.FOR_UPDATE})", args)


# --- records and the index outbox -----------------------------------------------------------

def insert_records(db: Sql, ns_id: int, records: Sequence[NewRecord], codec: RowCodec) -> list[int]:
    """Insert records of one session and queue their upserts; their ids."""
    scope_col, scope_mark = (", scope_terms", ",?") if db.SCOPE_TERMS else ("", "")
    scope = (f"s{ns_id}",) if db.SCOPE_TERMS else ()
    sql = ("INSERT INTO records (ns, kind, text, message_ids, importance, pinned, tags, metadata, created_at, key, "
           f"terms{scope_col}) VALUES (?,?,?,?,?,?,?,?,?,?,?{scope_mark})")
    ids = [db.insert_id(sql, (ns_id, *record_values(r, codec, ns_id), *scope)) for r in records]
    queue(db, ids, "upsert", ns_id)
    return ids


# scope_size binds this many namespaces first, then twice as many each time while the count is short.
SCOPE_SIZE_FIRST_CHUNK = 32


# A keyword search's scope as a journal filters it: its namespaces, and the kinds asked (``None``: every kind).
ScopeFilter = tuple[Sequence[int], Sequence[str] | None]


def in_scope(db: Sql, scope: ScopeFilter | None, table: str = "") -> tuple[str, list[Any]]:
    """The conditions (each led by `` AND``) that keep a statement on ``records`` (named ``table``, as ``"r."``)
    to ``scope`` (its namespaces and kinds; ``None``: the whole journal, no condition), and their arguments."""
    if scope is None:
        return "", []
    ns_ids, kinds = scope
    members, args = db.in_(list(ns_ids))
    sql = f" AND {table}ns {members}"
    if kinds:
        kind_members, kind_args = db.in_(list(kinds))
        sql += f" AND {table}kind {kind_members}"
        args += kind_args
    return sql, args


def ids_in_scope(db: Sql, ids: Sequence[int], sessions: set[int], kinds: set[str] | None) -> set[int]:
    """Those of ``ids`` whose records are in ``sessions`` (and of ``kinds``; ``None``: any): read by primary key
    and tested here. A statement naming a scope's namespaces beside a few ids gets plans that walk the scope's
    records (SQLite) or compare each id's namespace with every one of the scope's (PostgreSQL)."""
    members, args = db.in_(list(ids))
    return {int(r[0]) for r in db.all(f"SELECT id, ns, kind FROM records WHERE id {members}", args)
            if int(r[1]) in sessions and (kinds is None or r[2] in kinds)}


def scope_versions(db: Sql, ns_ids: Sequence[int]) -> dict[int, tuple[int, int, int]]:
    """``Journal.scope_versions`` read on ``db`` (inside a caller's snapshot, where it needs one)."""
    members, args = db.in_(list(dict.fromkeys(int(n) for n in ns_ids)))
    rows = db.all(f"SELECT ns, last_record_id, records_deleted, records_edited FROM namespaces WHERE ns {members}",
                  args)
    return {int(r[0]): (int(r[1]), int(r[2]), int(r[3])) for r in rows}


def scope_size(db: Sql, ns_ids: Sequence[int], kinds: Sequence[str] | None, cap: int) -> int:
    """How many records a keyword search may rank (these namespaces, these kinds), counted up to ``cap``
    (whether the scope is within the keyword budget: :mod:`.keyword_budget`).

    The namespaces are bound a growing chunk at a time and the count stops at ``cap``: a user's first
    few sessions usually hold more than the budget, and binding all of a user's 10,000 sessions (an
    IN list SQLite builds as an index) cost 3.2-4.6 ms a search at 1M records against ~0.3 in chunks
    (``benchmarks/scope_stamp_cost.py``)."""
    ids = list(ns_ids)
    kind_args: list[Any] = []
    kind_sql = ""
    if kinds:
        kind_members, kind_args = db.in_(list(kinds))
        kind_sql = f" AND kind {kind_members}"
    total, start, chunk = 0, 0, SCOPE_SIZE_FIRST_CHUNK
    while start < len(ids) and total < cap:
        members, args = db.in_(ids[start:start + chunk])
        sql = f"SELECT 1 FROM records WHERE ns {members}{kind_sql}"
        total += int(db.one(f"SELECT count(*) FROM ({sql} LIMIT ?) s", [*args, *kind_args, cap - total])[0])
        start += chunk
        chunk *= 2
    return total


def keyed_and_listed(db: Sql, ns_ids: Sequence[int], unkeyed: Sequence[int], where: str = "",
                     where_args: Sequence[Any] = ()) -> tuple[str, list[Any]]:
    """A subquery of record ids and its arguments: the records of ``ns_ids`` that have a key, and those among
    the ``unkeyed`` ids that have none, each meeting ``where`` (over ``records``' own columns).

    The keyed ones come through records_key (ns, key) WHERE key IS NOT NULL (a sealed key is not NULL
    either: it works encrypted), the listed ones by id. A user holds one current memory per key, so they
    stay few; the user's other memories, which grow with the history, are never read (reading all of them
    made each summary fold and each ``context()`` grow with it: benchmarks/add_path.py). The listed ids are
    those a keyword search of the caller's scope found, as recall reads its hits by id: they are not
    checked against ``ns_ids`` again, which may name only the sessions holding a keyed record (a check
    against all of a user's 10,000 sessions cost 0.8 ms of each ``context()``).
    """
    members, args = db.in_(list(ns_ids))
    condition = f" AND {where}" if where else ""
    sql = f"SELECT id FROM records WHERE ns {members} AND key IS NOT NULL{condition}"
    out = [*args, *where_args]
    if unkeyed:
        ids, id_args = db.in_(sorted(set(unkeyed)))
        sql += f" UNION ALL SELECT id FROM records WHERE id {ids} AND key IS NULL{condition}"
        out += [*id_args, *where_args]
    return sql, out


def queue(db: Sql, record_ids: Sequence[int], op: str, ns_id: int | None) -> None:
    """Queue index changes afresh: attempts and backoff reset, a new ``seq``.

    An existing lease is kept: the holder finishes its (now stale) item first, and the new
    change becomes claimable when it releases the row, so a delete never overtakes an upsert.
    """
    if not record_ids:
        return
    seq, seq_args = db.new_seq()
    db.many(f"INSERT INTO outbox (record_id, op, seq, ns) VALUES (?, ?, {seq}, ?) ON CONFLICT (record_id) "
            "DO UPDATE SET op=excluded.op, attempts=0, last_error=NULL, retry_at=0, seq=excluded.seq, "
            "ns=coalesce(excluded.ns, outbox.ns)",
            [(rid, op, *seq_args, ns_id) for rid in record_ids])


def release(db: Sql, items: Sequence[OutboxItem]) -> None:
    """Release the leases these items hold (rows queued again meanwhile become claimable)."""
    db.many("UPDATE outbox SET owner=NULL, claimed_until=0 WHERE record_id=? AND owner=?",
            [(i.record_id, i.owner) for i in items if i.owner])


def outbox_done(db: Sql, items: Sequence[OutboxItem]) -> None:
    """Drop the items whose ``seq`` still matches (a change queued again meanwhile stays), release the rest."""
    db.many("DELETE FROM outbox WHERE record_id=? AND seq=?", [(i.record_id, i.seq) for i in items])
    release(db, items)


def outbox_failed(db: Sql, items: Sequence[OutboxItem], error: str) -> None:
    """Per item: attempts + 1, the error kept, retried after a growing delay; leases released."""
    now, now_args = db.now()
    # SET reads the old attempts: the first failure waits 1 s, then 2, 4 ... up to 256 s.
    db.many(f"UPDATE outbox SET attempts=attempts+1, last_error=?, retry_at={now} + {RETRY_DELAY_SQL} "
            "WHERE record_id=? AND seq=?",
            [(error[:2000], *now_args, i.record_id, i.seq) for i in items])
    release(db, items)


def delete_records(db: Sql, ids: Sequence[int]) -> int:
    """Delete records with their links, queue their deletes, bump their sessions; how many existed."""
    if not ids:
        return 0
    wanted = list(dict.fromkeys(ids))
    members, args = db.in_(wanted)
    owners = {int(r[0]): int(r[1]) for r in db.all(f"DELETE FROM records WHERE id {members} RETURNING id, ns", args)}
    db.execute(f"DELETE FROM links WHERE a {members} OR b {members}", [*args, *args])
    by_ns: dict[int | None, list[int]] = {}
    for rid in wanted:
        by_ns.setdefault(owners.get(rid), []).append(rid)
    for ns_id, rids in by_ns.items():
        queue(db, rids, "delete", ns_id)
    bump(db, sorted(set(owners.values())))
    return len(owners)


def delete_ns_content(db: Sql, ns_id: int, keep_memories: bool = False) -> list[int]:
    """Delete a session's records, messages and summary versions; the record ids removed.

    ``keep_memories`` keeps explicit memories that no message produced (``remember()``).
    """
    keep = " AND (kind='turn' OR message_ids != '[]')" if keep_memories else ""
    ids = [int(r[0]) for r in db.all(f"SELECT id FROM records WHERE ns=?{keep} ORDER BY id", (ns_id,))]
    delete_records(db, ids)
    db.execute("DELETE FROM messages WHERE ns=?", (ns_id,))
    db.execute("DELETE FROM summary_versions WHERE ns=?", (ns_id,))
    return ids


def records_citing(db: Sql, ns_id: int, message_ids: Sequence[int]) -> list[tuple[int, str, list[int]]]:
    """``(id, kind, message ids)`` of the session's records made from any of these messages."""
    members, args = db.in_(list(message_ids))
    rows = db.all(f"SELECT DISTINCT r.id, r.kind, r.message_ids FROM records r, {db.CITED_FROM} "
                  f"WHERE r.ns=? AND {db.CITED_ID} {members} ORDER BY r.id", [ns_id, *args])
    return [(int(r[0]), str(r[1]), json.loads(r[2])) for r in rows]


def fold_nfc(db: Sql, log: Any) -> None:
    """The data part of schema version 4: stored ids folded into NFC, legacy message keys backfilled.

    Namespaces whose user, agent and session ids become equal in NFC are merged into the
    lowest id (:func:`~langmem_tiers.journal.base.nfc_merge_plan`): their messages, records
    and outbox rows move there (links follow the records), the lowest id's session state is
    kept and the others' dropped; every moved or renamed record is queued for upsert so the
    vector store learns its new ids. Returns nothing; the caller rebuilds what indexes scope.
    """
    rows = db.all("SELECT ns, user_id, agent_id, session_id FROM namespaces ORDER BY ns")
    merges, renames = nfc_merge_plan((int(r[0]), str(r[1]), str(r[2]), str(r[3])) for r in rows)
    touched: set[int] = set()
    for source, target in merges:
        db.execute("UPDATE messages SET ns=? WHERE ns=?", (target, source))
        if db.SCOPE_TERMS:
            db.execute("UPDATE records SET ns=?, scope_terms=? WHERE ns=?", (target, f"s{target}", source))
        else:
            db.execute("UPDATE records SET ns=? WHERE ns=?", (target, source))
        db.execute("UPDATE outbox SET ns=? WHERE ns=?", (target, source))
        db.execute("DELETE FROM state WHERE ns=?", (source,))
        db.execute("DELETE FROM namespaces WHERE ns=?", (source,))
        touched.add(target)
        log.info("journal migration: namespace %d merged into %d (equal ids in NFC)", source, target)
    for ns_id, ns in renames:
        db.execute("UPDATE namespaces SET user_id=?, agent_id=?, session_id=? WHERE ns=?",
                   (ns.user_id, ns.agent_id, ns.session_id, ns_id))
        touched.add(ns_id)
    if merges and db.SCOPE_TERMS:  # moved records changed scope terms, which no trigger follows
        db.execute("INSERT INTO records_fts (records_fts) VALUES ('rebuild')")
    for ns_id in sorted(touched):
        queue(db, [int(r[0]) for r in db.all("SELECT id FROM records WHERE ns=? ORDER BY id", (ns_id,))],
              "upsert", ns_id)
    bump(db, sorted(touched))
    rows = db.all("SELECT id, ns, metadata FROM messages WHERE key IS NULL AND metadata LIKE '%\"langchain\"%' "
                  "ORDER BY id")
    db.many("UPDATE messages SET key=? WHERE id=?", legacy_message_keys(rows))


# --- the transactions the memory runs -------------------------------------------------------

class SqlWrite:
    """Operations inside one serialized write transaction of one session (``Journal.write``)."""

    def __init__(self, db: Sql, ns_id: int, codec: RowCodec) -> None:
        self.db = db
        self.ns_id = ns_id
        self._codec = codec
        self.touched = False  # a change to this session: its version grows at commit

    def state(self) -> SessionState:
        return read_state(self.db, self.ns_id, self._codec)

    def insert_messages(self, messages: Sequence[Message], tokens: Sequence[int], tokens_key: str) -> list[Message]:
        from dataclasses import replace

        db = self.db
        stored = []
        for message, count in zip(messages, tokens):
            content, name, calls, metadata, created = message_values(message, self._codec, self.ns_id)
            try:
                message_id = db.insert_id(
                    "INSERT INTO messages (ns, role, content, name, tool_calls, tool_call_id, metadata, created_at, "
                    "tokens, tokens_key, key) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                    (self.ns_id, message.role, content, name, db.tool_calls_param(calls),
                     message.tool_call_id, metadata, created, count, tokens_key, message.key))
            except Exception as e:
                if message.key is not None and db.duplicate_key(e):
                    raise JournalError(
                        f"a message with key {message.key!r:.80} is already stored in this session: "
                        "look keys up with messages_by_key() and skip the stored ones"
                    ) from e
                raise
            stored.append(replace(message, id=message_id, created_at=created))
        self.touched = self.touched or bool(stored)
        return stored

    def messages_by_key(self, keys: Sequence[str]) -> dict[str, Message]:
        if not keys:
            return {}
        members, args = self.db.in_(list(dict.fromkeys(keys)))
        rows = self.db.all(f"SELECT {MSG_COLS} FROM messages WHERE ns=? AND key {members}", [self.ns_id, *args])
        return {str(r[MSG_KEY]): row_message(r, self._codec) for r in rows}

    def window_entries(self, start: int) -> list[WindowEntry]:
        rows = self.db.all("SELECT id, role, tokens FROM messages WHERE ns=? AND id>=? ORDER BY id",
                           (self.ns_id, start))
        return [WindowEntry(int(r[0]), str(r[1]), int(r[2])) for r in rows]

    def messages_between(self, after: int, before: int) -> list[Message]:
        rows = self.db.all(f"SELECT {MSG_COLS} FROM messages WHERE ns=? AND id>? AND id<? ORDER BY id",
                           (self.ns_id, after, before))
        return [row_message(r, self._codec) for r in rows]

    def open_tool_calls(self, since: int) -> set[str]:
        rows = self.db.all(f"{self.db.TOOL_CALL_IDS} WHERE m.ns=? AND m.id>=? AND m.tool_calls IS NOT NULL",
                           (self.ns_id, since))
        return {str(r[0]) for r in rows}

    def set_window_start(self, window_start: int) -> None:
        self.db.execute("UPDATE state SET window_start=? WHERE ns=?", (window_start, self.ns_id))
        self.touched = True

    def set_summary(self, summary: str, tokens: int, cursor: int, history: int = DEFAULT_SUMMARY_HISTORY) -> None:
        sealed = self._codec.seal_summary(self.ns_id, summary)
        self.db.execute(
            "UPDATE state SET summary=?, summary_tokens=?, summary_cursor=?, summary_version=summary_version+1, "
            "failures=0, last_error=NULL, retry_at=0 WHERE ns=?", (sealed, tokens, cursor, self.ns_id))
        if history > 0:
            self.db.execute(
                "INSERT INTO summary_versions (ns, version, text, tokens, summary_cursor, created_at) "
                "SELECT ns, summary_version, ?, ?, ?, ? FROM state WHERE ns=?",
                (sealed, tokens, cursor, time.time(), self.ns_id))
        self.db.execute("DELETE FROM summary_versions WHERE ns=? AND version NOT IN (SELECT version FROM "
                        "summary_versions WHERE ns=? ORDER BY version DESC LIMIT ?)",
                        (self.ns_id, self.ns_id, max(history, 0)))
        self.touched = True

    def set_failure(self, error: str | None, failures: int, retry_at: float) -> None:
        self.db.execute("UPDATE state SET last_error=?, failures=?, retry_at=? WHERE ns=?",
                        (error, failures, retry_at, self.ns_id))
        self.touched = True

    def insert_records(self, records: Sequence[NewRecord]) -> list[int]:
        ids = insert_records(self.db, self.ns_id, records, self._codec)
        self.touched = self.touched or bool(ids)
        return ids

    def update_tokens(self, ids_tokens: Sequence[tuple[int, int]], tokens_key: str) -> None:
        if not ids_tokens:
            return
        self.db.many("UPDATE messages SET tokens=?, tokens_key=? WHERE id=? AND ns=?",
                     [(count, tokens_key, mid, self.ns_id) for mid, count in ids_tokens])
        self.touched = True

    def current_memories(self, ns_ids: Sequence[int], unkeyed: Sequence[int] | None = None) -> list[Record]:
        if not ns_ids and not unkeyed:
            return []
        # "kind != 'turn'" as two ranges, ordered by +r.id: SQLite then reads the few memories through
        # records_ns (ns, kind); written as != it walked every record of the scope (12 ms per write that
        # plans memories at 100k records in one session, 0.04 ms as ranges).
        if unkeyed is None:
            members, args = self.db.in_(list(ns_ids))
            rows = self.db.all(f"{RECORD_SELECT} WHERE r.ns {members} AND (r.kind < 'turn' OR r.kind > 'turn') "
                               "AND r.valid_to IS NULL ORDER BY +r.id", args)
            return row_records(rows, self._codec)
        chosen, chosen_args = keyed_and_listed(self.db, ns_ids, unkeyed,
                                               "(kind < 'turn' OR kind > 'turn') AND valid_to IS NULL")
        return row_records(self.db.all(f"{RECORD_SELECT} WHERE r.id IN ({chosen}) ORDER BY r.id", chosen_args),
                           self._codec)

    def supersede(self, record_ids: Sequence[int], valid_to: float) -> None:
        if not record_ids:
            return
        # Superseded records may live in the user's other sessions; their version stamps stay
        # (a stamp tells a session's own messages and cursors apart) and their state rows are not
        # locked, so two sessions of one user superseding each other's memories never deadlock.
        members, args = self.db.in_(list(record_ids))
        self.db.execute(f"UPDATE records SET valid_to=? WHERE id {members} AND valid_to IS NULL",
                        [float(valid_to), *args])
        self.touched = True

    def merge_memory(self, record_id: int, importance: float, message_ids: tuple[int, ...]) -> None:
        self.db.execute("UPDATE records SET importance=?, message_ids=? WHERE id=?",
                        (importance, to_json(list(message_ids)), record_id))
        self.touched = True


class SqlRead:
    """Reads from one consistent snapshot (``Journal.read``)."""

    def __init__(self, db: Sql, codec: RowCodec) -> None:
        self.db = db
        self._codec = codec

    def state(self, ns_id: int) -> SessionState:
        return read_state(self.db, ns_id, self._codec)

    def window_messages(self, ns_id: int, start: int) -> list[tuple[Message, int, str]]:
        rows = self.db.all(f"SELECT {MSG_COLS} FROM messages WHERE ns=? AND id>=? ORDER BY id", (ns_id, start))
        return [(row_message(r, self._codec), int(r[MSG_TOKENS]), str(r[MSG_TOKENS_KEY])) for r in rows]

    def count_between(self, ns_id: int, after: int, before: int) -> int:
        row = self.db.one("SELECT count(*) FROM messages WHERE ns=? AND id>? AND id<?", (ns_id, after, before))
        return int(row[0]) if row else 0

    def last_message_id(self, ns_id: int) -> int:
        """The session's newest message id (0 when none); kept for tools and tests, the core does not need it."""
        row = self.db.one("SELECT max(id) FROM messages WHERE ns=?", (ns_id,))
        return int(row[0] or 0) if row else 0
