"""The SQLite journal: one file, WAL, every write committed before the call returns."""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from langmem_tiers.errors import JournalError, SchemaVersionError
from langmem_tiers.journal.base import (
    SCHEMA_VERSION,
    KeywordHit,
    Namespace,
    NewRecord,
    OutboxItem,
    Record,
    Scope,
    SessionState,
    WindowEntry,
)
from langmem_tiers.messages import Message, ToolCall
from langmem_tiers.text import query_words

log = logging.getLogger(__name__)

# Forward migrations, applied in order; index i takes schema version i to i + 1.
MIGRATIONS: tuple[str, ...] = (
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
assert len(MIGRATIONS) == SCHEMA_VERSION

def fts_query(text: str, ns_id: int | None = None) -> str | None:
    """Turn free text into a safe FTS5 query: each word quoted, OR-ed (bm25 ranks the overlap).

    With ``ns_id`` the query also requires the session's scope term, so FTS5 itself
    filters by session instead of ranking every match in the journal.
    """
    words = " OR ".join(f'"{w}"' for w in query_words(text))
    if not words:
        return None
    return f'scope_terms : "s{ns_id}" AND ({words})' if ns_id is not None else f"text : ({words})"


class SqliteJournal:
    """A journal in one SQLite file.

    One connection per instance, shared by threads under a lock; writers in other
    processes are serialized by SQLite (``BEGIN IMMEDIATE`` with a busy timeout).

    Example:
        >>> import tempfile, pathlib
        >>> j = SqliteJournal(pathlib.Path(tempfile.mkdtemp()) / "journal.db")
        >>> j.namespace_id(Namespace("s1")) > 0
        True
        >>> j.close()
    """

    def __init__(self, path: str | Path, *, synchronous: str = "FULL", busy_timeout_s: float = 30.0) -> None:
        if synchronous not in ("FULL", "NORMAL", "EXTRA"):
            raise JournalError(f"synchronous ({synchronous!r}) must be FULL, NORMAL or EXTRA")
        self.path = Path(path)
        self.url = f"sqlite:///{self.path}"
        self._lock = threading.RLock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(
                str(self.path), isolation_level=None, check_same_thread=False, timeout=busy_timeout_s
            )
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(f"PRAGMA synchronous={synchronous}")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._migrate()
        except sqlite3.Error as e:
            raise JournalError(f"cannot open journal {self.path}: {e}") from e
        self.uid = self._meta("uid")

    # --- schema ---------------------------------------------------------------

    def _migrate(self) -> None:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                has_meta = self._db.execute(
                    "SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'"
                ).fetchone()
                version = 0
                if has_meta:
                    row = self._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
                    version = int(row[0]) if row else 0
                if version > SCHEMA_VERSION:
                    raise SchemaVersionError(
                        f"journal {self.path} has schema version {version}, newer than this "
                        f"langmem-tiers understands ({SCHEMA_VERSION}): upgrade langmem-tiers"
                    )
                for step in range(version, SCHEMA_VERSION):
                    for statement in _split_sql(MIGRATIONS[step]):
                        self._db.execute(statement)
                    log.info("journal %s migrated to schema version %d", self.path, step + 1)
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
        """A serialized write transaction; commits on exit, rolls back on error."""
        with self._txn() as db:
            yield _SqliteWrite(db, ns_id)

    @contextmanager
    def read(self) -> Iterator[_SqliteRead]:
        with self._lock:
            self._check_open()
            self._db.execute("BEGIN")
            try:
                yield _SqliteRead(self._db)
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
                return int(row[0]) if row else None
        with self._txn() as db:
            db.execute(
                "INSERT OR IGNORE INTO namespaces (user_id, agent_id, session_id, created_at) VALUES (?,?,?,?)",
                (*key, time.time()),
            )
            row = db.execute(
                "SELECT ns FROM namespaces WHERE user_id=? AND agent_id=? AND session_id=?", key
            ).fetchone()
            db.execute("INSERT OR IGNORE INTO state (ns) VALUES (?)", (row[0],))
            return int(row[0])

    def namespaces(self, scope: Scope | None = None) -> list[tuple[int, Namespace]]:
        sql, args = "SELECT ns, session_id, user_id, agent_id FROM namespaces", ()
        if scope is not None:
            own = scope.namespace
            if scope.kind == "session":
                sql += " WHERE session_id=? AND user_id=? AND agent_id=?"
                args = (own.session_id, own.user_id, own.agent_id)  # type: ignore[assignment]
            elif scope.kind == "user":
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
                yield _row_message(row)
            cursor = rows[-1][0]

    def messages_by_id(self, ids: Sequence[int]) -> list[Message]:
        with self._autocommit() as db:
            rows = _select_in(db, f"SELECT {_MSG_COLS} FROM messages WHERE id IN ({{}}) ORDER BY id", ids)
        return [_row_message(r) for r in rows]

    def count_messages(self, ns_id: int | None = None) -> int:
        with self._autocommit() as db:
            if ns_id is None:
                return int(db.execute("SELECT count(*) FROM messages").fetchone()[0])
            return int(db.execute("SELECT count(*) FROM messages WHERE ns=?", (ns_id,)).fetchone()[0])

    def clear_session(self, ns_id: int) -> list[int]:
        """Delete a session's messages, summary and records; returns the record ids removed."""
        with self._txn() as db:
            record_ids = _delete_ns_content(db, ns_id)
            db.execute("UPDATE state SET window_start=0, summary='', summary_tokens=0, summary_cursor=0, "
                       "summary_version=summary_version+1, failures=0, last_error=NULL, retry_at=0 WHERE ns=?",
                       (ns_id,))
            return record_ids

    def delete_namespaces(self, ns_ids: Sequence[int]) -> list[int]:
        removed: list[int] = []
        with self._txn() as db:
            for ns_id in ns_ids:
                removed += _delete_ns_content(db, ns_id)
                db.execute("DELETE FROM state WHERE ns=?", (ns_id,))
                db.execute("DELETE FROM namespaces WHERE ns=?", (ns_id,))
        return removed

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
        return [_row_record(r) for r in rows]

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
            return [_row_record(r) for r in db.execute(sql + " ORDER BY r.id", args)]

    def keyword_search(self, query: str, ns_ids: Sequence[int], k: int,
                       kinds: Sequence[str] | None = None) -> list[KeywordHit]:
        # One session (the context() path) filters inside FTS5; wider scopes filter by join.
        match = fts_query(query, ns_ids[0] if len(ns_ids) == 1 else None)
        if not match or not ns_ids:
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

    def add_records(self, ns_id: int, records: Sequence[NewRecord]) -> list[int]:
        with self._txn() as db:
            return _insert_records(db, ns_id, records)

    def delete_records(self, ids: Sequence[int]) -> int:
        with self._txn() as db:
            return _delete_records(db, ids)

    def update_record(self, record_id: int, *, text: str | None = None, importance: float | None = None,
                      message_ids: tuple[int, ...] | None = None,
                      metadata: Mapping[str, Any] | None = None) -> None:
        sets: list[str] = []
        args: list[Any] = []
        for column, value in (("text", text), ("importance", importance),
                              ("message_ids", None if message_ids is None else json.dumps(list(message_ids))),
                              ("metadata", None if metadata is None else json.dumps(dict(metadata)))):
            if value is not None:
                sets.append(f"{column}=?")
                args.append(value)
        if not sets:
            return
        with self._txn() as db:
            db.execute(f"UPDATE records SET {', '.join(sets)} WHERE id=?", (*args, record_id))
            _queue(db, [record_id], "upsert")

    def outbox(self, limit: int, due_only: bool = True) -> list[OutboxItem]:
        with self._autocommit() as db:
            rows = db.execute(
                "SELECT record_id, op, attempts, seq FROM outbox WHERE retry_at <= ? ORDER BY record_id LIMIT ?",
                (time.time() if due_only else float("inf"), limit),
            ).fetchall()
        return [OutboxItem(int(r[0]), str(r[1]), int(r[2]), int(r[3])) for r in rows]

    def outbox_done(self, items: Sequence[OutboxItem]) -> None:
        with self._txn() as db:
            db.executemany("DELETE FROM outbox WHERE record_id=? AND seq=?", [(i.record_id, i.seq) for i in items])

    def outbox_failed(self, items: Sequence[OutboxItem], error: str) -> None:
        with self._txn() as db:
            for item in items:
                db.execute(
                    "UPDATE outbox SET attempts=attempts+1, last_error=?, "
                    "retry_at=? + min(300, 1 << min(attempts, 8)) WHERE record_id=? AND seq=?",
                    (error[:2000], time.time(), item.record_id, item.seq),
                )

    def outbox_count(self) -> int:
        with self._autocommit() as db:
            return int(db.execute("SELECT count(*) FROM outbox").fetchone()[0])

    def outbox_error(self) -> str | None:
        with self._autocommit() as db:
            row = db.execute("SELECT last_error FROM outbox WHERE last_error IS NOT NULL LIMIT 1").fetchone()
        return None if row is None else str(row[0])

    def requeue_all(self) -> int:
        with self._txn() as db:
            db.execute("INSERT OR REPLACE INTO outbox (record_id, op, seq) SELECT id, 'upsert', "
                       "(SELECT coalesce(max(seq), 0) + 1 FROM outbox) FROM records")
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

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None  # type: ignore[assignment]


_MSG_COLS = "id, role, content, name, tool_calls, tool_call_id, metadata, created_at, tokens, tokens_key"
_RECORD_SELECT = (
    "SELECT r.id, n.session_id, n.user_id, n.agent_id, r.kind, r.text, r.message_ids, r.importance, "
    "r.pinned, r.tags, r.metadata, r.created_at FROM records r JOIN namespaces n ON n.ns = r.ns"
)


class _SqliteWrite:
    def __init__(self, db: sqlite3.Connection, ns_id: int) -> None:
        self._db = db
        self.ns_id = ns_id

    def state(self) -> SessionState:
        return _state(self._db, self.ns_id)

    def insert_messages(self, messages: Sequence[Message], tokens: Sequence[int], tokens_key: str) -> list[Message]:
        stored = []
        for message, count in zip(messages, tokens):
            created = message.created_at if message.created_at is not None else time.time()
            cur = self._db.execute(
                "INSERT INTO messages (ns, role, content, name, tool_calls, tool_call_id, metadata, created_at, "
                "tokens, tokens_key) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (self.ns_id, message.role, json.dumps(message.to_dict()["content"], ensure_ascii=False),
                 message.name,
                 json.dumps([c.to_dict() for c in message.tool_calls]) if message.tool_calls else None,
                 message.tool_call_id,
                 json.dumps(dict(message.metadata), ensure_ascii=False) if message.metadata else None,
                 created, count, tokens_key),
            )
            stored.append(_with_id(message, int(cur.lastrowid or 0), created))
        return stored

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
        return [_row_message(r) for r in rows]

    def open_tool_calls(self, since: int) -> set[str]:
        rows = self._db.execute(
            "SELECT json_extract(j.value, '$.id') FROM messages m, json_each(m.tool_calls) j "
            "WHERE m.ns=? AND m.id>=? AND m.tool_calls IS NOT NULL",
            (self.ns_id, since),
        ).fetchall()
        return {str(r[0]) for r in rows}

    def set_window_start(self, window_start: int) -> None:
        self._db.execute("UPDATE state SET window_start=? WHERE ns=?", (window_start, self.ns_id))

    def set_summary(self, summary: str, tokens: int, cursor: int) -> None:
        self._db.execute(
            "UPDATE state SET summary=?, summary_tokens=?, summary_cursor=?, summary_version=summary_version+1, "
            "failures=0, last_error=NULL, retry_at=0 WHERE ns=?",
            (summary, tokens, cursor, self.ns_id),
        )

    def set_failure(self, error: str | None, failures: int, retry_at: float) -> None:
        self._db.execute(
            "UPDATE state SET last_error=?, failures=?, retry_at=? WHERE ns=?",
            (error, failures, retry_at, self.ns_id),
        )

    def insert_records(self, records: Sequence[NewRecord]) -> list[int]:
        return _insert_records(self._db, self.ns_id, records)

    def update_tokens(self, ids_tokens: Sequence[tuple[int, int]], tokens_key: str) -> None:
        self._db.executemany(
            "UPDATE messages SET tokens=?, tokens_key=? WHERE id=?",
            [(count, tokens_key, mid) for mid, count in ids_tokens],
        )


class _SqliteRead:
    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def state(self, ns_id: int) -> SessionState:
        return _state(self._db, ns_id)

    def window_messages(self, ns_id: int, start: int) -> list[tuple[Message, int, str]]:
        rows = self._db.execute(
            f"SELECT {_MSG_COLS} FROM messages WHERE ns=? AND id>=? ORDER BY id", (ns_id, start)
        ).fetchall()
        return [(_row_message(r), int(r[8]), str(r[9])) for r in rows]

    def count_between(self, ns_id: int, after: int, before: int) -> int:
        row = self._db.execute(
            "SELECT count(*) FROM messages WHERE ns=? AND id>? AND id<?", (ns_id, after, before)
        ).fetchone()
        return int(row[0])

    def last_message_id(self, ns_id: int) -> int:
        row = self._db.execute("SELECT max(id) FROM messages WHERE ns=?", (ns_id,)).fetchone()
        return int(row[0] or 0)


def _state(db: sqlite3.Connection, ns_id: int) -> SessionState:
    row = db.execute(
        "SELECT window_start, summary, summary_tokens, summary_cursor, summary_version, failures, last_error, "
        "retry_at FROM state WHERE ns=?",
        (ns_id,),
    ).fetchone()
    if row is None:
        return SessionState()
    return SessionState(int(row[0]), str(row[1]), int(row[2]), int(row[3]), int(row[4]), int(row[5]),
                        row[6], float(row[7]))


def _row_message(row: Sequence[Any]) -> Message:
    content = json.loads(row[2])
    return Message(
        role=row[1],
        content=content if isinstance(content, str) else tuple(content),
        name=row[3],
        tool_calls=tuple(ToolCall(**c) for c in json.loads(row[4])) if row[4] else (),
        tool_call_id=row[5],
        metadata=json.loads(row[6]) if row[6] else {},
        created_at=float(row[7]),
        id=int(row[0]),
    )


def _with_id(message: Message, message_id: int, created_at: float) -> Message:
    from dataclasses import replace

    return replace(message, id=message_id, created_at=created_at)


def _row_record(row: Sequence[Any]) -> Record:
    return Record(
        id=int(row[0]),
        namespace=Namespace(row[1], row[2], row[3]),
        kind=str(row[4]),
        text=str(row[5]),
        message_ids=tuple(json.loads(row[6])),
        importance=float(row[7]),
        pinned=bool(row[8]),
        tags=tuple(json.loads(row[9])),
        metadata=json.loads(row[10]),
        created_at=float(row[11]),
    )


def _insert_records(db: sqlite3.Connection, ns_id: int, records: Sequence[NewRecord]) -> list[int]:
    ids = []
    for r in records:
        cur = db.execute(
            "INSERT INTO records (ns, kind, text, message_ids, importance, pinned, tags, metadata, created_at, "
            "scope_terms) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (ns_id, r.kind, r.text, json.dumps(list(r.message_ids)), r.importance, int(r.pinned),
             json.dumps(list(r.tags), ensure_ascii=False), json.dumps(dict(r.metadata), ensure_ascii=False),
             r.created_at or time.time(), f"s{ns_id}"),
        )
        rid = int(cur.lastrowid or 0)
        _queue(db, [rid], "upsert")
        ids.append(rid)
    return ids


def _queue(db: sqlite3.Connection, record_ids: Sequence[int], op: str) -> None:
    """Queue index changes afresh: attempts and backoff reset, a new ``seq``."""
    for rid in record_ids:
        db.execute(
            "INSERT OR REPLACE INTO outbox (record_id, op, seq) "
            "VALUES (?, ?, (SELECT coalesce(max(seq), 0) + 1 FROM outbox))",
            (rid, op),
        )


def _delete_records(db: sqlite3.Connection, ids: Sequence[int]) -> int:
    removed = 0
    for rid in ids:
        removed += db.execute("DELETE FROM records WHERE id=?", (rid,)).rowcount
        db.execute("DELETE FROM links WHERE a=? OR b=?", (rid, rid))
        _queue(db, [rid], "delete")
    return removed


def _delete_ns_content(db: sqlite3.Connection, ns_id: int) -> list[int]:
    ids = [int(r[0]) for r in db.execute("SELECT id FROM records WHERE ns=?", (ns_id,))]
    _delete_records(db, ids)
    db.execute("DELETE FROM messages WHERE ns=?", (ns_id,))
    return ids


def _select_in(db: sqlite3.Connection, sql: str, ids: Sequence[int]) -> list[Any]:
    rows: list[Any] = []
    for start in range(0, len(ids), 500):
        chunk = list(ids[start:start + 500])
        rows += db.execute(sql.format(",".join("?" * len(chunk))), chunk).fetchall()
    return rows


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
