"""The SQLite journal: one file, WAL, every write committed before the call returns.

Erasure is physical where SQLite allows it: ``secure_delete`` is on (deleted cells and
freed pages are overwritten with zeros), and :meth:`SqliteJournal.compact` merges the
FTS5 index (dropping the terms of deleted records from its segments) and truncates the
WAL, so :meth:`SqliteJournal.residue` can prove that no copy of an erased text is left in
the journal file, its ``-wal`` or its ``-shm``.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

from langmem_tiers.errors import JournalError, SchemaVersionError, SessionErasedError
from langmem_tiers.journal.base import (
    DEFAULT_SUMMARY_HISTORY,
    SCHEMA_VERSION,
    KeywordHit,
    Namespace,
    NewRecord,
    OutboxItem,
    Record,
    Scope,
    SessionState,
    SummaryVersion,
    WindowEntry,
    check_claim,
    erased_message,
    legacy_message_keys,
    nfc_merge_plan,
    parse_schema_version,
    provenance_after_erasure,
    search_terms,
)
from langmem_tiers.journal.encryption import (
    ALGORITHM,
    META_KEY,
    RECORD_METADATA,
    RECORD_TEXT,
    FieldCipher,
    RowCodec,
    cipher_for,
    shred_orphans,
)
from langmem_tiers.keyring import KeyRing
from langmem_tiers.messages import Message, ToolCall

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


def _migrate_to_v4(db: sqlite3.Connection) -> None:
    """Schema version 4 (see ``V4_SQL``), then stored ids folded into NFC.

    Namespaces whose user, agent and session ids become equal in NFC are merged into the
    lowest id (:func:`~langmem_tiers.journal.base.nfc_merge_plan`): their messages, records
    and outbox rows move there (links follow the records), the lowest id's session state is
    kept and the others' dropped; every moved or renamed record is queued for upsert so the
    vector store learns its new ids.
    """
    for statement in _split_sql(V4_SQL):
        db.execute(statement)
    rows = db.execute("SELECT ns, user_id, agent_id, session_id FROM namespaces ORDER BY ns").fetchall()
    merges, renames = nfc_merge_plan((int(r[0]), str(r[1]), str(r[2]), str(r[3])) for r in rows)
    touched: set[int] = set()
    for source, target in merges:
        db.execute("UPDATE messages SET ns=? WHERE ns=?", (target, source))
        db.execute("UPDATE records SET ns=?, scope_terms=? WHERE ns=?", (target, f"s{target}", source))
        db.execute("UPDATE outbox SET ns=? WHERE ns=?", (target, source))
        db.execute("DELETE FROM state WHERE ns=?", (source,))
        db.execute("DELETE FROM namespaces WHERE ns=?", (source,))
        touched.add(target)
        log.info("journal migration: namespace %d merged into %d (equal ids in NFC)", source, target)
    for ns_id, ns in renames:
        db.execute("UPDATE namespaces SET user_id=?, agent_id=?, session_id=? WHERE ns=?",
                   (ns.user_id, ns.agent_id, ns.session_id, ns_id))
        touched.add(ns_id)
    if merges:  # moved records changed scope terms, which no trigger follows
        db.execute("INSERT INTO records_fts (records_fts) VALUES ('rebuild')")
    for ns_id in sorted(touched):
        ids = [int(r[0]) for r in db.execute("SELECT id FROM records WHERE ns=?", (ns_id,))]
        _queue(db, ids, "upsert", ns_id)
    _bump(db, sorted(touched))
    rows = db.execute("SELECT id, ns, metadata FROM messages WHERE key IS NULL AND metadata LIKE '%\"langchain\"%' "
                      "ORDER BY id").fetchall()
    db.executemany("UPDATE messages SET key=? WHERE id=?", legacy_message_keys(rows))


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

MIGRATIONS: tuple[str | Callable[[sqlite3.Connection], None], ...] = (
    *_OLD_MIGRATIONS, _migrate_to_v4, V5_SQL, V6_SQL, V7_SQL)
assert len(MIGRATIONS) == SCHEMA_VERSION

# How long a freshly opened journal waits on the file before reporting it busy.
DEFAULT_BUSY_TIMEOUT_S = 30.0


# Up to this many namespaces, FTS5 itself narrows the search by their scope terms.
MAX_SCOPE_TERMS = 64


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
    if ns_ids and len(ns_ids) <= MAX_SCOPE_TERMS:
        scopes = " OR ".join(f'"s{int(n)}"' for n in ns_ids)
        return f"scope_terms : ({scopes}) AND text : ({words})"
    return f"text : ({words})"


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


class SqliteJournal:
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

    Example:
        >>> import tempfile, pathlib
        >>> j = SqliteJournal(pathlib.Path(tempfile.mkdtemp()) / "journal.db")
        >>> j.namespace_id(Namespace("s1")) > 0
        True
        >>> j.close()
    """

    def __init__(self, path: str | Path, *, synchronous: str = "FULL", busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S,
                 read_only: bool | None = None, keyring: KeyRing | None = None) -> None:
        if synchronous not in ("FULL", "NORMAL", "EXTRA"):
            raise JournalError(f"synchronous ({synchronous!r}) must be FULL, NORMAL or EXTRA")
        self.path = Path(path)
        self.url = f"sqlite:///{self.path}"
        self._lock = threading.RLock()
        # Names of the sessions this process resolved, to say which one a stale handle lost (memory only).
        self._names: dict[int, Namespace] = {}
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
                self._check_version_read_only()
            else:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._db = sqlite3.connect(
                    str(self.path), isolation_level=None, check_same_thread=False, timeout=busy_timeout_s
                )
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute(f"PRAGMA synchronous={synchronous}")
                # Deleted rows and freed pages are overwritten with zeros: erased text leaves the file.
                self._db.execute("PRAGMA secure_delete=ON")
                self._migrate()
                self._db.execute("PRAGMA foreign_keys=ON")
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
        self._codec = RowCodec(self._cipher, self._namespace_of)

    @property
    def encrypted(self) -> bool:
        """True when this journal seals user content (it was opened with a keyring)."""
        return self._cipher is not None

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

    def _namespace_of(self, ns_id: int) -> Namespace:
        """The ids of a namespace (its key subject), from the cache or the journal."""
        known = self._names.get(ns_id)
        if known is not None:
            return known
        with self._lock:
            row = self._db.execute("SELECT session_id, user_id, agent_id FROM namespaces WHERE ns=?",
                                   (ns_id,)).fetchone()
        if row is None:
            raise SessionErasedError(erased_message(ns_id, None))
        ns = Namespace(row[0], row[1], row[2])
        self._remember(ns_id, ns)
        return ns

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
        if version > SCHEMA_VERSION:
            raise SchemaVersionError(
                f"journal {self.path} has schema version {version}, newer than this "
                f"langmem-tiers understands ({SCHEMA_VERSION}): upgrade langmem-tiers"
            )
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
                        migration(self._db)
                    else:
                        for statement in _split_sql(migration):
                            self._db.execute(statement)
                    log.info("journal %s migrated to schema version %d", self.path, step + 1)
                if version < SCHEMA_VERSION:
                    broken = self._db.execute("PRAGMA foreign_key_check").fetchall()
                    if broken:
                        raise JournalError(f"journal {self.path}: migration left dangling references {broken[:5]}")
                if version == 0:
                    self._db.execute("INSERT INTO meta VALUES ('uid', ?)", (uuid.uuid4().hex,))
                self._db.execute(
                    "INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def _meta(self, key: str) -> str:
        row = self._db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return str(row[0])

    # --- transactions ---------------------------------------------------------

    @contextmanager
    def write(self, ns_id: int) -> Iterator[_SqliteWrite]:
        """A serialized write transaction; commits on exit, rolls back on error.

        Raises:
            SessionErasedError: the namespace was erased meanwhile (its id is never reused).
        """
        with self._txn() as db:
            _require_session(db, ns_id, self._names.get(ns_id))
            tx = _SqliteWrite(db, ns_id, self._codec)
            yield tx
            if tx.touched:
                _bump(db, [ns_id])

    @contextmanager
    def read(self) -> Iterator[_SqliteRead]:
        with self._lock:
            self._check_open()
            self._db.execute("BEGIN")
            try:
                yield _SqliteRead(self._db, self._codec)
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
    def _autocommit(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._check_open()
            try:
                yield self._db
            except sqlite3.Error as e:
                raise JournalError(f"journal operation failed: {e}") from e

    @contextmanager
    def _txn(self) -> Iterator[sqlite3.Connection]:
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
                yield self._db
                self._db.execute("COMMIT")
            except sqlite3.Error as e:
                self._rollback()
                raise JournalError(f"journal write failed and was rolled back: {e}") from e
            except BaseException:
                self._rollback()
                raise

    # --- namespaces -----------------------------------------------------------

    def namespace_id(self, ns: Namespace, create: bool = True) -> int | None:
        key = (ns.user_id, ns.agent_id, ns.session_id)
        with self._autocommit() as db:
            row = db.execute(
                "SELECT ns FROM namespaces WHERE user_id=? AND agent_id=? AND session_id=?", key
            ).fetchone()
        if row or not create:
            return self._remember(int(row[0]), ns) if row else None
        with self._txn() as db:
            db.execute(
                "INSERT OR IGNORE INTO namespaces (user_id, agent_id, session_id, created_at) VALUES (?,?,?,?)",
                (*key, time.time()),
            )
            row = db.execute(
                "SELECT ns FROM namespaces WHERE user_id=? AND agent_id=? AND session_id=?", key
            ).fetchone()
            db.execute("INSERT OR IGNORE INTO state (ns) VALUES (?)", (row[0],))
        return self._remember(int(row[0]), ns)

    def _remember(self, ns_id: int, ns: Namespace) -> int:
        if len(self._names) >= _NAMES_KEPT:
            self._names.pop(next(iter(self._names)))
        self._names[ns_id] = ns
        return ns_id

    def namespaces(self, scope: Scope | None = None) -> list[tuple[int, Namespace]]:
        """Namespaces a scope may see (every one without a scope); anonymous scopes narrow to the session."""
        sql, args = "SELECT ns, session_id, user_id, agent_id FROM namespaces", ()
        if scope is not None:
            own = scope.namespace
            kind = scope.effective_kind
            if kind == "session":
                sql += " WHERE session_id=? AND user_id=? AND agent_id=?"
                args = (own.session_id, own.user_id, own.agent_id)  # type: ignore[assignment]
            elif kind == "user":
                sql += " WHERE user_id=?"
                args = (own.user_id,)  # type: ignore[assignment]
            else:
                sql += " WHERE user_id=? AND agent_id=?"
                args = (own.user_id, own.agent_id)  # type: ignore[assignment]
        with self._autocommit() as db:
            return [(int(r[0]), Namespace(r[1], r[2], r[3])) for r in db.execute(sql + " ORDER BY ns", args)]

    # --- messages -------------------------------------------------------------

    def iter_messages(self, ns_id: int, after: int = 0, batch: int = 500) -> Iterator[Message]:
        cursor = after
        while True:
            with self._autocommit() as db:
                rows = db.execute(
                    f"SELECT {_MSG_COLS} FROM messages WHERE ns=? AND id>? ORDER BY id LIMIT ?",
                    (ns_id, cursor, batch),
                ).fetchall()
            if not rows:
                return
            for row in rows:
                yield _row_message(row, self._codec)
            cursor = rows[-1][0]

    def messages_by_id(self, ids: Sequence[int]) -> list[Message]:
        with self._autocommit() as db:
            rows = _select_in(db, f"SELECT {_MSG_COLS} FROM messages WHERE id IN ({{}}) ORDER BY id", ids)
            return [_row_message(r, self._codec) for r in rows]

    def count_messages(self, ns_id: int | None = None) -> int:
        with self._autocommit() as db:
            if ns_id is None:
                return int(db.execute("SELECT count(*) FROM messages").fetchone()[0])
            return int(db.execute("SELECT count(*) FROM messages WHERE ns=?", (ns_id,)).fetchone()[0])

    def clear_session(self, ns_id: int, keep_memories: bool = False) -> list[int]:
        """Delete a session's messages, summary and records; returns the record ids removed.

        The session row stays; ``summary_version`` and ``version`` grow (never reset), so a
        summary computed before the clear is recognized as stale by its version.
        ``keep_memories`` keeps explicit memories that no message produced (``remember()``).
        """
        with self._txn() as db:
            record_ids = _delete_ns_content(db, ns_id, keep_memories)
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
            if not ids or db.execute("SELECT 1 FROM state WHERE ns=?", (ns_id,)).fetchone() is None:
                return []
            rows = _select_in(
                db, f"SELECT DISTINCT r.id, r.kind, r.message_ids FROM records r, json_each(r.message_ids) j "
                f"WHERE r.ns={int(ns_id)} AND j.value IN ({{}})", ids)
            record_ids, narrowed = provenance_after_erasure(
                ((int(r[0]), str(r[1]), json.loads(r[2])) for r in rows), ids)
            record_ids.sort()
            _delete_records(db, record_ids)
            # A memory also said in messages that remain keeps those as its provenance.
            db.executemany("UPDATE records SET message_ids=? WHERE id=?",
                           [(json.dumps(list(remaining)), rid) for rid, remaining in narrowed])
            _select_in(db, f"DELETE FROM messages WHERE ns={int(ns_id)} AND id IN ({{}})", ids)
            db.execute("DELETE FROM summary_versions WHERE ns=? AND summary_cursor >= ?", (ns_id, ids[0]))
            if ids[0] <= _state(db, ns_id, None).summary_cursor:
                clean = db.execute("SELECT text, tokens, summary_cursor FROM summary_versions WHERE ns=? "
                                   "ORDER BY version DESC LIMIT 1", (ns_id,)).fetchone() or ("", 0, 0)
                # The clean version's text is copied as stored (sealed the same way, same subject).
                db.execute("UPDATE state SET summary=?, summary_tokens=?, summary_cursor=?, "
                           "summary_version=summary_version+1, failures=0, last_error=NULL, retry_at=0 WHERE ns=?",
                           (*clean, ns_id))
            _bump(db, [ns_id])
            return record_ids

    def delete_namespaces(self, ns_ids: Sequence[int]) -> list[int]:
        """Delete namespaces with everything they hold; returns the record ids removed.

        In an encrypted journal, the key of every user (or anonymous session) left without a
        session is then destroyed, after the commit: copies of the rows that outlive the
        delete (a backup, a copied file) can no longer be opened.
        """
        removed: list[int] = []
        erased: list[Namespace] = []
        with self._txn() as db:
            for ns_id in dict.fromkeys(ns_ids):
                row = db.execute("SELECT session_id, user_id, agent_id FROM namespaces WHERE ns=?",
                                 (ns_id,)).fetchone()
                if row is not None:
                    erased.append(Namespace(row[0], row[1], row[2]))
                removed += _delete_ns_content(db, ns_id)
                db.execute("DELETE FROM state WHERE ns=?", (ns_id,))
                db.execute("DELETE FROM namespaces WHERE ns=?", (ns_id,))
        shred_orphans(self._cipher, erased, self._subject_in_use)
        return removed

    def _subject_in_use(self, ns: Namespace) -> bool:
        """Whether a namespace sealed with ``ns``'s key still exists (its user, or the anonymous session)."""
        sql, args = (("SELECT 1 FROM namespaces WHERE user_id=? LIMIT 1", (ns.user_id,)) if not ns.anonymous else
                     ("SELECT 1 FROM namespaces WHERE user_id='' AND agent_id=? AND session_id=?",
                      (ns.agent_id, ns.session_id)))
        with self._autocommit() as db:
            return db.execute(sql, args).fetchone() is not None

    def summary_history(self, ns_id: int, limit: int = DEFAULT_SUMMARY_HISTORY) -> list[SummaryVersion]:
        """The session's saved summary versions, newest first (at most ``limit``)."""
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise JournalError(f"limit ({limit!r}) must be an integer >= 0")
        with self._autocommit() as db:
            rows = db.execute("SELECT version, text, tokens, summary_cursor, created_at FROM summary_versions "
                              "WHERE ns=? ORDER BY version DESC LIMIT ?", (ns_id, limit)).fetchall()
        return [SummaryVersion(int(r[0]), self._codec.summary(ns_id, str(r[1])), int(r[2]), int(r[3]), float(r[4]))
                for r in rows]

    # --- records, keyword index, outbox ---------------------------------------

    def count_records(self, ns_id: int) -> int:
        return self.record_stats(ns_id)[0]

    def record_stats(self, ns_id: int) -> tuple[int, int]:
        """How many records a session has, and its largest record id (0 when none)."""
        with self._autocommit() as db:
            row = db.execute("SELECT count(*), coalesce(max(id), 0) FROM records WHERE ns=?", (ns_id,)).fetchone()
        return int(row[0]), int(row[1])

    def record_ids(self, ns_id: int, after: int = 0) -> list[int]:
        with self._autocommit() as db:
            rows = db.execute("SELECT id FROM records WHERE ns=? AND id>? ORDER BY id", (ns_id, after)).fetchall()
        return [int(r[0]) for r in rows]

    def records(self, ids: Sequence[int]) -> list[Record]:
        with self._autocommit() as db:
            rows = _select_in(db, f"{_RECORD_SELECT} WHERE r.id IN ({{}})", ids)
        return [_row_record(r, self._codec) for r in rows]

    def scoped_records(self, ns_ids: Sequence[int], kinds: Sequence[str] | None = None,
                       pinned_only: bool = False) -> list[Record]:
        if not ns_ids:
            return []
        sql = f"{_RECORD_SELECT} WHERE r.ns IN ({','.join('?' * len(ns_ids))})"
        if pinned_only:
            sql += " AND r.pinned = 1"
        args: list[Any] = list(ns_ids)
        if kinds:
            sql += f" AND r.kind IN ({','.join('?' * len(kinds))})"
            args += list(kinds)
        with self._autocommit() as db:
            return [_row_record(r, self._codec) for r in db.execute(sql + " ORDER BY r.id", args)]

    def keyword_search(self, query: str, ns_ids: Sequence[int], k: int,
                       kinds: Sequence[str] | None = None) -> list[KeywordHit]:
        """bm25-ranked records of these namespaces matching any word of ``query``.

        The namespace filter is a join on the records table (FTS5 also narrows by scope
        terms, a column that user words never reach: see :func:`fts_query`).
        """
        if not ns_ids or k <= 0:
            return []
        match = fts_query(query, ns_ids, self._query_tokens(query, ns_ids))
        if not match:
            return []
        sql = (
            "SELECT r.id, bm25(records_fts, 1.0, 0.0) AS score FROM records_fts "
            "JOIN records r ON r.id = records_fts.rowid "
            f"WHERE records_fts MATCH ? AND r.ns IN ({','.join('?' * len(ns_ids))})"
        )
        args: list[Any] = [match, *ns_ids]
        if kinds:
            sql += f" AND r.kind IN ({','.join('?' * len(kinds))})"
            args += list(kinds)
        sql += " ORDER BY score LIMIT ?"
        args.append(k)
        with self._autocommit() as db:
            rows = db.execute(sql, args).fetchall()
        # bm25() is lower-is-better and negative; report a positive relevance.
        return [KeywordHit(int(r[0]), i + 1, -float(r[1])) for i, r in enumerate(rows)]

    def _query_tokens(self, query: str, ns_ids: Sequence[int]) -> list[str] | None:
        """The blind tokens of the query's words for these namespaces' keys (``None`` when not encrypted);
        plus the plaintext words when records from before encryption may exist."""
        if self._cipher is None:
            return None
        words = search_terms(query)
        try:
            namespaces = [self._namespace_of(n) for n in ns_ids]
        except SessionErasedError:  # one was erased meanwhile: search the others
            namespaces = [ns for n, ns in self.namespaces() if n in set(ns_ids)]
        tokens = self._cipher.query_terms(namespaces, words)
        return tokens + words if self._plain_records else tokens

    def add_records(self, ns_id: int, records: Sequence[NewRecord]) -> list[int]:
        """Insert records of one session; raises SessionErasedError when it was erased."""
        with self.write(ns_id) as tx:
            return tx.insert_records(records)

    def delete_records(self, ids: Sequence[int]) -> int:
        with self._txn() as db:
            return _delete_records(db, ids)

    def key_destroyed(self, ns: Namespace) -> bool | None:
        """Whether the key that sealed this namespace's text is gone (``None``: the journal is not encrypted)."""
        return None if self._cipher is None else not self._cipher.has_key(ns)

    def update_record(self, record_id: int, *, text: str | None = None, importance: float | None = None,
                      message_ids: tuple[int, ...] | None = None,
                      metadata: Mapping[str, Any] | None = None, pinned: bool | None = None) -> None:
        if text is None and importance is None and message_ids is None and metadata is None and pinned is None:
            return
        with self._txn() as db:
            row = db.execute("SELECT ns FROM records WHERE id=?", (record_id,)).fetchone()
            if row is None:
                return
            ns_id = int(row[0])
            sets: list[str] = []
            args: list[Any] = []
            for column, value in (
                    ("text", None if text is None else self._codec.sealed_column(ns_id, RECORD_TEXT, text)),
                    ("terms", None if text is None else self._codec.index_terms(ns_id, text)),
                    ("importance", importance),
                    ("message_ids", None if message_ids is None else json.dumps(list(message_ids))),
                    ("metadata", None if metadata is None else
                     self._codec.sealed_column(ns_id, RECORD_METADATA, json.dumps(dict(metadata)))),
                    ("pinned", None if pinned is None else int(bool(pinned)))):
                if value is not None:
                    sets.append(f"{column}=?")
                    args.append(value)
            db.execute(f"UPDATE records SET {', '.join(sets)} WHERE id=?", (*args, record_id))
            _queue(db, [record_id], "upsert", ns_id)
            _bump(db, [ns_id])

    def outbox(self, limit: int, due_only: bool = True) -> list[OutboxItem]:
        """Pending items, unclaimed (the single-process path; many indexers use :meth:`claim_outbox`)."""
        with self._autocommit() as db:
            rows = db.execute(
                "SELECT record_id, op, attempts, seq FROM outbox WHERE retry_at <= ? ORDER BY record_id LIMIT ?",
                (time.time() if due_only else float("inf"), limit),
            ).fetchall()
        return [OutboxItem(int(r[0]), str(r[1]), int(r[2]), int(r[3])) for r in rows]

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
            rows = db.execute(
                "UPDATE outbox SET owner=?, claimed_until=? WHERE record_id IN ("
                "SELECT record_id FROM outbox WHERE retry_at <= ? AND claimed_until <= ? ORDER BY record_id LIMIT ?"
                ") RETURNING record_id, op, attempts, seq",
                (owner, now + lease_s, now if due_only else float("inf"), now, limit),
            ).fetchall()
        return sorted((OutboxItem(int(r[0]), str(r[1]), int(r[2]), int(r[3]), owner) for r in rows),
                      key=lambda i: i.record_id)

    def outbox_done(self, items: Sequence[OutboxItem]) -> None:
        if not items:
            return
        with self._txn() as db:
            db.executemany("DELETE FROM outbox WHERE record_id=? AND seq=?", [(i.record_id, i.seq) for i in items])
            _release(db, items)

    def outbox_failed(self, items: Sequence[OutboxItem], error: str) -> None:
        if not items:
            return
        with self._txn() as db:
            now = time.time()
            db.executemany(
                "UPDATE outbox SET attempts=attempts+1, last_error=?, "
                "retry_at=? + min(300, 1 << min(attempts, 8)) WHERE record_id=? AND seq=?",
                [(error[:2000], now, item.record_id, item.seq) for item in items],
            )
            _release(db, items)

    def outbox_count(self, ns_ids: Sequence[int] | None = None) -> int:
        with self._autocommit() as db:
            if ns_ids is None:
                return int(db.execute("SELECT count(*) FROM outbox").fetchone()[0])
            rows = _select_in(db, "SELECT count(*) FROM outbox WHERE ns IN ({})", ns_ids)
        return sum(int(r[0]) for r in rows)

    def outbox_error(self, ns_ids: Sequence[int] | None = None) -> str | None:
        with self._autocommit() as db:
            if ns_ids is None:
                rows = db.execute("SELECT last_error FROM outbox WHERE last_error IS NOT NULL LIMIT 1").fetchall()
            else:
                rows = _select_in(db, "SELECT last_error FROM outbox WHERE last_error IS NOT NULL AND ns IN ({}) "
                                      "LIMIT 1", ns_ids)
        return None if not rows else str(rows[0][0])

    def pending_records(self, ns_ids: Sequence[int], limit: int) -> list[Record]:
        """Records of these namespaces whose upsert is still queued (not yet in the vector store).

        The newest ``limit`` of them, in id order: a query searches them exactly (their
        vectors are computed on the spot) until the indexer catches up.
        """
        if not ns_ids or limit <= 0:
            return []
        marks = ",".join("?" * len(ns_ids))
        with self._autocommit() as db:
            rows = db.execute(
                f"{_RECORD_SELECT} JOIN outbox o ON o.record_id = r.id "
                f"WHERE o.op = 'upsert' AND r.ns IN ({marks}) ORDER BY r.id DESC LIMIT ?",
                (*ns_ids, limit),
            ).fetchall()
        return [_row_record(r, self._codec) for r in reversed(rows)]

    def requeue_all(self) -> int:
        with self._txn() as db:
            seq = _next_seq(db)
            db.execute(
                "INSERT INTO outbox (record_id, op, seq, ns) SELECT id, 'upsert', ?, ns FROM records WHERE true "
                "ON CONFLICT (record_id) DO UPDATE SET op='upsert', attempts=0, last_error=NULL, retry_at=0, "
                "seq=excluded.seq, ns=excluded.ns",
                (seq,),
            )
            db.execute("INSERT INTO records_fts (records_fts) VALUES ('rebuild')")
            return int(db.execute("SELECT count(*) FROM outbox").fetchone()[0])

    def links(self, record_ids: Sequence[int]) -> list[tuple[int, int, str, float]]:
        with self._autocommit() as db:
            marks = ",".join("?" * len(record_ids))
            if not marks:
                return []
            rows = db.execute(
                f"SELECT a, b, relation, strength FROM links WHERE a IN ({marks}) OR b IN ({marks})",
                (*record_ids, *record_ids),
            ).fetchall()
        return [(int(r[0]), int(r[1]), str(r[2]), float(r[3])) for r in rows]

    def add_link(self, a: int, b: int, relation: str, strength: float) -> None:
        with self._txn() as db:
            db.execute("INSERT OR REPLACE INTO links VALUES (?,?,?,?)", (a, b, relation, strength))

    def integrity_check(self) -> str:
        with self._autocommit() as db:
            return str(db.execute("PRAGMA integrity_check").fetchone()[0])

    # --- physical erasure -----------------------------------------------------

    def compact(self) -> bool:
        """Remove what deletes left behind on disk; True when the WAL was fully truncated.

        FTS5 keeps the terms of a deleted record in its old segments until they are merged:
        ``optimize`` rewrites the index into one segment without them (its cost grows with
        the index: see the report in the journal tests). Then a ``TRUNCATE`` checkpoint
        copies the WAL into the file (where ``secure_delete`` zeroed the freed content) and
        empties it. Another process reading at that moment keeps the WAL alive: False.
        """
        with self._txn() as db:
            db.execute("INSERT INTO records_fts (records_fts) VALUES ('optimize')")
        with self._autocommit() as db:
            busy, _, _ = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
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


_NAMES_KEPT = 4096
_MSG_COLS = "id, role, content, name, tool_calls, tool_call_id, metadata, created_at, tokens, tokens_key, key, ns"
_RECORD_SELECT = (
    "SELECT r.id, n.session_id, n.user_id, n.agent_id, r.kind, r.text, r.message_ids, r.importance, "
    "r.pinned, r.tags, r.metadata, r.created_at, r.key, r.valid_to FROM records r JOIN namespaces n ON n.ns = r.ns"
)


class _SqliteWrite:
    def __init__(self, db: sqlite3.Connection, ns_id: int, codec: RowCodec) -> None:
        self._db = db
        self.ns_id = ns_id
        self._codec = codec
        self.touched = False  # a change to this session: its version grows at commit

    def state(self) -> SessionState:
        return _state(self._db, self.ns_id, self._codec)

    def insert_messages(self, messages: Sequence[Message], tokens: Sequence[int], tokens_key: str) -> list[Message]:
        stored = []
        for message, count in zip(messages, tokens):
            created = message.created_at if message.created_at is not None else time.time()
            content, name, calls, metadata = self._codec.message_columns(
                self.ns_id, json.dumps(message.to_dict()["content"], ensure_ascii=False), message.name,
                [c.to_dict() for c in message.tool_calls] if message.tool_calls else None,
                json.dumps(dict(message.metadata), ensure_ascii=False) if message.metadata else None)
            try:
                cur = self._db.execute(
                    "INSERT INTO messages (ns, role, content, name, tool_calls, tool_call_id, metadata, created_at, "
                    "tokens, tokens_key, key) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                    (self.ns_id, message.role, content, name, json.dumps(calls) if calls else None,
                     message.tool_call_id, metadata, created, count, tokens_key, message.key),
                )
            except sqlite3.IntegrityError as e:
                if message.key is not None and "key" in str(e):
                    raise JournalError(
                        f"a message with key {message.key!r:.80} is already stored in this session: "
                        "look keys up with messages_by_key() and skip the stored ones"
                    ) from e
                raise
            stored.append(_with_id(message, int(cur.lastrowid or 0), created))
        self.touched = self.touched or bool(stored)
        return stored

    def messages_by_key(self, keys: Sequence[str]) -> dict[str, Message]:
        found: dict[str, Message] = {}
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), 500):
            chunk = unique[start:start + 500]
            rows = self._db.execute(
                f"SELECT {_MSG_COLS} FROM messages WHERE ns=? AND key IN ({','.join('?' * len(chunk))})",
                (self.ns_id, *chunk),
            ).fetchall()
            for row in rows:
                found[str(row[10])] = _row_message(row, self._codec)
        return found

    def window_entries(self, start: int) -> list[WindowEntry]:
        rows = self._db.execute(
            "SELECT id, role, tokens FROM messages WHERE ns=? AND id>=? ORDER BY id", (self.ns_id, start)
        ).fetchall()
        return [WindowEntry(int(r[0]), str(r[1]), int(r[2])) for r in rows]

    def messages_between(self, after: int, before: int) -> list[Message]:
        rows = self._db.execute(
            f"SELECT {_MSG_COLS} FROM messages WHERE ns=? AND id>? AND id<? ORDER BY id",
            (self.ns_id, after, before),
        ).fetchall()
        return [_row_message(r, self._codec) for r in rows]

    def open_tool_calls(self, since: int) -> set[str]:
        rows = self._db.execute(
            "SELECT json_extract(j.value, '$.id') FROM messages m, json_each(m.tool_calls) j "
            "WHERE m.ns=? AND m.id>=? AND m.tool_calls IS NOT NULL",
            (self.ns_id, since),
        ).fetchall()
        return {str(r[0]) for r in rows}

    def set_window_start(self, window_start: int) -> None:
        self._db.execute("UPDATE state SET window_start=? WHERE ns=?", (window_start, self.ns_id))
        self.touched = True

    def set_summary(self, summary: str, tokens: int, cursor: int, history: int = DEFAULT_SUMMARY_HISTORY) -> None:
        sealed = self._codec.seal_summary(self.ns_id, summary)
        self._db.execute(
            "UPDATE state SET summary=?, summary_tokens=?, summary_cursor=?, summary_version=summary_version+1, "
            "failures=0, last_error=NULL, retry_at=0 WHERE ns=?",
            (sealed, tokens, cursor, self.ns_id),
        )
        if history > 0:
            self._db.execute(
                "INSERT INTO summary_versions (ns, version, text, tokens, summary_cursor, created_at) "
                "SELECT ns, summary_version, ?, ?, ?, ? FROM state WHERE ns=?",
                (sealed, tokens, cursor, time.time(), self.ns_id))
        self._db.execute("DELETE FROM summary_versions WHERE ns=? AND version NOT IN (SELECT version FROM "
                         "summary_versions WHERE ns=? ORDER BY version DESC LIMIT ?)",
                         (self.ns_id, self.ns_id, max(history, 0)))
        self.touched = True

    def set_failure(self, error: str | None, failures: int, retry_at: float) -> None:
        self._db.execute(
            "UPDATE state SET last_error=?, failures=?, retry_at=? WHERE ns=?",
            (error, failures, retry_at, self.ns_id),
        )
        self.touched = True

    def insert_records(self, records: Sequence[NewRecord]) -> list[int]:
        ids = _insert_records(self._db, self.ns_id, records, self._codec)
        self.touched = self.touched or bool(ids)
        return ids

    def update_tokens(self, ids_tokens: Sequence[tuple[int, int]], tokens_key: str) -> None:
        self._db.executemany(
            "UPDATE messages SET tokens=?, tokens_key=? WHERE id=? AND ns=?",
            [(count, tokens_key, mid, self.ns_id) for mid, count in ids_tokens],
        )
        self.touched = self.touched or bool(ids_tokens)

    def current_memories(self, ns_ids: Sequence[int]) -> list[Record]:
        if not ns_ids:
            return []
        sql = (f"{_RECORD_SELECT} WHERE r.ns IN ({','.join('?' * len(ns_ids))}) AND r.kind != 'turn' "
               "AND r.valid_to IS NULL ORDER BY r.id")
        return [_row_record(r, self._codec) for r in self._db.execute(sql, list(ns_ids))]

    def supersede(self, record_ids: Sequence[int], valid_to: float) -> None:
        if not record_ids:
            return
        # Superseded records may live in the user's other sessions; their version stamps stay:
        # a stamp tells a session's own messages and cursors apart, which this does not change.
        _select_in(self._db, f"UPDATE records SET valid_to={float(valid_to)!r} "
                   "WHERE id IN ({}) AND valid_to IS NULL", list(record_ids))
        self.touched = True

    def merge_memory(self, record_id: int, importance: float, message_ids: tuple[int, ...]) -> None:
        self._db.execute("UPDATE records SET importance=?, message_ids=? WHERE id=?",
                         (importance, json.dumps(list(message_ids)), record_id))
        self.touched = True


class _SqliteRead:
    def __init__(self, db: sqlite3.Connection, codec: RowCodec) -> None:
        self._db = db
        self._codec = codec

    def state(self, ns_id: int) -> SessionState:
        return _state(self._db, ns_id, self._codec)

    def window_messages(self, ns_id: int, start: int) -> list[tuple[Message, int, str]]:
        rows = self._db.execute(
            f"SELECT {_MSG_COLS} FROM messages WHERE ns=? AND id>=? ORDER BY id", (ns_id, start)
        ).fetchall()
        return [(_row_message(r, self._codec), int(r[8]), str(r[9])) for r in rows]

    def count_between(self, ns_id: int, after: int, before: int) -> int:
        row = self._db.execute(
            "SELECT count(*) FROM messages WHERE ns=? AND id>? AND id<?", (ns_id, after, before)
        ).fetchone()
        return int(row[0])

    def last_message_id(self, ns_id: int) -> int:
        row = self._db.execute("SELECT max(id) FROM messages WHERE ns=?", (ns_id,)).fetchone()
        return int(row[0] or 0)


def _state(db: sqlite3.Connection, ns_id: int, codec: RowCodec | None) -> SessionState:
    """The session's state; its summary opened by ``codec`` (left as stored when ``None``: cursors only)."""
    row = db.execute(
        "SELECT window_start, summary, summary_tokens, summary_cursor, summary_version, failures, last_error, "
        "retry_at, version FROM state WHERE ns=?",
        (ns_id,),
    ).fetchone()
    if row is None:
        return SessionState()
    summary = str(row[1]) if codec is None else codec.summary(ns_id, str(row[1]))
    return SessionState(int(row[0]), summary, int(row[2]), int(row[3]), int(row[4]), int(row[5]),
                        row[6], float(row[7]), int(row[8]))


def _require_session(db: sqlite3.Connection, ns_id: int, known: Namespace | None) -> None:
    """Refuse a write to an erased namespace (inside the write transaction, so no erase can slip in)."""
    if db.execute("SELECT 1 FROM state WHERE ns=?", (ns_id,)).fetchone():
        return
    if db.execute("SELECT 1 FROM namespaces WHERE ns=?", (ns_id,)).fetchone():
        db.execute("INSERT INTO state (ns) VALUES (?)", (ns_id,))  # a namespace row without state: repair
        return
    raise SessionErasedError(erased_message(ns_id, known))


def _bump(db: sqlite3.Connection, ns_ids: Sequence[int]) -> None:
    """Grow the version stamp of these sessions (inside the transaction that changed them)."""
    for start in range(0, len(ns_ids), 500):
        chunk = list(ns_ids[start:start + 500])
        db.execute(f"UPDATE state SET version=version+1 WHERE ns IN ({','.join('?' * len(chunk))})", chunk)


def _row_message(row: Sequence[Any], codec: RowCodec) -> Message:
    raw, name, calls, metadata = codec.message_fields(
        int(row[11]), row[2], row[3], json.loads(row[4]) if row[4] else None, row[6])
    content = json.loads(raw)
    return Message(
        role=row[1],
        content=content if isinstance(content, str) else tuple(content),
        name=name,
        tool_calls=tuple(ToolCall(**c) for c in calls) if calls else (),
        tool_call_id=row[5],
        metadata=json.loads(metadata) if metadata else {},
        created_at=float(row[7]),
        id=int(row[0]),
        key=row[10],
    )


def _with_id(message: Message, message_id: int, created_at: float) -> Message:
    from dataclasses import replace

    return replace(message, id=message_id, created_at=created_at)


def _row_record(row: Sequence[Any], codec: RowCodec) -> Record:
    ns = Namespace(row[1], row[2], row[3])
    text, tags, metadata, key = codec.record_fields(ns, str(row[5]), str(row[9]), str(row[10]), row[12])
    return Record(
        id=int(row[0]),
        namespace=ns,
        kind=str(row[4]),
        text=text,
        message_ids=tuple(json.loads(row[6])),
        importance=float(row[7]),
        pinned=bool(row[8]),
        tags=tuple(json.loads(tags)),
        metadata=json.loads(metadata),
        created_at=float(row[11]),
        key=key,
        valid_to=None if row[13] is None else float(row[13]),
    )


def _insert_records(db: sqlite3.Connection, ns_id: int, records: Sequence[NewRecord], codec: RowCodec) -> list[int]:
    ids = []
    for r in records:
        text, tags, metadata, key, terms = codec.record_columns(
            ns_id, r.text, json.dumps(list(r.tags), ensure_ascii=False),
            json.dumps(dict(r.metadata), ensure_ascii=False), r.key)
        cur = db.execute(
            "INSERT INTO records (ns, kind, text, message_ids, importance, pinned, tags, metadata, created_at, "
            "scope_terms, key, terms) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (ns_id, r.kind, text, json.dumps(list(r.message_ids)), r.importance, int(r.pinned),
             tags, metadata, r.created_at or time.time(), f"s{ns_id}", key, terms),
        )
        ids.append(int(cur.lastrowid or 0))
    _queue(db, ids, "upsert", ns_id)
    return ids


def _next_seq(db: sqlite3.Connection) -> int:
    """The next outbox ``seq``: a counter that never goes back, even when the outbox empties."""
    row = db.execute(
        "UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key='outbox_seq' RETURNING value"
    ).fetchone()
    return int(row[0])


def _queue(db: sqlite3.Connection, record_ids: Sequence[int], op: str, ns_id: int | None) -> None:
    """Queue index changes afresh: attempts and backoff reset, a new ``seq``.

    An existing lease is kept: the holder finishes its (now stale) item first, and the new
    change becomes claimable when it releases the row, so a delete never overtakes an upsert.
    """
    if not record_ids:
        return
    seq = _next_seq(db)
    db.executemany(
        "INSERT INTO outbox (record_id, op, seq, ns) VALUES (?, ?, ?, ?) ON CONFLICT (record_id) DO UPDATE "
        "SET op=excluded.op, attempts=0, last_error=NULL, retry_at=0, seq=excluded.seq, "
        "ns=coalesce(excluded.ns, outbox.ns)",
        [(rid, op, seq, ns_id) for rid in record_ids],
    )


def _release(db: sqlite3.Connection, items: Sequence[OutboxItem]) -> None:
    """Release the leases these items hold (rows queued again meanwhile become claimable)."""
    db.executemany(
        "UPDATE outbox SET owner=NULL, claimed_until=0 WHERE record_id=? AND owner=?",
        [(i.record_id, i.owner) for i in items if i.owner],
    )


def _delete_records(db: sqlite3.Connection, ids: Sequence[int]) -> int:
    wanted = list(dict.fromkeys(ids))
    owners = {int(r[0]): int(r[1]) for r in _select_in(db, "SELECT id, ns FROM records WHERE id IN ({})", wanted)}
    removed = 0
    for rid in wanted:
        removed += db.execute("DELETE FROM records WHERE id=?", (rid,)).rowcount
        db.execute("DELETE FROM links WHERE a=? OR b=?", (rid, rid))
    by_ns: dict[int | None, list[int]] = {}
    for rid in wanted:
        by_ns.setdefault(owners.get(rid), []).append(rid)
    for ns_id, rids in by_ns.items():
        _queue(db, rids, "delete", ns_id)
    _bump(db, sorted({ns for ns in owners.values()}))
    return removed


def _delete_ns_content(db: sqlite3.Connection, ns_id: int, keep_memories: bool = False) -> list[int]:
    keep = " AND (kind='turn' OR message_ids != '[]')" if keep_memories else ""
    ids = [int(r[0]) for r in db.execute(f"SELECT id FROM records WHERE ns=?{keep}", (ns_id,))]
    _delete_records(db, ids)
    db.execute("DELETE FROM messages WHERE ns=?", (ns_id,))
    db.execute("DELETE FROM summary_versions WHERE ns=?", (ns_id,))
    return ids


def _select_in(db: sqlite3.Connection, sql: str, ids: Sequence[Any]) -> list[Any]:
    rows: list[Any] = []
    for start in range(0, len(ids), 500):
        chunk = list(ids[start:start + 500])
        rows += db.execute(sql.format(",".join("?" * len(chunk))), chunk).fetchall()
    return rows


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
