"""Wrap any function that embeds a batch of texts as an :class:`Embedder`."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from langmem_tiers.errors import ConfigError, RecallError

EmbedFn = Callable[[list[str]], list[list[float]]]
AsyncEmbedFn = Callable[[list[str]], Awaitable[list[list[float]]]]


class CallableEmbedder:
    """An :class:`Embedder` around plain functions, for any embedding API or a test fake.

    ``fn`` may raise :class:`~langmem_tiers.embedders.base.EmbeddingInputError` (with the
    index of the refused text, if it knows it) to mark a bad input: it passes through, so
    :func:`~langmem_tiers.embedders.base.embed_each` isolates that text. Any other
    exception becomes a :class:`RecallError` (an outage, as far as the caller can tell).
    The function sees texts as given: split long ones yourself if the model needs it.

    Args:
        fn: embeds a list of texts, returning one vector per text.
        dimension: the length of every vector ``fn`` returns (checked on each call).
        key: names the model, e.g. ``"openai:text-embedding-3-small"``; vectors with
            different keys never share an index.
        afn: an async version of ``fn``; without it ``aembed`` runs ``fn`` on a thread.

    Example:
        >>> emb = CallableEmbedder(lambda texts: [[float(len(t)), 1.0] for t in texts],
        ...                        dimension=2, key="fake:len")
        >>> emb.embed(["ab", "c"])
        [[2.0, 1.0], [1.0, 1.0]]
    """

    def __init__(self, fn: EmbedFn, *, dimension: int, key: str, afn: AsyncEmbedFn | None = None) -> None:
        if not callable(fn):
            raise ConfigError(f"fn ({fn!r}) must be callable: texts -> vectors")
        if afn is not None and not callable(afn):
            raise ConfigError(f"afn ({afn!r}) must be an async callable or None")
        if isinstance(dimension, bool) or not isinstance(dimension, int) or dimension < 1:
            raise ConfigError(f"dimension ({dimension!r}) must be an integer >= 1: the vector length")
        if not isinstance(key, str) or not key.strip():
            raise ConfigError(f"key ({key!r}) must be a non-empty name of the model, e.g. 'openai:small'")
        self._fn = fn
        self._afn = afn
        self._dimension = dimension
        self.key = key

    def __repr__(self) -> str:
        return f"CallableEmbedder(key={self.key!r}, dimension={self._dimension})"

    @property
    def dimension(self) -> int:
        """The vector length given at construction."""
        return self._dimension

    def _check(self, texts: list[str], vectors: object) -> list[list[float]]:
        if not isinstance(vectors, list) or len(vectors) != len(texts):
            n = len(vectors) if isinstance(vectors, list) else type(vectors).__name__
            raise RecallError(f"{self.key} returned {n} vector(s) for {len(texts)} text(s)")
        out: list[list[float]] = []
        for v in vectors:
            row = [float(x) for x in v]
            if len(row) != self._dimension:
                raise RecallError(
                    f"{self.key} returned a vector of length {len(row)}, expected {self._dimension}"
                )
            out.append(row)
        return out

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed ``texts``; an empty input returns ``[]`` without calling ``fn``."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not a single str")
        items = list(texts)
        if not items:
            return []
        try:
            vectors = self._fn(items)
        except RecallError:
            raise
        except Exception as e:
            raise RecallError(f"{self.key} failed to embed {len(items)} text(s): {e}") from e
        return self._check(items, vectors)

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed with ``afn`` when given, else run ``fn`` on a worker thread."""
        if self._afn is None:
            return await asyncio.to_thread(self.embed, texts)
        if isinstance(texts, str):
            raise TypeError("aembed() takes a sequence of texts, not a single str")
        items = list(texts)
        if not items:
            return []
        try:
            vectors = await self._afn(items)
        except RecallError:
            raise
        except Exception as e:
            raise RecallError(f"{self.key} failed to embed {len(items)} text(s): {e}") from e
        return self._check(items, vectors)
