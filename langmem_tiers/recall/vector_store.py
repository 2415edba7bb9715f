"""A namespace-safe wrapper over one Chroma collection.

One collection holds every namespace of a deployment. The store does not know the
caller's namespace, but it refuses any query or filtered delete without a ``where``
filter, so no code path can search across tenants by accident.

**Store less.** Chroma needs ids, vectors and the few metadata fields that recall
filters on; the text stays in the journal. :meth:`ChromaStore.upsert` takes
``documents=None`` (nothing is written to Chroma's document or full-text tables),
and callers should keep user and session ids out of the metadata (the engine stores
an integer namespace id, never reused, and filters with ``{"ns": {"$in": [...]}}``).

**One process per embedded folder.** Two processes writing one ``PersistentClient``
folder corrupt its vector index. An embedded store takes an exclusive ``flock`` on
``langmem-tiers.lock`` in the folder for as long as any store of this process uses
it (released by :meth:`ChromaStore.close`, or by the kernel when the process dies);
another process gets :class:`~langmem_tiers.errors.VectorStoreLockedError`, which
points to ``chroma run --path FOLDER``. Stores of one process share the folder
(chromadb shares one engine per path in a process).

**Physical erasure.** A delete only marks rows gone: the embedded engine keeps the
erased rows in its write-ahead log table (``embeddings_queue``, purged only after the
HNSW index next persists, every ``sync_threshold`` = 1000 writes by default), in
free SQLite pages, in full-text (FTS5) segments, and as vectors in the HNSW binary
files, which are never rewritten in place. Worse, chromadb 1.5 writes HNSW files at
their full capacity and fills the unused slots from uninitialized memory, so any text
the process held (erased documents, other tenants' messages) can land in
``data_level0.bin``. :meth:`ChromaStore.compact` rebuilds the collection, vacuums the
folder and zeroes those slots, so deleted rows are physically gone; :meth:`close`
zeroes the slots again. :func:`folder_residue` counts raw byte occurrences of given
strings in the folder's files, for an erasure report.

Chroma is always given precomputed embeddings (``embedding_function=None``): its
default embedder downloads a model. chromadb is imported on first use.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import sqlite3
import struct
import threading
import uuid
import weakref
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from langmem_tiers.errors import (
    ConfigError,
    MissingDependencyError,
    RecallError,
    VectorStoreLockedError,
)
from langmem_tiers.recall.where_match import matcher

logger = logging.getLogger(__name__)

Metadata = Mapping[str, str | int | float | bool]

DEFAULT_COLLECTION = "langmem_tiers"
# ChromaStore.query: an unfiltered query for this many times k first, its rows tested against the filter here.
WIDE_FACTOR = 3
NARROW_KEPT = 1024  # filters the unfiltered query fell short for, remembered: they go to Chroma's filter at once
_INSTALL_HINT = "pip install 'langmem-tiers[local]'"


def _chromadb() -> Any:
    try:
        import chromadb
    except ImportError as e:
        raise MissingDependencyError(f"chromadb is needed for the vector store: {_INSTALL_HINT}") from e
    return chromadb


def _settings() -> Any:
    from chromadb.config import Settings

    # Telemetry would try the network on every client start.
    return Settings(anonymized_telemetry=False)


@dataclass(frozen=True)
class VectorHit:
    """One query result, nearest first.

    Attributes:
        id: the row id.
        distance: Chroma's cosine distance (0 = same direction, 2 = opposite).
        similarity: ``1 - distance``, the cosine similarity.
        document: the stored text.
        metadata: the stored metadata (namespace keys included).
    """

    id: str
    distance: float
    similarity: float
    document: str | None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class StoredVector:
    """One row read back by :meth:`ChromaStore.get`."""

    id: str
    document: str | None
    metadata: dict[str, Any]
    embedding: list[float] | None = None


LOCK_FILE = "langmem-tiers.lock"
SQLITE_FILE = "chroma.sqlite3"
# Files of one HNSW segment folder; a folder holding anything else is never removed.
_HNSW_FILES = frozenset({"header.bin", "data_level0.bin", "length.bin", "link_lists.bin", "index_metadata.pickle"})
_SCAN_CHUNK = 8 << 20


@dataclass(frozen=True)
class CompactReport:
    """What :meth:`ChromaStore.compact` did, and what stays on disk.

    Attributes:
        physical: ``True`` when deleted rows were made physically gone (embedded
            store); ``False`` for a server, where only its operator can (see ``remains``).
        rows_kept: live rows copied into the rebuilt collection.
        segments_removed: orphaned HNSW segment folders deleted (vectors of
            dropped collections that chromadb leaves on disk).
        bytes_before / bytes_after: size of the folder's files (0 for a server).
        remains: plain-language notes on copies this call cannot remove.
    """

    physical: bool
    rows_kept: int
    segments_removed: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    remains: tuple[str, ...] = ()


class VectorStore(Protocol):
    """What recall asks of a vector store: :class:`ChromaStore` (embedded or a server) and
    :class:`~langmem_tiers.recall.sqlite_vectors.SqliteVectorStore` (embedded, vectors on disk).

    Ids are strings, metadata flat scalars, filters Chroma's ``where`` language; a query or a
    filtered delete without a filter is refused, so no path searches across tenants.
    """

    @property
    def embedded(self) -> bool:
        """Whether the store's files are on this machine (an embedded folder, not a server)."""
        ...

    def upsert(self, ids: Sequence[str], embeddings: Sequence[Sequence[float]], documents: Sequence[str] | None,
               metadatas: Sequence[Metadata]) -> None:
        """Insert or replace rows (``documents=None``: store no text, drop any stored before)."""
        ...

    def query(self, embedding: Sequence[float], k: int, where: Mapping[str, Any]) -> list[VectorHit]:
        """The ``k`` nearest rows matching ``where`` (required), nearest first, by cosine."""
        ...

    def get(self, ids: Sequence[str], *, include_embeddings: bool = False) -> list[StoredVector]:
        """Rows by id, in the order asked; missing ids are skipped."""
        ...

    def embeddings(self, ids: Sequence[str]) -> tuple[list[str], Any]:
        """The ids found and their vectors as one float32 matrix (row ``i`` is id ``i``)."""
        ...

    def delete(self, ids: Sequence[str] | None = None, where: Mapping[str, Any] | None = None) -> None:
        """Delete rows by id, by filter, or ids matching the filter (never everything)."""
        ...

    def count(self, where: Mapping[str, Any] | None = None) -> int:
        """Rows matching ``where``, or all rows."""
        ...

    def compact(self) -> CompactReport:
        """Make deleted rows physically gone where this process can; report what remains."""
        ...

    def residue(self, needles: Sequence[str]) -> dict[str, int]:
        """Raw byte occurrences of each needle in the store's files (embedded stores)."""
        ...

    def close(self) -> None:
        """Release what the store holds. Idempotent."""
        ...


_EMBEDDED_REMAINS = (
    ("blocks of deleted files (the old HNSW segment files, SQLite's rollback journal) stay on the "
     "device until the filesystem reuses them; backups and snapshots of the folder keep their copies"),
    ("while this process runs, chromadb may write stale process memory (any text the process held) "
     "into the unused slots of HNSW files again when it loads, creates or grows an index; compact() "
     "and close() zero those slots, and a Chroma server (which never sees text with documents=None) "
     "avoids it"),
)
_SERVER_REMAINS = (
    ("a Chroma server keeps deleted rows in its write-ahead log until its HNSW index next persists "
     "(every sync_threshold writes), in free SQLite pages, and as vectors in HNSW files; its operator "
     "makes them physically gone by stopping the server and running `chroma vacuum --path FOLDER --force` "
     "(log and pages), and by reindexing into a new collection (HNSW vectors)"),
)


# -- the folder lock ---------------------------------------------------------------

@dataclass
class _Lease:
    """This process's hold on one embedded folder: the locked file and who uses it."""

    folder: Path
    fd: int
    pid: int
    users: int = 0
    # Serializes writes and compaction of every store of this process on the folder.
    mutex: threading.RLock = field(default_factory=threading.RLock)


_LEASES: dict[Path, _Lease] = {}
_LEASES_LOCK = threading.Lock()


def _acquire(folder: Path) -> _Lease:
    """Take (or share, within this process) the exclusive lock on ``folder``."""
    import fcntl

    with _LEASES_LOCK:
        lease = _LEASES.get(folder)
        if lease is not None and lease.pid != os.getpid():
            # Inherited through fork: the lock belongs to the parent, not to this child.
            del _LEASES[folder]
            lease = None
        if lease is None:
            path = folder / LOCK_FILE
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as e:
                raise RecallError(f"could not create the Chroma lock file {str(path)!r}: {e}") from e
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                holder = _holder(fd)
                os.close(fd)
                raise VectorStoreLockedError(
                    f"the embedded Chroma folder {str(folder)!r} is already open in another process"
                    f"{holder}: two processes writing one folder corrupt its vector index. To share "
                    f"vectors between processes, stop them, serve the folder with `chroma run --path "
                    f"{folder}` and open every memory with chroma=\"http://127.0.0.1:8000\""
                ) from e
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            lease = _Lease(folder, fd, os.getpid())
            _LEASES[folder] = lease
        lease.users += 1
        return lease


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return ""
    return f" (pid {text})" if text.isdigit() else ""


def _release(lease: _Lease) -> None:
    with _LEASES_LOCK:
        lease.users -= 1
        if lease.users > 0:
            return
        if _LEASES.get(lease.folder) is lease:
            del _LEASES[lease.folder]
        if lease.pid == os.getpid():
            try:
                # The engine may have re-written HNSW files with stale process memory since
                # the last compact(); scrub while the folder is still ours.
                _scrub_hnsw_slack(lease.folder)
            except OSError as e:
                logger.warning("could not scrub the HNSW files in %s: %s", lease.folder, e)
            with contextlib.suppress(OSError):
                os.close(lease.fd)  # closing the last descriptor releases the flock


def _finalize(lease: _Lease | None, client: Any, owns_client: bool) -> None:
    """Release what a store holds; runs on close() or when the store is garbage collected."""
    if owns_client:
        with contextlib.suppress(Exception):
            client.close()
    if lease is not None:
        _release(lease)


def _persist_directory(client: Any) -> Path | None:
    """The folder of an embedded (persistent, in-process) chromadb client, else ``None``."""
    try:
        settings = client.get_settings()
    except Exception:
        return None
    if not getattr(settings, "is_persistent", False):
        return None
    impl = str(getattr(settings, "chroma_api_impl", ""))
    if impl.endswith(("FastAPI", "AsyncFastAPI")):
        return None
    directory = getattr(settings, "persist_directory", None)
    return Path(directory).resolve() if directory else None


class ChromaStore:
    """One Chroma collection with cosine distance, refusing unfiltered searches.

    Args:
        client: a chromadb client (``PersistentClient``, ``HttpClient``, ...). With a
            persistent client the store locks its folder against other processes
            (:class:`~langmem_tiers.errors.VectorStoreLockedError`).
        collection: the collection name (3-512 chars of ``[a-zA-Z0-9._-]``).

    Example:
        >>> import tempfile
        >>> with ChromaStore.persistent(tempfile.mkdtemp(), collection="demo") as store:
        ...     store.upsert(["m1"], [[1.0, 0.0]], None, [{"ns": 7, "kind": "fact"}])
        ...     [h.id for h in store.query([1.0, 0.1], 3, {"ns": {"$in": [7]}})]
        ['m1']
    """

    def __init__(self, client: Any, collection: str = DEFAULT_COLLECTION) -> None:
        if not isinstance(collection, str) or not collection:
            raise ConfigError(f"collection ({collection!r}) must be a non-empty collection name")
        self._client = client
        self.collection_name = collection
        self.folder = _persist_directory(client)
        self._lease = _acquire(self.folder) if self.folder is not None else None
        self._owns_client = False
        self._closed = False
        self._narrow: dict[bytes, None] = {}  # filters (hashed) that Chroma's filtered query answers, oldest first
        self._narrow_lock = threading.Lock()
        try:
            with self._writing():
                if self.folder is not None:  # only an embedded store ever compacts
                    self._recover_compaction()
                self._collection = self._open_collection()
        except BaseException:
            if self._lease is not None:
                _release(self._lease)
            raise
        self._finalizer = weakref.finalize(self, _finalize, self._lease, client, False)
        self._finalizer.atexit = False  # at exit the kernel releases the lock anyway
        try:
            self._max_batch = int(client.get_max_batch_size())
        except Exception:
            self._max_batch = 5000

    def _open_collection(self) -> Any:
        try:
            collection = self._client.get_or_create_collection(
                self.collection_name,
                embedding_function=None,
                # configuration=, not metadata={"hnsw:space": ...}: the latter is the legacy
                # form in chromadb 1.x and warns.
                configuration={"hnsw": {"space": "cosine"}},
            )
        except Exception as e:
            raise RecallError(f"could not open Chroma collection {self.collection_name!r}: {e}") from e
        space = _space_of(collection)
        if space is not None and space != "cosine":
            raise ConfigError(
                f"Chroma collection {self.collection_name!r} uses distance {space!r}, but langmem-tiers needs "
                "'cosine': use another collection name or reindex into a new collection"
            )
        return collection

    # -- factories -----------------------------------------------------------------

    @classmethod
    def from_client(cls, client: Any, *, collection: str = DEFAULT_COLLECTION) -> ChromaStore:
        """Wrap an existing chromadb client (left open by :meth:`close`)."""
        return cls(client, collection)

    @classmethod
    def persistent(cls, path: str | Path, *, collection: str = DEFAULT_COLLECTION) -> ChromaStore:
        """An embedded Chroma at ``path``, locked against other processes until :meth:`close`.

        Raises:
            VectorStoreLockedError: another process has the folder open; share it
                through ``chroma run --path FOLDER`` and ``chroma="http://..."`` instead.
            ConfigError: ``path`` names a file.
            RecallError: Chroma could not open the folder.
        """
        folder = Path(path).expanduser().resolve()
        if folder.exists() and not folder.is_dir():
            raise ConfigError(f"the Chroma path {str(folder)!r} is a file: pass a folder")
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise RecallError(f"could not create the Chroma folder {str(folder)!r}: {e}") from e
        chromadb = _chromadb()
        # Locked before chromadb touches the folder: opening runs migrations (writes).
        lease = _acquire(folder)
        try:
            try:
                # The resolved path: chromadb shares one engine per path *string* in a process.
                client = chromadb.PersistentClient(path=str(folder), settings=_settings())
            except Exception as e:
                raise RecallError(f"could not open Chroma at {str(folder)!r}: {e}") from e
            try:
                store = cls(client, collection)
            except BaseException:
                with contextlib.suppress(Exception):
                    client.close()
                raise
        finally:
            _release(lease)
        store._owns_client = True
        store._finalizer.detach()
        store._finalizer = weakref.finalize(store, _finalize, store._lease, client, True)
        store._finalizer.atexit = False
        return store

    @classmethod
    def http(
        cls,
        url_or_host: str,
        port: int | None = None,
        *,
        collection: str = DEFAULT_COLLECTION,
        headers: Mapping[str, str] | None = None,
    ) -> ChromaStore:
        """A Chroma server: ``ChromaStore.http("http://127.0.0.1:8000")`` or ``http("127.0.0.1", 8000)``.

        An explicit ``port`` overrides the URL's; without either, 8000.
        """
        host, url_port, ssl = _parse_server(url_or_host)
        final_port = port if port is not None else (url_port if url_port is not None else 8000)
        if isinstance(final_port, bool) or not isinstance(final_port, int) or not 0 < final_port < 65536:
            raise ConfigError(f"port ({final_port!r}) must be an integer between 1 and 65535")
        chromadb = _chromadb()
        try:
            client = chromadb.HttpClient(
                host=host, port=final_port, ssl=ssl, headers=dict(headers or {}), settings=_settings()
            )
        except Exception as e:
            raise RecallError(f"could not reach the Chroma server at {host}:{final_port}: {e}") from e
        return cls(client, collection)

    # -- lifetime ------------------------------------------------------------------

    @property
    def client(self) -> Any:
        """The chromadb client this store uses (shared by the stores opened from it)."""
        return self._client

    @property
    def embedded(self) -> bool:
        """Whether this store runs Chroma in this process on a folder (not a server)."""
        return self.folder is not None

    def close(self) -> None:
        """Release the folder lock (when no other store of this process uses the folder)
        and, for :meth:`persistent` stores, the chromadb client. Idempotent."""
        self._closed = True
        self._finalizer()

    def __enter__(self) -> ChromaStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- operations ----------------------------------------------------------------

    def upsert(
        self,
        ids: Sequence[str],
        embeddings: Sequence[Sequence[float]],
        documents: Sequence[str] | None,
        metadatas: Sequence[Metadata],
    ) -> None:
        """Insert or replace rows; ``embeddings`` and ``metadatas`` have one entry per id.

        ``documents=None`` stores no text in Chroma (the engine's path: the journal holds
        the text), and also drops a document an earlier upsert stored under one of these
        ids (Chroma's own upsert would keep it). A sequence stores one document per id.
        Bad arguments (counts, ids, vectors: :func:`embedding_matrix`) raise ``ValueError`` or
        ``TypeError`` before anything is written.
        """
        ids = upsert_ids(ids, embeddings, documents, metadatas)
        n = len(ids)
        if n == 0:
            return
        matrix = embedding_matrix(embeddings)
        with self._writing():
            for start in range(0, n, self._max_batch):
                end = start + self._max_batch
                kwargs: dict[str, Any] = {
                    "ids": list(ids[start:end]),
                    "embeddings": matrix[start:end],  # float32, as Chroma stores them
                    "metadatas": [dict(m) for m in metadatas[start:end]],
                }
                if documents is not None:
                    kwargs["documents"] = list(documents[start:end])
                else:
                    self._drop_documents(kwargs["ids"])
                self._call("upsert", **kwargs)

    def _drop_documents(self, ids: list[str]) -> None:
        """Delete the rows among ``ids`` that hold a document, so the upsert re-adds them without."""
        existing = self._call("get", ids=ids, include=["documents"])
        docs = existing.get("documents") or []
        holding = [row_id for row_id, doc in zip(existing["ids"], docs) if doc is not None]
        if holding:
            self._call("delete", ids=holding)

    def query(self, embedding: Sequence[float], k: int, where: Mapping[str, Any]) -> list[VectorHit]:
        """The ``k`` nearest rows matching ``where``, nearest first.

        Chroma's filtered query costs far more than its unfiltered one when the filter admits much of the
        collection (one user's 1,000 sessions among 117k vectors, embedded: 145 ms against 3-5 ms): it
        gathers every admitted id first. So where :func:`~langmem_tiers.recall.where_match.matcher` can
        test the filter here, the collection's ``WIDE_FACTOR * k`` nearest come first, unfiltered, and the
        rows the filter admits are kept: when at least ``k`` are, they are the answer, the same rows the
        filtered query ranks first (an admitted row further out ranks below ``k`` admitted ones). Otherwise
        (fewer than ``k``, even when Chroma returned fewer rows than asked: a short answer is not taken to mean
        the collection holds no more), and from then on for that filter (the last ``NARROW_KEPT`` such filters),
        Chroma's filtered query answers. No row the filter refuses is ever returned either way.

        Raises:
            ConfigError: ``where`` is missing or empty (unfiltered searches are refused).
            RecallError: Chroma failed.
        """
        flt = require_where(where, "query")
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise ConfigError(f"k ({k!r}) must be an integer >= 0")
        if k == 0:
            return []
        vector = [float(x) for x in embedding]
        admits = matcher(flt)
        if admits is not None:
            key = hashlib.blake2b(json.dumps(flt, sort_keys=True, default=str).encode(), digest_size=16).digest()
            with self._narrow_lock:
                narrow = key in self._narrow
            if not narrow:
                wide = WIDE_FACTOR * k
                result = self._call("query", query_embeddings=[vector], n_results=wide,
                                    include=["documents", "metadatas", "distances"])
                hits = [h for h in _hits(result) if admits(h.metadata)]
                if len(hits) >= k:
                    return hits[:k]
                with self._narrow_lock:
                    self._narrow[key] = None
                    while len(self._narrow) > NARROW_KEPT:
                        del self._narrow[next(iter(self._narrow))]
        return _hits(self._call("query", query_embeddings=[vector], n_results=k, where=flt,
                                include=["documents", "metadatas", "distances"]))

    def get(self, ids: Sequence[str], *, include_embeddings: bool = False) -> list[StoredVector]:
        """Rows by id, in the order asked; missing ids are skipped (``document`` is ``None``
        for rows stored without one)."""
        ids = checked_ids(ids)
        if not ids:
            return []
        include = ["documents", "metadatas"] + (["embeddings"] if include_embeddings else [])
        found: dict[str, StoredVector] = {}
        for start in range(0, len(ids), self._max_batch):
            result = self._call("get", ids=list(ids[start : start + self._max_batch]), include=include)
            docs = result.get("documents")
            metas = result.get("metadatas")
            embs = result.get("embeddings")
            for j, row_id in enumerate(result["ids"]):
                found[row_id] = StoredVector(
                    id=row_id,
                    document=docs[j] if docs is not None else None,
                    metadata=dict(metas[j] or {}) if metas is not None else {},
                    embedding=[float(x) for x in embs[j]] if embs is not None else None,
                )
        return [found[i] for i in ids if i in found]

    def embeddings(self, ids: Sequence[str]) -> tuple[list[str], Any]:
        """The stored vectors of ``ids`` as one float32 numpy matrix (missing ids are skipped; an id
        asked twice is returned once, where Chroma would refuse the whole request)."""
        import numpy as np

        ids = list(dict.fromkeys(checked_ids(ids)))
        found: list[str] = []
        rows: list[Any] = []
        for start in range(0, len(ids), self._max_batch):
            result = self._call("get", ids=list(ids[start : start + self._max_batch]), include=["embeddings"])
            embs = result.get("embeddings")
            if embs is None or len(result["ids"]) == 0:
                continue
            found += list(result["ids"])
            rows.append(np.asarray(embs, dtype=np.float32))
        dim = rows[0].shape[1] if rows else 0
        return found, (np.concatenate(rows) if rows else np.empty((0, dim), dtype=np.float32))

    def delete(self, ids: Sequence[str] | None = None, where: Mapping[str, Any] | None = None) -> None:
        """Delete rows by id, by filter, or ids matching the filter.

        The rows leave every query at once; their bytes leave the disk with :meth:`compact`.

        Raises:
            ConfigError: neither ``ids`` nor a non-empty ``where`` was given (a delete
                of everything is refused; drop the collection instead).
        """
        if ids is None and where is None:
            raise ConfigError("delete needs ids or a where filter: refusing to delete every namespace")
        kwargs: dict[str, Any] = {}
        if where is not None:
            kwargs["where"] = require_where(where, "delete")
        with self._writing():
            if ids is not None:
                id_list = checked_ids(ids)
                for start in range(0, len(id_list), self._max_batch):
                    self._call("delete", ids=list(id_list[start : start + self._max_batch]), **kwargs)
                return
            self._call("delete", **kwargs)

    def count(self, where: Mapping[str, Any] | None = None) -> int:
        """Rows matching ``where``, or every row of the collection when ``None``."""
        if where is None:
            return int(self._call("count"))
        flt = require_where(where, "count")
        result = self._call("get", where=flt, include=[])
        return len(result["ids"])

    # -- physical erasure ------------------------------------------------------------

    def compact(self) -> CompactReport:
        """Make deleted rows physically gone from an embedded folder; report what remains.

        Embedded store: copies the live rows into a fresh collection, drops the old one
        (with its write-ahead log rows), renames the copy, removes HNSW segment folders
        that no collection uses any more, merges the full-text index and runs SQLite
        ``VACUUM`` and zeroes the unused slots of the HNSW files (which chromadb fills
        from uninitialized process memory). Afterwards no byte of a deleted row's id,
        metadata, document or vector is left in the folder's files (see
        ``CompactReport.remains`` for what a running engine may write again). Cost: one read and one write of every live
        row of the collection (all tenants), so run it after erasures, not per request;
        writes of this process wait meanwhile, and a crash midway is recovered on the
        next open (the old collection stays until the copy is complete).

        Server store: nothing is done here (``physical=False``): another replica may be
        writing, so only the server's operator can compact; ``remains`` says how.
        """
        self._check_open()
        if self.folder is None or self._lease is None:
            return CompactReport(physical=False, rows_kept=self.count(), remains=_SERVER_REMAINS)
        folder = self.folder
        with self._writing():
            before = folder_bytes(folder)
            kept = self._rebuild()
            removed = _remove_orphan_segments(folder)
            _vacuum(folder / SQLITE_FILE)
            _scrub_hnsw_slack(folder)
            after = folder_bytes(folder)
        logger.info("compacted Chroma collection %s in %s: %d rows kept, %d old segments removed, %d -> %d bytes",
                    self.collection_name, folder, kept, removed, before, after)
        return CompactReport(physical=True, rows_kept=kept, segments_removed=removed, bytes_before=before,
                             bytes_after=after, remains=_EMBEDDED_REMAINS)

    def residue(self, needles: Sequence[str]) -> dict[str, int]:
        """Raw byte occurrences of each needle in the embedded folder's files (:func:`folder_residue`).

        Raises:
            ConfigError: the store is a server (its files are not on this machine), or
                a needle is empty or not a string.
        """
        if self.folder is None:
            raise ConfigError(
                "residue() reads the files of an embedded store; this store is a Chroma server: scan the "
                "server's --path folder on its host"
            )
        return folder_residue(self.folder, needles)

    # -- internals -------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise RecallError(f"the Chroma store {self.collection_name!r} is closed")

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        if self._lease is None:
            yield
            return
        with self._lease.mutex:
            yield

    def _temp_name(self) -> str:
        # Short, valid and derived from the name, so a crashed compaction is found on open.
        return "lmt-compacting-" + hashlib.sha1(self.collection_name.encode()).hexdigest()[:20]

    def _exists(self, name: str) -> bool:
        try:
            self._client.get_collection(name, embedding_function=None)
        except Exception:
            return False
        return True

    def _recover_compaction(self) -> None:
        """Finish or undo a compaction that a crash interrupted."""
        temp = self._temp_name()
        if not self._exists(temp):
            return
        try:
            if self._exists(self.collection_name):
                self._client.delete_collection(temp)  # the copy was incomplete: the original is intact
                logger.warning("dropped the incomplete compaction copy of %s", self.collection_name)
            else:
                self._client.get_collection(temp, embedding_function=None).modify(name=self.collection_name)
                logger.warning("finished an interrupted compaction of %s", self.collection_name)
        except Exception as e:
            raise RecallError(f"could not recover an interrupted compaction of {self.collection_name!r}: {e}") from e

    def _rebuild(self) -> int:
        old = self._collection
        config = old.configuration_json if isinstance(old.configuration_json, Mapping) else {}
        hnsw = dict(config.get("hnsw") or {"space": "cosine"})
        temp = self._temp_name()
        try:
            if self._exists(temp):
                self._client.delete_collection(temp)
            copy = self._client.create_collection(
                temp, embedding_function=None, configuration={"hnsw": hnsw}, metadata=old.metadata or None
            )
            kept = 0
            while True:
                page = old.get(include=["embeddings", "metadatas", "documents"], limit=self._max_batch, offset=kept)
                if not page["ids"]:
                    break
                _copy_page(copy, page)
                kept += len(page["ids"])
            self._client.delete_collection(self.collection_name)
            copy.modify(name=self.collection_name)
        except Exception as e:
            raise RecallError(f"could not compact Chroma collection {self.collection_name!r}: {e}") from e
        self._collection = self._open_collection()
        return kept

    def _call(self, method: str, **kwargs: Any) -> Any:
        try:
            return getattr(self._collection, method)(**kwargs)
        except Exception as e:
            if not self._closed and self._refresh():
                # Another store of this process compacted (re-created) the collection.
                try:
                    return getattr(self._collection, method)(**kwargs)
                except Exception as again:
                    raise RecallError(f"Chroma {method} on {self.collection_name!r} failed: {again}") from again
            raise RecallError(f"Chroma {method} on {self.collection_name!r} failed: {e}") from e

    def _refresh(self) -> bool:
        """Re-open the collection by name; ``True`` when it is a different collection now."""
        try:
            current = self._client.get_collection(self.collection_name, embedding_function=None)
        except Exception:
            return False
        if current.id == self._collection.id:
            return False
        self._collection = current
        return True


def _hits(result: Mapping[str, Any]) -> list[VectorHit]:
    """The hits of one Chroma query's result (one query embedding), nearest first."""
    ids = result["ids"][0]
    docs = (result.get("documents") or [[None] * len(ids)])[0]
    metas = (result.get("metadatas") or [[None] * len(ids)])[0]
    dists = result["distances"][0]
    return [VectorHit(id=i, distance=float(d), similarity=1.0 - float(d), document=doc, metadata=dict(m or {}))
            for i, doc, m, d in zip(ids, docs, metas, dists)]


def folder_residue(folder: str | Path, needles: Sequence[str]) -> dict[str, int]:
    """Raw byte occurrences of each needle (UTF-8) in every file under ``folder``.

    For erasure reports: after :meth:`ChromaStore.compact` (or :meth:`ChromaStore.close`),
    an erased text, id or metadata value should count 0. Chroma's full-text index stores
    documents as trigrams, so a stored document can be present while its whole-word
    count is 0; store no documents (``documents=None``) or compact after deletes.

    Raises:
        ConfigError: a needle is empty or not a string.
        RecallError: a file could not be read.
    """
    if isinstance(needles, str):
        raise TypeError("needles must be a sequence of strings, not a single str")
    patterns: dict[str, bytes] = {}
    for needle in needles:
        if not isinstance(needle, str) or not needle:
            raise ConfigError(f"every needle must be a non-empty string, got {needle!r}")
        patterns[needle] = needle.encode("utf-8")
    counts = dict.fromkeys(patterns, 0)
    for path in folder_files(Path(folder)):
        for needle, n in _count_in_file(path, patterns).items():
            counts[needle] += n
    return counts


def _copy_page(target: Any, page: Mapping[str, Any]) -> None:
    """Add one page of ``get`` output to ``target`` as it is (``None`` entries stay ``None``)."""
    kwargs: dict[str, Any] = {"ids": list(page["ids"]), "embeddings": page["embeddings"]}
    for key in ("metadatas", "documents"):
        values = page.get(key)
        if values is not None and any(v is not None for v in values):
            kwargs[key] = list(values)
    target.add(**kwargs)


def another_model(folder: Path | None, made_by: str, model: str) -> ConfigError:
    """The refusal to open an embedded folder's vectors with another embedding model (``made_by`` says which
    made them), and how to change models: an erasure reaches only the vectors of the model in use."""
    return ConfigError(
        f"the vectors in {str(folder)!r} were made by {made_by}; this memory embeds with {model!r}, and vectors "
        f"of two models cannot be searched together. Open with the same embedder, or remove {str(folder)!r} "
        "(with no process using it), open with the new embedder, then call reindex() to embed the journal's "
        "records again")


def folder_files(folder: Path) -> Iterator[Path]:
    """Every regular file under ``folder`` (links not followed)."""
    for root, _dirs, names in os.walk(folder):
        for name in names:
            path = Path(root) / name
            if path.is_file() and not path.is_symlink():
                yield path


def folder_bytes(folder: Path) -> int:
    """The bytes of :func:`folder_files` (a file gone meanwhile counts nothing)."""
    total = 0
    for path in folder_files(folder):
        with contextlib.suppress(OSError):
            total += path.stat().st_size
    return total


def _count_in_file(path: Path, patterns: Mapping[str, bytes]) -> dict[str, int]:
    """Occurrences of each pattern, reading the file in chunks; a match across chunks counts once."""
    counts = dict.fromkeys(patterns, 0)
    tails = dict.fromkeys(patterns, b"")
    try:
        with open(path, "rb") as f:
            while chunk := f.read(_SCAN_CHUNK):
                for name, pattern in patterns.items():
                    # The tail is shorter than the pattern, so a match never lies wholly inside it.
                    window = tails[name] + chunk
                    counts[name] += window.count(pattern)
                    tails[name] = window[-(len(pattern) - 1):] if len(pattern) > 1 else b""
    except OSError as e:
        raise RecallError(f"could not read {str(path)!r} for the residue scan: {e}") from e
    return counts


def _live_segments(db: Path) -> set[str] | None:
    try:
        con = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True, timeout=30)
        try:
            return {str(row[0]) for row in con.execute("SELECT id FROM segments")}
        finally:
            con.close()
    except sqlite3.Error as e:
        logger.warning("could not list Chroma segments in %s, leaving segment folders alone: %s", db, e)
        return None


def _remove_orphan_segments(folder: Path) -> int:
    """Delete HNSW segment folders that no collection references (chromadb leaves them behind
    when a collection is dropped, with every vector they held)."""
    live = _live_segments(folder / SQLITE_FILE)
    if live is None:
        return 0
    removed = 0
    for child in folder.iterdir():
        if not child.is_dir() or child.name in live:
            continue
        try:
            uuid.UUID(child.name)
        except ValueError:
            continue
        if not {p.name for p in child.iterdir()} <= _HNSW_FILES:
            continue
        shutil.rmtree(child)
        removed += 1
    return removed


def _scrub_hnsw_slack(folder: Path) -> int:
    """Zero the unused slots of every HNSW segment file; returns bytes zeroed.

    chromadb 1.5 persists an HNSW index at its full capacity and leaves the slots past
    ``cur_element_count`` as they came from ``malloc``: whatever the process held in that
    memory before (document text, metadata, any other string of the process) lands in
    ``data_level0.bin`` and ``length.bin``. hnswlib never reads those slots. The header
    layout is checked first; a file that does not match is left alone.
    """
    zeroed = 0
    for segment in folder.iterdir():
        header_path = segment / "header.bin"
        if not segment.is_dir() or not header_path.is_file():
            continue
        header = header_path.read_bytes()
        if len(header) < 36:
            continue
        version, _offset0, capacity, used, element_size = struct.unpack_from("<I4Q", header, 0)
        if version != 1 or not 0 <= used <= capacity or element_size <= 0:
            continue
        for name, size in (("data_level0.bin", element_size), ("length.bin", 4)):
            path = segment / name
            if not path.is_file() or path.stat().st_size != capacity * size:
                continue
            start = used * size
            with open(path, "r+b") as f:
                f.seek(start)
                f.write(bytes(capacity * size - start))
                f.flush()
                os.fsync(f.fileno())
            zeroed += capacity * size - start
    return zeroed


def _vacuum(db: Path) -> None:
    """Merge the full-text index (dropping deleted entries) and rewrite the SQLite file
    without its free pages: what ``chroma vacuum`` does, plus the full-text merge."""
    try:
        con = sqlite3.connect(db, timeout=60, isolation_level=None)
    except sqlite3.Error as e:
        raise RecallError(f"could not open {str(db)!r} to vacuum it: {e}") from e
    try:
        has_fts = con.execute(
            "SELECT 1 FROM sqlite_master WHERE name = 'embedding_fulltext_search'"
        ).fetchone()
        if has_fts:
            con.execute(
                "INSERT INTO embedding_fulltext_search(embedding_fulltext_search) VALUES ('optimize')"
            )
        con.execute("VACUUM")
    except sqlite3.Error as e:
        raise RecallError(f"could not vacuum {str(db)!r}: {e}") from e
    finally:
        con.close()


def _space_of(collection: Any) -> str | None:
    try:
        # The raw JSON: the parsed ``configuration`` property warns about the "legacy"
        # embedding function that embedding_function=None records.
        config = collection.configuration_json
        hnsw = config.get("hnsw") if isinstance(config, Mapping) else None
        space = hnsw.get("space") if isinstance(hnsw, Mapping) else None
    except Exception:
        return None
    return space if isinstance(space, str) else None


def require_where(where: Mapping[str, Any] | None, op: str) -> dict[str, Any]:
    """``where`` as a dict, for every store: an unfiltered ``op`` would cross tenants.

    Raises:
        ConfigError: ``where`` is missing, empty or not a mapping.
    """
    if where is None or not isinstance(where, Mapping) or not where:
        raise ConfigError(
            f"{op} needs a non-empty where filter (got {where!r}): build one with namespace_where() "
            "so a search never crosses tenants"
        )
    return dict(where)


def upsert_ids(ids: Sequence[str], embeddings: Sequence[Sequence[float]], documents: Sequence[str] | None,
               metadatas: Sequence[Metadata]) -> list[str]:
    """The ids of an upsert, once its arguments are checked (one of each per id, unique ids), for every store.

    Raises:
        ValueError: counts that differ, an empty or repeated id.
        TypeError: ``ids`` or ``documents`` is a single string, or a document is not a string.
    """
    out = checked_ids(ids)
    n = len(out)
    n_docs = n if documents is None else len(documents)
    if not (len(embeddings) == n_docs == len(metadatas) == n):
        raise ValueError(
            f"upsert needs one embedding, document (or documents=None) and metadata per id: got {n} ids, "
            f"{len(embeddings)} embeddings, {n_docs} documents, {len(metadatas)} metadatas"
        )
    if documents is not None and (isinstance(documents, str) or not all(isinstance(d, str) for d in documents)):
        raise TypeError("documents must be None or a sequence of strings")
    if len(set(out)) != n:
        raise ValueError("upsert ids must be unique within one call")
    return out


def embedding_matrix(embeddings: Sequence[Sequence[float]]) -> Any:
    """``embeddings`` as one float32 numpy matrix, for every store.

    Raises:
        ValueError: vectors of different lengths, empty ones, or values that are not finite numbers.
    """
    import numpy as np

    try:
        matrix = np.asarray(embeddings, dtype=np.float32)
    except (TypeError, ValueError) as e:
        raise ValueError(f"embeddings must be equal-length, non-empty sequences of numbers: {e}") from e
    if matrix.ndim != 2 or matrix.shape[1] == 0 or not np.isfinite(matrix).all():
        raise ValueError("embeddings must be equal-length, non-empty sequences of finite numbers")
    return matrix


def checked_ids(ids: Sequence[str]) -> list[str]:
    """``ids`` as a list, for every store.

    Raises:
        TypeError: ``ids`` is a single string.
        ValueError: an id is empty or not a string.
    """
    if isinstance(ids, str):
        raise TypeError("ids must be a sequence of strings, not a single str")
    out = list(ids)
    for i in out:
        if not isinstance(i, str) or not i:
            raise ValueError(f"every id must be a non-empty string, got {i!r}")
    return out


def _parse_server(url_or_host: str) -> tuple[str, int | None, bool]:
    if not isinstance(url_or_host, str) or not url_or_host.strip():
        raise ConfigError(f"url_or_host ({url_or_host!r}) must be a host or an http(s) URL")
    text = url_or_host.strip()
    if "://" not in text:
        if ":" in text and text.count(":") == 1:
            host, _, port_text = text.partition(":")
            if not port_text.isdigit():
                raise ConfigError(f"url_or_host ({url_or_host!r}) has a bad port")
            return host, int(port_text), False
        return text, None, False
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            f"url_or_host ({url_or_host!r}) must be http://host:port or https://host:port"
        )
    if parts.path not in ("", "/"):
        raise ConfigError(f"url_or_host ({url_or_host!r}) must not have a path: Chroma serves at the root")
    try:
        port = parts.port
    except ValueError as e:
        raise ConfigError(f"url_or_host ({url_or_host!r}) has a bad port") from e
    return parts.hostname, port, parts.scheme == "https"

