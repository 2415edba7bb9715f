"""LlamaIndex baseline: ``VectorMemory`` (in-memory ``SimpleVectorStore``, exact search).

Each message is ``put`` as a ``ChatMessage`` (content ``"speaker: text"``); VectorMemory
batches a user message with the replies after it into one node (a round) and re-embeds the
node as it grows. ``get(input)`` returns the messages of the top ``similarity_top_k``
nodes: units are rounds. The message key and round number ride in ``additional_kwargs``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.memory import VectorMemory
from pydantic import PrivateAttr

from langmem_tiers.embedders.base import Embedder
from langmem_tiers.eval.baselines._cache import CachedEmbedder
from langmem_tiers.eval.datasets import DatasetMessage


class LocalEmbedding(BaseEmbedding):
    """Our embedder as a LlamaIndex ``BaseEmbedding``."""

    _embedder: Any = PrivateAttr()

    def __init__(self, embedder: CachedEmbedder, **kwargs: Any) -> None:
        super().__init__(model_name=embedder.embedder.key, **kwargs)
        self._embedder = embedder

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._embedder.embed_uncached(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._embedder.embed([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._embedder.embed(texts)


_ROLES = {"user": MessageRole.USER, "assistant": MessageRole.ASSISTANT, "system": MessageRole.SYSTEM}


class LlamaIndexRetriever:
    def __init__(self, embedder: Embedder) -> None:
        self._cache = CachedEmbedder(embedder)
        self._embed_model = LocalEmbedding(self._cache)
        self._memory = None

    def ingest(self, sessions: Sequence[Sequence[DatasetMessage]]) -> dict[str, int]:
        self._memory = VectorMemory.from_defaults(
            vector_store=None, embed_model=self._embed_model, retriever_kwargs={"similarity_top_k": 10}
        )
        messages = [m for s in sessions for m in s]
        # Prime the cache with every text VectorMemory will embed (each growing round), batched.
        texts, current = [], ""
        for m in messages:
            role = _ROLES.get(m.role, MessageRole.USER)
            starts_round = role in (MessageRole.USER, MessageRole.SYSTEM) or not current
            current = m.line if starts_round else f"{current} {m.line}"
            texts.append(current)
        self._cache.prime(texts)
        round_no = 0
        for i, m in enumerate(messages):
            role = _ROLES.get(m.role, MessageRole.USER)
            if role in (MessageRole.USER, MessageRole.SYSTEM) and i > 0:
                round_no += 1
            self._memory.put(
                ChatMessage(role=role, content=m.line, additional_kwargs={"message_key": m.key, "round": round_no})
            )
        self._cache.clear()
        return {}

    def query(self, text: str, k: int) -> list[tuple[str, ...]]:
        if self._memory is None:
            return []
        self._memory.retriever_kwargs["similarity_top_k"] = k
        messages = self._memory.get(input=text)
        units: list[list[str]] = []
        last = None
        for m in messages:
            kw = m.additional_kwargs
            key, rnd = kw.get("message_key"), kw.get("round")
            if key is None:
                continue
            if rnd != last or not units:
                units.append([])
                last = rnd
            units[-1].append(str(key))
        return [tuple(u) for u in units[:k]]

    def close(self) -> None:
        self._memory = None
