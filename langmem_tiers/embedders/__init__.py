"""Embedders: the :class:`Embedder` protocol and its implementations.

Long texts are split into model-sized pieces and pooled, never cut or sent over-long;
a refused input raises :class:`EmbeddingInputError`, and :func:`embed_each` returns a
vector or an error per text (see :mod:`langmem_tiers.embedders.base`).

``LocalEmbedder`` (sentence-transformers) and ``OpenAIEmbedder`` import their heavy
dependencies only when used; importing this package stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langmem_tiers.embedders.base import Embedder, aembed_each, embed_each
from langmem_tiers.embedders.callable import CallableEmbedder
from langmem_tiers.embedders.local import LocalEmbedder, default_embedder
from langmem_tiers.errors import EmbeddingInputError

if TYPE_CHECKING:
    from langmem_tiers.embedders.openai import OpenAIEmbedder

__all__ = ["CallableEmbedder", "Embedder", "EmbeddingInputError", "LocalEmbedder", "OpenAIEmbedder", "aembed_each",
           "default_embedder", "embed_each"]


def __getattr__(name: str) -> Any:
    # Lazy so that importing the package never needs the openai extra.
    if name == "OpenAIEmbedder":
        from langmem_tiers.embedders.openai import OpenAIEmbedder

        return OpenAIEmbedder
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
