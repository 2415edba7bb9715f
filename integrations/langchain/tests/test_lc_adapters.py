"""Adapters: any chat model as summarizer, any Embeddings as embedder, a langchain-chroma store."""

from __future__ import annotations

import uuid

import chromadb
from langchain_chroma import Chroma
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langmem_tiers import TieredMemory
from lc_fakes import SMALL, conversation

from langchain_langmem_tiers import (
    ChatModelSummarizer,
    LangChainEmbedder,
    TieredChatMessageHistory,
    chroma_store_from_langchain,
)


def test_chat_model_summarizer_folds_evicted_turns(tmp_path) -> None:
    llm = FakeListChatModel(responses=["The user reported progress on many projects."])
    with TieredChatMessageHistory.open(
        tmp_path, session_id="s", config=SMALL, embedder=False, summarizer=ChatModelSummarizer(llm)
    ) as h:
        for text in conversation(10):
            h.add_messages([HumanMessage(text), AIMessage("ok")])
        assert h.memory.summary == "The user reported progress on many projects."
        assert "The user reported progress" in h.messages[0].text


async def test_chat_model_summarizer_async(tmp_path) -> None:
    llm = FakeListChatModel(responses=["async summary"])
    with TieredChatMessageHistory.open(
        tmp_path, session_id="s", config=SMALL, embedder=False, summarizer=ChatModelSummarizer(llm)
    ) as h:
        for text in conversation(10):
            await h.aadd_messages([HumanMessage(text), AIMessage("ok")])
        assert h.memory.summary == "async summary"


def test_embeddings_and_langchain_chroma(tmp_path) -> None:
    client = chromadb.PersistentClient(path=str(tmp_path / "chroma"))
    embeddings = DeterministicFakeEmbedding(size=16)
    store = Chroma(
        collection_name=f"c{uuid.uuid4().hex[:8]}",
        client=client,
        embedding_function=embeddings,
        collection_metadata={"hnsw:space": "cosine"},
    )
    embedder = LangChainEmbedder(embeddings)
    assert embedder.dimension == 16
    assert embedder.key == "langchain:DeterministicFakeEmbedding:16"
    with TieredMemory.open(
        tmp_path, session_id="s", config=SMALL, embedder=embedder, chroma=chroma_store_from_langchain(store)
    ) as memory:
        for text in conversation(8):
            memory.add_messages([{"role": "user", "content": text}, {"role": "assistant", "content": "ok"}])
        memory.flush()
        assert store._collection.count() > 0  # vectors landed in the LangChain-owned collection
        assert memory.search("garden project", k=2)
