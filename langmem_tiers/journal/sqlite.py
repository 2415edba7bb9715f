"""The SQLite journal: one file, WAL, every write committed before the call returns.

Erasure is physical where SQLite allows it: ``secure_delete`` is on (deleted cells and
freed pages are overwritten with zeros), and :meth:`SqliteJournal.compact` merges the
FTS5 index (dropping the terms of deleted records from its segments) and truncates the
WAL, so :meth:`SqliteJournal.residue` can prove that no copy of an erased text is left in
the journal file, its ``-wal`` or its ``-shm``.

What SQLite and PostgreSQL do alike is written once in :mod:`.sql_core` and
:mod:`.sql_journal`; this module is the dialect: the connection, the DDL, FTS5, erasure.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

from langmem_tiers.errors import JournalError
from langmem_tiers.journal.base import (
    SCHEMA_VERSION,
    KeywordHit,
    Namespace,
    OutboxItem,
    Versions,
    check_claim,
    parse_schema_version,
    search_terms,
)
from langmem_tiers.journal.encryption import ALGORITHM, META_KEY, FieldCipher, RowCodec, cipher_for
from langmem_tiers.journal.keyword_budget import (
    TermCount,
    TermCounts,
    counted_since,
    crowded_out,
    plan_terms,
    recency_windows,
)
from langmem_tiers.journal.sql_core import ScopeFilter, Sql, fold_nfc, ids_in_scope, in_scope, scope_size
from langmem_tiers.journal.sql_journal import ListingCache, SqlJournal, check_version, finish_migration
from langmem_tiers.keyring import KeyRing

log = logging.getLogger(__name__)

# Forward migrations, applied in order; index i takes schema version i to i + 1.
# Versions 1-3 are SQL scripts, frozen as released; version 4 is _migrate_to_v4 below.
_OLD_MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE namespaces (
        ns INTEGER PRIMARY KEY,
        user_id TEXT NOT NULL, agent_id TEXT NOT NULL, session_id TEXT NOT NULL,
        created_at REAL NOT NULL,
        UNIQUE (user_id, agent_id, session_id)
    );
    CREATE TABLE messages (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        ns INTEGER NOT NULL REFERENCES namespaces(ns),
        role TEXT NOT NULL,
        content TEXT NOT NULL,
        name TEXT, tool_calls TEXT, tool_call_id TEXT, metadata TEXT,
        created_at REAL NOT NULL,
        tokens INTEGER NOT NULL,
        tokens_key TEXT NOT NULL
    );
    CREATE INDEX messages_ns_id ON messages (ns, id);
    CREATE TABLE state (
        ns INTEGER PRIMARY KEY REFERENCES namespaces(ns),
        window_start INTEGER NOT NULL DEFAULT 0,
        summary TEXT NOT NULL DEFAULT '',
        summary_tokens INTEGER NOT NULL DEFAULT 0,
        summary_cursor INTEGER NOT NULL DEFAULT 0,
        summary_version INTEGER NOT NULL DEFAULT 0,
        failures INTEGER NOT NULL DEFAULT 0,
        last_error TEXT,
        retry_at REAL NOT NULL DEFAULT 0
    );
    """,
    """
    CREATE TABLE records (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        ns INTEGER NOT NULL REFERENCES namespaces(ns),
        kind TEXT NOT NULL,
        text TEXT NOT NULL,
        message_ids TEXT NOT NULL DEFAULT '[]',
        importance REAL NOT NULL DEFAULT 0.5,
        pinned INTEGER NOT NULL DEFAULT 0,
        tags TEXT NOT NULL DEFAULT '[]',
        metadata TEXT NOT NULL DEFAULT '{}',
        created_at REAL NOT NULL
    );
    CREATE INDEX records_ns ON records (ns, kind);
    CREATE VIRTUAL TABLE records_fts USING fts5(
        text, content='records', content_rowid='id', tokenize='porter unicode61 remove_diacritics 2'
    );
    CREATE TRIGGER records_ai AFTER INSERT ON records BEGIN
        INSERT INTO records_fts (rowid, text) VALUES (new.id, new.text);
    END;
    CREATE TRIGGER records_ad AFTER DELETE ON records BEGIN
        INSERT INTO records_fts (records_fts, rowid, text) VALUES ('delete', old.id, old.text);
    END;
    CREATE TRIGGER records_au AFTER UPDATE OF text ON records BEGIN
        INSERT INTO records_fts (records_fts, rowid, text) VALUES ('delete', old.id, old.text);
        INSERT INTO records_fts (rowid, text) VALUES (new.id, new.text);
    END;
    CREATE TABLE outbox (
        record_id INTEGER PRIMARY KEY,
        op TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        last_error TEXT,
        retry_at REAL NOT NULL DEFAULT 0
    );
    CREATE TABLE links (
        a INTEGER NOT NULL, b INTEGER NOT NULL, relation TEXT NOT NULL, strength REAL NOT NULL,
        PRIMARY KEY (a, b, relation)
    );
    """,
    """
    CREATE INDEX records_pinned ON records (ns) WHERE pinned = 1;
    ALTER TABLE records ADD COLUMN scope_terms TEXT NOT NULL DEFAULT '';
    UPDATE records SET scope_terms = 's' || ns;
    DROP TRIGGER records_ai;
    DROP TRIGGER records_ad;
    DROP TRIGGER records_au;
    DROP TABLE records_fts;
    CREATE VIRTUAL TABLE records_fts USING fts5(
        text, scope_terms, content='records', content_rowid='id', tokenize='porter unicode61 remove_diacritics 2'
    );
    CREATE TRIGGER records_ai AFTER INSERT ON records BEGIN
        INSERT INTO records_fts (rowid, text, scope_terms) VALUES (new.id, new.text, new.scope_terms);
    END;
    CREATE TRIGGER records_ad AFTER DELETE ON records BEGIN
        INSERT INTO records_fts (records_fts, rowid, text, scope_terms)
        VALUES ('delete', old.id, old.text, old.scope_terms);
    END;
    CREATE TRIGGER records_au AFTER UPDATE OF text ON records BEGIN
        INSERT INTO records_fts (records_fts, rowid, text, scope_terms)
        VALUES ('delete', old.id, old.text, old.scope_terms);
        INSERT INTO records_fts (rowid, text, scope_terms) VALUES (new.id, new.text, new.scope_terms);
    END;
    INSERT INTO records_fts (records_fts) VALUES ('rebuild');
    ALTER TABLE outbox ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
    """,
)

# Schema version 4, in SQL; _migrate_to_v4 runs it, then folds stored ids into NFC.
#  - namespaces gets AUTOINCREMENT (a table rebuild): an erased namespace's id is never handed out
#    again, so a stale handle can never reach a session created later;
#  - state.version, the session version stamp; messages.key, the idempotency key;
#  - (the keyword index keeps its scope column: see fts_query for why it is safe and kept);
#  - the outbox learns each row's namespace (per-session counts, pending records) and leases
#    (owner, claimed_until) for many indexers; seq comes from a counter that never goes back.
V4_SQL = """
CREATE TABLE namespaces_v4 (
    ns INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id TEXT NOT NULL, agent_id TEXT NOT NULL, session_id TEXT NOT NULL,
    created_at REAL NOT NULL,
    UNIQUE (user_id, agent_id, session_id)
);
INSERT INTO namespaces_v4 (ns, user_id, agent_id, session_id, created_at)
    SELECT ns, user_id, agent_id, session_id, created_at FROM namespaces ORDER BY ns;
DROP TABLE namespaces;
ALTER TABLE namespaces_v4 RENAME TO namespaces;
ALTER TABLE state ADD COLUMN version INTEGER NOT NULL DEFAULT 0;
ALTER TABLE messages ADD COLUMN key TEXT;
CREATE UNIQUE INDEX messages_key ON messages (ns, key) WHERE key IS NOT NULL;
ALTER TABLE outbox ADD COLUMN ns INTEGER;
ALTER TABLE outbox ADD COLUMN owner TEXT;
ALTER TABLE outbox ADD COLUMN claimed_until REAL NOT NULL DEFAULT 0;
UPDATE outbox SET ns = (SELECT r.ns FROM records r WHERE r.id = outbox.record_id);
CREATE INDEX outbox_ns ON outbox (ns);
INSERT INTO meta VALUES ('outbox_seq', (SELECT coalesce(max(seq), 0) FROM outbox));
"""


def _migrate_to_v4(db: Sql) -> None:
    """Schema version 4 (see ``V4_SQL``), then stored ids folded into NFC
    (:func:`~langmem_tiers.journal.sql_core.fold_nfc`, shared with PostgreSQL)."""
    for statement in _split_sql(V4_SQL):
        db.execute(statement)
    fold_nfc(db, log)


# Schema version 5, the semantic tier: a memory's key (the user's current value for it until a
# newer memory with the key supersedes it) and when it was superseded (history is kept).
V5_SQL = """
ALTER TABLE records ADD COLUMN key TEXT;
ALTER TABLE records ADD COLUMN valid_to REAL;
CREATE INDEX records_key ON records (ns, key) WHERE key IS NOT NULL;
"""

# Schema version 6, encryption: ``records.terms`` holds the blind tokens of an encrypted record
# (NULL for plaintext ones), and the keyword index reads ``coalesce(terms, text)`` through a view,
# so FTS5's 'rebuild' and 'integrity-check' see what the triggers indexed, never ciphertext.
V6_SQL = """
ALTER TABLE records ADD COLUMN terms TEXT;
DROP TRIGGER records_ai;
DROP TRIGGER records_ad;
DROP TRIGGER records_au;
DROP TABLE records_fts;
CREATE VIEW records_fts_content AS SELECT id, coalesce(terms, text) AS text, scope_terms FROM records;
CREATE VIRTUAL TABLE records_fts USING fts5(
    text, scope_terms, content='records_fts_content', content_rowid='id',
    tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER records_ai AFTER INSERT ON records BEGIN
    INSERT INTO records_fts (rowid, text, scope_terms) VALUES (new.id, coalesce(new.terms, new.text), new.scope_terms);
END;
CREATE TRIGGER records_ad AFTER DELETE ON records BEGIN
    INSERT INTO records_fts (records_fts, rowid, text, scope_terms)
    VALUES ('delete', old.id, coalesce(old.terms, old.text), old.scope_terms);
END;
CREATE TRIGGER records_au AFTER UPDATE OF text, terms ON records BEGIN
    INSERT INTO records_fts (records_fts, rowid, text, scope_terms)
    VALUES ('delete', old.id, coalesce(old.terms, old.text), old.scope_terms);
    INSERT INTO records_fts (rowid, text, scope_terms) VALUES (new.id, coalesce(new.terms, new.text), new.scope_terms);
END;
INSERT INTO records_fts (records_fts) VALUES ('rebuild');
"""

# Schema version 7, the rolling summary's version history: every saved summary (its text sealed
# like state.summary when encrypted), bounded per session by the caller; erasure deletes each
# version that folded an erased message. The current summary becomes the first version.
V7_SQL = """
CREATE TABLE summary_versions (
    ns INTEGER NOT NULL REFERENCES namespaces(ns),
    version INTEGER NOT NULL,
    text TEXT NOT NULL,
    tokens INTEGER NOT NULL,
    summary_cursor INTEGER NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (ns, version)
);
INSERT INTO summary_versions (ns, version, text, tokens, summary_cursor, created_at)
    SELECT ns, summary_version, summary, summary_tokens, summary_cursor, (julianday('now') - 2440587.5) * 86400.0
    FROM state WHERE summary != '';
"""

# Schema version 8, scope versions: three counters per namespace, kept by triggers, that tell an
# in-process index (scope vectors) whether its copy is current with one primary-key read per
# namespace instead of a count over the session's records (tens of ms at 1M records):
# the largest record id ever inserted (never goes back, even when that record is deleted), the
# records deleted, the records whose indexed text (text, or the blind tokens of an encrypted
# record) changed. Numbers only: erasing a record leaves no text in them. Existing namespaces
# start from their largest record id; ``records_ns_id`` lets ``record_ids(ns, after)`` read only
# the new ids instead of the session's whole history.
V8_SQL = """
ALTER TABLE namespaces ADD COLUMN last_record_id INTEGER NOT NULL DEFAULT 0;
ALTER TABLE namespaces ADD COLUMN records_deleted INTEGER NOT NULL DEFAULT 0;
ALTER TABLE namespaces ADD COLUMN records_edited INTEGER NOT NULL DEFAULT 0;
UPDATE namespaces SET last_record_id = coalesce((SELECT max(r.id) FROM records r WHERE r.ns = namespaces.ns), 0);
CREATE INDEX records_ns_id ON records (ns, id);
CREATE TRIGGER records_scope_ai AFTER INSERT ON records BEGIN
    UPDATE namespaces SET last_record_id = max(last_record_id, new.id) WHERE ns = new.ns;
END;
CREATE TRIGGER records_scope_ad AFTER DELETE ON records BEGIN
    UPDATE namespaces SET records_deleted = records_deleted + 1 WHERE ns = old.ns;
END;
CREATE TRIGGER records_scope_au AFTER UPDATE OF text, terms ON records
WHEN old.text IS NOT new.text OR old.terms IS NOT new.terms BEGIN
    UPDATE namespaces SET records_edited = records_edited + 1 WHERE ns = new.ns;
END;
"""

# Schema version 9, the user's memories among their turns: context() reads the profile, skills and
# working state of every session of the user (scoped_records by kind), one index probe per session
# and kind; in (ns, kind) over every record that is not a turn, those probes land in a small index
# (10,000 sessions of turns: 13.8 -> 2.9 ms a read). A query uses it by repeating its condition.
V9_SQL = """
CREATE INDEX records_memories ON records (ns, kind) WHERE kind <> 'turn';
"""

# Schema version 10, pinned flags in the scope's stamp: ``Journal.scope_listing`` trusts what it read
# of a scope while the sums of these counters stay put, and a listing that tells which sessions hold
# pinned records must see a flag set or cleared (``update_record``), which moved no counter
# (``records_edited`` counts changes of the indexed text only). This counts those changes.
V10_SQL = """
ALTER TABLE namespaces ADD COLUMN records_repinned INTEGER NOT NULL DEFAULT 0;
CREATE TRIGGER records_scope_ap AFTER UPDATE OF pinned ON records
WHEN old.pinned IS NOT new.pinned BEGIN
    UPDATE namespaces SET records_repinned = records_repinned + 1 WHERE ns = new.ns;
END;
"""

# Schema version 11, scope stamps kept by triggers: ``Journal.scope_listing`` reads a user's (or an
# agent's) stamp before every recall, and as an aggregate over the namespaces rows that read grew with
# the user's sessions (8-9 ms at 10,000 sessions, every context()). Here one row per (user, agent) holds
# the same sums, moved by every insert, update and delete of a namespaces row; a user's stamp sums the
# user's few agent rows. A namespace never moves to another user or agent (only schema v4's NFC fold
# did, before this), and a trigger refuses it. ``ns_max`` is the largest id the group has held while it
# had a namespace (the aggregate's max falls when that namespace is erased; the count and the id sum say
# it in both). A group's row goes when its last namespace does, so erasing a user leaves no row naming
# them. SQLite has one writer at a time, so the shared row costs no concurrency; PostgreSQL keeps the
# aggregate (every writer of a user would queue on the row, and two transactions touching two of the
# user's sessions in opposite orders could deadlock). ``namespaces_growth`` lets the listing's grown
# path read the few sessions that gained records instead of walking the user's sessions.
V11_SQL = """
CREATE TABLE scope_stamps (
    user_id TEXT NOT NULL, agent_id TEXT NOT NULL,
    namespaces INTEGER NOT NULL DEFAULT 0, ns_sum INTEGER NOT NULL DEFAULT 0, ns_max INTEGER NOT NULL DEFAULT 0,
    last_record_sum INTEGER NOT NULL DEFAULT 0, deleted_sum INTEGER NOT NULL DEFAULT 0,
    edited_sum INTEGER NOT NULL DEFAULT 0, repinned_sum INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (user_id, agent_id)
) WITHOUT ROWID;
INSERT INTO scope_stamps (user_id, agent_id, namespaces, ns_sum, ns_max, last_record_sum, deleted_sum, edited_sum,
                          repinned_sum)
    SELECT user_id, agent_id, count(*), sum(ns), max(ns), sum(last_record_id), sum(records_deleted),
           sum(records_edited), sum(records_repinned)
    FROM namespaces GROUP BY user_id, agent_id;
CREATE TRIGGER namespaces_stamp_ai AFTER INSERT ON namespaces BEGIN
    INSERT OR IGNORE INTO scope_stamps (user_id, agent_id) VALUES (new.user_id, new.agent_id);
    UPDATE scope_stamps SET namespaces = namespaces + 1, ns_sum = ns_sum + new.ns, ns_max = max(ns_max, new.ns),
        last_record_sum = last_record_sum + new.last_record_id, deleted_sum = deleted_sum + new.records_deleted,
        edited_sum = edited_sum + new.records_edited, repinned_sum = repinned_sum + new.records_repinned
    WHERE user_id = new.user_id AND agent_id = new.agent_id;
END;
CREATE TRIGGER namespaces_stamp_ad AFTER DELETE ON namespaces BEGIN
    UPDATE scope_stamps SET namespaces = namespaces - 1, ns_sum = ns_sum - old.ns,
        last_record_sum = last_record_sum - old.last_record_id, deleted_sum = deleted_sum - old.records_deleted,
        edited_sum = edited_sum - old.records_edited, repinned_sum = repinned_sum - old.records_repinned
    WHERE user_id = old.user_id AND agent_id = old.agent_id;
    DELETE FROM scope_stamps WHERE user_id = old.user_id AND agent_id = old.agent_id AND namespaces = 0;
END;
CREATE TRIGGER namespaces_stamp_au AFTER UPDATE ON namespaces BEGIN
    UPDATE scope_stamps SET last_record_sum = last_record_sum + new.last_record_id - old.last_record_id,
        deleted_sum = deleted_sum + new.records_deleted - old.records_deleted,
        edited_sum = edited_sum + new.records_edited - old.records_edited,
        repinned_sum = repinned_sum + new.records_repinned - old.records_repinned
    WHERE user_id = new.user_id AND agent_id = new.agent_id;
END;
CREATE TRIGGER namespaces_keep_group BEFORE UPDATE OF user_id, agent_id ON namespaces
WHEN old.user_id IS NOT new.user_id OR old.agent_id IS NOT new.agent_id BEGIN
    SELECT RAISE(ABORT, 'a namespace keeps its user and agent (scope_stamps sums each group''s rows)');
END;
CREATE INDEX namespaces_growth ON namespaces (user_id, last_record_id);
"""

# Schema version 12, the journal's deletes and edits in one number: a keyword search keeps its terms'
# match counts between searches (``keyword_budget.TermCounts``), exact across appends, and drops them
# when this moves (in any process: the triggers run whoever writes). A number only: erasing a record
# leaves no text in it.
V12_SQL = """
INSERT OR IGNORE INTO meta VALUES ('records_churn', '0');
CREATE TRIGGER records_churn_ad AFTER DELETE ON records BEGIN
    UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'records_churn';
END;
CREATE TRIGGER records_churn_au AFTER UPDATE OF text, terms ON records
WHEN old.text IS NOT new.text OR old.terms IS NOT new.terms BEGIN
    UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'records_churn';
END;
"""

# Schema version 13, a keyword index of the memories alone (every record that is not a turn, as
# ``records_memories``). context()'s profile asks for the facts sharing a word with the question: over
# the keyword budget it ranked the newest matches of its rarest word among every record and kept the
# facts, so it ranked windows of turns to find 64 facts, and found none where the budget's newest matches
# were all turns. Here the same search ranks memories only (1M messages in 10,000 sessions, a fact every
# 6 turns: the keyword searches of a context() 6.2-6.5 -> 5.1-5.3 ms; BENCHMARKS.md, issue 15, session
# 53). A record's kind never changes (no UPDATE of records sets it), so the triggers test it once.
V13_SQL = """
CREATE VIEW records_memory_fts_content AS
    SELECT id, coalesce(terms, text) AS text, scope_terms FROM records WHERE kind <> 'turn';
CREATE VIRTUAL TABLE records_memory_fts USING fts5(
    text, scope_terms, content='records_memory_fts_content', content_rowid='id',
    tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER records_memory_ai AFTER INSERT ON records WHEN new.kind <> 'turn' BEGIN
    INSERT INTO records_memory_fts (rowid, text, scope_terms)
    VALUES (new.id, coalesce(new.terms, new.text), new.scope_terms);
END;
CREATE TRIGGER records_memory_ad AFTER DELETE ON records WHEN old.kind <> 'turn' BEGIN
    INSERT INTO records_memory_fts (records_memory_fts, rowid, text, scope_terms)
    VALUES ('delete', old.id, coalesce(old.terms, old.text), old.scope_terms);
END;
CREATE TRIGGER records_memory_au AFTER UPDATE OF text, terms ON records WHEN new.kind <> 'turn' BEGIN
    INSERT INTO records_memory_fts (records_memory_fts, rowid, text, scope_terms)
    VALUES ('delete', old.id, coalesce(old.terms, old.text), old.scope_terms);
    INSERT INTO records_memory_fts (rowid, text, scope_terms)
    VALUES (new.id, coalesce(new.terms, new.text), new.scope_terms);
END;
INSERT INTO records_memory_fts (records_memory_fts) VALUES ('rebuild');
"""

# The keyword indexes: every record's, and the memories' alone (V13_SQL).
RECORDS_INDEX = "records_fts"
MEMORY_INDEX = "records_memory_fts"
KEYWORD_INDEXES = (RECORDS_INDEX, MEMORY_INDEX)


def _v14_changes_nothing_here(db: Sql) -> None:
    """Schema version 14 makes PostgreSQL's GIN index take each record at once instead of in a pending list
    that every search then reads (postgres.py's V14_SQL). FTS5 has no such list: each write transaction adds
    a segment, and FTS5 merges segments as they accumulate (``automerge``), so a search reads a bounded
    number of them."""


MIGRATIONS: tuple[str | Callable[[Sql], None], ...] = (
    *_OLD_MIGRATIONS, _migrate_to_v4, V5_SQL, V6_SQL, V7_SQL, V8_SQL, V9_SQL, V10_SQL, V11_SQL, V12_SQL, V13_SQL,
    _v14_changes_nothing_here)
assert len(MIGRATIONS) == SCHEMA_VERSION

# How long a freshly opened journal waits on the file before reporting it busy.
DEFAULT_BUSY_TIMEOUT_S = 30.0


def enable_wal(db: sqlite3.Connection, timeout_s: float) -> None:
    """Switch the file to WAL, retrying while another connection holds it.

    SQLite answers ``PRAGMA journal_mode=WAL`` with "database is locked" at once, without
    calling the busy handler, when another connection is switching the same new file or
    checkpointing it on close (8 threads opening one new journal: 21 opens of 200 rounds
    failed). WAL is stored in the file, so one success is enough; the wait is bounded by
    the same timeout as every other lock.
    """
    deadline = time.monotonic() + timeout_s
    pause = 0.005
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as e:
            if ("locked" not in str(e) and "busy" not in str(e)) or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.2)


# Up to this many namespaces, FTS5 itself narrows a search, or a walk of a scope's own matches, by their scope
# terms; past it each match is looked up in records. The first costs about what the scope's terms hold, the second
# what the journal's matches of the word hold: at 1M records of 50 users, counting a word's matches in 200 sessions
# took 3.8 ms narrowed against 13.8 looked up, in 1,000 sessions 22.5 against 14.3 (``benchmarks/shared_journal.py
# --walk-probe``). A bound between the two; in a larger journal the crossing moves up (the lookups grow with it,
# the narrowing does not). (64 until session 54, a bound no measurement had set.)
MAX_SCOPE_TERMS = 256


def fts_query(text: str, ns_ids: Sequence[int] = (), tokens: Sequence[str] | None = None) -> str | None:
    """Turn free text into a safe FTS5 query: each word quoted, OR-ed (bm25 ranks the overlap).

    The words are confined to the ``text`` column, always: the index's ``scope_terms``
    column (one ``s<ns>`` term per record) can never be matched by what a user types, so
    "S3 bucket" finds records about S3 buckets, not every record of namespace 3. With a
    few ``ns_ids`` the query also requires one of their scope terms, so FTS5 ranks only
    those sessions' matches (measured at 100k records in 1000 sessions: p50 44 ms instead
    of 202 ms for a join that ranks every match in the journal). It is only an accelerator:
    :meth:`SqliteJournal.keyword_search` filters by ``records.ns`` as well.

    ``tokens``, when given, replace the words: the blind tokens of an encrypted journal
    (with the plaintext words too when the journal also holds rows from before encryption).
    """
    terms = search_terms(text) if tokens is None else list(tokens)
    words = " OR ".join(f'"{w}"' for w in terms)
    if not words:
        return None
    return narrowed(f"text : ({words})", ns_ids)


def narrowed(match: str, ns_ids: Sequence[int]) -> str:
    """``match`` (of the ``text`` column) required to hold one of ``ns_ids``' scope terms too, when there are at most
    ``MAX_SCOPE_TERMS`` of them (else, or with none, ``match`` as it is): FTS5 walks only their records' matches.
    Their column weighs nothing in bm25, so the scores are those of ``match`` alone."""
    if not ns_ids or len(ns_ids) > MAX_SCOPE_TERMS:
        return match
    scopes = " OR ".join(f'"s{int(n)}"' for n in ns_ids)
    return f"scope_terms : ({scopes}) AND {match}"


def read_only_uri(path: Path, folder_writable: bool) -> str:
    """The URI that opens ``path`` read-only.

    ``immutable=1`` only when the folder is not writable and no ``-wal`` file exists: then
    no writer can exist (a WAL journal cannot be written without creating ``-wal`` and
    ``-shm`` beside it), and SQLite needs that promise to read without creating ``-shm``.
    """
    uri = f"file:{quote(str(path.resolve()))}?mode=ro"
    wal = path.with_name(path.name + "-wal")
    if not folder_writable and not wal.exists():
        uri += "&immutable=1"
    return uri


def read_only_reason(path: Path) -> str | None:
    """Why the journal at ``path`` can only be read here (``None`` when it can be written)."""
    folder = path.parent
    if path.exists() and not os.access(path, os.W_OK):
        return f"the file {path} is not writable"
    if folder.exists() and not os.access(folder, os.W_OK | os.X_OK):
        return f"the folder {folder} is not writable (SQLite creates -wal and -shm files beside the journal)"
    return None




class SqliteSql(Sql):
    """SQLite's dialect: ``?`` placeholders as written, a single writer (no row locks), JSON as text."""

    __slots__ = ()

    TRUE = "1"  # records_pinned is a partial index WHERE pinned = 1
    SCOPE_STAMPS = True
    CITED_FROM = "json_each(r.message_ids) j"
    CITED_ID = "j.value"
    SCOPE_TERMS = True
    TOOL_CALL_IDS = "SELECT json_extract(j.value, '$.id') FROM messages m, json_each(m.tool_calls) j"

    def many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            self.raw.executemany(sql, rows)

    def insert_id(self, sql: str, args: Sequence[Any]) -> int:
        return int(self.raw.execute(sql, args).lastrowid or 0)

    def in_(self, values: Sequence[Any]) -> tuple[str, list[Any]]:
        if not values:
            return "IN (NULL)", []
        if len(values) <= _INLINE_VALUES:
            return f"IN ({','.join('?' * len(values))})", list(values)
        # A long list travels as one JSON argument: no limit on bound variables, no chunking.
        return "IN (SELECT value FROM json_each(?))", [json.dumps(list(values))]

    def floors(self, pairs: Sequence[tuple[int, int]]) -> tuple[str, list[Any]]:
        # One JSON argument: no limit on bound variables, however many sessions a user has.
        pairs_sql = ("(SELECT json_extract(value, '$[0]') AS ns_id, json_extract(value, '$[1]') AS above "
                     "FROM json_each(?)) f")
        return pairs_sql, [json.dumps([list(p) for p in pairs])]

    def new_seq(self) -> tuple[str, tuple[Any, ...]]:
        # A counter in meta, not max(seq) + 1: it never goes back, even when the outbox empties.
        row = self.raw.execute(
            "UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key='outbox_seq' RETURNING value").fetchone()
        return "?", (int(row[0]),)

    def now(self) -> tuple[str, tuple[Any, ...]]:
        return "?", (time.time(),)  # one host: the process clock

    def duplicate_key(self, error: Exception) -> bool:
        return isinstance(error, sqlite3.IntegrityError) and "key" in str(error)


# Lists up to this long are bound as one ``?`` per value; longer ones as a JSON array.
_INLINE_VALUES = 500


# A keyword ranking: (db, FTS5 match, namespace ids, k, kinds, rowid floor) -> the best (id, score) rows.
Ranker = Callable[[Sql, str, Sequence[int], int, Sequence[str] | None, int], list[Any]]


# SQLite reads the journal through a memory map of up to this many bytes (PRAGMA mmap_size). A context()
# over a user's million messages reads pages scattered over the file (the keyword index's postings, the
# candidates' rows); SQLite's own page cache is 2 MB, so most of them are likely read with a system call
# and a copy. Mapped, a page the kernel holds is read in place: BENCHMARKS.md, issue 15, session 45 (A/B
# at 1M, both orders: p50 32.2 -> 26.1 and 28.5 -> 25.4 ms; 1k unchanged). Writes still go through
# SQLite's usual path (its journal and WAL are untouched). The cost is resident memory: the mapped pages
# count in the process's RSS, up to 354 MB of a 1M history's journal (issue 15, session 46).
DEFAULT_MMAP_BYTES = 1 << 30


class SqliteJournal(SqlJournal):
    """A journal in one SQLite file.

    One connection per instance, shared by threads under a lock; writers in other
    processes are serialized by SQLite (``BEGIN IMMEDIATE`` with a busy timeout).

    Args:
        path: the journal file (its folder is created when missing).
        synchronous: SQLite's ``synchronous`` setting, ``FULL`` by default.
        busy_timeout_s: how long a write waits for another process's write.
        read_only: open for reading only. ``None`` (default) decides from the file system: a
            journal whose file or folder is not writable is opened read-only (reads work,
            writes raise :class:`JournalError`).
        keyring: encrypt every user-content text with per-user keys kept in this keyring
            (see :mod:`langmem_tiers.keyring`). Once a journal was opened with a keyring,
            opening it without one raises :class:`~langmem_tiers.errors.KeyUnavailableError`.
        mmap_bytes: read the file through a memory map of at most this many bytes (``0``: off,
            every read through SQLite's page cache). The pages read count in the process's resident
            memory (file-backed: the kernel drops them under memory pressure); a disk error on a mapped
            page ends the process (SIGBUS) instead of raising.

    Example:
        >>> import tempfile, pathlib
        >>> j = SqliteJournal(pathlib.Path(tempfile.mkdtemp()) / "journal.db")
        >>> j.namespace_id(Namespace("s1")) > 0
        True
        >>> j.close()
    """

    def __init__(self, path: str | Path, *, synchronous: str = "FULL", busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S,
                 read_only: bool | None = None, keyring: KeyRing | None = None,
                 mmap_bytes: int = DEFAULT_MMAP_BYTES) -> None:
        if synchronous not in ("FULL", "NORMAL", "EXTRA"):
            raise JournalError(f"synchronous ({synchronous!r}) must be FULL, NORMAL or EXTRA")
        if isinstance(mmap_bytes, bool) or not isinstance(mmap_bytes, int) or mmap_bytes < 0:
            raise JournalError(f"mmap_bytes ({mmap_bytes!r}) must be an integer >= 0 (0 turns the memory map off)")
        self.path = Path(path)
        self.url = f"sqlite:///{self.path}"
        self._lock = threading.RLock()
        # Names of the sessions this process resolved (memory only): the sessions of the records it reads, and
        # which one a stale handle lost.
        self._names: dict[int, Namespace] = {}
        self._names_lock = threading.Lock()
        self._listings = ListingCache()  # the newest listing of each scope read (SqlJournal.scope_listing)
        # keyword_search's counts of query terms in each keyword index, kept exact between searches.
        self._term_counts = {index: TermCounts() for index in KEYWORD_INDEXES}
        self._cipher = None
        self._check_path()
        reason = read_only_reason(self.path)
        if read_only is None:
            read_only = reason is not None and self.path.exists()
        self.read_only_reason = (reason or "it was opened with read_only=True") if read_only else None
        try:
            if read_only:
                if not self.path.exists():
                    raise JournalError(f"cannot open journal {self.path} read-only: the file does not exist")
                folder_writable = os.access(self.path.parent, os.W_OK | os.X_OK)
                self._db = sqlite3.connect(read_only_uri(self.path, folder_writable), uri=True,
                                           isolation_level=None, check_same_thread=False, timeout=busy_timeout_s)
                self._sql = SqliteSql(self._db)
                self._check_version_read_only()
            else:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._db = sqlite3.connect(
                    str(self.path), isolation_level=None, check_same_thread=False, timeout=busy_timeout_s
                )
                self._sql = SqliteSql(self._db)
                enable_wal(self._db, busy_timeout_s)
                self._db.execute(f"PRAGMA synchronous={synchronous}")
                # Deleted rows and freed pages are overwritten with zeros: erased text leaves the file.
                self._db.execute("PRAGMA secure_delete=ON")
                self._migrate()
                self._db.execute("PRAGMA foreign_keys=ON")
            self._db.execute(f"PRAGMA mmap_size={mmap_bytes}")  # both connections read through the map
        except sqlite3.Error as e:
            self._close_quietly()
            raise JournalError(f"cannot open journal {self.path}: {e}") from e
        except OSError as e:
            self._close_quietly()
            raise JournalError(f"cannot open journal {self.path}: {e}") from e
        except BaseException:
            self._close_quietly()
            raise
        self.uid = self._meta("uid")
        self._cipher, self._plain_records = self._setup_encryption(keyring)
        self._row_codec = RowCodec(self._cipher, self._namespaces_in_journal)

    def _setup_encryption(self, keyring: KeyRing | None) -> tuple[FieldCipher | None, bool]:
        """The cipher, and whether plaintext records from before encryption may exist (keyword search
        then also sends the plaintext query words). The first open with a keyring marks the journal."""
        try:
            with self._lock:
                rows = dict(self._db.execute(
                    "SELECT key, value FROM meta WHERE key IN (?, 'encryption_plain_records')", (META_KEY,)))
                cipher = cipher_for(keyring, self.uid, rows.get(META_KEY), str(self.path))
                if cipher is None or META_KEY in rows:
                    return cipher, rows.get("encryption_plain_records") == "1"
                if self.read_only:  # cannot mark it: reads work, and writes are refused anyway
                    return cipher, True
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    plain = self._db.execute("SELECT 1 FROM records LIMIT 1").fetchone() is not None
                    self._db.execute("INSERT OR IGNORE INTO meta VALUES (?, ?), ('encryption_plain_records', ?)",
                                     (META_KEY, ALGORITHM, "1" if plain else "0"))
                    self._db.execute("COMMIT")
                except BaseException:
                    self._rollback()
                    raise
                return cipher, plain
        except BaseException:
            self._close_quietly()
            raise

    def _codec(self, db: Sql) -> RowCodec:
        # One connection per journal: one codec, whose namespace lookups take the lock themselves.
        return self._row_codec

    def _namespaces_in_journal(self, ns_ids: Collection[int]) -> dict[int, Namespace]:
        with self._lock:
            return self._namespaces_of(self._sql, ns_ids)

    def _check_path(self) -> None:
        if self.path.is_dir():
            raise JournalError(
                f"journal path {self.path} is a folder: give the journal file inside it, "
                f"for example {self.path / 'journal.sqlite3'}"
            )
        for parent in self.path.parents:
            if parent.exists():
                if not parent.is_dir():
                    raise JournalError(
                        f"cannot open journal {self.path}: {parent} is a file, not a folder: "
                        "give a path inside a folder (or one that can be created)"
                    )
                break

    def _close_quietly(self) -> None:
        db = getattr(self, "_db", None)
        if db is not None:
            db.close()
        self._db = None  # type: ignore[assignment]

    @property
    def read_only(self) -> bool:
        """True when this journal was opened for reading only."""
        return self.read_only_reason is not None

    # --- schema ---------------------------------------------------------------

    def _stored_version(self) -> int:
        has_meta = self._db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'").fetchone()
        if not has_meta:
            return 0
        row = self._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        version = parse_schema_version(row[0], str(self.path)) if row else 0
        check_version(version, str(self.path))
        return version

    def _check_version_read_only(self) -> None:
        version = self._stored_version()
        if version != SCHEMA_VERSION:
            raise JournalError(
                f"journal {self.path} has schema version {version} and needs migrating to {SCHEMA_VERSION}, "
                f"but it can only be read here ({self.read_only_reason}): open it once where it is writable"
            )

    def _migrate(self) -> None:
        with self._lock:
            # Rebuilding a table that others reference needs foreign keys off (a connection
            # setting, ignored inside a transaction); foreign_key_check verifies before commit.
            self._db.execute("PRAGMA foreign_keys=OFF")
            self._db.execute("BEGIN IMMEDIATE")
            try:
                version = self._stored_version()
                for step in range(version, SCHEMA_VERSION):
                    migration = MIGRATIONS[step]
                    if callable(migration):
                        migration(self._sql)
                    else:
                        for statement in _split_sql(migration):
                            self._db.execute(statement)
                    log.info("journal %s migrated to schema version %d", self.path, step + 1)
                if version < SCHEMA_VERSION:
                    broken = self._db.execute("PRAGMA foreign_key_check").fetchall()
                    if broken:
                        raise JournalError(f"journal {self.path}: migration left dangling references {broken[:5]}")
                finish_migration(self._sql, version, uuid.uuid4().hex)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def _meta(self, key: str) -> str:
        row = self._db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return str(row[0])

    # --- transactions ---------------------------------------------------------

    @contextmanager
    def _snapshot(self) -> Iterator[Sql]:
        with self._lock:
            self._check_open()
            self._db.execute("BEGIN")
            try:
                yield self._sql
            finally:
                self._db.execute("COMMIT")

    def _rollback(self) -> None:
        try:
            self._db.execute("ROLLBACK")
        except sqlite3.Error:  # the failed statement may already have ended the transaction
            pass

    def _check_open(self) -> None:
        if self._db is None:
            raise JournalError("journal is closed")

    @contextmanager
    def _autocommit(self) -> Iterator[Sql]:
        with self._lock:
            self._check_open()
            try:
                yield self._sql
            except sqlite3.Error as e:
                raise JournalError(f"journal operation failed: {e}") from e

    @contextmanager
    def _txn(self) -> Iterator[Sql]:
        with self._lock:
            self._check_open()
            if self.read_only_reason is not None:
                raise JournalError(
                    f"journal {self.path} is open read-only ({self.read_only_reason}): writes are refused; "
                    "make the file and its folder writable and open it again"
                )
            try:
                self._db.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as e:
                raise JournalError(f"journal {self.path} is not writable: {e}") from e
            try:
                yield self._sql
                self._db.execute("COMMIT")
            except sqlite3.Error as e:
                self._rollback()
                raise JournalError(f"journal write failed and was rolled back: {e}") from e
            except BaseException:
                self._rollback()
                raise

    # --- keyword index and outbox claims ----------------------------------------

    def keyword_search(self, query: str, ns_ids: Sequence[int], k: int, kinds: Sequence[str] | None = None,
                       versions: Mapping[int, Versions] | None = None) -> list[KeywordHit]:
        """bm25-ranked records of these namespaces matching any word of ``query``.

        The namespace filter is a join on the records table (FTS5 also narrows by scope
        terms, a column that user words never reach: see :func:`fts_query`). At most
        ``keyword_budget`` matches are ranked (:mod:`.keyword_budget`): a scope of more
        records than that first counts each term's matches (journal-wide, up to the budget:
        an upper bound of the scope's), and a query over the budget ranks its rarest terms,
        or the newest matches of its rarest term, found through FTS5's rowid range. Over the
        budget, a search of memories only (``kinds`` without ``"turn"``) does all of that in the
        memories' own index (schema v13): their matches are counted, windowed and ranked without
        the turns around them. Within the budget it ranks as it always did, in every record's index.
        Where the journal's counts and windows left it short of ``k`` because other scopes' matches
        (or other kinds') took its place, it plans again on the scope's own (:func:`crowded_out`).
        """
        if not ns_ids or k <= 0:
            return []
        tokens = self._query_tokens(query, ns_ids)
        terms = search_terms(query) if tokens is None else tokens
        if not terms:
            return []
        budget = self.keyword_budget
        with self._autocommit() as db:
            if budget is None or scope_size(db, ns_ids, kinds, budget + 1) <= budget:
                # As without a budget: FTS5 narrows by the scope's terms (few records: cheap).
                match = fts_query("", ns_ids, terms)
                return _hits(self._ranking(db, ns_ids, kinds)(db, match, ns_ids, k, kinds, 0) if match else [])
            index = MEMORY_INDEX if kinds and "turn" not in kinds else RECORDS_INDEX
            ranked = self._ranking(db, ns_ids, kinds, index)
            counts = self._counts(db, terms, budget + 1, index)
            rows, crowded = self._ranked_in_budget(db, ranked, counts, ns_ids, k, kinds, budget, index, own=False)
            if crowded:
                # The counts and windows above are the journal's: other users' or sessions' matches (or
                # records of other kinds) filled them, so this scope found fewer than k where it holds
                # more. Plan again on the scope's own matches (walks that pass the others': slower, and
                # only here).
                counts = [self._count_matches(db, t, budget + 1, index=index, scope=(ns_ids, kinds)) for t in terms]
                rows, _ = self._ranked_in_budget(db, ranked, counts, ns_ids, k, kinds, budget, index, own=True)
            return _hits(rows)

    def _ranked_in_budget(self, db: Sql, ranked: Ranker, counts: Sequence[TermCount], ns_ids: Sequence[int], k: int,
                          kinds: Sequence[str] | None, budget: int, index: str, own: bool) -> tuple[list[Any], bool]:
        """The rows of a scope over the budget, ranked as :func:`plan_terms` decides on ``counts`` (each term's
        matches, up to the budget + 1: the journal's, or with ``own`` the scope's own, whose newest matches the
        recency windows then read); and, planned on the journal's, whether :func:`crowded_out` says to plan again
        on the scope's own."""
        counts = [c for c in counts if c.matches > 0]
        if not counts:
            return [], False  # words the journal never held: nothing matches (as PostgreSQL's _bounded_bm25)
        scope = (ns_ids, kinds) if own else None
        plan = plan_terms(counts, budget)
        # A large scope: the terms' matches counted (at most the budget) are the rows ranked. FTS5 walking
        # the scope's own term (every record of the scope) would cost more than the join that filters the
        # matches, and it never changes a score.
        kept = fts_query("", (), plan.terms)
        if kept is None:
            return [], False
        # The rows are those holding a kept term; the dropped terms whose matches were all
        # counted (at most the budget each) score them too: bm25 sums the phrases of "kept AND
        # scoring" (a kept term counts twice), which orders them closer to the unbounded search
        # (benchmarks/sql_layer_cost.py --keyword-scale). A term over the budget never scores:
        # FTS5's bm25 counts every match of each phrase for its weight, O(its matches).
        scoring = fts_query("", (), [c.term for c in counts if c.matches <= budget])
        match = kept if scoring in (None, kept) else f"{kept} AND {scoring}"
        if own:
            match = narrowed(match, ns_ids)  # planned again on the scope's own: rank only its matches
        if not plan.recent:  # every term when they fit: the same hits as without a budget
            rows = ranked(db, match, ns_ids, k, kinds, 0)
            return rows, not own and crowded_out(plan, counts, 0, len(rows), k)
        newest: list[int] = []  # the kept term's newest matches, read as far as the windows reach
        rows = []
        for window in recency_windows(budget):
            more = self._newest_matches(db, kept, newest[-1] if newest else None, window - len(newest), index, scope)
            if not more:
                break  # the last window held every match: ranking it again finds the same rows
            newest += more
            rows = ranked(db, match, ns_ids, k, kinds, newest[-1])
            if len(rows) >= k or len(newest) < window:
                break
        return rows, not own and crowded_out(plan, counts, len(newest), len(rows), k)

    @staticmethod
    def _newest_matches(db: Sql, match: str, below: int | None, limit: int, index: str = RECORDS_INDEX,
                        scope: ScopeFilter | None = None) -> list[int]:
        """Ids of the ``limit`` newest records matching ``match`` in ``index`` under id ``below`` (``None``: any),
        of the whole journal or of ``scope`` (its namespaces and kinds). Each recency window reads only the matches
        past the last one's (FTS5 seeks to the rowid bound): the first window, which most searches stop at, walks a
        quarter of the budget's postings, not all."""
        sql, args = _matching(db, match, index, scope)
        if below is not None:
            sql += f" AND {index}.rowid < ?"
            args.append(below)
        return [int(r[0]) for r in db.all(f"{sql} ORDER BY {index}.rowid DESC LIMIT ?", [*args, limit])]

    def _counts(self, db: Sql, terms: Sequence[str], cap: int, index: str = RECORDS_INDEX) -> list[TermCount]:
        """Each term's matches in the whole journal up to ``cap`` (:meth:`_count_matches`, in ``index``), through
        the counts held from earlier searches: a held count costs a seek to the matches appended since it was
        taken."""
        churn, top = db.one("SELECT (SELECT value FROM meta WHERE key = 'records_churn'), "
                            "(SELECT coalesce(max(id), 0) FROM records)")
        if churn is None:  # a read-only journal of an older schema: nothing tells its deletes, count afresh
            return [self._count_matches(db, t, cap, index=index) for t in terms]
        held_counts = self._term_counts[index]
        held_counts.restamp(churn)
        counts = []
        for term in terms:
            entry = held_counts.get(term, cap)
            count = self._brought_up(db, *entry, cap, top, index) if entry is not None else None
            if count is None:
                count = self._count_matches(db, term, cap, upto=top, index=index)
            held_counts.put(count, cap, top)
            counts.append(count)
        return counts

    def _brought_up(self, db: Sql, held: TermCount, upto: int, cap: int, top: int, index: str) -> TermCount | None:
        """``held`` (counted over the records up to id ``upto``) over those up to ``top``: a seek to the matches
        appended since. ``None`` where it cannot be (ids above ``top``, or the index disagrees): count afresh."""
        if upto > top:
            return None
        if upto == top:
            return held
        grown = counted_since(held, self._count_matches(db, held.term, cap, above=upto, upto=top, index=index), cap)
        return grown if isinstance(grown, TermCount) else self._window_moved(db, held, grown, cap, index)

    @staticmethod
    def _window_moved(db: Sql, held: TermCount, left: int, cap: int, index: str) -> TermCount | None:
        """``held``'s term over ``cap`` once its ``left`` oldest counted matches left the window of the newest
        ``cap``: the new oldest is the match ``left`` places above the held oldest (no delete since: the
        matches there are the held ones). ``None`` if the index disagrees (count afresh)."""
        row = db.one(f"SELECT rowid FROM {index} WHERE {index} MATCH ? AND rowid >= ? "
                     "ORDER BY rowid LIMIT 1 OFFSET ?", (fts_query("", (), [held.term]), held.oldest, left))
        return TermCount(held.term, cap, int(row[0])) if row else None

    @staticmethod
    def _count_matches(db: Sql, term: str, cap: int, above: int = 0, upto: int | None = None,
                       index: str = RECORDS_INDEX, scope: ScopeFilter | None = None) -> TermCount:
        """A term's matches in ``index`` (the whole journal's, or ``scope``'s) with ids in (``above``, ``upto``],
        newest first, counted up to ``cap`` (no ranking: cheap; FTS5 seeks to the bounds)."""
        match = fts_query("", (), [term])
        if match is None:
            return TermCount(term, 0, 0)  # no word to search: matches nothing
        sql, args = _matching(db, match, index, scope)
        sql += f" AND {index}.rowid > ?"
        args.append(above)
        if upto is not None:
            sql += f" AND {index}.rowid <= ?"
            args.append(upto)
        row = db.one(f"SELECT count(*), coalesce(min(id), 0) FROM ({sql} ORDER BY {index}.rowid DESC LIMIT ?)",
                     [*args, cap])
        return TermCount(term, int(row[0]), int(row[1]))

    @staticmethod
    def _ranking(db: Sql, ns_ids: Sequence[int], kinds: Sequence[str] | None = None,
                 index: str = RECORDS_INDEX) -> Ranker:
        """How to rank a keyword search of ``ns_ids`` in ``index``: ``(db, match, ns_ids, k, kinds, floor)`` to
        the ``k`` best matches by bm25 among records of ``ns_ids`` (of ``kinds``) with ids from ``floor`` on.
        Chosen once per search: a search over the budget ranks once per recency window.

        Two ways to the same rows. Joined: every match is looked up in ``records`` and kept to the scope
        before ranking. Streamed: FTS5 ranks its matches alone and the best are read in growing chunks,
        each kept to the scope by one lookup by id, until ``k`` are found: the first ``k`` in the same
        order. Streamed is faster when most matches are in the scope (every session of a journal of 100k
        records: 6.1-6.5 ms against 10.1-10.7 joined, two runs), slower when few are (a tenth of its
        sessions: 13.0-14.0 against 5.4-5.6), so it is taken when the scope holds at least half of the
        journal's sessions (a threshold between the two measured ends, not tuned:
        ``benchmarks/keyword_scope.py``). Kinds without turns, searched in every record's index (a scope
        of memories within the budget), keep a small part of its matches whatever the sessions: there
        streamed would rank the turns to drop them, so they are joined (the profile's search of LongMemEval's
        30 haystacks merged, 742 of 1,467 sessions holding 2,216 memories among 23,059 records: 2.2 ms
        p50 joined against 7.2 streamed, the same rows for each of its 28 questions, three rounds).
        """
        # Sessions are numbered from 1 (AUTOINCREMENT): the highest number is their count but for erased
        # ones, read at the end of the primary key (counting 10,000 rows cost ~0.8 ms a search).
        journal_ns = int(db.one("SELECT coalesce(max(ns), 0) FROM namespaces")[0])
        memories_among_all = index == RECORDS_INDEX and bool(kinds) and "turn" not in (kinds or ())
        streamed = 2 * len(ns_ids) >= journal_ns and not memories_among_all
        way = SqliteJournal._ranked_streamed if streamed else SqliteJournal._ranked_joined
        return functools.partial(way, index=index)

    @staticmethod
    def _ranked_joined(db: Sql, match: str, ns_ids: Sequence[int], k: int, kinds: Sequence[str] | None,
                       floor: int, index: str = RECORDS_INDEX) -> list[Any]:
        """:meth:`_ranking`'s way for a scope holding a small part of the journal: every match joined, then ranked."""
        scope, scope_args = in_scope(db, (ns_ids, kinds), "r.")
        sql = (f"SELECT r.id, bm25({index}, 1.0, 0.0) AS score FROM {index} "
               f"JOIN records r ON r.id = {index}.rowid WHERE {index} MATCH ?{scope}")
        args = [match, *scope_args]
        if floor:
            sql += f" AND {index}.rowid >= ?"
            args.append(floor)
        return db.all(sql + " ORDER BY score, r.id DESC LIMIT ?", [*args, k])

    @staticmethod
    def _ranked_streamed(db: Sql, match: str, ns_ids: Sequence[int], k: int, kinds: Sequence[str] | None,
                         floor: int, index: str = RECORDS_INDEX) -> list[Any]:
        """:meth:`_ranking`'s way for a scope that holds most of the journal: FTS5 ranks alone, the scope is tested
        on the best matches only."""
        sql = f"SELECT rowid, bm25({index}, 1.0, 0.0) AS score FROM {index} WHERE {index} MATCH ?"
        args: list[Any] = [match]
        if floor:
            sql += " AND rowid >= ?"
            args.append(floor)
        ranked = db.execute(sql + " ORDER BY score, rowid DESC", args)
        sessions = set(ns_ids)
        wanted_kinds = set(kinds) if kinds else None
        out: list[Any] = []
        chunk = max(2 * k, 64)
        try:
            while len(out) < k:
                rows = ranked.fetchmany(chunk)
                if not rows:
                    break
                inside = ids_in_scope(db, [r[0] for r in rows], sessions, wanted_kinds)
                out += [r for r in rows if r[0] in inside]
                chunk *= 2  # fewer, larger lookups while the scope's matches are sparse
        finally:
            ranked.close()  # the rest is never read: end the statement now, not when it is collected
        return out[:k]

    def _query_tokens(self, query: str, ns_ids: Sequence[int]) -> list[str] | None:
        """The blind tokens of the query's words for these namespaces' keys (``None`` when not encrypted);
        plus the plaintext words when records from before encryption may exist."""
        if self._cipher is None:
            return None
        words = search_terms(query)
        tokens = self._cipher.query_terms(self._search_namespaces(ns_ids), words)
        return tokens + words if self._plain_records else tokens

    def claim_outbox(self, limit: int, *, owner: str, lease_s: float, due_only: bool = True) -> list[OutboxItem]:
        """Claim up to ``limit`` unleased items (due ones unless ``due_only=False``) for ``lease_s`` seconds.

        The claim runs in one ``BEGIN IMMEDIATE`` transaction, so two processes never claim
        one row; a lease that expires (a crashed indexer) makes the row claimable again.
        """
        check_claim(limit, owner, lease_s)
        if limit == 0:
            return []
        with self._txn() as db:
            now = time.time()
            rows = db.all(
                "UPDATE outbox SET owner=?, claimed_until=? WHERE record_id IN ("
                "SELECT record_id FROM outbox WHERE retry_at <= ? AND claimed_until <= ? ORDER BY record_id LIMIT ?"
                ") RETURNING record_id, op, attempts, seq",
                (owner, now + lease_s, now if due_only else float("inf"), now, limit))
        return sorted((OutboxItem(int(r[0]), str(r[1]), int(r[2]), int(r[3]), owner) for r in rows),
                      key=lambda i: i.record_id)

    def _rebuild_keyword_index(self, db: Sql) -> None:
        for index in KEYWORD_INDEXES:
            db.execute(f"INSERT INTO {index} ({index}) VALUES ('rebuild')")

    def integrity_check(self) -> str:
        with self._autocommit() as db:
            return str(db.one("PRAGMA integrity_check")[0])

    # --- physical erasure -----------------------------------------------------

    def _forget_held(self) -> None:
        super()._forget_held()
        with self._lock:
            for counts in self._term_counts.values():
                counts.clear()  # no word asked of an erased session stays in memory

    def compact(self) -> bool:
        """Remove what deletes left behind on disk; True when the WAL was fully truncated.

        FTS5 keeps the terms of a deleted record in its old segments until they are merged:
        ``optimize`` rewrites the index into one segment without them (its cost grows with
        the index: see the report in the journal tests). Then a ``TRUNCATE`` checkpoint
        copies the WAL into the file (where ``secure_delete`` zeroed the freed content) and
        empties it. Another process reading at that moment keeps the WAL alive: False.
        """
        with self._txn() as db:
            for index in KEYWORD_INDEXES:
                db.execute(f"INSERT INTO {index} ({index}) VALUES ('optimize')")
        with self._autocommit() as db:
            busy, _, _ = db.one("PRAGMA wal_checkpoint(TRUNCATE)")
        if busy:
            log.warning("journal %s: another connection kept the WAL from being truncated; compact() again later",
                        self.path)
        return not busy

    def residue(self, needles: Sequence[str]) -> dict[str, int]:
        """Raw occurrences of each needle (UTF-8 bytes) in the journal file, its ``-wal`` and ``-shm``.

        What an on-disk erasure check needs: after :meth:`compact`, an erased text should be
        found 0 times. The journal stores text as plain UTF-8, but a long text spills into
        overflow pages, and a copy cut by a page boundary is no longer one byte run: use short,
        distinctive needles (a name, a code word), which a page boundary rarely cuts.
        """
        with self._lock:
            files = [self.path, self.path.with_name(self.path.name + "-wal"),
                     self.path.with_name(self.path.name + "-shm")]
            return {needle: sum(_count_in_file(f, needle.encode("utf-8")) for f in files) for needle in needles}

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None  # type: ignore[assignment]


def _matching(db: Sql, match: str, index: str, scope: ScopeFilter | None) -> tuple[str, list[Any]]:
    """``SELECT`` of the ids (``id``) of ``index``'s records matching ``match``, in ``scope`` when given (its
    namespaces and kinds, looked up by id: FTS5 drives, in rowid order), and its arguments; conditions on
    ``{index}.rowid`` may follow."""
    if scope is None:
        return f"SELECT {index}.rowid AS id FROM {index} WHERE {index} MATCH ?", [match]
    match = narrowed(match, scope[0])  # when it narrows, the lookups below only confirm (and test the kinds)
    conditions, args = in_scope(db, scope, "r.")
    # CROSS JOIN keeps FTS5 outside: SQLite would otherwise walk every record of the scope's namespaces.
    sql = (f"SELECT {index}.rowid AS id FROM {index} CROSS JOIN records r ON r.id = {index}.rowid "
           f"WHERE {index} MATCH ?{conditions}")
    return sql, [match, *args]


def _hits(rows: Sequence[Any]) -> list[KeywordHit]:
    # bm25() is lower-is-better and negative; report a positive relevance.
    return [KeywordHit(int(r[0]), i + 1, -float(r[1])) for i, r in enumerate(rows)]


def _count_in_file(path: Path, needle: bytes, chunk: int = 1 << 20) -> int:
    """Occurrences of ``needle`` in a file read in chunks (overlapping, so none is split)."""
    if not needle:
        raise JournalError("residue() needs non-empty needles")
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        return 0
    count, tail = 0, b""
    with handle:
        while block := handle.read(chunk):
            data = tail + block
            count += data.count(needle)
            # Keep len(needle) - 1 bytes: a match crossing the chunk boundary is found next time,
            # and no match fits wholly inside the kept tail, so none is counted twice.
            tail = data[-(len(needle) - 1):] if len(needle) > 1 else b""
    return count


def _split_sql(script: str) -> list[str]:
    """Split a migration into statements, keeping trigger bodies whole."""
    statements, current = [], []
    for line in script.strip().splitlines():
        current.append(line)
        text = "\n".join(current).strip()
        if text.endswith(";") and (not text.upper().startswith("CREATE TRIGGER") or text.upper().endswith("END;")):
            statements.append(text)
            current = []
    return statements
