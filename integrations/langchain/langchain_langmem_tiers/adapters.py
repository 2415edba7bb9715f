"""Adapters from LangChain components to langmem-tiers collaborators.

* :class:`ChatModelSummarizer`: any ``BaseChatModel`` as the rolling-summary summarizer.
* :class:`LangChainEmbedder`: any ``Embeddings`` as the recall embedder.
* :func:`chroma_store_from_langchain`: an existing langchain-chroma ``Chroma`` as the recall store.
"""

from __future__ import annotations

from typing import Any

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage
from langmem_tiers import ChromaStore, ConfigError
from langmem_tiers.embedders import CallableEmbedder
from langmem_tiers.summarizers import (
    DEFAULT_COMPRESS_PROMPT,
    DEFAULT_EXTRACT_INSTRUCTIONS,
    DEFAULT_SUMMARY_PROMPT,
    REPLY_SCHEMA,
    StructuredSummarizer,
)


class ChatModelSummarizer(StructuredSummarizer):
    """Summarize evicted turns with any LangChain chat model (sync ``invoke``, async ``ainvoke``).

    When the memory asks for extraction, the same single call returns the summary and the
    user's memories through ``model.with_structured_output`` (the JSON schema
    ``langmem_tiers.summarizers.REPLY_SCHEMA``). A model without structured output
    (no tool calling) gets one plain summary call instead, and the memory extracts offline.

    Example:
        >>> from langchain_core.language_models.fake_chat_models import FakeListChatModel
        >>> from langmem_tiers import Message, SummaryRequest
        >>> summarizer = ChatModelSummarizer(FakeListChatModel(responses=["Ada likes tea."]))
        >>> summarizer.summarize(SummaryRequest("", (Message("user", "I like tea"),), 100, len))
        'Ada likes tea.'
    """

    def __init__(
        self,
        model: BaseChatModel,
        *,
        prompt: str = DEFAULT_SUMMARY_PROMPT,
        compress_prompt: str = DEFAULT_COMPRESS_PROMPT,
        extract_instructions: str = DEFAULT_EXTRACT_INSTRUCTIONS,
    ) -> None:
        if not isinstance(model, BaseChatModel):
            raise ConfigError(f"model must be a LangChain BaseChatModel; got {type(model).__name__}")
        self.model = model

        def call(prompt_text: str) -> str:
            return model.invoke([HumanMessage(prompt_text)]).text

        async def acall(prompt_text: str) -> str:
            return (await model.ainvoke([HumanMessage(prompt_text)])).text

        def structured(prompt_text: str) -> Any:
            # Built per call: with_structured_output raises NotImplementedError for a model without
            # tool calling, which the shell turns into a plain summary call.
            return model.with_structured_output(REPLY_SCHEMA).invoke([HumanMessage(prompt_text)])

        async def astructured(prompt_text: str) -> Any:
            return await model.with_structured_output(REPLY_SCHEMA).ainvoke([HumanMessage(prompt_text)])

        super().__init__(call, acall, structured, astructured, prompt=prompt, compress_prompt=compress_prompt,
                         extract_instructions=extract_instructions)

    def __repr__(self) -> str:
        return f"ChatModelSummarizer({type(self.model).__name__})"


class LangChainEmbedder(CallableEmbedder):
    """Embed recall records with any LangChain ``Embeddings`` (``embed_documents`` / ``aembed_documents``).

    Args:
        embeddings: the LangChain embeddings.
        key: names the model so vectors of two models never share a collection; default
            ``langchain:<class>:<model>``.
        dimension: vector length; default: measured with one probe call.

    Example:
        >>> from langchain_core.embeddings import DeterministicFakeEmbedding
        >>> LangChainEmbedder(DeterministicFakeEmbedding(size=8)).dimension
        8
    """

    def __init__(
        self, embeddings: Embeddings, *, key: str | None = None, dimension: int | None = None
    ) -> None:
        if not isinstance(embeddings, Embeddings):
            raise ConfigError(f"embeddings must be a LangChain Embeddings; got {type(embeddings).__name__}")
        self.embeddings = embeddings
        if key is None:
            model = next(
                (
                    getattr(embeddings, a)
                    for a in ("model", "model_name", "size")
                    if getattr(embeddings, a, None) is not None
                ),
                "default",
            )
            key = f"langchain:{type(embeddings).__name__}:{model}"
        if dimension is None:
            dimension = len(embeddings.embed_query("dimension probe"))
        super().__init__(
            embeddings.embed_documents, dimension=dimension, key=key, afn=embeddings.aembed_documents
        )


def chroma_store_from_langchain(vectorstore: Any) -> ChromaStore:
    """Reuse the client and collection of a langchain-chroma ``Chroma`` as the recall store.

    The collection must use cosine distance: create it with
    ``Chroma(..., collection_configuration={"hnsw": {"space": "cosine"}})`` (or
    ``collection_metadata={"hnsw:space": "cosine"}``); otherwise :class:`ConfigError`.
    Pass the result as ``chroma=`` to ``TieredMemory.open`` (or the history / middleware).
    """
    try:
        client, name = vectorstore._client, vectorstore._collection.name
    except AttributeError as e:
        raise ConfigError(
            f"expected a langchain_chroma.Chroma vector store (with _client and _collection); "
            f"got {type(vectorstore).__name__}"
        ) from e
    return ChromaStore.from_client(client, collection=name)
