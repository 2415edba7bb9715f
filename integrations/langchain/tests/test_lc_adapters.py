"""Adapters: any chat model as summarizer, any Embeddings as embedder, a langchain-chroma store."""

from __future__ import annotations

import re
import uuid
from typing import Any

import chromadb
import pytest
from langchain_chroma import Chroma
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from langmem_tiers import Message, SummaryRequest, TieredMemory
from langmem_tiers.summarizers.base import SummaryResult
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


# --- extraction in the summary call (with_structured_output) ----------------------------------

class StructuredChatModel(BaseChatModel):
    """A faithful fake of a tool-calling chat model: with tools bound (``with_structured_output``)
    it answers with one call of the schema's tool; otherwise with text. ``broken`` tool arguments
    imitate a model that answers off-schema."""

    calls: int = 0
    broken: bool = False

    @property
    def _llm_type(self) -> str:
        return "structured-fake"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        self.calls += 1
        prompt = messages[-1].text
        if not kwargs.get("tools"):
            return ChatResult(generations=[ChatGeneration(message=AIMessage("Plain summary of the turns."))])
        ids = [int(i) for i in re.findall(r"\[#(\d+)\][^\n]*user: [^\n]*cat is called", prompt)]
        args: dict[str, Any] = {"summary": "The user talked about their cat.", "memories": [
            {"text": "The user's cat is called Miso", "kind": "fact", "key": "cat_name", "subject": "user",
             "relation": "cat_name", "object": "Miso", "confidence": 0.9, "message_ids": ids}] if ids else []}
        if self.broken:
            args = {"summry": 42}
        name = kwargs["tools"][0]["function"]["name"]
        call = {"name": name, "args": args, "id": f"call_{self.calls}", "type": "tool_call"}
        return ChatResult(generations=[ChatGeneration(message=AIMessage("", tool_calls=[call]))])


@pytest.mark.parametrize("broken", [False, True])
def test_chat_model_summarizer_extracts_in_the_same_call(tmp_path, broken: bool) -> None:
    llm = StructuredChatModel(broken=broken)
    with TieredMemory.open(tmp_path, session_id="s", user_id="u", config=SMALL, embedder=False,
                           summarizer=ChatModelSummarizer(llm)) as memory:
        memory.add("user", "By the way, my cat is called Miso.")
        memory.add("assistant", "Lovely name!")
        for text in conversation(10):
            memory.add("user", text)
            memory.add("assistant", "ok")
        memory.flush()
        facts = memory.facts()
        if broken:  # off-schema: one plain summary call instead, and the offline extractor
            assert memory.summary == "Plain summary of the turns."
            keyed = [f for f in facts if f.key]
            assert [f.key for f in keyed] == ["cat_name"]
            assert keyed[0].text.startswith("my cat is called Miso")
        else:
            assert memory.summary == "The user talked about their cat."
            assert [(f.text, f.key) for f in facts] == [("The user's cat is called Miso", "cat_name")]
            assert isinstance(facts[0].source, tuple)
            assert facts[0].source == (memory.messages()[0].id,)


async def test_chat_model_summarizer_extracts_async(tmp_path) -> None:
    llm = StructuredChatModel()
    summarizer = ChatModelSummarizer(llm)
    request = SummaryRequest("", (Message("user", "My cat is called Miso.", id=5),), 100, len, extract=True)
    result = await summarizer.asummarize(request)
    assert isinstance(result, SummaryResult)
    assert [m.message_ids for m in result.memories] == [(5,)]
    assert llm.calls == 1


def test_chat_model_without_tool_calling_costs_no_extra_call() -> None:
    llm = FakeListChatModel(responses=["summary one"])
    request = SummaryRequest("", (Message("user", "My cat is called Miso.", id=5),), 100, len, extract=True)
    result = ChatModelSummarizer(llm).summarize(request)
    assert isinstance(result, SummaryResult)
    assert result.text == "summary one"
    assert result.memories == ()
    assert result.extraction_error
