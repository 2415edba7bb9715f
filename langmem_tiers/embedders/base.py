"""The embedder protocol, and a per-text fallback that pins a failure on the text that caused it.

Every text in, one vector out: embedders never send a model more than it accepts. A
text longer than the model's input is split into model-sized pieces at token
boundaries, each piece is embedded, and the text's vector is the mean of the piece
vectors weighted by their token counts, L2-normalized (:mod:`.long_text`); nothing of
a long text is silently cut off. ``LocalEmbedder`` uses the model's own tokenizer and
``max_seq_length`` (all-MiniLM-L6-v2: 256 word pieces, 254 for text);
``OpenAIEmbedder`` counts ``cl100k_base`` tokens against the model's limit (8191 for
text-embedding-3-* and ada-002) and keeps each request under OpenAI's per-request
token total.

Failures are attributable. An embedder raises :class:`EmbeddingInputError` when the
input itself is refused: with ``index`` set when it knows which text (an empty string
for OpenAI, a non-string), or ``index=None`` when the model refused the batch without
saying which text (an HTTP 400). Any other :class:`~langmem_tiers.errors.RecallError`
is an outage (network, server, rate limit, model not loadable) that affects every text
alike. :func:`embed_each` / :func:`aembed_each` embed a batch and, on an input error,
bisect it to return a vector for every good text and the error for each bad one, so
one poison text never blocks the others; an outage is raised for the whole batch
(retrying every text alone would only multiply failing calls).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from langmem_tiers.errors import EmbeddingInputError, RecallError


@runtime_checkable
class Embedder(Protocol):
    """Embeds batches of text.

    ``key`` names the model (and dimensions) so that vectors from different models
    never share an index; ``dimension`` is the vector length. Implementations
    batch internally, load their model lazily and raise on failure (the caller
    keeps the rows pending and retries): :class:`EmbeddingInputError` for a refused
    input, another :class:`~langmem_tiers.errors.RecallError` for an outage.
    """

    key: str

    @property
    def dimension(self) -> int:
        """The length of every vector this embedder returns."""
        ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order."""
        ...

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        """Async :meth:`embed`."""
        ...


Result = list[float] | EmbeddingInputError


def embed_each(embedder: Embedder, texts: Sequence[str], *, isolate_any: bool = False) -> list[Result]:
    """One vector, or the error that refused it, per text, in order.

    Embeds ``texts`` as one batch; when the embedder raises
    :class:`EmbeddingInputError`, the batch is bisected (or split around the named
    index) until every refused text is alone, so each failure lands on its own text.
    Extra calls: about ``2 * log2(len(texts))`` per refused text.

    Args:
        isolate_any: also bisect on any other :class:`~langmem_tiers.errors.RecallError`
            (for embedders that cannot tell a bad input from an outage, such as a
            wrapped function); by default an outage is raised for the whole batch.

    Raises:
        RecallError: an outage (not an input error) while ``isolate_any`` is off.
    """
    items = _texts(texts)
    results: list[Result | None] = [None] * len(items)
    pending = [(0, len(items))] if items else []
    while pending:
        lo, hi = pending.pop()
        try:
            vectors = embedder.embed(items[lo:hi])
        except RecallError as e:
            _split(e, lo, hi, results, pending, isolate_any)
            continue
        results[lo:hi] = vectors
    return _done(results)


async def aembed_each(embedder: Embedder, texts: Sequence[str], *, isolate_any: bool = False) -> list[Result]:
    """Async :func:`embed_each`."""
    items = _texts(texts)
    results: list[Result | None] = [None] * len(items)
    pending = [(0, len(items))] if items else []
    while pending:
        lo, hi = pending.pop()
        try:
            vectors = await embedder.aembed(items[lo:hi])
        except RecallError as e:
            _split(e, lo, hi, results, pending, isolate_any)
            continue
        results[lo:hi] = vectors
    return _done(results)


def _texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):
        raise TypeError("embed_each() takes a sequence of texts, not a single str")
    return list(texts)


def _split(error: RecallError, lo: int, hi: int, results: list[Result | None],
           pending: list[tuple[int, int]], isolate_any: bool) -> None:
    if not isinstance(error, EmbeddingInputError) and not isolate_any:
        raise error
    index = error.index if isinstance(error, EmbeddingInputError) else None
    if hi - lo == 1:
        index = 0
    if index is not None and 0 <= index < hi - lo:
        at = lo + index
        refused = EmbeddingInputError(f"text {at} cannot be embedded: {error}", at)
        refused.__cause__ = error
        results[at] = refused
        pending.extend(r for r in ((lo, at), (at + 1, hi)) if r[0] < r[1])
        return
    mid = (lo + hi) // 2
    pending.extend([(mid, hi), (lo, mid)])


def _done(results: list[Result | None]) -> list[Result]:
    out: list[Result] = []
    for r in results:
        assert r is not None  # every range was embedded or split down to single refused texts
        out.append(r)
    return out
