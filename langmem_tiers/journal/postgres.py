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
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from langmem_tiers.errors import JournalError, MissingDependencyError, SchemaVersionError, SessionErasedError
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
# Versions 1-3 are SQL scripts, frozen as released; version 4 is _migrate_to_v4 below.
_OLD_MIGRATIONS: tuple[str, ...] = (
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

# Schema version 4 (ids already come from sequences, which never hand a number out twice):
# the session version stamp, the message idempotency key, and the outbox's namespace
# (per-session counts, pending records) and leases (owner, claimed_until) for many indexers.
V4_SQL = """
ALTER TABLE state ADD COLUMN version BIGINT NOT NULL DEFAULT 0;
ALTER TABLE messages ADD COLUMN key TEXT;
CREATE UNIQUE INDEX messages_key ON messages (ns, key) WHERE key IS NOT NULL;
ALTER TABLE outbox ADD COLUMN ns BIGINT, ADD COLUMN owner TEXT,
    ADD COLUMN claimed_until DOUBLE PRECISION NOT NULL DEFAULT 0;
UPDATE outbox o SET ns = r.ns FROM records r WHERE r.id = o.record_id;
CREATE INDEX outbox_ns ON outbox (ns);
"""


def _migrate_to_v4(conn: Conn) -> None:
    """Schema version 4 (see ``V4_SQL``), then stored ids folded into NFC.

    Namespaces whose user, agent and session ids become equal in NFC are merged into the
    lowest id (:func:`~langmem_tiers.journal.base.nfc_merge_plan`): their messages, records
    and outbox rows move there (links follow the records), the lowest id's session state is
    kept and the others' dropped; every moved or renamed record is queued for upsert so the
    vector store learns its new ids.
    """
    conn.execute(V4_SQL)
    rows = conn.execute("SELECT ns, user_id, agent_id, session_id FROM namespaces ORDER BY ns").fetchall()
    merges, renames = nfc_merge_plan((int(r[0]), str(r[1]), str(r[2]), str(r[3])) for r in rows)
    touched: set[int] = set()
    for source, target in merges:
        conn.execute("UPDATE messages SET ns=%s WHERE ns=%s", (target, source))
        conn.execute("UPDATE records SET ns=%s WHERE ns=%s", (target, source))
        conn.execute("UPDATE outbox SET ns=%s WHERE ns=%s", (target, source))
        conn.execute("DELETE FROM state WHERE ns=%s", (source,))
        conn.execute("DELETE FROM namespaces WHERE ns=%s", (source,))
        touched.add(target)
        log.info("journal migration: namespace %d merged into %d (equal ids in NFC)", source, target)
    for ns_id, ns in renames:
        conn.execute("UPDATE namespaces SET user_id=%s, agent_id=%s, session_id=%s WHERE ns=%s",
                     (ns.user_id, ns.agent_id, ns.session_id, ns_id))
        touched.add(ns_id)
    for ns_id in sorted(touched):
        ids = [int(r[0]) for r in conn.execute("SELECT id FROM records WHERE ns=%s", (ns_id,)).fetchall()]
        _queue(conn, ids, "upsert", ns_id)
    _bump(conn, sorted(touched))
    rows = conn.execute("SELECT id, ns, metadata FROM messages WHERE key IS NULL "
                        "AND metadata LIKE '%%\"langchain\"%%' ORDER BY id").fetchall()
    for key, message_id in legacy_message_keys(rows):
        conn.execute("UPDATE messages SET key=%s WHERE id=%s", (key, message_id))


# Schema version 5, the semantic tier: a memory's key (the user's current value for it until a
# newer memory with the key supersedes it) and when it was superseded (history is kept).
V5_SQL = """
ALTER TABLE records ADD COLUMN key TEXT, ADD COLUMN valid_to DOUBLE PRECISION;
CREATE INDEX records_key ON records (ns, key) WHERE key IS NOT NULL;
"""

# Schema version 6, encryption: ``records.terms`` holds the blind tokens of an encrypted record
# (NULL for plaintext ones). The generated tsvector is rebuilt to index them ('simple': the
# tokens are not English words) instead of the text, which is then ciphertext. A table rewrite.
V6_SQL = """
ALTER TABLE records ADD COLUMN terms TEXT;
ALTER TABLE records DROP COLUMN tsv;
ALTER TABLE records ADD COLUMN tsv TSVECTOR GENERATED ALWAYS AS (
    CASE WHEN terms IS NULL THEN to_tsvector('english'::regconfig, text)
         ELSE to_tsvector('simple'::regconfig, terms) END) STORED;
CREATE INDEX records_tsv ON records USING GIN (tsv);
"""

# Schema version 7, the rolling summary's version history: every saved summary (its text sealed
# like state.summary when encrypted), bounded per session by the caller; erasure deletes each
# version that folded an erased message. The current summary becomes the first version.
V7_SQL = """
CREATE TABLE summary_versions (
    ns BIGINT NOT NULL REFERENCES namespaces(ns),
    version BIGINT NOT NULL,
    text TEXT NOT NULL,
    tokens INTEGER NOT NULL,
    summary_cursor BIGINT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (ns, version)
);
INSERT INTO summary_versions (ns, version, text, tokens, summary_cursor, created_at)
    SELECT ns, summary_version, summary, summary_tokens, summary_cursor, extract(epoch FROM now())::double precision
    FROM state WHERE summary != '';
"""

MIGRATIONS: tuple[str | Callable[[Conn], None], ...] = (
    *_OLD_MIGRATIONS, _migrate_to_v4, V5_SQL, V6_SQL, V7_SQL)
assert len(MIGRATIONS) == SCHEMA_VERSION

# The server's clock, in epoch seconds: leases and retry times of replicas on several hosts
# are compared on one clock.
_NOW = "extract(epoch FROM clock_timestamp())::double precision"
# The tables compact() vacuums: every one that holds user text or ids.
_TABLES = ("messages", "records", "namespaces", "state", "summary_versions", "outbox", "links")

_WORD = re.compile(r"\w+", re.UNICODE)
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def ts_query(text: str, words: Sequence[str] | None = None) -> str | None:
    """Turn free text into a safe ``to_tsquery`` input: each word quoted, OR-ed (ranking weighs the overlap).

    At most ``MAX_QUERY_TERMS`` words: PostgreSQL parses and evaluates an OR chain
    recursively, and a 20k-word query (a pasted document) exceeded its stack depth limit.
    ``words``, when given, are used instead of the text's (the blind tokens of an encrypted journal).
    """
    words = search_terms(text) if words is None else list(words)
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
        keyring: encrypt every user-content text with per-user keys kept in this keyring,
            outside the database (see :mod:`langmem_tiers.keyring`). Once a schema was
            opened with a keyring, opening it without one raises
            :class:`~langmem_tiers.errors.KeyUnavailableError`.

    Raises:
        MissingDependencyError: psycopg is not installed.
        SchemaVersionError: the schema was written by a newer langmem-tiers.
        JournalError: the server cannot be reached or refused a statement.

    Example:
        >>> j = PostgresJournal("postgresql://postgres@127.0.0.1:5432/app")  # doctest: +SKIP
        >>> j.namespace_id(Namespace("s1")) > 0  # doctest: +SKIP
        True
    """

    # What erase_report() must say it cannot see: residue() reads live rows through SQL only.
    residue_note = ("live rows scanned through SQL only: deleted rows' bytes stay in heap pages after VACUUM "
                    "until the pages are reused or rewritten (VACUUM FULL, an exclusive lock: a maintenance "
                    "window), and dead tuples, the WAL, replicas and backups cannot be scanned from a client "
                    "(rotate WAL and backups by your retention policy)")

    def __init__(self, url: str, *, schema: str = DEFAULT_SCHEMA, min_size: int = 1, max_size: int = 8,
                 timeout_s: float = 30.0, keyring: KeyRing | None = None) -> None:
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
        # Names of the sessions this process resolved, to say which one a stale handle lost (memory only).
        self._names: dict[int, Namespace] = {}
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
            self._cipher, self._plain_records = self._setup_encryption(keyring)
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
                version = parse_schema_version(found[0], f"{self.url} (schema {self.schema})") if found else 0
            if version > SCHEMA_VERSION:
                raise SchemaVersionError(
                    f"journal {self.url} (schema {self.schema}) has schema version {version}, newer than this "
                    f"langmem-tiers understands ({SCHEMA_VERSION}): upgrade langmem-tiers"
                )
            for step in range(version, SCHEMA_VERSION):
                migration = MIGRATIONS[step]
                if callable(migration):
                    migration(conn)
                else:
                    conn.execute(migration)
                log.info("journal %s (schema %s) migrated to schema version %d", self.url, self.schema, step + 1)
            if version == 0:
                conn.execute("INSERT INTO meta VALUES ('uid', %s)", (uuid.uuid4().hex,))
            conn.execute(
                "INSERT INTO meta VALUES ('schema_version', %s) ON CONFLICT (key) DO UPDATE SET value=EXCLUDED.value",
                (str(SCHEMA_VERSION),),
            )

    @property
    def encrypted(self) -> bool:
        """True when this journal seals user content (it was opened with a keyring)."""
        return self._cipher is not None

    def _setup_encryption(self, keyring: KeyRing | None) -> tuple[FieldCipher | None, bool]:
        """The cipher, and whether plaintext records from before encryption may exist (keyword search
        then also sends the plaintext query words). The first open with a keyring marks the schema."""
        with self._autocommit() as conn:
            rows = dict(conn.execute("SELECT key, value FROM meta WHERE key IN (%s, 'encryption_plain_records')",
                                     (META_KEY,)).fetchall())
        cipher = cipher_for(keyring, self.uid, rows.get(META_KEY), f"{self.url} (schema {self.schema})")
        if cipher is None or META_KEY in rows:
            return cipher, rows.get("encryption_plain_records") == "1"
        with self._txn() as conn:
            conn.execute("LOCK TABLE meta IN EXCLUSIVE MODE")  # two replicas turning it on at once agree
            plain = conn.execute("SELECT 1 FROM records LIMIT 1").fetchone() is not None
            conn.execute("INSERT INTO meta VALUES (%s, %s), ('encryption_plain_records', %s) ON CONFLICT DO NOTHING",
                         (META_KEY, ALGORITHM, "1" if plain else "0"))
            row = conn.execute("SELECT value FROM meta WHERE key='encryption_plain_records'").fetchone()
        return cipher, bool(row and row[0] == "1")

    def _codec(self, conn: Conn) -> RowCodec:
        """Seals and opens rows read or written on ``conn`` (namespace lookups reuse the connection)."""
        return RowCodec(self._cipher, lambda ns_id: self._namespace_of(conn, ns_id))

    def _namespace_of(self, conn: Conn, ns_id: int) -> Namespace:
        known = self._names.get(ns_id)
        if known is not None:
            return known
        row = conn.execute("SELECT session_id, user_id, agent_id FROM namespaces WHERE ns=%s", (ns_id,)).fetchone()
        if row is None:
            raise SessionErasedError(erased_message(ns_id, None))
        ns = Namespace(row[0], row[1], row[2])
        self._remember(ns_id, ns)
        return ns

    def key_destroyed(self, ns: Namespace) -> bool | None:
        """Whether the key that sealed this namespace's text is gone (``None``: the journal is not encrypted)."""
        return None if self._cipher is None else not self._cipher.has_key(ns)

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
        """A write transaction serialized per session across processes; commits on exit, rolls back on error.

        Raises:
            SessionErasedError: the namespace was erased meanwhile (sequence ids are never reused).
        """
        with self._txn() as conn:
            if not _lock_session(conn, ns_id):
                raise SessionErasedError(erased_message(ns_id, self._names.get(ns_id)))
            tx = _PostgresWrite(conn, ns_id, self._codec(conn))
            yield tx
            if tx.touched:
                _bump(conn, [ns_id])

    @contextmanager
    def read(self) -> Iterator[_PostgresRead]:
        """Reads from one consistent snapshot."""
        with self._txn("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY") as conn:
            yield _PostgresRead(conn, self._codec(conn))

    # --- namespaces -----------------------------------------------------------

    def namespace_id(self, ns: Namespace, create: bool = True) -> int | None:
        key = (ns.user_id, ns.agent_id, ns.session_id)
        select = "SELECT ns FROM namespaces WHERE user_id=%s AND agent_id=%s AND session_id=%s"
        with self._autocommit() as conn:
            row = conn.execute(select, key).fetchone()
        if row or not create:
            return self._remember(int(row[0]), ns) if row else None
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
        return self._remember(int(row[0]), ns)

    def _remember(self, ns_id: int, ns: Namespace) -> int:
        if len(self._names) >= _NAMES_KEPT:
            self._names.pop(next(iter(self._names)))
        self._names[ns_id] = ns
        return ns_id

    def namespaces(self, scope: Scope | None = None) -> list[tuple[int, Namespace]]:
        sql = "SELECT ns, session_id, user_id, agent_id FROM namespaces"
        args: tuple[str, ...] = ()
        if scope is not None:
            own = scope.namespace
            kind = scope.effective_kind  # an anonymous session's scopes narrow to itself
            if kind == "session":
                sql += " WHERE session_id=%s AND user_id=%s AND agent_id=%s"
                args = (own.session_id, own.user_id, own.agent_id)
            elif kind == "user":
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
                codec = self._codec(conn)
                messages = [_row_message(row, codec) for row in rows]
            if not rows:
                return
            yield from messages
            cursor = rows[-1][0]

    def messages_by_id(self, ids: Sequence[int]) -> list[Message]:
        if not ids:
            return []
        with self._autocommit() as conn:
            rows = conn.execute(
                f"SELECT {_MSG_COLS} FROM messages WHERE id = ANY(%s) ORDER BY id", (list(ids),)
            ).fetchall()
            codec = self._codec(conn)
            return [_row_message(r, codec) for r in rows]

    def count_messages(self, ns_id: int | None = None) -> int:
        with self._autocommit() as conn:
            if ns_id is None:
                row = conn.execute("SELECT count(*) FROM messages").fetchone()
            else:
                row = conn.execute("SELECT count(*) FROM messages WHERE ns=%s", (ns_id,)).fetchone()
        return int(row[0]) if row else 0

    def clear_session(self, ns_id: int, keep_memories: bool = False) -> list[int]:
        """Delete a session's messages, summary and records; returns the record ids removed.

        The session row stays; ``summary_version`` and ``version`` grow (never reset), so a
        summary computed before the clear is recognized as stale by its version.
        ``keep_memories`` keeps explicit memories that no message produced (``remember()``).
        """
        with self._txn() as conn:
            _lock_session(conn, ns_id)
            record_ids = _delete_ns_content(conn, ns_id, keep_memories)
            conn.execute(
                "UPDATE state SET window_start=0, summary='', summary_tokens=0, summary_cursor=0, "
                "summary_version=summary_version+1, failures=0, last_error=NULL, retry_at=0, "
                "version=version+1 WHERE ns=%s",
                (ns_id,),
            )
            return record_ids

    def erase_messages(self, ns_id: int, message_ids: Sequence[int]) -> list[int]:
        """Erase messages of one session with every record made from them; returns the records removed.

        Every summary version that folded one of them goes in the same transaction; a current
        summary that covered them falls back to the newest remaining version (its cursor before
        the first erased id), or to none, and ``summary_version`` grows: no summary keeps their
        text, and the summarizer re-folds only the evicted turns after that version's cursor.
        """
        ids = sorted(set(message_ids))
        with self._txn() as conn:
            if not ids or conn.execute("SELECT 1 FROM state WHERE ns=%s", (ns_id,)).fetchone() is None:
                return []
            _lock_session(conn, ns_id)
            rows = conn.execute(
                "SELECT DISTINCT r.id, r.kind, r.message_ids FROM records r, "
                "jsonb_array_elements_text(r.message_ids::jsonb) j "
                "WHERE r.ns=%s AND j::bigint = ANY(%s) ORDER BY r.id", (ns_id, ids)).fetchall()
            record_ids, narrowed = provenance_after_erasure(
                ((int(r[0]), str(r[1]), json.loads(r[2])) for r in rows), ids)
            _delete_records(conn, record_ids)
            # A memory also said in messages that remain keeps those as its provenance.
            for rid, remaining in narrowed:
                conn.execute("UPDATE records SET message_ids=%s WHERE id=%s", (json.dumps(list(remaining)), rid))
            conn.execute("DELETE FROM messages WHERE ns=%s AND id = ANY(%s)", (ns_id, ids))
            conn.execute("DELETE FROM summary_versions WHERE ns=%s AND summary_cursor >= %s", (ns_id, ids[0]))
            if ids[0] <= _state(conn, ns_id, None).summary_cursor:
                clean = conn.execute("SELECT text, tokens, summary_cursor FROM summary_versions WHERE ns=%s "
                                     "ORDER BY version DESC LIMIT 1", (ns_id,)).fetchone() or ("", 0, 0)
                # The clean version's text is copied as stored (sealed the same way, same subject).
                conn.execute("UPDATE state SET summary=%s, summary_tokens=%s, summary_cursor=%s, "
                             "summary_version=summary_version+1, failures=0, last_error=NULL, retry_at=0 "
                             "WHERE ns=%s", (*clean, ns_id))
            _bump(conn, [ns_id])
            return record_ids

    def delete_namespaces(self, ns_ids: Sequence[int]) -> list[int]:
        """Delete namespaces with everything they hold; returns the record ids removed.

        In an encrypted journal, the key of every user (or anonymous session) left without a
        session is then destroyed, after the commit: the rows' copies in the WAL, in dead
        tuples, on replicas and in backups can no longer be opened.
        """
        removed: list[int] = []
        with self._txn() as conn:
            ordered = sorted(set(ns_ids))  # lock in one order: two deleters never deadlock
            conn.execute("SELECT ns FROM state WHERE ns = ANY(%s) ORDER BY ns FOR UPDATE", (ordered,))
            erased = [Namespace(r[0], r[1], r[2]) for r in conn.execute(
                "SELECT session_id, user_id, agent_id FROM namespaces WHERE ns = ANY(%s)", (ordered,)).fetchall()]
            for ns_id in ordered:
                removed += _delete_ns_content(conn, ns_id)
                conn.execute("DELETE FROM state WHERE ns=%s", (ns_id,))
                conn.execute("DELETE FROM namespaces WHERE ns=%s", (ns_id,))
        shred_orphans(self._cipher, erased, self._subject_in_use)
        return removed

    def _subject_in_use(self, ns: Namespace) -> bool:
        """Whether a namespace sealed with ``ns``'s key still exists (its user, or the anonymous session)."""
        sql, args = (("SELECT 1 FROM namespaces WHERE user_id=%s LIMIT 1", (ns.user_id,)) if not ns.anonymous else
                     ("SELECT 1 FROM namespaces WHERE user_id='' AND agent_id=%s AND session_id=%s",
                      (ns.agent_id, ns.session_id)))
        with self._autocommit() as conn:
            return conn.execute(sql, args).fetchone() is not None

    def summary_history(self, ns_id: int, limit: int = DEFAULT_SUMMARY_HISTORY) -> list[SummaryVersion]:
        """The session's saved summary versions, newest first (at most ``limit``)."""
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise JournalError(f"limit ({limit!r}) must be an integer >= 0")
        with self._autocommit() as conn:
            rows = conn.execute("SELECT version, text, tokens, summary_cursor, created_at FROM summary_versions "
                                "WHERE ns=%s ORDER BY version DESC LIMIT %s", (ns_id, limit)).fetchall()
            codec = self._codec(conn)
            return [SummaryVersion(int(r[0]), codec.summary(ns_id, str(r[1])), int(r[2]), int(r[3]), float(r[4]))
                    for r in rows]

    # --- records, keyword index, outbox ---------------------------------------

    def records(self, ids: Sequence[int]) -> list[Record]:
        if not ids:
            return []
        with self._autocommit() as conn:
            rows = conn.execute(f"{_RECORD_SELECT} WHERE r.id = ANY(%s) ORDER BY r.id", (list(ids),)).fetchall()
        return [_row_record(r, self._codec(conn)) for r in rows]

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
        return [_row_record(r, self._codec(conn)) for r in rows]

    def keyword_search(self, query: str, ns_ids: Sequence[int], k: int,
                       kinds: Sequence[str] | None = None) -> list[KeywordHit]:
        if not ns_ids or k <= 0:
            return []
        args: list[Any]
        if self._cipher is None:
            match = ts_query(query)
            if not match:
                return []
            tsquery, args = "to_tsquery('english'::regconfig, %s)", [match]
        else:
            tsquery, args = self._blind_tsquery(query, ns_ids)
            if not tsquery:
                return []
        # The namespace filter is a column of records, never a term of the text index.
        sql = (
            "SELECT r.id, ts_rank_cd(r.tsv, q.query) AS score "
            f"FROM records r, {tsquery} AS q(query) "
            "WHERE r.tsv @@ q.query AND r.ns = ANY(%s)"
        )
        args.append(list(ns_ids))
        if kinds:
            sql += " AND r.kind = ANY(%s)"
            args.append(list(kinds))
        sql += " ORDER BY score DESC, r.id DESC LIMIT %s"
        args.append(k)
        with self._autocommit() as conn:
            rows = conn.execute(sql, args).fetchall()
        return [KeywordHit(int(r[0]), i + 1, float(r[1])) for i, r in enumerate(rows)]

    def _blind_tsquery(self, query: str, ns_ids: Sequence[int]) -> tuple[str, list[Any]]:
        """The tsquery of an encrypted journal: the blind tokens of the query's words ('simple'), OR-ed
        with the plaintext words ('english') only when records from before encryption may exist."""
        assert self._cipher is not None
        words = search_terms(query)
        with self._autocommit() as conn:
            try:
                namespaces = [self._namespace_of(conn, n) for n in ns_ids]
            except SessionErasedError:  # one was erased meanwhile: search the others
                rows = conn.execute("SELECT session_id, user_id, agent_id FROM namespaces WHERE ns = ANY(%s)",
                                    (list(ns_ids),)).fetchall()
                namespaces = [Namespace(r[0], r[1], r[2]) for r in rows]
        parts: list[str] = []
        args: list[Any] = []
        blind = ts_query("", self._cipher.query_terms(namespaces, words))
        if blind:
            parts.append("to_tsquery('simple'::regconfig, %s)")
            args.append(blind)
        plain = ts_query(query) if self._plain_records else None
        if plain:
            parts.append("to_tsquery('english'::regconfig, %s)")
            args.append(plain)
        return (f"(SELECT {' || '.join(parts)})" if parts else ""), args

    def add_records(self, ns_id: int, records: Sequence[NewRecord]) -> list[int]:
        """Insert records of one session; raises SessionErasedError when it was erased."""
        with self.write(ns_id) as tx:
            return tx.insert_records(records)

    def delete_records(self, ids: Sequence[int]) -> int:
        with self._txn() as conn:
            return _delete_records(conn, ids)

    def update_record(self, record_id: int, *, text: str | None = None, importance: float | None = None,
                      message_ids: tuple[int, ...] | None = None,
                      metadata: Mapping[str, Any] | None = None, pinned: bool | None = None) -> None:
        if text is None and importance is None and message_ids is None and metadata is None and pinned is None:
            return
        with self._txn() as conn:
            row = conn.execute("SELECT ns FROM records WHERE id=%s FOR UPDATE", (record_id,)).fetchone()
            if row is None:
                return
            ns_id = int(row[0])
            codec = self._codec(conn)
            sets: list[str] = []
            args: list[Any] = []
            for column, value in (
                    ("text", None if text is None else codec.sealed_column(ns_id, RECORD_TEXT, text)),
                    ("terms", None if text is None else codec.index_terms(ns_id, text)),
                    ("importance", importance),
                    ("message_ids", None if message_ids is None else json.dumps(list(message_ids))),
                    ("metadata", None if metadata is None else codec.sealed_column(
                        ns_id, RECORD_METADATA, json.dumps(dict(metadata), ensure_ascii=False))),
                    ("pinned", None if pinned is None else bool(pinned))):
                if value is not None:
                    sets.append(f"{column}=%s")
                    args.append(value)
            conn.execute(f"UPDATE records SET {', '.join(sets)} WHERE id=%s", (*args, record_id))
            _queue(conn, [record_id], "upsert", ns_id)
            _bump(conn, [ns_id])

    def outbox(self, limit: int, due_only: bool = True) -> list[OutboxItem]:
        """Pending items, unclaimed (the single-process path; many indexers use :meth:`claim_outbox`)."""
        with self._autocommit() as conn:
            rows = conn.execute(
                f"SELECT record_id, op, attempts, seq FROM outbox WHERE (NOT %s OR retry_at <= {_NOW}) "
                "ORDER BY record_id LIMIT %s",
                (due_only, limit),
            ).fetchall()
        return [OutboxItem(int(r[0]), str(r[1]), int(r[2]), int(r[3])) for r in rows]

    def claim_outbox(self, limit: int, *, owner: str, lease_s: float, due_only: bool = True) -> list[OutboxItem]:
        """Claim up to ``limit`` unleased items (due ones unless ``due_only=False``) for ``lease_s`` seconds.

        ``FOR UPDATE SKIP LOCKED`` lets replicas claim at once without waiting on each other;
        a lease that expires (a crashed indexer) makes the row claimable again. Times are
        the server's clock.
        """
        check_claim(limit, owner, lease_s)
        if limit == 0:
            return []
        with self._autocommit() as conn:
            rows = conn.execute(
                f"WITH now AS (SELECT {_NOW} AS t), picked AS ("
                "SELECT o.record_id FROM outbox o, now WHERE (NOT %s OR o.retry_at <= now.t) "
                "AND o.claimed_until <= now.t ORDER BY o.record_id LIMIT %s FOR UPDATE OF o SKIP LOCKED) "
                "UPDATE outbox o SET owner=%s, claimed_until=(SELECT t FROM now) + %s FROM picked "
                "WHERE o.record_id = picked.record_id RETURNING o.record_id, o.op, o.attempts, o.seq",
                (due_only, limit, owner, lease_s),
            ).fetchall()
        return sorted((OutboxItem(int(r[0]), str(r[1]), int(r[2]), int(r[3]), owner) for r in rows),
                      key=lambda i: i.record_id)

    def outbox_done(self, items: Sequence[OutboxItem]) -> None:
        if not items:
            return
        with self._txn() as conn:
            # Matching seq keeps a change queued again meanwhile.
            conn.execute(
                "DELETE FROM outbox o USING unnest(%s::bigint[], %s::bigint[]) AS d(record_id, seq) "
                "WHERE o.record_id = d.record_id AND o.seq = d.seq",
                ([i.record_id for i in items], [i.seq for i in items]),
            )
            _release(conn, items)

    def outbox_failed(self, items: Sequence[OutboxItem], error: str) -> None:
        if not items:
            return
        with self._txn() as conn:
            # SET reads the old attempts: the first failure waits 1 s, then 2, 4 ... up to 256 s.
            conn.execute(
                "UPDATE outbox o SET attempts=o.attempts+1, last_error=%s, "
                f"retry_at={_NOW} + least(300, 1 << least(o.attempts, 8)) "
                "FROM unnest(%s::bigint[], %s::bigint[]) AS d(record_id, seq) "
                "WHERE o.record_id = d.record_id AND o.seq = d.seq",
                (error[:2000], [i.record_id for i in items], [i.seq for i in items]),
            )
            _release(conn, items)

    def outbox_count(self, ns_ids: Sequence[int] | None = None) -> int:
        with self._autocommit() as conn:
            if ns_ids is None:
                row = conn.execute("SELECT count(*) FROM outbox").fetchone()
            else:
                row = conn.execute("SELECT count(*) FROM outbox WHERE ns = ANY(%s)", (list(ns_ids),)).fetchone()
        return int(row[0]) if row else 0

    def outbox_error(self, ns_ids: Sequence[int] | None = None) -> str | None:
        sql, args = "SELECT last_error FROM outbox WHERE last_error IS NOT NULL", []
        if ns_ids is not None:
            sql += " AND ns = ANY(%s)"
            args.append(list(ns_ids))
        with self._autocommit() as conn:
            row = conn.execute(sql + " LIMIT 1", args).fetchone()
        return None if row is None else str(row[0])

    def pending_records(self, ns_ids: Sequence[int], limit: int) -> list[Record]:
        """Records of these namespaces whose upsert is still queued (not yet in the vector store).

        The newest ``limit`` of them, in id order: a query searches them exactly (their
        vectors are computed on the spot) until the indexer catches up.
        """
        if not ns_ids or limit <= 0:
            return []
        with self._autocommit() as conn:
            rows = conn.execute(
                f"{_RECORD_SELECT} JOIN outbox o ON o.record_id = r.id "
                "WHERE o.op = 'upsert' AND r.ns = ANY(%s) ORDER BY r.id DESC LIMIT %s",
                (list(ns_ids), limit),
            ).fetchall()
        return [_row_record(r, self._codec(conn)) for r in reversed(rows)]

    def requeue_all(self) -> int:
        # The tsvector column is generated from the text, so only the vectors need rebuilding.
        with self._txn() as conn:
            conn.execute(
                "INSERT INTO outbox (record_id, op, ns) SELECT id, 'upsert', ns FROM records "
                "ON CONFLICT (record_id) DO UPDATE SET op='upsert', attempts=0, last_error=NULL, retry_at=0, "
                "seq=nextval('outbox_seq'), ns=EXCLUDED.ns"
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

    # --- physical erasure -----------------------------------------------------

    def compact(self) -> bool:
        """VACUUM the journal's tables (outside a transaction, as PostgreSQL requires).

        VACUUM makes the space of deleted rows reusable and prunes dead index entries; it
        does not overwrite the bytes at once, and copies in the WAL, in replicas and in
        backups stay until PostgreSQL recycles them: nothing SQL can reach proves or forces
        their removal (see :meth:`residue`).
        """
        with self._autocommit() as conn:
            conn.execute("VACUUM " + ", ".join(_TABLES))
        return True

    def residue(self, needles: Sequence[str]) -> dict[str, int]:
        """Occurrences of each needle in the live rows of every journal table that holds text.

        Only what SQL can see: dead tuples not yet reclaimed, the WAL, replicas and backups
        are not scannable from a client, so 0 here means "no live copy", not "no copy on disk".
        """
        columns = {"messages": ("content", "metadata", "tool_calls::text", "key"),
                   "records": ("text", "metadata", "tags"),
                   "namespaces": ("user_id", "agent_id", "session_id"),
                   "state": ("summary", "last_error"),
                   "summary_versions": ("text",),
                   "outbox": ("last_error",)}
        found: dict[str, int] = {}
        with self._autocommit() as conn:
            for needle in needles:
                if not needle:
                    raise JournalError("residue() needs non-empty needles")
                total = 0
                for table, cols in columns.items():
                    parts = " + ".join(
                        f"coalesce(sum((length({c}) - length(replace({c}, %(n)s, ''))) / length(%(n)s)), 0)"
                        for c in cols)
                    row = conn.execute(f"SELECT {parts} FROM {table}", {"n": needle}).fetchone()
                    total += int(row[0]) if row else 0
                found[needle] = total
        return found

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    def __repr__(self) -> str:
        return f"PostgresJournal({self.url!r}, schema={self.schema!r})"


_NAMES_KEPT = 4096
_MSG_COLS = "id, role, content, name, tool_calls, tool_call_id, metadata, created_at, tokens, tokens_key, key, ns"
_RECORD_SELECT = (
    "SELECT r.id, n.session_id, n.user_id, n.agent_id, r.kind, r.text, r.message_ids, r.importance, "
    "r.pinned, r.tags, r.metadata, r.created_at, r.key, r.valid_to FROM records r JOIN namespaces n ON n.ns = r.ns"
)


class _PostgresWrite:
    def __init__(self, conn: Conn, ns_id: int, codec: RowCodec) -> None:
        self.conn = conn
        self.ns_id = ns_id
        self._codec = codec
        self.touched = False  # a change to this session: its version grows at commit

    def state(self) -> SessionState:
        return _state(self.conn, self.ns_id, self._codec)

    def insert_messages(self, messages: Sequence[Message], tokens: Sequence[int], tokens_key: str) -> list[Message]:
        from psycopg.types.json import Jsonb

        stored = []
        for message, count in zip(messages, tokens):
            created = message.created_at if message.created_at is not None else time.time()
            content, name, calls, metadata = self._codec.message_columns(
                self.ns_id, json.dumps(message.to_dict()["content"], ensure_ascii=False), message.name,
                [c.to_dict() for c in message.tool_calls] if message.tool_calls else None,
                json.dumps(dict(message.metadata), ensure_ascii=False) if message.metadata else None)
            try:
                row = self.conn.execute(
                    "INSERT INTO messages (ns, role, content, name, tool_calls, tool_call_id, metadata, created_at, "
                    "tokens, tokens_key, key) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) RETURNING id",
                    (self.ns_id, message.role, content, name, Jsonb(calls) if calls else None,
                     message.tool_call_id, metadata, created, count, tokens_key, message.key),
                ).fetchone()
            except Exception as e:
                if message.key is not None and getattr(e, "sqlstate", None) == "23505":  # unique_violation
                    raise JournalError(
                        f"a message with key {message.key!r:.80} is already stored in this session: "
                        "look keys up with messages_by_key() and skip the stored ones"
                    ) from e
                raise
            assert row is not None
            stored.append(replace(message, id=int(row[0]), created_at=created))
        self.touched = self.touched or bool(stored)
        return stored

    def messages_by_key(self, keys: Sequence[str]) -> dict[str, Message]:
        if not keys:
            return {}
        rows = self.conn.execute(
            f"SELECT {_MSG_COLS} FROM messages WHERE ns=%s AND key = ANY(%s)", (self.ns_id, list(set(keys)))
        ).fetchall()
        return {str(r[10]): _row_message(r, self._codec) for r in rows}

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
        return [_row_message(r, self._codec) for r in rows]

    def open_tool_calls(self, since: int) -> set[str]:
        rows = self.conn.execute(
            "SELECT c->>'id' FROM messages m, jsonb_array_elements(m.tool_calls) AS c "
            "WHERE m.ns=%s AND m.id>=%s AND m.tool_calls IS NOT NULL",
            (self.ns_id, since),
        ).fetchall()
        return {str(r[0]) for r in rows}

    def set_window_start(self, window_start: int) -> None:
        self.conn.execute("UPDATE state SET window_start=%s WHERE ns=%s", (window_start, self.ns_id))
        self.touched = True

    def set_summary(self, summary: str, tokens: int, cursor: int, history: int = DEFAULT_SUMMARY_HISTORY) -> None:
        sealed = self._codec.seal_summary(self.ns_id, summary)
        self.conn.execute(
            "UPDATE state SET summary=%s, summary_tokens=%s, summary_cursor=%s, "
            "summary_version=summary_version+1, failures=0, last_error=NULL, retry_at=0 WHERE ns=%s",
            (sealed, tokens, cursor, self.ns_id),
        )
        if history > 0:
            self.conn.execute(
                "INSERT INTO summary_versions (ns, version, text, tokens, summary_cursor, created_at) "
                "SELECT ns, summary_version, %s, %s, %s, %s FROM state WHERE ns=%s",
                (sealed, tokens, cursor, time.time(), self.ns_id))
        self.conn.execute("DELETE FROM summary_versions WHERE ns=%s AND version NOT IN (SELECT version FROM "
                          "summary_versions WHERE ns=%s ORDER BY version DESC LIMIT %s)",
                          (self.ns_id, self.ns_id, max(history, 0)))
        self.touched = True

    def set_failure(self, error: str | None, failures: int, retry_at: float) -> None:
        self.conn.execute(
            "UPDATE state SET last_error=%s, failures=%s, retry_at=%s WHERE ns=%s",
            (error, failures, retry_at, self.ns_id),
        )
        self.touched = True

    def insert_records(self, records: Sequence[NewRecord]) -> list[int]:
        ids = _insert_records(self.conn, self.ns_id, records, self._codec)
        self.touched = self.touched or bool(ids)
        return ids

    def update_tokens(self, ids_tokens: Sequence[tuple[int, int]], tokens_key: str) -> None:
        if not ids_tokens:
            return
        with self.conn.cursor() as cur:
            cur.executemany(
                "UPDATE messages SET tokens=%s, tokens_key=%s WHERE id=%s AND ns=%s",
                [(count, tokens_key, mid, self.ns_id) for mid, count in ids_tokens],
            )
        self.touched = True

    def current_memories(self, ns_ids: Sequence[int]) -> list[Record]:
        if not ns_ids:
            return []
        rows = self.conn.execute(f"{_RECORD_SELECT} WHERE r.ns = ANY(%s) AND r.kind != 'turn' "
                                 "AND r.valid_to IS NULL ORDER BY r.id", (list(ns_ids),)).fetchall()
        return [_row_record(r, self._codec) for r in rows]

    def supersede(self, record_ids: Sequence[int], valid_to: float) -> None:
        if not record_ids:
            return
        # Superseded records may live in the user's other sessions; their version stamps stay
        # (a stamp tells a session's own messages and cursors apart) and their state rows are not
        # locked, so two sessions of one user superseding each other's memories never deadlock.
        self.conn.execute("UPDATE records SET valid_to=%s WHERE id = ANY(%s) AND valid_to IS NULL",
                          (float(valid_to), list(record_ids)))
        self.touched = True

    def merge_memory(self, record_id: int, importance: float, message_ids: tuple[int, ...]) -> None:
        self.conn.execute("UPDATE records SET importance=%s, message_ids=%s WHERE id=%s",
                          (importance, json.dumps(list(message_ids)), record_id))
        self.touched = True


class _PostgresRead:
    def __init__(self, conn: Conn, codec: RowCodec) -> None:
        self.conn = conn
        self._codec = codec

    def state(self, ns_id: int) -> SessionState:
        return _state(self.conn, ns_id, self._codec)

    def window_messages(self, ns_id: int, start: int) -> list[tuple[Message, int, str]]:
        rows = self.conn.execute(
            f"SELECT {_MSG_COLS} FROM messages WHERE ns=%s AND id>=%s ORDER BY id", (ns_id, start)
        ).fetchall()
        return [(_row_message(r, self._codec), int(r[8]), str(r[9])) for r in rows]

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


def _state(conn: Conn, ns_id: int, codec: RowCodec | None) -> SessionState:
    """The session's state; its summary opened by ``codec`` (left as stored when ``None``: cursors only)."""
    row = conn.execute(
        "SELECT window_start, summary, summary_tokens, summary_cursor, summary_version, failures, last_error, "
        "retry_at, version FROM state WHERE ns=%s",
        (ns_id,),
    ).fetchone()
    if row is None:
        return SessionState()
    summary = str(row[1]) if codec is None else codec.summary(ns_id, str(row[1]))
    return SessionState(int(row[0]), summary, int(row[2]), int(row[3]), int(row[4]), int(row[5]),
                        row[6], float(row[7]), int(row[8]))


def _lock_session(conn: Conn, ns_id: int) -> bool:
    """Lock the session's state row for this transaction; False when the namespace was erased."""
    if conn.execute("SELECT ns FROM state WHERE ns=%s FOR UPDATE", (ns_id,)).fetchone():
        return True
    if conn.execute("SELECT ns FROM namespaces WHERE ns=%s FOR KEY SHARE", (ns_id,)).fetchone() is None:
        return False
    conn.execute("INSERT INTO state (ns) VALUES (%s) ON CONFLICT DO NOTHING", (ns_id,))  # repair a missing row
    return conn.execute("SELECT ns FROM state WHERE ns=%s FOR UPDATE", (ns_id,)).fetchone() is not None


def _bump(conn: Conn, ns_ids: Sequence[int]) -> None:
    """Grow the version stamp of these sessions, locking their rows in id order (no deadlock)."""
    if not ns_ids:
        return
    conn.execute(
        "UPDATE state SET version=version+1 WHERE ns IN "
        "(SELECT ns FROM state WHERE ns = ANY(%s) ORDER BY ns FOR UPDATE)",
        (sorted(set(ns_ids)),),
    )


def _release(conn: Conn, items: Sequence[OutboxItem]) -> None:
    """Release the leases these items hold (rows queued again meanwhile become claimable)."""
    claimed = [i for i in items if i.owner]
    if claimed:
        conn.execute(
            "UPDATE outbox o SET owner=NULL, claimed_until=0 "
            "FROM unnest(%s::bigint[], %s::text[]) AS d(record_id, owner) "
            "WHERE o.record_id = d.record_id AND o.owner = d.owner",
            ([i.record_id for i in claimed], [i.owner for i in claimed]),
        )


def _row_message(row: Sequence[Any], codec: RowCodec) -> Message:
    raw, name, calls, metadata = codec.message_fields(int(row[11]), row[2], row[3], row[4] or None, row[6])
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


def _queue(conn: Conn, record_ids: Sequence[int], op: str, ns_id: int | None) -> None:
    """Queue index changes afresh: attempts and backoff reset, a new ``seq``.

    An existing lease is kept: the holder finishes its (now stale) item first, and the new
    change becomes claimable when it releases the row, so a delete never overtakes an upsert.
    """
    if not record_ids:
        return
    conn.execute(
        "INSERT INTO outbox (record_id, op, ns) SELECT unnest(%s::bigint[]), %s, %s ON CONFLICT (record_id) "
        "DO UPDATE SET op=EXCLUDED.op, attempts=0, last_error=NULL, retry_at=0, seq=nextval('outbox_seq'), "
        "ns=coalesce(EXCLUDED.ns, outbox.ns)",
        (list(record_ids), op, ns_id),
    )


def _insert_records(conn: Conn, ns_id: int, records: Sequence[NewRecord], codec: RowCodec) -> list[int]:
    ids = []
    for r in records:
        text, tags, metadata, key, terms = codec.record_columns(
            ns_id, r.text, json.dumps(list(r.tags), ensure_ascii=False),
            json.dumps(dict(r.metadata), ensure_ascii=False), r.key)
        row = conn.execute(
            "INSERT INTO records (ns, kind, text, message_ids, importance, pinned, tags, metadata, created_at, key, "
            "terms) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) RETURNING id",
            (ns_id, r.kind, text, json.dumps(list(r.message_ids)), r.importance, bool(r.pinned),
             tags, metadata, r.created_at or time.time(), key, terms),
        ).fetchone()
        assert row is not None
        ids.append(int(row[0]))
    _queue(conn, ids, "upsert", ns_id)
    return ids


def _delete_records(conn: Conn, ids: Sequence[int]) -> int:
    if not ids:
        return 0
    wanted = list(dict.fromkeys(ids))
    owners = {int(r[0]): int(r[1]) for r in
              conn.execute("DELETE FROM records WHERE id = ANY(%s) RETURNING id, ns", (wanted,)).fetchall()}
    conn.execute("DELETE FROM links WHERE a = ANY(%s) OR b = ANY(%s)", (wanted, wanted))
    by_ns: dict[int | None, list[int]] = {}
    for rid in wanted:
        by_ns.setdefault(owners.get(rid), []).append(rid)
    for ns_id, rids in by_ns.items():
        _queue(conn, rids, "delete", ns_id)
    _bump(conn, sorted(set(owners.values())))
    return len(owners)


def _delete_ns_content(conn: Conn, ns_id: int, keep_memories: bool = False) -> list[int]:
    keep = " AND (kind='turn' OR message_ids != '[]')" if keep_memories else ""
    ids = [int(r[0]) for r in conn.execute(f"SELECT id FROM records WHERE ns=%s{keep} ORDER BY id",
                                           (ns_id,)).fetchall()]
    _delete_records(conn, ids)
    conn.execute("DELETE FROM messages WHERE ns=%s", (ns_id,))
    conn.execute("DELETE FROM summary_versions WHERE ns=%s", (ns_id,))
    return ids
