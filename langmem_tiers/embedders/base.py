"""The embedder protocol: text in, fixed-size float vectors out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable


@runtime_checkable
class Embedder(Protocol):
    """Embeds batches of text.

    ``key`` names the model (and dimensions) so that vectors from different models
    never share an index; ``dimension`` is the vector length. Implementations
    batch internally, load their model lazily and raise on failure (the caller
    keeps the rows pending and retries).
    """

    key: str

    @property
    def dimension(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]: ...
