"""LangChain baseline: ``VectorStoreRetrieverMemory`` over langchain-chroma.

Each message is saved through ``save_context({role: line}, {})`` as an application
would (``line`` is ``"speaker: text"``), so one Chroma document per message (page
content ``"{role}: {line}"``). A document carries no metadata that way, so results map
back to messages by their page content; identical texts (short greetings) are assigned
to distinct messages in order, never counted twice. Chroma gets precomputed embeddings only (``embedding_function``
of the collection is ``None``; langchain-chroma embeds through our ``Embeddings``).
"""

from __future__ import annotations

import uuid
import warnings
from collections import defaultdict
from collections.abc import Sequence

import chromadb
from langchain_chroma import Chroma
from langchain_classic.memory import VectorStoreRetrieverMemory
from langchain_core.embeddings import Embeddings

from langmem_tiers.embedders.base import Embedder
from langmem_tiers.eval.baselines._cache import CachedEmbedder
from langmem_tiers.eval.datasets import DatasetMessage


class LocalEmbeddings(Embeddings):
    """Our embedder as a LangChain ``Embeddings``."""

    def __init__(self, embedder: CachedEmbedder) -> None:
        self._embedder = embedder

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._embedder.embed(texts)

    def embed_query(self, text: str) -> list[float]:
        return self._embedder.embed_uncached(text)


_CLIENT = None


def _client():
    # One ephemeral client per process (several would share data anyway); one collection per store.
    global _CLIENT
    if _CLIENT is None:
        _CLIENT = chromadb.EphemeralClient()
    return _CLIENT


class LangChainRetriever:
    def __init__(self, embedder: Embedder) -> None:
        self._cache = CachedEmbedder(embedder)
        self._embeddings = LocalEmbeddings(self._cache)
        self._name = f"eval-{uuid.uuid4().hex}"
        self._store = None
        self._memory = None
        self._by_content: dict[str, list[str]] = {}
        self._assigned: dict[str, str] = {}

    def ingest(self, sessions: Sequence[Sequence[DatasetMessage]]) -> dict[str, int]:
        self._store = Chroma(
            collection_name=self._name,
            embedding_function=self._embeddings,
            client=_client(),
            collection_metadata={"hnsw:space": "cosine"},
        )
        with warnings.catch_warnings():
            # Deprecated in LangChain 1.x but still the documented vector memory: it is the baseline.
            warnings.simplefilter("ignore", DeprecationWarning)
            self._memory = VectorStoreRetrieverMemory(
                retriever=self._store.as_retriever(search_kwargs={"k": 10}),
                return_docs=True,
                input_key="input",
            )
        messages = [m for s in sessions for m in s]
        by_content: dict[str, list[str]] = defaultdict(list)
        contents = [f"{m.role}: {m.line}" for m in messages]
        self._cache.prime(contents)
        for m, content in zip(messages, contents):
            self._memory.save_context({m.role: m.line}, {})
            by_content[content].append(m.key)
        self._by_content = dict(by_content)
        self._cache.clear()
        return {}

    def query(self, text: str, k: int) -> list[tuple[str, ...]]:
        if self._memory is None:
            return []
        self._memory.retriever.search_kwargs["k"] = k
        docs = self._memory.load_memory_variables({"input": text})["history"]
        units = []
        for doc in docs[:k]:
            key = self._assigned.get(doc.id) if doc.id else None
            if key is None:
                pool = self._by_content.get(doc.page_content) or []
                if not pool:
                    continue
                key = pool.pop(0) if doc.id else pool[0]
                if doc.id:
                    self._assigned[doc.id] = key
            units.append((key,))
        return units

    def close(self) -> None:
        if self._store is not None:
            try:
                _client().delete_collection(self._name)
            except Exception:
                pass
        self._store = None
        self._memory = None
