"""The PostgreSQL journal: one schema shared by every process and host of a deployment.

Same tables and semantics as :mod:`langmem_tiers.journal.sqlite`; what the two do alike is
written once in :mod:`.sql_core` and :mod:`.sql_journal`, and this module is the dialect:
the connection pool, the DDL, locking, keyword search and erasure. Writers of one session
are serialized by a row lock on its ``state`` row (``SELECT ... FOR UPDATE``), so several
replicas can append to one session; ``read()`` is a ``REPEATABLE READ`` snapshot. The
keyword index is a generated ``tsvector`` column (``english`` configuration) with a GIN
index that takes each record at once (no pending list for every search to read, ``V14_SQL``);
matches are ranked by bm25 (``BM25_SQL``), as SQLite's FTS5 ranks them; a large scope's, once
its postings are read into the process (:mod:`.postgres_postings`), by the same formula there.

psycopg 3 and psycopg_pool are imported when a journal is opened
(``pip install 'langmem-tiers[postgres]'``).
"""

from __future__ import annotations

import functools
import logging
import re
import threading
import time
import uuid
import weakref
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from langmem_tiers.errors import JournalError, MissingDependencyError
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
from langmem_tiers.journal.encryption import ALGORITHM, META_KEY, FieldCipher, cipher_for
from langmem_tiers.journal.keyword_budget import TermCount, crowded_out, plan_terms, recency_windows
from langmem_tiers.journal.postgres_postings import (
    DEFAULT_MAX_BYTES,
    LEXEMES_KEPT,
    READ_CHUNK,
    ROWS_SQL,
    ScopePostings,
    lexeme_of,
)
from langmem_tiers.journal.postgres_stats import JournalStats, StatsReader
from langmem_tiers.journal.rows import RECORD_COLS
from langmem_tiers.journal.sql_core import (
    ScopeFilter,
    Sql,
    fold_nfc,
    ids_in_scope,
    in_scope,
    scope_size,
    scope_versions,
)
from langmem_tiers.journal.sql_journal import ListingCache, SqlJournal, check_version, finish_migration
from langmem_tiers.keyring import KeyRing

if TYPE_CHECKING:
    import psycopg
    import psycopg_pool

    Conn = psycopg.Connection[tuple[Any, ...]]

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'langmem-tiers[postgres]'"
DEFAULT_SCHEMA = "langmem_tiers"
# A pooled connection handed back less than this long ago is not checked again when taken: psycopg_pool's
# check is a round trip (an empty statement), and a context() takes ~13 connections in a row, 1-4 ms of
# round trips on the servers where they are ~0.08 ms without (BENCHMARKS.md, issue 15, session 56). One
# idle longer (a server restart, a proxy's idle timeout) is checked and replaced before use; one broken
# within the last half second fails its statement, and the pool discards it. 0.5 s: HikariCP's default
# for the same bypass (aliveBypassWindowMs).
CHECK_IDLE_S = 0.5

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


def _migrate_to_v4(db: Sql) -> None:
    """Schema version 4 (see ``V4_SQL``), then stored ids folded into NFC
    (:func:`~langmem_tiers.journal.sql_core.fold_nfc`, shared with SQLite)."""
    db.raw.execute(V4_SQL)
    fold_nfc(db, log)


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

# Schema version 8, scope versions (see sqlite.py's V8_SQL for why): three counters per namespace
# kept by triggers. Deletes count per statement from the transition table, locking the namespace
# rows in id order first (two transactions deleting records of the same sessions never deadlock);
# inserts and text edits are single-row statements (``insert_records``, ``update_record``).
V8_SQL = """
ALTER TABLE namespaces ADD COLUMN last_record_id BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN records_deleted BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN records_edited BIGINT NOT NULL DEFAULT 0;
UPDATE namespaces n SET last_record_id = m.last FROM (SELECT ns, max(id) AS last FROM records GROUP BY ns) m
    WHERE m.ns = n.ns;
CREATE INDEX records_ns_id ON records (ns, id);
CREATE FUNCTION records_scope_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE namespaces SET last_record_id = greatest(last_record_id, NEW.id) WHERE ns = NEW.ns;
    RETURN NULL;
END $$;
CREATE FUNCTION records_scope_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM namespaces WHERE ns IN (SELECT ns FROM gone) ORDER BY ns FOR NO KEY UPDATE;
    UPDATE namespaces n SET records_deleted = n.records_deleted + g.n
        FROM (SELECT ns, count(*) AS n FROM gone GROUP BY ns) g WHERE g.ns = n.ns;
    RETURN NULL;
END $$;
CREATE FUNCTION records_scope_edited() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE namespaces SET records_edited = records_edited + 1 WHERE ns = NEW.ns;
    RETURN NULL;
END $$;
CREATE TRIGGER records_scope_ai AFTER INSERT ON records FOR EACH ROW EXECUTE FUNCTION records_scope_inserted();
CREATE TRIGGER records_scope_ad AFTER DELETE ON records REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION records_scope_deleted();
CREATE TRIGGER records_scope_au AFTER UPDATE OF text, terms ON records FOR EACH ROW
    WHEN (OLD.text IS DISTINCT FROM NEW.text OR OLD.terms IS DISTINCT FROM NEW.terms)
    EXECUTE FUNCTION records_scope_edited();
"""

# Schema version 9, the user's memories among their turns: context() reads the profile, skills and
# working state of every session of the user (scoped_records by kind), one index probe per session
# and kind; in (ns, kind) over every record that is not a turn, those probes land in a small index
# (10,000 sessions of turns: 13.8 -> 2.9 ms a read). A query uses it by repeating its condition.
V9_SQL = """
CREATE INDEX records_memories ON records (ns, kind) WHERE kind <> 'turn';
"""

# Schema version 10, pinned flags in the scope's stamp (see sqlite.py's V10_SQL for why): a counter of the
# pinned flags set or cleared, kept by a trigger (``update_record`` changes one record per statement).
V10_SQL = """
ALTER TABLE namespaces ADD COLUMN records_repinned BIGINT NOT NULL DEFAULT 0;
CREATE FUNCTION records_scope_repinned() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE namespaces SET records_repinned = records_repinned + 1 WHERE ns = NEW.ns;
    RETURN NULL;
END $$;
CREATE TRIGGER records_scope_ap AFTER UPDATE OF pinned ON records FOR EACH ROW
    WHEN (OLD.pinned IS DISTINCT FROM NEW.pinned)
    EXECUTE FUNCTION records_scope_repinned();
"""


def _v11_changes_nothing_here(db: Sql) -> None:
    """Schema version 11 keeps SQLite's scope stamps in a table moved by triggers (sqlite.py's V11_SQL);
    PostgreSQL keeps summing the namespaces rows at each read: a row shared by all of a user's sessions
    would queue every writer of the user on it, and two transactions touching two of the user's sessions
    in opposite orders could deadlock on it."""


def _v12_changes_nothing_here(db: Sql) -> None:
    """Schema version 12 counts SQLite's record deletes and edits in one meta row (sqlite.py's V12_SQL), for
    the term counts its keyword search keeps between searches. PostgreSQL counts its terms in the GIN
    index at each search (no order to walk; ``_count_matches``), and a row every delete of every user
    moves would queue all of them on it."""


def _v13_changes_nothing_here(db: Sql) -> None:
    """Schema version 13 gives SQLite a keyword index of the memories alone (sqlite.py's V13_SQL), so that a
    search of memories over the keyword budget counts, windows and ranks no turn. Not built here: this
    journal reads a term's newest matches by a backward walk of the primary key (``_newest_matches``), and
    kept to memories that walk would pass every turn between them (the planner took that walk for a memories-
    only query on a small table, as it does for every record's). Tried with a partial index of the memories'
    ids for that walk, beside a partial GIN index: the walk used it, but so did the scope listing's probe of
    each session for a memory (``sql_journal._holds``), instead of ``records_memories`` (ns, kind), and at
    100k messages in 1,000 sessions the keyword searches of a context() took 17.8 ms against 14.5
    (``benchmarks/scale.py --servers``, commit 0252237 against its parent): a memory search whose rarest
    word's memory matches fit the budget ranks all of them, where it ranked windows of 500. Reverted. So its
    memory searches plan on every record's matches, and where newer turns took the memories' place they plan
    again on the scope's own memories (``_bounded_bm25``, :func:`.keyword_budget.crowded_out`)."""


# Schema version 14, the keyword index updated at once. With GIN's default ``fastupdate = on`` a new record's
# lexemes go to a pending list, unsorted, merged into the index only when the list passes
# ``gin_pending_list_limit`` (4 MB) or at VACUUM; until then every search of the index reads the whole list.
# A journal taking a message at a time always holds one, so every keyword search paid for it, and the add
# that filled the list paid the merge. At 100k records and 25,000 one-line adds, searches cost 14.97 / 12.14
# ms p50 (p95 49.8 / 27.4) with the list against 10.66 / 10.46 (p95 21.9 / 18.7) without, the slowest add
# 36 ms against 6.5; an add costs a little more at once: 0.81-0.84 ms p50 against 0.75-0.77, and on turns
# of ~108 words 0.97-1.09 against 0.84-0.87 (``benchmarks/postgres_gin_pending.py``; BENCHMARKS.md, issue
# 15, session 55). The list left by older versions is merged here.
V14_SQL = """
ALTER INDEX records_tsv SET (fastupdate = off);
SELECT gin_clean_pending_list('records_tsv'::regclass);
"""

MIGRATIONS: tuple[str | Callable[[Sql], None], ...] = (
    *_OLD_MIGRATIONS, _migrate_to_v4, V5_SQL, V6_SQL, V7_SQL, V8_SQL, V9_SQL, V10_SQL, _v11_changes_nothing_here,
    _v12_changes_nothing_here, _v13_changes_nothing_here, V14_SQL)
assert len(MIGRATIONS) == SCHEMA_VERSION

# The server's clock, in epoch seconds: leases and retry times of replicas on several hosts
# are compared on one clock.
_NOW = "extract(epoch FROM clock_timestamp())::double precision"
# The tables compact() vacuums: every one that holds user text or ids.
_TABLES = ("messages", "records", "namespaces", "state", "summary_versions", "outbox", "links")

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



@functools.lru_cache(maxsize=1024)
def _placeholders(sql: str) -> str:
    """A core statement (``?`` placeholders) in psycopg's ``%s`` style; a literal ``%`` doubled."""
    return sql.replace("%", "%%").replace("?", "%s")


# Beyond this many ids, ``Sql.in_`` binds them as one text array unnested in a subquery (see there):
# at 1M records, 500 record ids (a context()'s candidates) loaded in 14.3 ms that way against 17.4
# (a throwaway timing, session 31).
MANY_IDS = 100


class PostgresSql(Sql):
    """PostgreSQL's dialect: ``%s`` placeholders, row locks, arrays for lists, jsonb tool calls, the server clock."""

    __slots__ = ()

    FOR_UPDATE = " FOR UPDATE"
    FOR_KEY_SHARE = " FOR KEY SHARE"
    TRUE = "TRUE"
    CITED_FROM = "jsonb_array_elements_text(r.message_ids::jsonb) j"
    CITED_ID = "j::bigint"
    TOOL_CALL_IDS = "SELECT c->>'id' FROM messages m, jsonb_array_elements(m.tool_calls) AS c"

    def execute(self, sql: str, args: Sequence[Any] = ()) -> Any:
        return self.raw.execute(_placeholders(sql), args)

    def many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if len(rows) == 1:
            self.raw.execute(_placeholders(sql), rows[0])
        elif rows:
            with self.raw.cursor() as cur:
                cur.executemany(_placeholders(sql), rows)

    def insert_id(self, sql: str, args: Sequence[Any]) -> int:
        row = self.raw.execute(_placeholders(sql + " RETURNING id"), args).fetchone()
        return int(row[0])

    def in_(self, values: Sequence[Any]) -> tuple[str, list[Any]]:
        if not values:
            return "IN (NULL)", []
        if len(values) > MANY_IDS and all(type(v) is int for v in values):
            # A user's 10,000 sessions: ``= ANY(list)`` cost ~20 ms a statement (psycopg adapting the
            # list ~6 ms; the custom plan estimating each element's selectivity ~9 ms), this ~4 ms.
            return "IN (SELECT unnest(?::bigint[]))", ["{" + ",".join(map(str, values)) + "}"]
        return "= ANY(?)", [list(values)]

    def floors(self, pairs: Sequence[tuple[int, int]]) -> tuple[str, list[Any]]:
        return "unnest(?::bigint[], ?::bigint[]) AS f(ns_id, above)", [[p[0] for p in pairs], [p[1] for p in pairs]]

    def new_seq(self) -> tuple[str, tuple[Any, ...]]:
        return "nextval('outbox_seq')", ()

    def now(self) -> tuple[str, tuple[Any, ...]]:
        return _NOW, ()

    def duplicate_key(self, error: Exception) -> bool:
        return getattr(error, "sqlstate", None) == "23505"  # unique_violation

    def tool_calls_param(self, calls: list[dict[str, Any]] | None) -> Any:
        from psycopg.types.json import Jsonb

        return Jsonb(calls) if calls else None


class PostgresJournal(SqlJournal):
    """A journal in a PostgreSQL schema, shared by processes and hosts.

    A connection pool serves the threads of this process; writers of one session in
    any process wait on that session's ``state`` row lock. A connection idle for more than
    ``CHECK_IDLE_S`` (half a second) is checked before use and replaced if the server dropped
    it; one dropped within that half second fails its call with
    :class:`~langmem_tiers.errors.JournalError`.

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
                 timeout_s: float = 30.0, keyring: KeyRing | None = None,
                 keyword_postings_bytes: int = DEFAULT_MAX_BYTES) -> None:
        if not _SCHEMA_NAME.fullmatch(schema):
            raise JournalError(
                f"schema ({schema!r}) must be a lowercase identifier: letters, digits and _, up to 63 characters"
            )
        if not 1 <= min_size <= max_size:
            raise JournalError(f"min_size ({min_size}) must be between 1 and max_size ({max_size})")
        psycopg, pool_module = _import_drivers()
        self._error: type[Exception] = psycopg.Error
        self.url = redact_url(url)
        self.schema = schema
        self._lock = threading.Lock()
        # Names of the sessions this process resolved (memory only): the sessions of the records it reads, and
        # which one a stale handle lost.
        self._names: dict[int, Namespace] = {}
        self._names_lock = threading.Lock()
        self._listings = ListingCache()  # the newest listing of each scope read (SqlJournal.scope_listing)
        self._stats = StatsReader()  # the planner's statistics, the keyword budget's estimates
        self._cipher = None
        if keyword_postings_bytes < 0:
            raise JournalError(f"keyword_postings_bytes ({keyword_postings_bytes}) must be 0 (none held) or more")
        # Large scopes' keyword postings held in this process (:mod:`.postgres_postings`), and the lexeme of
        # each query word seen (``to_tsquery``'s, the same for every scope).
        self.keyword_postings = ScopePostings(self.scope_versions, self._postings_rows, self.record_ids_many,
                                              self._postings_scope, self._scope_size, max_bytes=keyword_postings_bytes)
        self._lexemes: OrderedDict[str, str | None] = OrderedDict()
        search_path = f'SET search_path TO "{schema}"'

        def configure(conn: Conn) -> None:
            conn.execute(search_path)
            # psycopg prepares a statement after five runs, and the server may then plan it once for
            # any arguments: a generic plan knows neither how many namespaces ``ns = ANY(?)`` holds nor
            # which kinds, and chose badly (context()'s typed-memory read of a user's 1,000 sessions:
            # 4 ms custom, ~25 ms generic; bm25's hit counts re-aggregated per pair: 15 -> 230 ms).
            # Statements stay prepared (parsed once); each run is planned for its arguments.
            conn.execute("SET plan_cache_mode = force_custom_plan")

        # When each pooled connection was last handed back (see CHECK_IDLE_S).
        self._handed_back: weakref.WeakKeyDictionary[Conn, float] = weakref.WeakKeyDictionary()

        def check(conn: Conn) -> None:
            if time.monotonic() - self._handed_back.get(conn, float("-inf")) >= CHECK_IDLE_S:
                pool_module.ConnectionPool.check_connection(conn)

        self._pool: psycopg_pool.ConnectionPool[Conn] | None = pool_module.ConnectionPool(
            url, min_size=min_size, max_size=max_size, kwargs={"autocommit": True}, configure=configure,
            check=check, timeout=timeout_s, open=False, name=f"langmem-tiers-{schema}",
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
        where = f"{self.url} (schema {self.schema})"
        with self._txn() as db:
            # One process migrates at a time; the others wait and then find it done.
            db.execute("SELECT pg_advisory_xact_lock(?, 0)", (lock_key,))
            db.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
            row = db.one("SELECT to_regclass('meta') IS NOT NULL")
            version = 0
            if row is not None and row[0]:
                found = db.one("SELECT value FROM meta WHERE key='schema_version'")
                version = parse_schema_version(found[0], where) if found else 0
            check_version(version, where)
            for step in range(version, SCHEMA_VERSION):
                migration = MIGRATIONS[step]
                if callable(migration):
                    migration(db)
                else:
                    db.raw.execute(migration)
                log.info("journal %s (schema %s) migrated to schema version %d", self.url, self.schema, step + 1)
            finish_migration(db, version, uuid.uuid4().hex)

    def _setup_encryption(self, keyring: KeyRing | None) -> tuple[FieldCipher | None, bool]:
        """The cipher, and whether plaintext records from before encryption may exist (keyword search
        then also sends the plaintext query words). The first open with a keyring marks the schema."""
        with self._autocommit() as db:
            rows = dict(db.all("SELECT key, value FROM meta WHERE key IN (?, 'encryption_plain_records')",
                               (META_KEY,)))
        cipher = cipher_for(keyring, self.uid, rows.get(META_KEY), f"{self.url} (schema {self.schema})")
        if cipher is None or META_KEY in rows:
            return cipher, rows.get("encryption_plain_records") == "1"
        with self._txn() as db:
            db.execute("LOCK TABLE meta IN EXCLUSIVE MODE")  # two replicas turning it on at once agree
            plain = db.one("SELECT 1 FROM records LIMIT 1") is not None
            db.execute("INSERT INTO meta VALUES (?, ?), ('encryption_plain_records', ?) ON CONFLICT DO NOTHING",
                       (META_KEY, ALGORITHM, "1" if plain else "0"))
            row = db.one("SELECT value FROM meta WHERE key='encryption_plain_records'")
        return cipher, bool(row and row[0] == "1")

    def _meta(self, key: str) -> str:
        with self._autocommit() as db:
            row = db.one("SELECT value FROM meta WHERE key=?", (key,))
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
                try:
                    yield conn
                finally:
                    self._handed_back[conn] = time.monotonic()
        except self._error as e:
            raise JournalError(f"journal operation failed on {self.url}: {e}") from e

    @contextmanager
    def _autocommit(self) -> Iterator[Sql]:
        with self._connection() as conn:
            yield PostgresSql(conn)

    @contextmanager
    def _txn(self, begin: str = "BEGIN") -> Iterator[Sql]:
        """A transaction that commits on exit and rolls back on any error."""
        with self._connection() as conn:
            conn.execute(begin)
            try:
                yield PostgresSql(conn)
            except BaseException:
                _rollback(conn, self._error)
                raise
            conn.execute("COMMIT")

    def _snapshot(self) -> AbstractContextManager[Sql]:
        return self._txn("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")

    def _beside_sql(self, record_ids: Sequence[int], kind: str, per_side: int) -> tuple[str, list[Any]]:
        # One statement of fixed text whatever the number of records (prepared once): a LATERAL pair of walks
        # per record. The shared UNION ALL of 2 x len(record_ids) walks was planned on every run: five turns at
        # 100k records in 1,000 sessions, 2.14 -> 1.02 ms p50 (benchmarks/record_reads.py, BENCHMARKS.md session 66).
        return BESIDE_SQL, [list(record_ids), kind, per_side, kind, per_side]

    # --- keyword index and outbox claims ----------------------------------------

    def keyword_search(self, query: str, ns_ids: Sequence[int], k: int, kinds: Sequence[str] | None = None,
                       versions: Mapping[int, Versions] | None = None) -> list[KeywordHit]:
        """bm25-ranked records of these namespaces matching any word of ``query`` (see ``BM25_SQL``).

        The GIN index finds the records matching any word; each word is then weighed by how
        rare it is among them, as SQLite's FTS5 bm25 does. The namespace filter is a column
        of records, never a term of the text index. At most ``keyword_budget`` matches are
        ranked (:mod:`.keyword_budget`): a scope of more records than that first counts each
        term's matches (journal-wide, up to the budget: an upper bound of the scope's), and a
        query over the budget ranks the records holding its rarest terms, or the newest
        matches of its rarest term (:func:`_bounded_bm25`); every query word still scores them.
        A word the planner's statistics hold among the commonest is estimated from them instead of
        counted (:mod:`.postgres_stats`). Where other scopes' matches left it short of ``k``, it plans
        again on the scope's own.
        """
        if not ns_ids or k <= 0:
            return []
        terms = self._query_terms(query, ns_ids)
        if not terms:
            return []
        held = self._held_search(terms, ns_ids, kinds, k, versions)
        if held is not None:
            return [KeywordHit(rid, i + 1, score) for i, (rid, score) in enumerate(held)]
        budget = self.keyword_budget
        large = True
        with self._autocommit() as db:
            if budget is None:
                rows = _bm25(db, terms, terms, ns_ids, kinds, k)  # every match
            else:
                rows, large = _bounded_bm25(db, terms, ns_ids, kinds, k, budget, self._stats.get(db))
        if large and self._cipher is None and self.keyword_postings.max_bytes > 0:
            self.keyword_postings.want(ns_ids)
        return [KeywordHit(int(r[0]), i + 1, float(r[1])) for i, r in enumerate(rows)]

    def _held_search(self, terms: Sequence[tuple[str, str]], ns_ids: Sequence[int], kinds: Sequence[str] | None,
                     k: int, versions: Mapping[int, Versions] | None = None) -> list[tuple[int, float]] | None:
        """The search ranked from the scope's postings held here (:mod:`.postgres_postings`): every match, as
        ``BM25_SQL`` ranks them without a budget; ``None`` when they are not held, the journal is encrypted,
        or a word is several lexemes to PostgreSQL."""
        if self._cipher is not None:
            return None

        def lexemes_of() -> list[str] | None:  # asked only of a held scope: it may cost a round trip
            lexemes = self._lexemes_of([w for _, w in terms])
            return None if lexemes is None else [x for x in lexemes if x]  # stop words left out: they match nothing

        return self.keyword_postings.rank(ns_ids, lexemes_of, kinds, k, versions)

    def _lexemes_of(self, words: Sequence[str]) -> list[str] | None:
        """Each word's lexeme under the 'english' configuration (``""``: a stop word), remembered; ``None``
        when a word is several lexemes."""
        with self._lock:
            missing = [w for w in dict.fromkeys(words) if w not in self._lexemes]
        if missing:
            with self._autocommit() as db:
                rows = db.all("SELECT w, to_tsquery('english'::regconfig, q)::text "
                              "FROM unnest(?::text[], ?::text[]) AS t(w, q)",
                              [missing, [ts_query("", [w]) for w in missing]])
            with self._lock:
                for w, text in rows:
                    self._lexemes[w] = lexeme_of(text)
                while len(self._lexemes) > LEXEMES_KEPT:
                    self._lexemes.popitem(last=False)
        with self._lock:
            found = [self._lexemes.get(w) for w in words]
        return None if any(x is None for x in found) else [x for x in found if x is not None]

    def _postings_rows(self, floors: Sequence[tuple[int, int, int]]) -> list[Any]:
        """``ROWS_SQL`` for ``(namespace, above, upto)`` triples: records to add to a held scope."""
        with self._autocommit() as db:
            return db.all(ROWS_SQL, [[f[0] for f in floors], [f[1] for f in floors], [f[2] for f in floors]])

    def _postings_scope(self, ns_ids: Sequence[int]) -> Iterator[Any]:
        """A scope's versions, then its records' ``ROWS_SQL`` rows in chunks, all of one snapshot (a build)."""
        with self._snapshot() as db:
            versions = scope_versions(db, ns_ids)
            yield versions
            floors = [(n, 0, v[0]) for n, v in versions.items()]
            with db.raw.cursor(name=f"postings_{uuid.uuid4().hex}") as cur:
                cur.execute(_placeholders(ROWS_SQL),
                            [[f[0] for f in floors], [f[1] for f in floors], [f[2] for f in floors]])
                while rows := cur.fetchmany(READ_CHUNK):
                    yield rows

    def _scope_size(self, ns_ids: Sequence[int], cap: int) -> int:
        with self._autocommit() as db:
            return scope_size(db, ns_ids, None, cap)

    def _query_terms(self, query: str, ns_ids: Sequence[int]) -> list[tuple[str, str]]:
        """``(text search configuration, word)`` pairs a query searches for. Encrypted: the blind tokens
        of its words ('simple': they are not English), plus the plaintext words ('english') only when
        records from before encryption may exist."""
        words = search_terms(query)
        if self._cipher is None:
            return [("english", w) for w in words]
        terms = [("simple", t) for t in self._cipher.query_terms(self._search_namespaces(ns_ids), words)]
        return terms + [("english", w) for w in words] if self._plain_records else terms

    def claim_outbox(self, limit: int, *, owner: str, lease_s: float, due_only: bool = True) -> list[OutboxItem]:
        """Claim up to ``limit`` unleased items (due ones unless ``due_only=False``) for ``lease_s`` seconds.

        ``FOR UPDATE SKIP LOCKED`` lets replicas claim at once without waiting on each other;
        a lease that expires (a crashed indexer) makes the row claimable again. Times are
        the server's clock.
        """
        check_claim(limit, owner, lease_s)
        if limit == 0:
            return []
        with self._autocommit() as db:
            rows = db.all(
                f"WITH now AS (SELECT {_NOW} AS t), picked AS ("
                "SELECT o.record_id FROM outbox o, now WHERE (NOT ? OR o.retry_at <= now.t) "
                "AND o.claimed_until <= now.t ORDER BY o.record_id LIMIT ? FOR UPDATE OF o SKIP LOCKED) "
                "UPDATE outbox o SET owner=?, claimed_until=(SELECT t FROM now) + ? FROM picked "
                "WHERE o.record_id = picked.record_id RETURNING o.record_id, o.op, o.attempts, o.seq",
                (due_only, limit, owner, lease_s))
        return sorted((OutboxItem(int(r[0]), str(r[1]), int(r[2]), int(r[3]), owner) for r in rows),
                      key=lambda i: i.record_id)

    def integrity_check(self) -> str:
        """``"ok"``, or what is wrong: schema version, sessions without state, messages past the cursors."""
        problems: list[str] = []
        with self._snapshot() as db:
            row = db.one("SELECT value FROM meta WHERE key='schema_version'")
            if row is None or row[0] != str(SCHEMA_VERSION):
                problems.append(f"schema_version is {row[0] if row else None!r}, expected {SCHEMA_VERSION}")
            row = db.one("SELECT count(*) FROM namespaces n LEFT JOIN state s ON s.ns = n.ns WHERE s.ns IS NULL")
            if row and row[0]:
                problems.append(f"{row[0]} namespaces have no state row")
            row = db.one("SELECT count(*) FROM state WHERE summary_cursor >= window_start AND window_start > 0")
            if row and row[0]:
                problems.append(f"{row[0]} sessions have a summary cursor inside their window")
        return "ok" if not problems else "; ".join(problems)

    # --- physical erasure -----------------------------------------------------

    def compact(self) -> bool:
        """VACUUM and ANALYZE the journal's tables (outside a transaction, as PostgreSQL requires).

        VACUUM makes the space of deleted rows reusable and prunes dead index entries; it
        does not overwrite the bytes at once, and copies in the WAL, in replicas and in
        backups stay until PostgreSQL recycles them: nothing SQL can reach proves or forces
        their removal (see :meth:`residue`). ANALYZE samples the live rows again, so the
        planner's statistics (``pg_statistic``: the commonest lexemes of the keyword column
        among them) no longer hold words only erased records held. This process's held keyword
        postings are packed too (``ScopePostings.pack``): a deleted record's postings leave them.
        """
        with self._connection() as conn:
            # No parameters: the simple protocol, no transaction.
            conn.execute("VACUUM (ANALYZE) " + ", ".join(_TABLES))
        self._stats.clear()
        self.keyword_postings.pack()  # and what deleted records left in this process's held postings
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
        with self._connection() as conn:
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

    def _forget_held(self) -> None:
        super()._forget_held()
        # What was read before the erasure goes; read again at need, from statistics that keep the erased words'
        # lexemes until the next ANALYZE (compact() runs one).
        self._stats.clear()
        self.keyword_postings.clear()
        with self._lock:
            self._lexemes.clear()  # query words: an erased user's messages were queries too

    def close(self) -> None:
        postings = getattr(self, "keyword_postings", None)
        if postings is not None:
            postings.close()  # its build reads through the pool: stopped first
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    def __repr__(self) -> str:
        return f"PostgresJournal({self.url!r}, schema={self.schema!r})"


# Keyword ranking: Okapi bm25 (k1 = 1.2, b = 0.75, FTS5's constants) over the records that match.
# ts_rank_cd alone has no notion of how rare a word is: "kayak trip" ranked "that trip was long, the
# trip back" above the only record about a kayak (the contract suite's ranking cases). Here each
# query word's document frequency is counted among the matching records of the scope (bm25 takes
# it from the whole index; a count over the scope would cost a scan per query), its term frequency
# is ts_rank_cd of that word alone with unit weights (= its occurrences), and the record length
# is its number of lexemes. df and total are computed once (MATERIALIZED): a plan that underestimates
# the hits (a generic plan; the id list of a recency window) otherwise re-aggregated the hits for
# every (record, word) pair, O(hits²): 86 ms for 500 hits. Arguments: the OR query's texts, the
# namespaces, [the kinds], [the record ids], the words' configurations and quoted words, [the
# counted matches of the words not wholly ranked, the least hit count (both: ``BM25_AT_LEAST``)], k.
# A hit's tsvector is read once: ``r.tsv || ''::tsvector`` is a copy of r.tsv in memory, which the tests below
# read (a long record's tsvector is stored compressed or out of line, and each of the hits x terms tests
# decompressed it again), and ``OFFSET 0`` keeps the planner from writing that copy out twice (into ``dl``
# as well). LongMemEval user messages of 33-1,228 words as the queries of a 10k-record history: 192 -> 72 ms
# p50, the same records and scores (``benchmarks/long_query_terms.py --postgres``; BENCHMARKS.md, issue 15,
# session 62).
BM25_SQL = """
WITH hit AS MATERIALIZED (
    SELECT h.id, h.tsv, length(h.tsv)::float8 AS dl FROM (
        SELECT r.id, r.tsv || ''::tsvector AS tsv FROM records r, (SELECT {match}) AS q(query)
        WHERE r.tsv @@ q.query{scope} OFFSET 0) h),
term AS MATERIALIZED (
    SELECT DISTINCT ON (q::text) q::text AS lexeme, q
    FROM (SELECT to_tsquery(t.config::regconfig, t.word) AS q FROM unnest(?::text[], ?::text[]) AS t(config, word)) w
    WHERE q::text <> ''),
tf AS (
    SELECT h.id, h.dl, t.lexeme, ts_rank_cd('{{1,1,1,1}}', h.tsv, t.q, 0)::float8 AS tf
    FROM hit h JOIN term t ON h.tsv @@ t.q),
df AS MATERIALIZED ({df}),
total AS MATERIALIZED (SELECT {n} AS n, avg(dl) AS avgdl FROM hit)
SELECT tf.id, sum(ln(1 + (total.n - df.n + 0.5) / (df.n + 0.5))
                  * tf.tf * 2.2 / (tf.tf + 1.2 * (0.25 + 0.75 * tf.dl / greatest(total.avgdl, 1)))) AS score
FROM tf JOIN df USING (lexeme), total
GROUP BY tf.id ORDER BY score DESC, tf.id DESC LIMIT ?
"""
# Document frequencies and hit count among the matching records (every match ranked).
BM25_AMONG_HITS = {"df": "SELECT lexeme, count(*)::float8 AS n FROM tf GROUP BY lexeme", "n": "count(*)::float8"}
# Under the keyword budget (:func:`_bounded_bm25`), only the records holding the kept words are
# ranked: counted among them alone, a kept word in every ranked record would weigh nothing and the
# dropped common words everything. A word whose matches were not all ranked weighs as if its counted
# matches (up to the budget + 1, journal-wide) were among the hits, and the hits at least number
# all the counted matches: the weights of the search without a budget, as far as the counts know them.
BM25_AT_LEAST = {
    "df": (f"SELECT h.lexeme, greatest(h.n, coalesce(c.n, 0)) AS n FROM ({BM25_AMONG_HITS['df']}) h "
           "LEFT JOIN unnest(?::text[], ?::float8[]) AS c(lexeme, n) USING (lexeme)"),
    "n": "greatest(count(*)::float8, ?)",
}


# The records of ``kind`` just before and just after each record of an array in its session (see
# ``SqlJournal.beside``): rows of (anchor, side, RECORD_COLS...), side 0 before, 1 after.
BESIDE_SQL = f"""
SELECT w.anchor, w.side, {RECORD_COLS} FROM (
    SELECT a.anchor, s.side, s.id FROM unnest(?::bigint[]) AS a(anchor)
    JOIN records ar ON ar.id = a.anchor
    CROSS JOIN LATERAL (
        (SELECT 0 AS side, b.id FROM records b WHERE b.ns = ar.ns AND b.kind = ? AND b.id < a.anchor
         ORDER BY b.id DESC LIMIT ?)
        UNION ALL
        (SELECT 1 AS side, b.id FROM records b WHERE b.ns = ar.ns AND b.kind = ? AND b.id > a.anchor
         ORDER BY b.id ASC LIMIT ?)) AS s) AS w
JOIN records r ON r.id = w.id
"""


# --- keyword search (dialect helpers of PostgresJournal.keyword_search) ----------------------------

def _bm25(db: Sql, matched: Sequence[tuple[str, str]], scoring: Sequence[tuple[str, str]], ns_ids: Sequence[int],
          kinds: Sequence[str] | None, k: int, ids: Sequence[int] | None = None,
          counted: tuple[Sequence[TermCount], int] | None = None) -> list[Any]:
    """``BM25_SQL``: the ``k`` best records of the scope holding a ``matched`` term (among ``ids``
    when given), weighed by the ``scoring`` terms (``(config, word)`` pairs, as ``_query_terms``);
    ``counted``: the terms not wholly ranked and the least hit count (``BM25_AT_LEAST``)."""
    parts: list[str] = []
    args: list[Any] = []
    for config in ("simple", "english"):  # one OR query per text search configuration
        text = ts_query("", [w for c, w in matched if c == config])
        if text:
            parts.append(f"to_tsquery('{config}'::regconfig, ?)")
            args.append(text)
    if not parts:
        return []
    if ids is not None:
        # A recency window: its ids kept to the scope first, read by primary key and tested here. Named beside
        # them, a scope of many sessions got a plan that compared each hit's namespace with every one of the
        # scope's (2,000 sessions, a window of 500: 60 ms of a 64 ms statement; BENCHMARKS.md, session 54).
        inside = ids_in_scope(db, ids, set(ns_ids), set(kinds) if kinds else None)
        ids = [i for i in ids if i in inside]
        if not ids:
            return []
        scope = " AND r.id = ANY(?)"
        args.append(list(ids))
    else:
        scope, scope_args = in_scope(db, (ns_ids, kinds), "r.")
        args += scope_args
    args += [[c for c, _ in scoring], [ts_query("", [w]) for _, w in scoring]]
    weights = BM25_AMONG_HITS
    if counted is not None:
        weights = BM25_AT_LEAST
        args += [[c.term for c in counted[0]], [float(c.matches) for c in counted[0]], float(counted[1])]
    return db.all(BM25_SQL.format(match=" || ".join(parts), scope=scope, **weights), [*args, k])


def _bounded_bm25(db: Sql, terms: Sequence[tuple[str, str]], ns_ids: Sequence[int], kinds: Sequence[str] | None,
                  k: int, budget: int, stats: JournalStats | None = None) -> tuple[list[Any], bool]:
    """A search within ``budget`` matches: a scope of at most ``budget`` records ranks every match
    (:func:`scope_size` counts it first, or, where the statistics call it large, only once the plan would
    leave matches out); a larger one ranks the records holding the terms :func:`plan_terms` keeps.

    A term is a lexeme (``to_tsquery``'s text: two words with one stem are one term, and a stop
    word none). The records ranked hold a kept term; every query word scores them (a dropped word
    costs a lookup in each ranked record's tsvector: FTS5, which weighs a phrase by all its
    matches, can only afford the dropped words it counted whole), weighed as ``BM25_AT_LEAST``
    says when some matches were left unranked. Planned on the journal's counts first; where
    :func:`crowded_out` says other scopes' matches (or other kinds') took the scope's place, again on
    the scope's own (a memory search whose newest matches are all turns, or a user's whose are all
    other users'). With the planner's ``stats``, the journal's matches of the commonest words are estimated,
    not counted, and the plan is on the matches expected in the scope (:func:`_expected_in_scope`).
    Also whether the scope may be over the budget (``False``: it was counted within it).
    """
    share = stats.share(ns_ids, kinds) if stats is not None else None
    likely_small = stats is None or share is None or share * stats.rows <= budget

    def small() -> bool:
        return scope_size(db, ns_ids, kinds, budget + 1) <= budget

    if likely_small and small():
        return _bm25(db, terms, terms, ns_ids, kinds, k), False  # every match: a small scope
    counts, lexemes = _journal_counts(db, terms, budget + 1, stats)
    if stats is not None:
        counts = _expected_in_scope(counts, stats, share, budget + 1)
    # A scope the statistics call large is counted only when its plan would leave matches out: where its
    # terms' expected matches all fit, every match is ranked anyway (:func:`_ranked_in_budget`).
    if not likely_small and sum(c.matches for c in counts) > budget and small():
        return _bm25(db, terms, terms, ns_ids, kinds, k), False  # a small scope after all
    rows, crowded = _ranked_in_budget(db, terms, lexemes, counts, ns_ids, kinds, k, budget, own=False)
    if crowded:
        counts, _ = _count_matches(db, terms, budget + 1, (ns_ids, kinds))
        rows, _ = _ranked_in_budget(db, terms, lexemes, counts, ns_ids, kinds, k, budget, own=True)
    return rows, True


def _ranked_in_budget(db: Sql, terms: Sequence[tuple[str, str]], lexemes: Sequence[str], counts: Sequence[TermCount],
                      ns_ids: Sequence[int], kinds: Sequence[str] | None, k: int, budget: int,
                      own: bool) -> tuple[list[Any], bool]:
    """:func:`_bounded_bm25`'s ranking on ``counts`` (the journal's, or with ``own`` the scope's own, whose
    newest matches the recency windows then read); and, planned on the journal's, whether :func:`crowded_out`
    says to plan again."""
    counts = [c for c in counts if c.matches > 0]  # as plan_terms: a term with no match finds nothing
    if not counts:
        return [], False  # stop words, or words the journal never held: nothing matches
    newest: dict[str, list[int]] = {}
    if min(c.matches for c in counts) > budget:
        # Every term that matches is over the budget: plan_terms picks the one whose newest matches
        # reach furthest back, which only a walk in id order tells (the counts above stop anywhere).
        newest = _newest_matches(db, [c.term for c in counts], budget + 1, (ns_ids, kinds) if own else None)
        counts = [TermCount(x, len(ids), ids[-1]) for x, ids in newest.items()]
    plan = plan_terms(counts, budget)
    kept = [t for t, x in zip(terms, lexemes, strict=True) if x in plan.terms]
    if not plan.recent and len(plan.terms) == len(counts):  # every term fits: as without a budget
        return _bm25(db, terms, terms, ns_ids, kinds, k), False
    # The kept terms' matches are all ranked, unless only the newest are.
    unranked = [c for c in counts if plan.recent or c.term not in plan.terms]
    counted = (unranked, sum(c.matches for c in counts))
    if not plan.recent:
        rows = _bm25(db, kept, terms, ns_ids, kinds, k, counted=counted)
        return rows, not own and crowded_out(plan, counts, 0, len(rows), k)
    ids = newest[plan.terms[0]][:budget]
    rows, walked = [], 0
    for window in recency_windows(budget):
        walked = min(window, len(ids))
        rows = _bm25(db, kept, terms, ns_ids, kinds, k, ids[:walked], counted)
        if len(rows) >= k or walked == len(ids):
            break
    return rows, not own and crowded_out(plan, counts, walked, len(rows), k)


def _expected_in_scope(counts: Sequence[TermCount], stats: JournalStats, share: float | None,
                       cap: int) -> list[TermCount]:
    """Each term's matches expected in the scope: its matches in the journal times ``share``, the scope's share
    of the journal's records (:meth:`JournalStats.share`, the words spread over the records alike), at least one
    where the journal holds any. The journal's matches: a common word's estimate, uncapped; a word counted
    under ``cap``, its count; one counted at ``cap`` (rarer than the commonest, yet over the cap), the least
    common word's estimate, about the most it can hold, and never less than the cap. ``counts`` unchanged
    without the columns' statistics.

    The plan (:func:`plan_terms`) is then the scope's: in a journal shared by 20 users a word over the budget
    is not over it in one user's records, who ranks every match of their own (the bm25 statement ranks only
    the scope's) instead of walking the journal's newest matches (the newest user's) and planning again
    (200k records, words of 1.7%: 42 ms a search, against 2.4 ranking the user's every match; BENCHMARKS.md,
    issue 15, sessions 55-56). Where a scope's words are not spread like the journal's (a word of one user's
    only) the estimate is short and more than the budget is ranked, exactly; where it is long, fewer words
    are kept, and :func:`crowded_out` plans again on the scope's own counts if that left it short of ``k``.
    """
    if share is None or share >= 1.0:
        return list(counts)
    scaled = []
    for c in counts:
        journal = stats.matches(c.term, stats.rows_cap)
        if journal is None:
            journal = c.matches if c.matches < cap else max(c.matches, stats.least_common)
        scaled.append(TermCount(c.term, max(round(journal * share), 1) if c.matches else 0, c.oldest))
    return scaled


def _journal_counts(db: Sql, terms: Sequence[tuple[str, str]], cap: int,
                    stats: JournalStats | None) -> tuple[list[TermCount], list[str]]:
    """As :func:`_count_matches` journal-wide, but a lexeme ``stats`` hold among the commonest is estimated
    from the planner's statistics (``oldest`` unknown: 0; :func:`_ranked_in_budget` walks for it where it matters), and
    only the others are counted."""
    if stats is None:
        return _count_matches(db, terms, cap)
    args = [[c for c, _ in terms], [ts_query("", [w]) for _, w in terms]]
    lexemes = [str(r[0]) for r in db.all(
        "SELECT to_tsquery(t.config::regconfig, t.word)::text "
        "FROM unnest(?::text[], ?::text[]) WITH ORDINALITY AS t(config, word, i) ORDER BY t.i", args)]
    estimated = {x: TermCount(x, n, 0) for x in lexemes if x and (n := stats.matches(x, cap)) is not None}
    rest = [t for t, x in zip(terms, lexemes, strict=True) if x and x not in estimated]
    counted = {c.term: c for c in (_count_matches(db, rest, cap)[0] if rest else [])}
    by_lexeme = {**estimated, **counted}
    return [by_lexeme[x] for x in dict.fromkeys(lexemes) if x], lexemes


def _count_matches(db: Sql, terms: Sequence[tuple[str, str]], cap: int,
                   scope: ScopeFilter | None = None) -> tuple[list[TermCount], list[str]]:
    """Each distinct lexeme's matches in the whole journal (or in ``scope``), counted up to ``cap`` in no order;
    and each ``(config, word)`` pair's lexeme(s), as ``to_tsquery`` writes them ('' for a stop word).

    In no order, the GIN bitmap is read until ``cap`` matches (2-3 ms for a word in 5% of
    100k records, against 9-14 ms for its newest ``cap`` by a backward walk of the primary key),
    so ``oldest`` is exact only under the cap, where every match was read: enough for
    :func:`plan_terms`, which reads it only to choose among terms over the budget (see
    :func:`_newest_matches`). Journal-wide, as SQLite counts: within the scope the namespace
    filter turns the count into a heap visit of every match (2-3x slower at 100k records,
    growing with history, and walking other users' matches in a shared journal), paid only when
    the journal's counts left the scope short (:func:`crowded_out`).
    """
    where, where_args = in_scope(db, scope)
    one = ("SELECT {i}, to_tsquery('{config}'::regconfig, ?)::text, count(*), coalesce(min(id), 0) FROM ("
           "SELECT id FROM records WHERE tsv @@ to_tsquery('{config}'::regconfig, ?)" + where + " LIMIT ?) s{i}")
    args: list[Any] = []
    for _, word in terms:
        args += [ts_query("", [word]), ts_query("", [word]), *where_args, cap]
    rows = db.all(" UNION ALL ".join(one.format(i=i, config=c) for i, (c, _) in enumerate(terms)), args)
    found = {int(r[0]): (str(r[1]), int(r[2]), int(r[3])) for r in rows}
    lexemes = [found[i][0] for i in range(len(terms))]
    counts = {x: TermCount(x, n, oldest) for x, n, oldest in (found[i] for i in range(len(terms))) if x}
    return list(counts.values()), lexemes


def _newest_matches(db: Sql, lexemes: Sequence[str], cap: int,
                    scope: ScopeFilter | None = None) -> dict[str, list[int]]:
    """Each lexeme's newest ``cap`` matches in the whole journal (or in ``scope``), newest first.

    A statement per lexeme, each planned for its own word: the planner walks the primary key backwards
    for a common one (O(cap / its frequency) rows) and sorts a rarer one's matches from the GIN index.
    One walk for all the words, each leaving it once it had its ``cap`` (sessions 9-54), read every
    word's matches in each chunk and could only walk: two words of 1.7%, their newest 2,001 each, 32.4 ms
    against 4.7 at 200k records, 50.1 against 42.1 at 1M (analyzed tables; ``benchmarks/shared_journal.py
    --postgres --walk-probe``, BENCHMARKS.md, issue 15, session 55).
    """
    where, where_args = in_scope(db, scope)
    sql = f"SELECT id FROM records WHERE tsv @@ ?::tsquery{where} ORDER BY id DESC LIMIT ?"
    return {x: [int(r[0]) for r in db.all(sql, [x, *where_args, cap])] for x in lexemes}


def _rollback(conn: Conn, error: type[Exception]) -> None:
    try:
        conn.execute("ROLLBACK")
    except error:  # a broken connection: the pool discards it and the server aborted the transaction
        pass
