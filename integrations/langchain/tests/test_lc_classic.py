"""TieredConversationMemory: a swap-in for ConversationSummaryBufferMemory in ConversationChain."""

from __future__ import annotations

import warnings

import pytest
from langchain_core.messages import BaseMessage, SystemMessage
from langmem_tiers import TieredMemory
from lc_fakes import SMALL, conversation

from langchain_langmem_tiers import TieredConversationMemory


@pytest.fixture
def memory(tmp_path):
    with TieredMemory.open(tmp_path, session_id="s", config=SMALL, embedder=False) as m:
        yield m


def test_conversation_chain(memory, model) -> None:
    from langchain_classic.chains import ConversationChain

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        chain = ConversationChain(llm=model, memory=TieredConversationMemory(memory=memory))
    turns = conversation(10)
    for text in turns:
        chain.invoke({"input": text})
    assert [m.text for m in memory.messages()][::2] == turns
    prompt = model.inputs[-1][0].text
    assert "Summary of earlier conversation" in prompt
    assert turns[-1] in prompt
    assert f"Human: {turns[0]}" not in prompt  # evicted from the window (the summary may quote it)


def test_memory_variables_and_return_messages(memory) -> None:
    mem = TieredConversationMemory(memory=memory, memory_key="chat_history", return_messages=True)
    assert mem.memory_variables == ["chat_history"]
    mem.save_context({"input": "I am Ada"}, {"output": "Hi Ada"})
    loaded = mem.load_memory_variables({"input": "who am I?"})["chat_history"]
    assert all(isinstance(m, BaseMessage) for m in loaded)
    assert [m.type for m in loaded] == ["human", "ai"]
    for text in conversation(10):
        mem.save_context({"input": text}, {"output": "ok"})
    loaded = mem.load_memory_variables({"input": "and now?"})["chat_history"]
    assert isinstance(loaded[0], SystemMessage)
    mem.clear()
    assert mem.load_memory_variables({"input": "x"})["chat_history"] == []


async def test_async(memory) -> None:
    mem = TieredConversationMemory(memory=memory)
    await mem.asave_context({"input": "I am Ada"}, {"response": "Hi Ada"})
    assert (await mem.aload_memory_variables({"input": "who?"}))["history"] == "Human: I am Ada\nAI: Hi Ada"
