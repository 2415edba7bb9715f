"""The PostgreSQL journal: one schema shared by every process and host of a deployment.

Same tables and semantics as :mod:`langmem_tiers.journal.sqlite`. Writers of one
session are serialized by a row lock on its ``state`` row (``SELECT ... FOR
UPDATE``), so several replicas can append to one session; ``read()`` is a
``REPEATABLE READ`` snapshot. The keyword index is a generated ``tsvector``
column (``english`` configuration) with a GIN index, ranked by ``ts_rank_cd``.

psycopg 3 and psycopg_pool are imported when a journal is opened
(``pip install 'langmem-tiers[postgres]'``).
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
import uuid
import zlib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from langmem_tiers.errors import JournalError, MissingDependencyError, SchemaVersionError
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

if TYPE_CHECKING:
    import psycopg
    import psycopg_pool

    Conn = psycopg.Connection[tuple[Any, ...]]

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'langmem-tiers[postgres]'"
DEFAULT_SCHEMA = "langmem_tiers"

# Forward migrations, applied in order; index i takes schema version i to i + 1.
# JSON documents are kept as text (exact round trip; jsonb rejects NaN and \u0000),
# except tool_calls, which open_tool_calls() reads with jsonb functions.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE namespaces (
        ns BIGSERIAL PRIMARY KEY,
        user_id TEXT NOT NULL, agent_id TEXT NOT NULL, session_id TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        UNIQUE (user_id, agent_id, session_id)
    );
    CREATE TABLE messages (
        id BIGSERIAL PRIMARY KEY,
        ns BIGINT NOT NULL REFERENCES namespaces(ns),
        role TEXT NOT NULL,
        content TEXT NOT NULL,
        name TEXT, tool_calls JSONB, tool_call_id TEXT, metadata TEXT,
        created_at DOUBLE PRECISION NOT NULL,
        tokens INTEGER NOT NULL,
        tokens_key TEXT NOT NULL
    );
    CREATE INDEX messages_ns_id ON messages (ns, id);
    CREATE TABLE state (
        ns BIGINT PRIMARY KEY REFERENCES namespaces(ns),
        window_start BIGINT NOT NULL DEFAULT 0,
        summary TEXT NOT NULL DEFAULT '',
        summary_tokens INTEGER NOT NULL DEFAULT 0,
        summary_cursor BIGINT NOT NULL DEFAULT 0,
        summary_version BIGINT NOT NULL DEFAULT 0,
        failures INTEGER NOT NULL DEFAULT 0,
        last_error TEXT,
        retry_at DOUBLE PRECISION NOT NULL DEFAULT 0
    );
    """,
    """
    CREATE TABLE records (
        id BIGSERIAL PRIMARY KEY,
        ns BIGINT NOT NULL REFERENCES namespaces(ns),
        kind TEXT NOT NULL,
        text TEXT NOT NULL,
        message_ids TEXT NOT NULL DEFAULT '[]',
        importance DOUBLE PRECISION NOT NULL DEFAULT 0.5,
        pinned BOOLEAN NOT NULL DEFAULT FALSE,
        tags TEXT NOT NULL DEFAULT '[]',
        metadata TEXT NOT NULL DEFAULT '{}',
        created_at DOUBLE PRECISION NOT NULL,
        tsv TSVECTOR GENERATED ALWAYS AS (to_tsvector('english'::regconfig, text)) STORED
    );
    CREATE INDEX records_ns ON records (ns, kind);
    CREATE INDEX records_tsv ON records USING GIN (tsv);
    CREATE TABLE outbox (
        record_id BIGINT PRIMARY KEY,
        op TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        last_error TEXT,
        retry_at DOUBLE PRECISION NOT NULL DEFAULT 0
    );
    CREATE TABLE links (
        a BIGINT NOT NULL, b BIGINT NOT NULL, relation TEXT NOT NULL, strength DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (a, b, relation)
    );
    CREATE INDEX links_b ON links (b);
    """,
    """
    CREATE INDEX records_pinned ON records (ns) WHERE pinned;
    CREATE SEQUENCE outbox_seq;
    ALTER TABLE outbox ADD COLUMN seq BIGINT NOT NULL DEFAULT nextval('outbox_seq');
    """,
)
assert len(MIGRATIONS) == SCHEMA_VERSION

_WORD = re.compile(r"\w+", re.UNICODE)
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def ts_query(text: str) -> str | None:
    """Turn free text into a safe ``to_tsquery`` input: each word quoted, OR-ed (ranking weighs the overlap)."""
    words = query_words(text)
    return " | ".join("'" + w.replace("'", "''") + "'" for w in words) or None


def redact_url(url: str) -> str:
    """The URL with its password replaced by ``***`` (safe to log and show)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def _import_drivers() -> tuple[Any, Any]:
    try:
        import psycopg
        import psycopg_pool
    except ImportError as e:
        raise MissingDependencyError(
            f"the PostgreSQL journal needs psycopg 3 and psycopg_pool: {INSTALL_HINT}"
        ) from e
    return psycopg, psycopg_pool


class PostgresJournal:
    """A journal in a PostgreSQL schema, shared by processes and hosts.

    A connection pool serves the threads of this process; writers of one session in
    any process wait on that session's ``state`` row lock.

    Args:
        url: a libpq URL, ``postgresql://user:password@host:5432/db``.
        schema: the PostgreSQL schema holding the tables (created when missing).
        min_size / max_size: connections kept open / at most.
        timeout_s: how long to wait for the server at open and for a free connection.

    Raises:
        MissingDependencyError: psycopg is not installed.
        SchemaVersionError: the schema was written by a newer langmem-tiers.
        JournalError: the server cannot be reached or refused a statement.

    Example:
        >>> j = PostgresJournal("postgresql://postgres@127.0.0.1:5432/app")  # doctest: +SKIP
        >>> j.namespace_id(Namespace("s1")) > 0  # doctest: +SKIP
        True
    """

    def __init__(self, url: str, *, schema: str = DEFAULT_SCHEMA, min_size: int = 1, max_size: int = 8,
                 timeout_s: float = 30.0) -> None:
        if not _SCHEMA_NAME.fullmatch(schema):
            raise JournalError(
                f"schema ({schema!r}) must be a lowercase identifier: letters, digits and _, up to 63 characters"
            )
        if not 1 <= min_size <= max_size:
            raise JournalError(f"min_size ({min_size}) must be between 1 and max_size ({max_size})")
        psycopg, pool_module = _import_drivers()
        self._psycopg = psycopg
        self._error: type[Exception] = psycopg.Error
        self.url = redact_url(url)
        self.schema = schema
        self._lock = threading.Lock()
        search_path = f'SET search_path TO "{schema}"'

        def configure(conn: Conn) -> None:
            conn.execute(search_path)

        self._pool: psycopg_pool.ConnectionPool[Conn] | None = pool_module.ConnectionPool(
            url, min_size=min_size, max_size=max_size, kwargs={"autocommit": True}, configure=configure,
            check=pool_module.ConnectionPool.check_connection, timeout=timeout_s, open=False,
            name=f"langmem-tiers-{schema}",
        )
        try:
            self._pool.open(wait=True, timeout=timeout_s)
            self._migrate()
            self.uid = self._meta("uid")
        except self._error as e:
            self.close()
            raise JournalError(f"cannot open journal {self.url}: {e}") from e
        except BaseException:
            self.close()
            raise

    # --- schema ---------------------------------------------------------------

    def _migrate(self) -> None:
        lock_key = zlib.crc32(f"langmem_tiers:{self.schema}".encode()) - 2**31
        with self._txn() as conn:
            # One process migrates at a time; the others wait and then find it done.
            conn.execute("SELECT pg_advisory_xact_lock(%s, 0)", (lock_key,))
            conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
            row = conn.execute("SELECT to_regclass('meta') IS NOT NULL").fetchone()
            version = 0
            if row is not None and row[0]:
                found = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
                version = int(found[0]) if found else 0
            if version > SCHEMA_VERSION:
                raise SchemaVersionError(
                    f"journal {self.url} (schema {self.schema}) has schema version {version}, newer than this "
                    f"langmem-tiers understands ({SCHEMA_VERSION}): upgrade langmem-tiers"
                )
            for step in range(version, SCHEMA_VERSION):
                conn.execute(MIGRATIONS[step])
                log.info("journal %s (schema %s) migrated to schema version %d", self.url, self.schema, step + 1)
            if version == 0:
                conn.execute("INSERT INTO meta VALUES ('uid', %s)", (uuid.uuid4().hex,))
            conn.execute(
                "INSERT INTO meta VALUES ('schema_version', %s) ON CONFLICT (key) DO UPDATE SET value=EXCLUDED.value",
                (str(SCHEMA_VERSION),),
            )

    def _meta(self, key: str) -> str:
        with self._autocommit() as conn:
            row = conn.execute("SELECT value FROM meta WHERE key=%s", (key,)).fetchone()
        if row is None:
            raise JournalError(f"journal {self.url} has no {key!r} in its meta table")
        return str(row[0])

    # --- connections and transactions -----------------------------------------

    @contextmanager
    def _connection(self) -> Iterator[Conn]:
        pool = self._pool
        if pool is None:
            raise JournalError("journal is closed")
        try:
            with pool.connection() as conn:
                yield conn
        except self._error as e:
            raise JournalError(f"journal operation failed on {self.url}: {e}") from e

    @contextmanager
    def _autocommit(self) -> Iterator[Conn]:
        with self._connection() as conn:
            yield conn

    @contextmanager
    def _txn(self, begin: str = "BEGIN") -> Iterator[Conn]:
        """A transaction that commits on exit and rolls back on any error."""
        with self._connection() as conn:
            conn.execute(begin)
            try:
                yield conn
            except BaseException:
                _rollback(conn, self._error)
                raise
            conn.execute("COMMIT")

    @contextmanager
    def write(self, ns_id: int) -> Iterator[_PostgresWrite]:
        """A write transaction serialized per session across processes; commits on exit, rolls back on error."""
        with self._txn() as conn:
            locked = conn.execute("SELECT ns FROM state WHERE ns=%s FOR UPDATE", (ns_id,)).fetchone()
            if locked is None:  # a namespace without state (deleted): still serialize its writers
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (ns_id,))
            yield _PostgresWrite(conn, ns_id)

    @contextmanager
    def read(self) -> Iterator[_PostgresRead]:
        """Reads from one consistent snapshot."""
        with self._txn("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY") as conn:
            yield _PostgresRead(conn)

    # --- namespaces -----------------------------------------------------------

    def namespace_id(self, ns: Namespace, create: bool = True) -> int | None:
        key = (ns.user_id, ns.agent_id, ns.session_id)
        select = "SELECT ns FROM namespaces WHERE user_id=%s AND agent_id=%s AND session_id=%s"
        with self._autocommit() as conn:
            row = conn.execute(select, key).fetchone()
        if row or not create:
            return int(row[0]) if row else None
        with self._txn() as conn:
            conn.execute(
                "INSERT INTO namespaces (user_id, agent_id, session_id, created_at) VALUES (%s,%s,%s,%s) "
                "ON CONFLICT DO NOTHING",
                (*key, time.time()),
            )
            row = conn.execute(select, key).fetchone()
            if row is None:
                raise JournalError(f"namespace {ns} vanished while it was created (deleted concurrently)")
            conn.execute("INSERT INTO state (ns) VALUES (%s) ON CONFLICT DO NOTHING", (row[0],))
            return int(row[0])

    def namespaces(self, scope: Scope | None = None) -> list[tuple[int, Namespace]]:
        sql = "SELECT ns, session_id, user_id, agent_id FROM namespaces"
        args: tuple[str, ...] = ()
        if scope is not None:
            own = scope.namespace
            if scope.kind == "session":
                sql += " WHERE session_id=%s AND user_id=%s AND agent_id=%s"
                args = (own.session_id, own.user_id, own.agent_id)
            elif scope.kind == "user":
                sql += " WHERE user_id=%s"
                args = (own.user_id,)
            else:
                sql += " WHERE user_id=%s AND agent_id=%s"
                args = (own.user_id, own.agent_id)
        with self._autocommit() as conn:
            rows = conn.execute(sql + " ORDER BY ns", args).fetchall()
        return [(int(r[0]), Namespace(r[1], r[2], r[3])) for r in rows]

    # --- messages -------------------------------------------------------------

    def iter_messages(self, ns_id: int, after: int = 0, batch: int = 500) -> Iterator[Message]:
        cursor = after
        while True:
            with self._autocommit() as conn:
                rows = conn.execute(
                    f"SELECT {_MSG_COLS} FROM messages WHERE ns=%s AND id>%s ORDER BY id LIMIT %s",
                    (ns_id, cursor, batch),
                ).fetchall()
            if not rows:
                return
            for row in rows:
                yield _row_message(row)
            cursor = rows[-1][0]

    def messages_by_id(self, ids: Sequence[int]) -> list[Message]:
        if not ids:
            return []
        with self._autocommit() as conn:
            rows = conn.execute(
                f"SELECT {_MSG_COLS} FROM messages WHERE id = ANY(%s) ORDER BY id", (list(ids),)
            ).fetchall()
        return [_row_message(r) for r in rows]

    def count_messages(self, ns_id: int | None = None) -> int:
        with self._autocommit() as conn:
            if ns_id is None:
                row = conn.execute("SELECT count(*) FROM messages").fetchone()
            else:
                row = conn.execute("SELECT count(*) FROM messages WHERE ns=%s", (ns_id,)).fetchone()
        return int(row[0]) if row else 0

    def clear_session(self, ns_id: int) -> list[int]:
        """Delete a session's messages, summary and records; returns the record ids removed."""
        with self.write(ns_id) as tx:
            conn = tx.conn
            record_ids = _delete_ns_content(conn, ns_id)
            conn.execute(
                "UPDATE state SET window_start=0, summary='', summary_tokens=0, summary_cursor=0, "
                "summary_version=summary_version+1, failures=0, last_error=NULL, retry_at=0 WHERE ns=%s",
                (ns_id,),
            )
            return record_ids

    def delete_namespaces(self, ns_ids: Sequence[int]) -> list[int]:
        removed: list[int] = []
        with self._txn() as conn:
            ordered = sorted(set(ns_ids))  # lock in one order: two deleters never deadlock
            conn.execute("SELECT ns FROM state WHERE ns = ANY(%s) ORDER BY ns FOR UPDATE", (ordered,))
            for ns_id in ordered:
                removed += _delete_ns_content(conn, ns_id)
                conn.execute("DELETE FROM state WHERE ns=%s", (ns_id,))
                conn.execute("DELETE FROM namespaces WHERE ns=%s", (ns_id,))
        return removed

    # --- records, keyword index, outbox ---------------------------------------

    def records(self, ids: Sequence[int]) -> list[Record]:
        if not ids:
            return []
        with self._autocommit() as conn:
            rows = conn.execute(f"{_RECORD_SELECT} WHERE r.id = ANY(%s) ORDER BY r.id", (list(ids),)).fetchall()
        return [_row_record(r) for r in rows]

    def count_records(self, ns_id: int) -> int:
        return self.record_stats(ns_id)[0]

    def record_stats(self, ns_id: int) -> tuple[int, int]:
        """How many records a session has, and its largest record id (0 when none)."""
        with self._autocommit() as conn:
            row = conn.execute(
                "SELECT count(*), coalesce(max(id), 0) FROM records WHERE ns = %s", (ns_id,)
            ).fetchone()
        return (int(row[0]), int(row[1])) if row else (0, 0)

    def record_ids(self, ns_id: int, after: int = 0) -> list[int]:
        with self._autocommit() as conn:
            rows = conn.execute(
                "SELECT id FROM records WHERE ns = %s AND id > %s ORDER BY id", (ns_id, after)
            ).fetchall()
        return [int(r[0]) for r in rows]

    def scoped_records(self, ns_ids: Sequence[int], kinds: Sequence[str] | None = None,
                       pinned_only: bool = False) -> list[Record]:
        if not ns_ids:
            return []
        sql = f"{_RECORD_SELECT} WHERE r.ns = ANY(%s)"
        if pinned_only:
            sql += " AND r.pinned"
        args: list[Any] = [list(ns_ids)]
        if kinds:
            sql += " AND r.kind = ANY(%s)"
            args.append(list(kinds))
        with self._autocommit() as conn:
            rows = conn.execute(sql + " ORDER BY r.id", args).fetchall()
        return [_row_record(r) for r in rows]

    def keyword_search(self, query: str, ns_ids: Sequence[int], k: int,
                       kinds: Sequence[str] | None = None) -> list[KeywordHit]:
        match = ts_query(query)
        if not match or not ns_ids or k <= 0:
            return []
        sql = (
            "SELECT r.id, ts_rank_cd(r.tsv, q.query) AS score "
            "FROM records r, to_tsquery('english'::regconfig, %s) AS q(query) "
            "WHERE r.tsv @@ q.query AND r.ns = ANY(%s)"
        )
        args: list[Any] = [match, list(ns_ids)]
        if kinds:
            sql += " AND r.kind = ANY(%s)"
            args.append(list(kinds))
        sql += " ORDER BY score DESC, r.id DESC LIMIT %s"
        args.append(k)
        with self._autocommit() as conn:
            rows = conn.execute(sql, args).fetchall()
        return [KeywordHit(int(r[0]), i + 1, float(r[1])) for i, r in enumerate(rows)]

    def add_records(self, ns_id: int, records: Sequence[NewRecord]) -> list[int]:
        with self._txn() as conn:
            return _insert_records(conn, ns_id, records)

    def delete_records(self, ids: Sequence[int]) -> int:
        with self._txn() as conn:
            return _delete_records(conn, ids)

    def update_record(self, record_id: int, *, text: str | None = None, importance: float | None = None,
                      message_ids: tuple[int, ...] | None = None,
                      metadata: Mapping[str, Any] | None = None) -> None:
        sets: list[str] = []
        args: list[Any] = []
        for column, value in (("text", text), ("importance", importance),
                              ("message_ids", None if message_ids is None else json.dumps(list(message_ids))),
                              ("metadata", None if metadata is None else
                               json.dumps(dict(metadata), ensure_ascii=False))):
            if value is not None:
                sets.append(f"{column}=%s")
                args.append(value)
        if not sets:
            return
        with self._txn() as conn:
            conn.execute(f"UPDATE records SET {', '.join(sets)} WHERE id=%s", (*args, record_id))
            _queue(conn, record_id, "upsert")

    def outbox(self, limit: int, due_only: bool = True) -> list[OutboxItem]:
        with self._autocommit() as conn:
            rows = conn.execute(
                "SELECT record_id, op, attempts, seq FROM outbox WHERE retry_at <= %s ORDER BY record_id LIMIT %s",
                (time.time() if due_only else float("inf"), limit),
            ).fetchall()
        return [OutboxItem(int(r[0]), str(r[1]), int(r[2]), int(r[3])) for r in rows]

    def outbox_done(self, items: Sequence[OutboxItem]) -> None:
        if not items:
            return
        with self._autocommit() as conn:
            # Matching seq keeps a change queued again meanwhile.
            conn.execute(
                "DELETE FROM outbox o USING unnest(%s::bigint[], %s::bigint[]) AS d(record_id, seq) "
                "WHERE o.record_id = d.record_id AND o.seq = d.seq",
                ([i.record_id for i in items], [i.seq for i in items]),
            )

    def outbox_failed(self, items: Sequence[OutboxItem], error: str) -> None:
        if not items:
            return
        with self._autocommit() as conn:
            # SET reads the old attempts: the first failure waits 1 s, then 2, 4 ... up to 256 s.
            conn.execute(
                "UPDATE outbox o SET attempts=o.attempts+1, last_error=%s, "
                "retry_at=%s + least(300, 1 << least(o.attempts, 8)) "
                "FROM unnest(%s::bigint[], %s::bigint[]) AS d(record_id, seq) "
                "WHERE o.record_id = d.record_id AND o.seq = d.seq",
                (error[:2000], time.time(), [i.record_id for i in items], [i.seq for i in items]),
            )

    def outbox_count(self) -> int:
        with self._autocommit() as conn:
            row = conn.execute("SELECT count(*) FROM outbox").fetchone()
        return int(row[0]) if row else 0

    def outbox_error(self) -> str | None:
        with self._autocommit() as conn:
            row = conn.execute("SELECT last_error FROM outbox WHERE last_error IS NOT NULL LIMIT 1").fetchone()
        return None if row is None else str(row[0])

    def requeue_all(self) -> int:
        # The tsvector column is generated from the text, so only the vectors need rebuilding.
        with self._txn() as conn:
            conn.execute(
                "INSERT INTO outbox (record_id, op) SELECT id, 'upsert' FROM records "
                "ON CONFLICT (record_id) DO UPDATE SET op='upsert', attempts=0, last_error=NULL, retry_at=0, "
                "seq=nextval('outbox_seq')"
            )
            row = conn.execute("SELECT count(*) FROM outbox").fetchone()
            return int(row[0]) if row else 0

    def links(self, record_ids: Sequence[int]) -> list[tuple[int, int, str, float]]:
        if not record_ids:
            return []
        ids = list(record_ids)
        with self._autocommit() as conn:
            rows = conn.execute(
                "SELECT a, b, relation, strength FROM links WHERE a = ANY(%s) OR b = ANY(%s)", (ids, ids)
            ).fetchall()
        return [(int(r[0]), int(r[1]), str(r[2]), float(r[3])) for r in rows]

    def add_link(self, a: int, b: int, relation: str, strength: float) -> None:
        with self._autocommit() as conn:
            conn.execute(
                "INSERT INTO links VALUES (%s,%s,%s,%s) "
                "ON CONFLICT (a, b, relation) DO UPDATE SET strength=EXCLUDED.strength",
                (a, b, relation, strength),
            )

    def integrity_check(self) -> str:
        """``"ok"``, or what is wrong: schema version, sessions without state, messages past the cursors."""
        problems: list[str] = []
        with self._txn("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY") as conn:
            row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            if row is None or row[0] != str(SCHEMA_VERSION):
                problems.append(f"schema_version is {row[0] if row else None!r}, expected {SCHEMA_VERSION}")
            row = conn.execute(
                "SELECT count(*) FROM namespaces n LEFT JOIN state s ON s.ns = n.ns WHERE s.ns IS NULL"
            ).fetchone()
            if row and row[0]:
                problems.append(f"{row[0]} namespaces have no state row")
            row = conn.execute(
                "SELECT count(*) FROM state WHERE summary_cursor >= window_start AND window_start > 0"
            ).fetchone()
            if row and row[0]:
                problems.append(f"{row[0]} sessions have a summary cursor inside their window")
        return "ok" if not problems else "; ".join(problems)

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    def __repr__(self) -> str:
        return f"PostgresJournal({self.url!r}, schema={self.schema!r})"


_MSG_COLS = "id, role, content, name, tool_calls, tool_call_id, metadata, created_at, tokens, tokens_key"
_RECORD_SELECT = (
    "SELECT r.id, n.session_id, n.user_id, n.agent_id, r.kind, r.text, r.message_ids, r.importance, "
    "r.pinned, r.tags, r.metadata, r.created_at FROM records r JOIN namespaces n ON n.ns = r.ns"
)


class _PostgresWrite:
    def __init__(self, conn: Conn, ns_id: int) -> None:
        self.conn = conn
        self.ns_id = ns_id

    def state(self) -> SessionState:
        return _state(self.conn, self.ns_id)

    def insert_messages(self, messages: Sequence[Message], tokens: Sequence[int], tokens_key: str) -> list[Message]:
        from psycopg.types.json import Jsonb

        stored = []
        for message, count in zip(messages, tokens):
            created = message.created_at if message.created_at is not None else time.time()
            row = self.conn.execute(
                "INSERT INTO messages (ns, role, content, name, tool_calls, tool_call_id, metadata, created_at, "
                "tokens, tokens_key) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) RETURNING id",
                (self.ns_id, message.role, json.dumps(message.to_dict()["content"], ensure_ascii=False),
                 message.name,
                 Jsonb([c.to_dict() for c in message.tool_calls]) if message.tool_calls else None,
                 message.tool_call_id,
                 json.dumps(dict(message.metadata), ensure_ascii=False) if message.metadata else None,
                 created, count, tokens_key),
            ).fetchone()
            assert row is not None
            stored.append(replace(message, id=int(row[0]), created_at=created))
        return stored

    def window_entries(self, start: int) -> list[WindowEntry]:
        rows = self.conn.execute(
            "SELECT id, role, tokens FROM messages WHERE ns=%s AND id>=%s ORDER BY id", (self.ns_id, start)
        ).fetchall()
        return [WindowEntry(int(r[0]), str(r[1]), int(r[2])) for r in rows]

    def messages_between(self, after: int, before: int) -> list[Message]:
        rows = self.conn.execute(
            f"SELECT {_MSG_COLS} FROM messages WHERE ns=%s AND id>%s AND id<%s ORDER BY id",
            (self.ns_id, after, before),
        ).fetchall()
        return [_row_message(r) for r in rows]

    def open_tool_calls(self, since: int) -> set[str]:
        rows = self.conn.execute(
            "SELECT c->>'id' FROM messages m, jsonb_array_elements(m.tool_calls) AS c "
            "WHERE m.ns=%s AND m.id>=%s AND m.tool_calls IS NOT NULL",
            (self.ns_id, since),
        ).fetchall()
        return {str(r[0]) for r in rows}

    def set_window_start(self, window_start: int) -> None:
        self.conn.execute("UPDATE state SET window_start=%s WHERE ns=%s", (window_start, self.ns_id))

    def set_summary(self, summary: str, tokens: int, cursor: int) -> None:
        self.conn.execute(
            "UPDATE state SET summary=%s, summary_tokens=%s, summary_cursor=%s, "
            "summary_version=summary_version+1, failures=0, last_error=NULL, retry_at=0 WHERE ns=%s",
            (summary, tokens, cursor, self.ns_id),
        )

    def set_failure(self, error: str | None, failures: int, retry_at: float) -> None:
        self.conn.execute(
            "UPDATE state SET last_error=%s, failures=%s, retry_at=%s WHERE ns=%s",
            (error, failures, retry_at, self.ns_id),
        )

    def insert_records(self, records: Sequence[NewRecord]) -> list[int]:
        return _insert_records(self.conn, self.ns_id, records)

    def update_tokens(self, ids_tokens: Sequence[tuple[int, int]], tokens_key: str) -> None:
        if not ids_tokens:
            return
        with self.conn.cursor() as cur:
            cur.executemany(
                "UPDATE messages SET tokens=%s, tokens_key=%s WHERE id=%s",
                [(count, tokens_key, mid) for mid, count in ids_tokens],
            )


class _PostgresRead:
    def __init__(self, conn: Conn) -> None:
        self.conn = conn

    def state(self, ns_id: int) -> SessionState:
        return _state(self.conn, ns_id)

    def window_messages(self, ns_id: int, start: int) -> list[tuple[Message, int, str]]:
        rows = self.conn.execute(
            f"SELECT {_MSG_COLS} FROM messages WHERE ns=%s AND id>=%s ORDER BY id", (ns_id, start)
        ).fetchall()
        return [(_row_message(r), int(r[8]), str(r[9])) for r in rows]

    def count_between(self, ns_id: int, after: int, before: int) -> int:
        row = self.conn.execute(
            "SELECT count(*) FROM messages WHERE ns=%s AND id>%s AND id<%s", (ns_id, after, before)
        ).fetchone()
        return int(row[0]) if row else 0

    def last_message_id(self, ns_id: int) -> int:
        row = self.conn.execute("SELECT max(id) FROM messages WHERE ns=%s", (ns_id,)).fetchone()
        return int(row[0] or 0) if row else 0


def _rollback(conn: Conn, error: type[Exception]) -> None:
    try:
        conn.execute("ROLLBACK")
    except error:  # a broken connection: the pool discards it and the server aborted the transaction
        pass


def _state(conn: Conn, ns_id: int) -> SessionState:
    row = conn.execute(
        "SELECT window_start, summary, summary_tokens, summary_cursor, summary_version, failures, last_error, "
        "retry_at FROM state WHERE ns=%s",
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
        tool_calls=tuple(ToolCall(**c) for c in row[4]) if row[4] else (),
        tool_call_id=row[5],
        metadata=json.loads(row[6]) if row[6] else {},
        created_at=float(row[7]),
        id=int(row[0]),
    )


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


def _queue(conn: Conn, record_id: int, op: str) -> None:
    """Put a record in the outbox afresh (like SQLite's INSERT OR REPLACE: attempts and backoff reset)."""
    conn.execute(
        "INSERT INTO outbox (record_id, op) VALUES (%s, %s) ON CONFLICT (record_id) DO UPDATE "
        "SET op=EXCLUDED.op, attempts=0, last_error=NULL, retry_at=0, seq=nextval('outbox_seq')",
        (record_id, op),
    )


def _insert_records(conn: Conn, ns_id: int, records: Sequence[NewRecord]) -> list[int]:
    ids = []
    for r in records:
        row = conn.execute(
            "INSERT INTO records (ns, kind, text, message_ids, importance, pinned, tags, metadata, created_at) "
            "VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s) RETURNING id",
            (ns_id, r.kind, r.text, json.dumps(list(r.message_ids)), r.importance, bool(r.pinned),
             json.dumps(list(r.tags), ensure_ascii=False), json.dumps(dict(r.metadata), ensure_ascii=False),
             r.created_at or time.time()),
        ).fetchone()
        assert row is not None
        rid = int(row[0])
        _queue(conn, rid, "upsert")
        ids.append(rid)
    return ids


def _delete_records(conn: Conn, ids: Sequence[int]) -> int:
    if not ids:
        return 0
    wanted = list(dict.fromkeys(ids))
    removed = conn.execute("DELETE FROM records WHERE id = ANY(%s)", (wanted,)).rowcount
    conn.execute("DELETE FROM links WHERE a = ANY(%s) OR b = ANY(%s)", (wanted, wanted))
    conn.execute(
        "INSERT INTO outbox (record_id, op) SELECT unnest(%s::bigint[]), 'delete' ON CONFLICT (record_id) "
        "DO UPDATE SET op='delete', attempts=0, last_error=NULL, retry_at=0, seq=nextval('outbox_seq')",
        (wanted,),
    )
    return max(removed, 0)


def _delete_ns_content(conn: Conn, ns_id: int) -> list[int]:
    ids = [int(r[0]) for r in conn.execute("SELECT id FROM records WHERE ns=%s ORDER BY id", (ns_id,)).fetchall()]
    _delete_records(conn, ids)
    conn.execute("DELETE FROM messages WHERE ns=%s", (ns_id,))
    return ids
