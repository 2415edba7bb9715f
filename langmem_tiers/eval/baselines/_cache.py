"""An embedding cache so that frameworks calling the embedder one text at a time still
get batched throughput: the harness primes it with the texts it will add, in batches.
Vectors are the same as uncached ones (same model, same normalization)."""

from __future__ import annotations

from collections.abc import Sequence

from langmem_tiers.embedders.base import Embedder


class CachedEmbedder:
    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self._cache: dict[str, list[float]] = {}

    def prime(self, texts: Sequence[str]) -> None:
        todo = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if todo:
            for text, vec in zip(todo, self.embedder.embed(todo)):
                self._cache[text] = vec

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.prime(texts)
        return [self._cache[t] for t in texts]

    def embed_uncached(self, text: str) -> list[float]:
        return self.embedder.embed([text])[0]

    def clear(self) -> None:
        self._cache.clear()
