"""Summarizer and embedder adapters for any LlamaIndex ``LLM`` and ``BaseEmbedding``.

Example:
    >>> from llama_index.core.llms import MockLLM
    >>> summarizer = LlamaIndexSummarizer(MockLLM(max_tokens=3))
    >>> from langmem_tiers import SummaryRequest, Message
    >>> summarizer.summarize(SummaryRequest("", (Message("user", "hi"),), 50, len))
    'text text text'
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.llms.llm import LLM
from pydantic import BaseModel, Field

from langmem_tiers.errors import ConfigError, RecallError
from langmem_tiers.summarizers import (
    DEFAULT_COMPRESS_PROMPT,
    DEFAULT_EXTRACT_INSTRUCTIONS,
    DEFAULT_SUMMARY_PROMPT,
    StructuredSummarizer,
)


class ExtractedMemoryModel(BaseModel):
    """One memory in a structured summary reply (pydantic, as ``structured_predict`` needs)."""

    text: str
    kind: str = "fact"
    key: str | None = None
    subject: str | None = None
    relation: str | None = None
    object: str | None = None
    confidence: float = 1.0
    message_ids: list[int] = Field(default_factory=list)


class SummaryWithMemories(BaseModel):
    """The updated conversation summary and the memories extracted from the new turns."""

    summary: str
    memories: list[ExtractedMemoryModel] = Field(default_factory=list)


class LlamaIndexSummarizer(StructuredSummarizer):
    """A langmem-tiers summarizer that asks a LlamaIndex ``LLM``.

    Chat models get the prompt as one user message (``llm.chat``); completion
    models get it as is (``llm.complete``). Async uses ``achat`` / ``acomplete``.
    When the memory asks for extraction, the same single call returns the summary and the
    user's memories through ``llm.structured_predict(SummaryWithMemories, ...)`` (function
    calling where the LLM has it, JSON parsing of its text otherwise); a reply that does not
    parse gets one plain summary call instead, and the memory extracts offline.
    """

    def __init__(self, llm: LLM, *, prompt: str = DEFAULT_SUMMARY_PROMPT,
                 compress_prompt: str = DEFAULT_COMPRESS_PROMPT,
                 extract_instructions: str = DEFAULT_EXTRACT_INSTRUCTIONS) -> None:
        if not isinstance(llm, LLM):
            raise ConfigError(f"llm must be a llama_index LLM, got {type(llm).__name__}")
        self.llm = llm
        super().__init__(self._call, self._acall, self._structured, self._astructured, prompt=prompt,
                         compress_prompt=compress_prompt, extract_instructions=extract_instructions)

    def _structured(self, prompt: str) -> Any:
        from llama_index.core.prompts import PromptTemplate

        # The rendered prompt holds JSON braces: pass it as the template's one variable.
        return self.llm.structured_predict(SummaryWithMemories, PromptTemplate("{text}"), text=prompt)

    async def _astructured(self, prompt: str) -> Any:
        from llama_index.core.prompts import PromptTemplate

        return await self.llm.astructured_predict(SummaryWithMemories, PromptTemplate("{text}"), text=prompt)

    def __repr__(self) -> str:
        return f"LlamaIndexSummarizer({type(self.llm).__name__})"

    def _chat(self) -> bool:
        return bool(self.llm.metadata.is_chat_model)

    def _call(self, prompt: str) -> str:
        if self._chat():
            return self.llm.chat([ChatMessage(role="user", content=prompt)]).message.content or ""
        return self.llm.complete(prompt).text

    async def _acall(self, prompt: str) -> str:
        if self._chat():
            return (await self.llm.achat([ChatMessage(role="user", content=prompt)])).message.content or ""
        return (await self.llm.acomplete(prompt)).text


class LlamaIndexEmbedder:
    """A langmem-tiers embedder around any LlamaIndex ``BaseEmbedding``.

    ``key`` names the model so vectors of two models never share a Chroma
    collection; ``dimension`` is probed with one embedding unless given.
    """

    def __init__(self, embed_model: BaseEmbedding, *, dimension: int | None = None, key: str | None = None) -> None:
        if not isinstance(embed_model, BaseEmbedding):
            raise ConfigError(f"embed_model must be a llama_index BaseEmbedding, got {type(embed_model).__name__}")
        self.embed_model = embed_model
        self.key = key or f"llama_index:{embed_model.class_name()}:{embed_model.model_name}"
        self._dimension = dimension

    def __repr__(self) -> str:
        return f"LlamaIndexEmbedder(key={self.key!r})"

    @property
    def dimension(self) -> int:
        """The vector length: the one given, else measured once by embedding a probe text."""
        if self._dimension is None:
            self._dimension = len(self.embed_model.get_text_embedding("dimension probe"))
        return self._dimension

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in one batch call of the embedding model; a failure raises :class:`RecallError`."""
        items = list(texts)
        if not items:
            return []
        try:
            return [list(map(float, v)) for v in self.embed_model.get_text_embedding_batch(items)]
        except Exception as e:
            raise RecallError(f"{self.key} failed to embed {len(items)} text(s): {e}") from e

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        """Async :meth:`embed`."""
        items = list(texts)
        if not items:
            return []
        try:
            vectors = await self.embed_model.aget_text_embedding_batch(items)
        except Exception as e:
            raise RecallError(f"{self.key} failed to embed {len(items)} text(s): {e}") from e
        return [list(map(float, v)) for v in vectors]


def summarizer_from_llm(llm: LLM | None) -> LlamaIndexSummarizer | None:
    """``None`` (the offline extractive summarizer) or a summarizer asking ``llm``."""
    return None if llm is None else LlamaIndexSummarizer(llm)


def embedder_from_model(embed_model: Any) -> Any:
    """Map ``embed_model`` to what ``TieredMemory.open(embedder=...)`` takes.

    ``None``: the local default model; ``False``: no vectors (keyword recall only);
    a ``BaseEmbedding``: wrapped; a langmem-tiers embedder: as is.
    """
    if embed_model is None or isinstance(embed_model, bool):
        return embed_model
    if isinstance(embed_model, BaseEmbedding):
        return LlamaIndexEmbedder(embed_model)
    if hasattr(embed_model, "embed") and hasattr(embed_model, "key"):
        return embed_model
    raise ConfigError(
        f"embed_model must be None (local model), False (no vectors), a llama_index BaseEmbedding or a "
        f"langmem-tiers Embedder; got {type(embed_model).__name__}"
    )


__all__ = ["LlamaIndexEmbedder", "LlamaIndexSummarizer", "embedder_from_model", "summarizer_from_llm"]
