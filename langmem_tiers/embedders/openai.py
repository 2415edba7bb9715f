"""An embedder that calls an OpenAI-compatible ``/embeddings`` endpoint.

Never sends an over-long input: a text over the model's token limit (8191 tokens for
text-embedding-3-* and ada-002, counted with their ``cl100k_base`` encoding, loaded
offline) is split into pieces that fit, each piece is embedded, and the text's vector
is the token-weighted mean of the pieces, L2-normalized (OpenAI's cookbook scheme). A
request holds at most ``batch_size`` inputs and at most 300,000 tokens in total
(OpenAI's per-request limit). For other models pass ``max_input_tokens`` (counted
with ``cl100k_base``; leave headroom when the server's tokenizer differs); without
it, texts are sent whole.

Errors are attributable (:mod:`langmem_tiers.embedders.base`): an empty text raises
``EmbeddingInputError`` naming its index before anything is sent; an HTTP 400/413/422
answer raises ``EmbeddingInputError(index=None)`` (the server refused some input of
the batch: :func:`~langmem_tiers.embedders.base.embed_each` bisects to find it); any
other failure (network, timeout, 429, 5xx, malformed answer) is a plain
:class:`~langmem_tiers.errors.RecallError`.

Needs the ``openai`` extra: ``pip install 'langmem-tiers[openai]'``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from langmem_tiers.embedders.long_text import Pieces
from langmem_tiers.errors import ConfigError, EmbeddingInputError, RecallError, require
from langmem_tiers.openai_clients import OpenAIClients

DEFAULT_MODEL = "text-embedding-3-small"

# Native vector sizes; the text-embedding-3 models can be shortened with ``dimensions``.
MODEL_DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
_FIXED_SIZE_MODELS = ("text-embedding-ada-002",)

# Input limits in tokens of ENCODING, per input.
MODEL_MAX_TOKENS = {
    "text-embedding-3-small": 8191,
    "text-embedding-3-large": 8191,
    "text-embedding-ada-002": 8191,
}
ENCODING = "cl100k_base"

# OpenAI's per-request limits: inputs, and tokens summed over the inputs.
MAX_BATCH_SIZE = 2048
MAX_REQUEST_TOKENS = 300_000
# HTTP statuses that mean "this input was refused", not "the service failed".
_INPUT_REFUSED = (400, 413, 422)


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
        max_input_tokens: int | None = None,
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
        if max_input_tokens is not None and (
            isinstance(max_input_tokens, bool) or not isinstance(max_input_tokens, int)
            or not 1 <= max_input_tokens <= MAX_REQUEST_TOKENS
        ):
            raise ConfigError(
                f"max_input_tokens must be an integer between 1 and {MAX_REQUEST_TOKENS} or None, "
                f"got {max_input_tokens!r}"
            )
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
        self.max_input_tokens = max_input_tokens if max_input_tokens is not None else MODEL_MAX_TOKENS.get(model)
        self._encoding: Any = None
        self._dimension = dimensions if dimensions is not None else MODEL_DIMENSIONS[model]
        self.key = f"openai:{model}:{self._dimension}"
        self._clients = OpenAIClients(client=client, async_client=async_client, base_url=base_url,
                                      api_key=api_key, timeout=timeout, max_retries=max_retries)

    @property
    def dimension(self) -> int:
        """The vector length: the model's, or the ``dimensions`` asked for."""
        return self._dimension

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(model={self.model!r}, dimension={self._dimension})"

    # -- no I/O: batches, request parameters, reading vectors

    def _plan(self, texts: Sequence[str]) -> tuple[Pieces, list[list[int]]]:
        """The pieces to send and the request batches (indexes into the pieces)."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not a single str")
        for i, text in enumerate(texts):
            # OpenAI answers 400 for an empty input; say which one instead.
            if not isinstance(text, str) or not text:
                raise EmbeddingInputError(f"text {i} cannot be embedded: expected non-empty str, got {text!r:.80}", i)
        pieces = Pieces.of(texts, self._split)
        batches: list[list[int]] = []
        tokens = 0
        for j, weight in enumerate(pieces.weights):
            full = bool(batches) and (len(batches[-1]) >= self.batch_size or tokens + weight > MAX_REQUEST_TOKENS)
            if not batches or full:
                batches.append([])
                tokens = 0
            batches[-1].append(j)
            tokens += weight
        return pieces, batches

    def _split(self, text: str) -> list[tuple[str, int]]:
        """``text`` as pieces within ``max_input_tokens``, each with its token count (or an upper bound)."""
        limit = self.max_input_tokens
        size = len(text.encode("utf-8"))
        if limit is None or size <= limit:  # a token covers at least one byte
            return [(text, size)]
        encoding = self._tokenizer()
        tokens = encoding.encode(text, disallowed_special=())
        if len(tokens) <= limit:
            return [(text, len(tokens))]
        window = limit
        while True:
            pieces = [encoding.decode(tokens[a:a + window]) for a in range(0, len(tokens), window)]
            counts = [len(encoding.encode(p, disallowed_special=())) for p in pieces]
            # A cut inside a character decodes to U+FFFD, which can re-encode longer: shrink and retry.
            if max(counts) <= limit:
                return list(zip(pieces, counts))
            window -= max(1, window // 100)

    def _tokenizer(self) -> Any:
        if self._encoding is None:
            from langmem_tiers.tokens import load_encoding

            self._encoding = load_encoding(ENCODING)
        return self._encoding

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

    def _failure(self, e: Exception, batch: list[str]) -> RecallError:
        message = f"OpenAI embedder ({self.model}) failed: {type(e).__name__}: {e}"
        if getattr(e, "status_code", None) in _INPUT_REFUSED:
            return EmbeddingInputError(f"{message} (the server refused an input of this batch of {len(batch)})")
        return RecallError(message)

    # -- the I/O shells

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order; raise :class:`RecallError` on any failure
        (:class:`~langmem_tiers.embedders.base.EmbeddingInputError` for a refused input)."""
        pieces, batches = self._plan(texts)
        vectors: list[list[float]] = []
        for indexes in batches:
            batch = [pieces.texts[j] for j in indexes]
            try:
                response = self._clients.sync().embeddings.create(**self._params(batch))
            except Exception as e:  # openai errors, and JSON errors from a broken proxy
                raise self._failure(e, batch) from e
            vectors.extend(self._vectors(response, len(batch)))
        return pieces.pool(vectors) if vectors else []

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        """Async :meth:`embed`; batches go one after another to stay under rate limits."""
        pieces, batches = self._plan(texts)
        vectors: list[list[float]] = []
        for indexes in batches:
            batch = [pieces.texts[j] for j in indexes]
            try:
                response = await self._clients.async_().embeddings.create(**self._params(batch))
            except Exception as e:
                raise self._failure(e, batch) from e
            vectors.extend(self._vectors(response, len(batch)))
        return pieces.pool(vectors) if vectors else []

    def close(self) -> None:
        """Close the sync HTTP client built here (injected clients are left open)."""
        self._clients.close()

    async def aclose(self) -> None:
        """Close both HTTP clients built here; call from the event loop that used the async one."""
        await self._clients.aclose()
