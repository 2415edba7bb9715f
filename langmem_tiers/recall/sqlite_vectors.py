"""Vectors in one SQLite file: an embedded vector store whose memory does not grow with what it holds.

Embedded Chroma loads its whole float32 HNSW index of the collection into the process on the first
write (about 1 GB for 500k 384-d vectors, BENCHMARKS.md, issue 15's tenth step) and has no
memory-mapped mode. This store keeps the vectors on disk (one float32 BLOB per row, metadata as
JSON) and answers the same operations as :class:`~langmem_tiers.recall.vector_store.ChromaStore`.
Search is served from this process's own per-scope index (:mod:`langmem_tiers.recall.scope_vectors`,
an int8 HNSW graph bounded by ``MemoryConfig.vector_cache_mb``), built from vectors read here;
:meth:`SqliteVectorStore.query` is the exact fallback for a scope the index declines (it scans the
scope's rows in chunks: correct, memory bounded, slow for a scope of hundreds of thousands).

* **Filters**: the subset of Chroma's ``where`` language the core uses (``$and``, ``$or``, a value or
  ``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte``, ``$in``, ``$nin`` per field), compiled to
  SQL over the JSON metadata; the namespace field ``ns`` has an index. Unfiltered searches and
  deletes are refused, as in Chroma.
* **Durability**: WAL with ``synchronous=FULL``, so a vector the indexer pushed is on disk before its
  outbox row is marked done.
* **Erasure**: ``secure_delete`` zeroes a deleted row's bytes in the database file at once;
  :meth:`SqliteVectorStore.compact` checkpoints the write-ahead log (which holds old page images)
  and vacuums, so no byte of a deleted row stays in the folder's files.
* **Several processes** may open one folder: SQLite serializes their writes (Chroma's embedded
  engine needs one process per folder).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import re
import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from langmem_tiers.errors import ConfigError, RecallError
from langmem_tiers.recall.vector_store import (
    CompactReport,
    Metadata,
    StoredVector,
    VectorHit,
    another_model,
    checked_ids,
    embedding_matrix,
    folder_bytes,
    folder_files,
    folder_residue,
    require_where,
    upsert_ids,
)

logger = logging.getLogger(__name__)

DATABASE_FILE = "vectors.sqlite3"
SCAN_ROWS = 4096  # rows per chunk of an exact scan: bounds the memory a query holds
_FIELD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_COMPARISONS = {"$eq": "=", "$ne": "!=", "$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
_REMAINS = (
    ("blocks of deleted files stay on the device until the filesystem reuses them; backups and snapshots "
     "of the folder keep their copies"),
)
_SCHEMA = """
-- A rowid table: a 1.5 KB row fits in a table leaf page, where a WITHOUT ROWID table (an index b-tree)
-- spills it to an overflow page (4.7 KB a 384-d row on disk, against 2.1 KB here).
CREATE TABLE IF NOT EXISTS vectors (
    id TEXT NOT NULL UNIQUE,
    vector BLOB NOT NULL,
    document TEXT,
    metadata TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS vectors_ns ON vectors (json_extract(metadata, '$.ns'));
CREATE TABLE IF NOT EXISTS settings (name TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


class SqliteVectorStore:
    """Vectors, optional documents and metadata in ``FOLDER/vectors.sqlite3``; cosine distance.

    Args:
        folder: the store's folder (created when missing).
        model: the embedding model's key (``Embedder.key``). The store records the first one it is
            given and refuses another: a folder holds one model's vectors, as a Chroma collection
            does (vectors of two models cannot be searched together). ``None``: not checked.

    Raises:
        ConfigError: ``folder`` names a file, or the store holds another model's vectors.
        RecallError: the database could not be opened.

    Example:
        >>> import tempfile
        >>> with SqliteVectorStore(tempfile.mkdtemp()) as store:
        ...     store.upsert(["m1", "m2"], [[1.0, 0.0], [0.0, 1.0]], None, [{"ns": 7}, {"ns": 8}])
        ...     [h.id for h in store.query([1.0, 0.1], 3, {"ns": {"$in": [7]}})]
        ['m1']
    """

    embedded = True

    def __init__(self, folder: str | Path, model: str | None = None) -> None:
        path = Path(folder).expanduser().resolve()
        if path.exists() and not path.is_dir():
            raise ConfigError(f"the vector store path {str(path)!r} is a file: pass a folder")
        try:
            path.mkdir(parents=True, exist_ok=True)
            con = sqlite3.connect(path / DATABASE_FILE, timeout=60, isolation_level=None, check_same_thread=False)
        except (OSError, sqlite3.Error) as e:
            raise RecallError(f"could not open the vector store in {str(path)!r}: {e}") from e
        self.folder = path
        self._con = con  # the writer: upserts, deletes, compaction
        self._lock = threading.RLock()  # the writer's, and the lifetime's
        # Read connections, one per reading thread at a time (opened as needed, kept for reuse): in WAL mode
        # readers wait for no one, where on the writer's connection a scope's exact scan (seconds for 590k
        # vectors) held every other read and write of the process, a graph build's reads included: under a stream
        # of queries a 1M-message user's build took 818 s against 380 (BENCHMARKS.md, issue 15, session 61).
        self._readers: list[sqlite3.Connection] = []
        self._closed = False
        try:
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=FULL")
            con.execute("PRAGMA secure_delete=ON")
            con.executescript(_SCHEMA)
        except sqlite3.Error as e:
            con.close()
            raise RecallError(f"could not open the vector store in {str(path)!r}: {e}") from e
        if model is not None:
            try:
                self._claim_model(model)
            except BaseException:
                con.close()
                raise

    def __repr__(self) -> str:
        return f"SqliteVectorStore({str(self.folder)!r})"

    def _claim_model(self, model: str) -> None:
        # In a write transaction: two processes opening a new folder at once record one model, and the other
        # is refused. A store written before models were recorded takes the first one named (it cannot tell).
        with self._writing() as con:
            held = con.execute("SELECT value FROM settings WHERE name = 'model'").fetchone()
            if held is None:
                con.execute("INSERT INTO settings (name, value) VALUES ('model', ?)", (model,))
            elif held[0] != model:
                raise another_model(self.folder, f"the embedding model {held[0]!r}", model)

    # -- lifetime ------------------------------------------------------------------

    def close(self) -> None:
        """Close the database (its write-ahead log is checkpointed into the file). Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for reader in self._readers:  # those reading now are closed when they are handed back
                reader.close()
            self._readers.clear()
            with contextlib.suppress(sqlite3.Error):
                self._con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self._con.close()

    def __enter__(self) -> SqliteVectorStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- operations ----------------------------------------------------------------

    def upsert(self, ids: Sequence[str], embeddings: Sequence[Sequence[float]], documents: Sequence[str] | None,
               metadatas: Sequence[Metadata]) -> None:
        """Insert or replace rows; ``embeddings`` and ``metadatas`` have one entry per id, ``documents``
        one per id or ``None`` (no text stored; a document stored earlier under the id is dropped).
        Bad arguments raise as :meth:`~langmem_tiers.recall.vector_store.ChromaStore.upsert` says, before
        anything is written."""
        ids = upsert_ids(ids, embeddings, documents, metadatas)
        if not ids:
            return
        matrix = embedding_matrix(embeddings)
        dimension = int(matrix.shape[1])
        rows = [(i, matrix[j].tobytes(), None if documents is None else documents[j], _metadata_json(metadatas[j]))
                for j, i in enumerate(ids)]
        with self._writing() as con:
            # Read inside the write transaction: another connection (process) may have set it since.
            held = con.execute("SELECT value FROM settings WHERE name = 'dimension'").fetchone()
            if held is None:
                con.execute("INSERT INTO settings (name, value) VALUES ('dimension', ?)", (str(dimension),))
            elif dimension != int(held[0]):
                raise RecallError(f"this vector store holds {held[0]}-dimensional vectors; got {dimension}: "
                                  f"open another folder for another embedding model")
            con.executemany("INSERT INTO vectors (id, vector, document, metadata) VALUES (?, ?, ?, ?) "
                            "ON CONFLICT (id) DO UPDATE SET vector = excluded.vector, document = excluded.document, "
                            "metadata = excluded.metadata", rows)

    def query(self, embedding: Sequence[float], k: int, where: Mapping[str, Any]) -> list[VectorHit]:
        """The ``k`` nearest rows matching ``where``, nearest first: an exact scan of the matching rows.

        Raises:
            ConfigError: ``where`` is missing, empty or uses an operator this store does not know.
        """
        import numpy as np

        sql, params = _compile(require_where(where, "query"))
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise ConfigError(f"k ({k!r}) must be an integer >= 0")
        if k == 0:
            return []
        q = np.asarray(embedding, dtype=np.float32)
        q = q / max(float(np.linalg.norm(q)), 1e-12)
        # Scan rowids and vectors only (the per-row cost of Python objects is most of a large scan's time),
        # keeping the k best of each chunk; then read ids and metadata for the k that won.
        best_rows = np.empty(0, dtype=np.int64)
        best_sims = np.empty(0, dtype=np.float32)
        with self._reading() as con:
            cursor = con.execute(f"SELECT rowid, vector FROM vectors WHERE {sql}", params)
            while chunk := cursor.fetchmany(SCAN_ROWS):
                matrix = np.frombuffer(b"".join(r[1] for r in chunk), dtype=np.float32).reshape(len(chunk), -1)
                if matrix.shape[1] != q.shape[0]:
                    raise RecallError(f"the query has {q.shape[0]} dimensions, the stored vectors {matrix.shape[1]}")
                sims = (matrix @ q) / np.maximum(np.linalg.norm(matrix, axis=1), 1e-12)
                best_rows = np.concatenate([best_rows, np.fromiter((r[0] for r in chunk), np.int64, len(chunk))])
                best_sims = np.concatenate([best_sims, sims.astype(np.float32)])
                if len(best_sims) > k:
                    keep = np.argpartition(-best_sims, k - 1)[:k]
                    best_rows, best_sims = best_rows[keep], best_sims[keep]
            rows = {r[0]: r[1:] for r in con.execute(
                "SELECT rowid, id, document, metadata FROM vectors WHERE rowid IN (SELECT value FROM json_each(?))",
                (json.dumps(best_rows.tolist()),))}
        hits = [(float(sim), *rows[int(rowid)]) for rowid, sim in zip(best_rows, best_sims) if int(rowid) in rows]
        return [VectorHit(id=i, distance=1.0 - sim, similarity=sim, document=doc, metadata=json.loads(meta))
                for sim, i, doc, meta in sorted(hits, key=lambda h: (-h[0], h[1]))]

    def get(self, ids: Sequence[str], *, include_embeddings: bool = False) -> list[StoredVector]:
        """Rows by id, in the order asked; missing ids are skipped."""
        import numpy as np

        ids = checked_ids(ids)
        with self._reading() as con:
            rows = {r[0]: r for r in con.execute(
                "SELECT id, vector, document, metadata FROM vectors WHERE id IN (SELECT value FROM json_each(?))",
                (json.dumps(ids),))}
        return [StoredVector(id=i, document=rows[i][2], metadata=json.loads(rows[i][3]),
                             embedding=np.frombuffer(rows[i][1], dtype=np.float32).tolist() if include_embeddings
                             else None)
                for i in ids if i in rows]

    def embeddings(self, ids: Sequence[str]) -> tuple[list[str], Any]:
        """The stored vectors of ``ids`` as one float32 numpy matrix, in the order asked (missing ids are
        skipped; an id asked twice is returned once)."""
        import numpy as np

        ids = list(dict.fromkeys(checked_ids(ids)))
        with self._reading() as con:
            rows = dict(con.execute("SELECT id, vector FROM vectors WHERE id IN (SELECT value FROM json_each(?))",
                                    (json.dumps(ids),)))
        found = [i for i in ids if i in rows]
        if not found:
            return [], np.empty((0, 0), dtype=np.float32)  # as ChromaStore.embeddings
        return found, np.frombuffer(b"".join(rows[i] for i in found), dtype=np.float32).reshape(len(found), -1).copy()

    def delete(self, ids: Sequence[str] | None = None, where: Mapping[str, Any] | None = None) -> None:
        """Delete rows by id, by filter, or ids matching the filter; their bytes are zeroed in the file at
        once (``secure_delete``), and leave the write-ahead log with :meth:`compact`.

        Raises:
            ConfigError: neither ``ids`` nor a non-empty ``where`` was given.
        """
        if ids is None and where is None:
            raise ConfigError("delete needs ids or a where filter: refusing to delete every namespace")
        clauses: list[str] = []
        params: list[Any] = []
        if where is not None:
            sql, where_params = _compile(require_where(where, "delete"))
            clauses.append(sql)
            params += where_params
        if ids is not None:
            clauses.append("id IN (SELECT value FROM json_each(?))")
            params.append(json.dumps(checked_ids(ids)))
        with self._writing() as con:
            con.execute(f"DELETE FROM vectors WHERE {' AND '.join(clauses)}", params)

    def count(self, where: Mapping[str, Any] | None = None) -> int:
        """Rows matching ``where``, or every row when ``None``."""
        sql, params = ("1", []) if where is None else _compile(require_where(where, "count"))
        with self._reading() as con:
            return int(con.execute(f"SELECT count(*) FROM vectors WHERE {sql}", params).fetchone()[0])

    # -- physical erasure ------------------------------------------------------------

    def compact(self) -> CompactReport:
        """Make deleted rows physically gone: checkpoint the write-ahead log into the file, ``VACUUM``,
        and truncate the log again. Other processes' open readers may delay the checkpoint; the report
        then says so."""
        with self._writer() as con:  # outside a transaction: neither a checkpoint nor VACUUM runs inside one
            before = folder_bytes(self.folder)
            try:
                con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                con.execute("VACUUM")
                busy = con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
            except sqlite3.Error as e:
                raise RecallError(f"could not compact the vector store in {str(self.folder)!r}: {e}") from e
            kept = int(con.execute("SELECT count(*) FROM vectors").fetchone()[0])
            after = folder_bytes(self.folder)
        busy_note = "another process was reading: the write-ahead log was not truncated; compact again when idle"
        remains = (*_REMAINS, busy_note) if busy else _REMAINS
        logger.info("compacted the vector store in %s: %d rows kept, %d -> %d bytes", self.folder, kept, before, after)
        return CompactReport(physical=True, rows_kept=kept, bytes_before=before, bytes_after=after, remains=remains)

    def residue(self, needles: Sequence[str]) -> dict[str, int]:
        """Raw byte occurrences of each needle (UTF-8) in the store's files (see :func:`folder_residue`)."""
        return folder_residue(self.folder, needles)

    def files(self) -> list[Path]:
        """The store's files on disk (the database and its write-ahead log)."""
        return sorted(folder_files(self.folder))

    # -- internals -------------------------------------------------------------------

    @contextlib.contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        """A read connection of this thread's own while it reads (autocommit: each statement sees what was
        committed when it began)."""
        with self._lock:
            if self._closed:
                raise RecallError(f"the vector store in {str(self.folder)!r} is closed")
            con = self._readers.pop() if self._readers else None
        try:
            if con is None:
                con = sqlite3.connect(self.folder / DATABASE_FILE, timeout=60, isolation_level=None,
                                      check_same_thread=False)
                con.execute("PRAGMA query_only=ON")
            yield con
        except sqlite3.Error as e:
            raise RecallError(f"the vector store in {str(self.folder)!r} failed: {e}") from e
        finally:
            if con is not None:
                with self._lock:
                    if self._closed:
                        con.close()
                    else:
                        self._readers.append(con)

    @contextlib.contextmanager
    def _writer(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            if self._closed:
                raise RecallError(f"the vector store in {str(self.folder)!r} is closed")
            try:
                yield self._con
            except sqlite3.Error as e:
                raise RecallError(f"the vector store in {str(self.folder)!r} failed: {e}") from e

    @contextlib.contextmanager
    def _writing(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (rolled back on any error: nothing is half-written)."""
        with self._writer() as con:
            con.execute("BEGIN IMMEDIATE")
            try:
                yield con
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")


def _metadata_json(metadata: Metadata) -> str:
    if not isinstance(metadata, Mapping):
        raise TypeError(f"each metadata must be a mapping, got {type(metadata).__name__}")
    for key, value in metadata.items():
        if not isinstance(key, str) or not _FIELD.match(key):
            raise ValueError(f"metadata key {key!r} must be a name of letters, digits and _")
        if not isinstance(value, (str, int, float, bool)) or (isinstance(value, float) and not math.isfinite(value)):
            raise ValueError(f"metadata value of {key!r} must be a str, int, finite float or bool, got {value!r:.40}")
    return json.dumps(dict(metadata), separators=(",", ":"))


def _compile(where: Mapping[str, Any]) -> tuple[str, list[Any]]:
    """SQL and parameters for a Chroma-style ``where`` over the JSON metadata.

    Raises:
        ConfigError: an operator or field this store does not support.
    """
    clauses: list[str] = []
    params: list[Any] = []
    for key, value in where.items():
        if key in ("$and", "$or"):
            if not isinstance(value, list) or not value:
                raise ConfigError(f"{key} needs a non-empty list of filters, got {value!r}")
            parts = [_compile(require_where(v, key)) for v in value]
            clauses.append("(" + f" {key[1:].upper()} ".join(p[0] for p in parts) + ")")
            params += [p for _, ps in parts for p in ps]
            continue
        if not isinstance(key, str) or not _FIELD.match(key):
            raise ConfigError(f"where field {key!r} must be a metadata name (letters, digits and _) or $and/$or")
        column = f"json_extract(metadata, '$.{key}')"
        ops = value if isinstance(value, Mapping) else {"$eq": value}
        if not ops:
            raise ConfigError(f"where field {key!r} needs an operator, got an empty filter")
        for op, operand in ops.items():
            if op in ("$in", "$nin"):
                if not isinstance(operand, list):
                    raise ConfigError(f"{op} on {key!r} needs a list, got {operand!r}")
                clauses.append(f"{column} {'NOT ' if op == '$nin' else ''}IN (SELECT value FROM json_each(?))")
                params.append(json.dumps(operand))
            elif op in _COMPARISONS and isinstance(operand, (str, int, float, bool)):
                clauses.append(f"{column} {_COMPARISONS[op]} ?")
                params.append(operand)
            else:
                raise ConfigError(f"where operator {op!r} on {key!r} with {operand!r} is not supported: use "
                                  f"{', '.join([*_COMPARISONS, '$in', '$nin'])} with a str, number or bool")
    return "(" + " AND ".join(clauses) + ")", params
