"""A namespace-safe wrapper over one Chroma collection.

One collection holds every namespace of a deployment; each row carries ``user_id``,
``agent_id`` and ``session_id`` metadata (strings, ``""`` for none). The store does not
know the caller's namespace, but it refuses any query or filtered delete without a
``where`` filter, so no code path can search across tenants by accident. Build the
filter with :func:`namespace_where`.

Chroma is always given precomputed embeddings (``embedding_function=None``): its
default embedder downloads a model. chromadb is imported on first use.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from langmem_tiers.errors import ConfigError, InvalidNamespaceError, MissingDependencyError, RecallError

logger = logging.getLogger(__name__)

Scope = Literal["session", "user", "agent"]
Metadata = Mapping[str, str | int | float | bool]

DEFAULT_COLLECTION = "langmem_tiers"
USER_KEY = "user_id"
AGENT_KEY = "agent_id"
SESSION_KEY = "session_id"
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


def namespace_where(user_id: str, agent_id: str, session_id: str | None, scope: Scope) -> dict[str, Any]:
    """The Chroma ``where`` filter of one namespace at one scope.

    Args:
        user_id: the user whose memories are searched (always part of the filter).
        agent_id: the agent; part of the ``session`` and ``agent`` scopes.
        session_id: the session; required by the ``session`` scope, ignored otherwise.
        scope: ``"session"`` (this user, agent and session), ``"agent"`` (this user
            with this agent, every session) or ``"user"`` (every agent and session of
            this user).

    Returns:
        A filter for :meth:`ChromaStore.query`, :meth:`ChromaStore.delete` and
        :meth:`ChromaStore.count`.

    Raises:
        InvalidNamespaceError: an id is empty or not a string.
        ConfigError: unknown scope.

    Example:
        >>> namespace_where("u1", "a1", None, "agent")
        {'$and': [{'user_id': {'$eq': 'u1'}}, {'agent_id': {'$eq': 'a1'}}]}
    """
    _check_id("user_id", user_id)
    if scope == "user":
        conditions = [(USER_KEY, user_id)]
    elif scope == "agent":
        _check_id("agent_id", agent_id)
        conditions = [(USER_KEY, user_id), (AGENT_KEY, agent_id)]
    elif scope == "session":
        _check_id("agent_id", agent_id)
        if session_id is None:
            raise InvalidNamespaceError(
                "session_id (None) is required for scope 'session': pass it or use scope 'agent'"
            )
        _check_id("session_id", session_id)
        conditions = [(USER_KEY, user_id), (AGENT_KEY, agent_id), (SESSION_KEY, session_id)]
    else:
        raise ConfigError(f"scope ({scope!r}) must be 'session', 'user' or 'agent'")
    clauses: list[dict[str, Any]] = [{key: {"$eq": value}} for key, value in conditions]
    # Chroma rejects an $and of fewer than two clauses.
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


def _check_id(name: str, value: object) -> None:
    if not isinstance(value, str) or not value:
        raise InvalidNamespaceError(f"{name} ({value!r}) must be a non-empty string")


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


class ChromaStore:
    """One Chroma collection with cosine distance, refusing unfiltered searches.

    Args:
        client: a chromadb client (``PersistentClient``, ``HttpClient``, ...).
        collection: the collection name (3-512 chars of ``[a-zA-Z0-9._-]``).

    Example:
        >>> import tempfile
        >>> store = ChromaStore.persistent(tempfile.mkdtemp(), collection="demo")
        >>> store.upsert(["m1"], [[1.0, 0.0]], ["likes tea"],
        ...              [{"user_id": "u", "agent_id": "a", "session_id": "s"}])
        >>> [h.id for h in store.query([1.0, 0.1], 3, namespace_where("u", "a", None, "user"))]
        ['m1']
    """

    def __init__(self, client: Any, collection: str = DEFAULT_COLLECTION) -> None:
        if not isinstance(collection, str) or not collection:
            raise ConfigError(f"collection ({collection!r}) must be a non-empty collection name")
        self._client = client
        self.collection_name = collection
        try:
            self._collection = client.get_or_create_collection(
                collection,
                embedding_function=None,
                # configuration=, not metadata={"hnsw:space": ...}: the latter is the legacy
                # form in chromadb 1.x and warns.
                configuration={"hnsw": {"space": "cosine"}},
            )
        except Exception as e:
            raise RecallError(f"could not open Chroma collection {collection!r}: {e}") from e
        space = _space_of(self._collection)
        if space is not None and space != "cosine":
            raise ConfigError(
                f"Chroma collection {collection!r} uses distance {space!r}, but langmem-tiers needs "
                "'cosine': use another collection name or reindex into a new collection"
            )
        try:
            self._max_batch = int(client.get_max_batch_size())
        except Exception:
            self._max_batch = 5000

    # -- factories -----------------------------------------------------------------

    @classmethod
    def from_client(cls, client: Any, *, collection: str = DEFAULT_COLLECTION) -> ChromaStore:
        """Wrap an existing chromadb client."""
        return cls(client, collection)

    @classmethod
    def persistent(cls, path: str | Path, *, collection: str = DEFAULT_COLLECTION) -> ChromaStore:
        """An embedded Chroma at ``path``. Only one process may write a path at a time."""
        chromadb = _chromadb()
        try:
            client = chromadb.PersistentClient(path=str(path), settings=_settings())
        except Exception as e:
            raise RecallError(f"could not open Chroma at {str(path)!r}: {e}") from e
        return cls(client, collection)

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

    # -- operations ----------------------------------------------------------------

    @property
    def client(self) -> Any:
        return self._client

    def upsert(
        self,
        ids: Sequence[str],
        embeddings: Sequence[Sequence[float]],
        documents: Sequence[str],
        metadatas: Sequence[Metadata],
    ) -> None:
        """Insert or replace rows; all four sequences must have the same length."""
        ids = _ids(ids)
        n = len(ids)
        if not (len(embeddings) == len(documents) == len(metadatas) == n):
            raise ValueError(
                f"upsert needs one embedding, document and metadata per id: got {n} ids, "
                f"{len(embeddings)} embeddings, {len(documents)} documents, {len(metadatas)} metadatas"
            )
        if n == 0:
            return
        if len(set(ids)) != n:
            raise ValueError("upsert ids must be unique within one call")
        for start in range(0, n, self._max_batch):
            end = start + self._max_batch
            self._call(
                "upsert",
                ids=list(ids[start:end]),
                embeddings=[[float(x) for x in v] for v in embeddings[start:end]],
                documents=list(documents[start:end]),
                metadatas=[dict(m) for m in metadatas[start:end]],
            )

    def query(self, embedding: Sequence[float], k: int, where: Mapping[str, Any]) -> list[VectorHit]:
        """The ``k`` nearest rows matching ``where``, nearest first.

        Raises:
            ConfigError: ``where`` is missing or empty (unfiltered searches are refused).
            RecallError: Chroma failed.
        """
        flt = _require_where(where, "query")
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise ConfigError(f"k ({k!r}) must be an integer >= 0")
        if k == 0:
            return []
        result = self._call(
            "query",
            query_embeddings=[[float(x) for x in embedding]],
            n_results=k,
            where=flt,
            include=["documents", "metadatas", "distances"],
        )
        ids = result["ids"][0]
        docs = (result.get("documents") or [[None] * len(ids)])[0]
        metas = (result.get("metadatas") or [[None] * len(ids)])[0]
        dists = result["distances"][0]
        return [
            VectorHit(
                id=i, distance=float(d), similarity=1.0 - float(d), document=doc, metadata=dict(m or {})
            )
            for i, doc, m, d in zip(ids, docs, metas, dists)
        ]

    def get(self, ids: Sequence[str], *, include_embeddings: bool = False) -> list[StoredVector]:
        """Rows by id, in the order asked; missing ids are skipped."""
        ids = _ids(ids)
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
        """The stored vectors of ``ids`` as one float32 numpy matrix (missing ids are skipped)."""
        import numpy as np

        ids = _ids(ids)
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

        Raises:
            ConfigError: neither ``ids`` nor a non-empty ``where`` was given (a delete
                of everything is refused; drop the collection instead).
        """
        if ids is None and where is None:
            raise ConfigError("delete needs ids or a where filter: refusing to delete every namespace")
        kwargs: dict[str, Any] = {}
        if where is not None:
            kwargs["where"] = _require_where(where, "delete")
        if ids is not None:
            id_list = _ids(ids)
            if not id_list:
                return
            for start in range(0, len(id_list), self._max_batch):
                self._call("delete", ids=list(id_list[start : start + self._max_batch]), **kwargs)
            return
        self._call("delete", **kwargs)

    def count(self, where: Mapping[str, Any] | None = None) -> int:
        """Rows matching ``where``, or every row of the collection when ``None``."""
        if where is None:
            return int(self._call("count"))
        flt = _require_where(where, "count")
        result = self._call("get", where=flt, include=[])
        return len(result["ids"])

    def _call(self, method: str, **kwargs: Any) -> Any:
        try:
            return getattr(self._collection, method)(**kwargs)
        except Exception as e:
            raise RecallError(f"Chroma {method} on {self.collection_name!r} failed: {e}") from e


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


def _require_where(where: Mapping[str, Any] | None, op: str) -> dict[str, Any]:
    if where is None or not isinstance(where, Mapping) or not where:
        raise ConfigError(
            f"{op} needs a non-empty where filter (got {where!r}): build one with namespace_where() "
            "so a search never crosses tenants"
        )
    return dict(where)


def _ids(ids: Sequence[str]) -> list[str]:
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

