"""An embedder that calls an OpenAI-compatible ``/embeddings`` endpoint.

Needs the ``openai`` extra: ``pip install 'langmem-tiers[openai]'``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from langmem_tiers.errors import ConfigError, RecallError, require
from langmem_tiers.openai_clients import OpenAIClients

DEFAULT_MODEL = "text-embedding-3-small"

# Native vector sizes; the text-embedding-3 models can be shortened with ``dimensions``.
MODEL_DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
_FIXED_SIZE_MODELS = ("text-embedding-ada-002",)

# OpenAI's per-request input limit.
MAX_BATCH_SIZE = 2048


class OpenAIEmbedder:
    """Embeds texts in batches of ``batch_size`` with one request per batch.

    ``client`` / ``async_client`` are used as given; otherwise clients are built on
    first use from ``base_url``, ``api_key``, ``timeout`` and ``max_retries``
    (0 by default: failed rows stay pending and the memory retries them).

    Example:
        >>> e = OpenAIEmbedder(dimensions=256, api_key="sk-test")
        >>> e.key, e.dimension
        ('openai:text-embedding-3-small:256', 256)
    """

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        dimensions: int | None = None,
        client: Any | None = None,
        async_client: Any | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 30.0,
        batch_size: int = 256,
        max_retries: int = 0,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigError(f"model must be a non-empty model name, got {model!r}")
        if dimensions is not None:
            if isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions < 1:
                raise ConfigError(f"dimensions must be a positive integer or None, got {dimensions!r}")
            if model in _FIXED_SIZE_MODELS:
                raise ConfigError(
                    f"{model} does not support dimensions (got {dimensions}): leave dimensions=None "
                    "or use a text-embedding-3 model"
                )
            native = MODEL_DIMENSIONS.get(model)
            if native is not None and dimensions > native:
                raise ConfigError(
                    f"dimensions ({dimensions}) must be at most {native} for {model}: lower dimensions"
                )
        elif model not in MODEL_DIMENSIONS:
            raise ConfigError(
                f"the vector size of {model!r} is unknown: pass dimensions=<its size> "
                f"(known models: {', '.join(MODEL_DIMENSIONS)})"
            )
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not (
            1 <= batch_size <= MAX_BATCH_SIZE
        ):
            raise ConfigError(f"batch_size must be between 1 and {MAX_BATCH_SIZE}, got {batch_size!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise ConfigError(f"timeout must be a positive number of seconds, got {timeout!r}")
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ConfigError(f"max_retries must be an integer >= 0, got {max_retries!r}")
        if client is None or async_client is None:
            require("openai", "openai")
            if api_key is None and not os.environ.get("OPENAI_API_KEY"):
                raise ConfigError(
                    "OpenAIEmbedder needs an API key: pass api_key=..., set OPENAI_API_KEY, "
                    "or pass client= and async_client="
                )
        self.model = model
        self.dimensions = dimensions
        self.batch_size = batch_size
        self._dimension = dimensions if dimensions is not None else MODEL_DIMENSIONS[model]
        self.key = f"openai:{model}:{self._dimension}"
        self._clients = OpenAIClients(client=client, async_client=async_client, base_url=base_url,
                                      api_key=api_key, timeout=timeout, max_retries=max_retries)

    @property
    def dimension(self) -> int:
        return self._dimension

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(model={self.model!r}, dimension={self._dimension})"

    # -- no I/O: batches, request parameters, reading vectors

    def _batches(self, texts: Sequence[str]) -> list[list[str]]:
        for i, text in enumerate(texts):
            # OpenAI answers 400 for an empty input; say which one instead.
            if not isinstance(text, str) or not text:
                raise RecallError(f"text {i} cannot be embedded: expected non-empty str, got {text!r}")
        items = list(texts)
        return [items[i:i + self.batch_size] for i in range(0, len(items), self.batch_size)]

    def _params(self, batch: list[str]) -> dict[str, Any]:
        params: dict[str, Any] = {"model": self.model, "input": batch, "encoding_format": "float"}
        if self.dimensions is not None:
            params["dimensions"] = self.dimensions
        return params

    def _vectors(self, response: Any, expected: int) -> list[list[float]]:
        try:
            data = sorted(response.data, key=lambda d: d.index)
            vectors = [[float(x) for x in d.embedding] for d in data]
        except (AttributeError, TypeError, ValueError) as e:
            raise RecallError(
                f"OpenAI embedder ({self.model}) got a malformed response: {type(e).__name__}: {e}"
            ) from e
        if len(vectors) != expected:
            raise RecallError(
                f"OpenAI embedder ({self.model}) sent {len(vectors)} vectors for {expected} texts"
            )
        for v in vectors:
            if len(v) != self._dimension:
                raise RecallError(
                    f"OpenAI embedder ({self.model}) sent a vector of size {len(v)}, "
                    f"expected {self._dimension}"
                )
        return vectors

    def _failure(self, e: Exception) -> RecallError:
        return RecallError(f"OpenAI embedder ({self.model}) failed: {type(e).__name__}: {e}")

    # -- the I/O shells

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order; raise :class:`RecallError` on any failure."""
        out: list[list[float]] = []
        for batch in self._batches(texts):
            try:
                response = self._clients.sync().embeddings.create(**self._params(batch))
            except Exception as e:  # openai errors, and JSON errors from a broken proxy
                raise self._failure(e) from e
            out.extend(self._vectors(response, len(batch)))
        return out

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        """Async :meth:`embed`; batches go one after another to stay under rate limits."""
        out: list[list[float]] = []
        for batch in self._batches(texts):
            try:
                response = await self._clients.async_().embeddings.create(**self._params(batch))
            except Exception as e:
                raise self._failure(e) from e
            out.extend(self._vectors(response, len(batch)))
        return out

    def close(self) -> None:
        """Close the sync HTTP client built here (injected clients are left open)."""
        self._clients.close()

    async def aclose(self) -> None:
        """Close both HTTP clients built here; call from the event loop that used the async one."""
        await self._clients.aclose()
