"""End to end through the chat engines: both calling orders, eviction, summary, budgets, streaming."""

from __future__ import annotations

import time

import pytest
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.chat_engine import CondensePlusContextChatEngine, ContextChatEngine, SimpleChatEngine
from llama_index.core.schema import NodeWithScore, TextNode

from llama_index.memory.langmem_tiers import TieredChatMemory

from .conftest import SMALL, RecordingLLM, system_count, text_of

TURNS = 30


class FixedRetriever(BaseRetriever):
    def _retrieve(self, query_bundle):  # type: ignore[no-untyped-def]
        return [NodeWithScore(node=TextNode(text="Doc: the shop opens at nine."), score=1.0)]


def make_engine(kind: str, llm: RecordingLLM, memory: TieredChatMemory):  # type: ignore[no-untyped-def]
    if kind == "simple":
        return SimpleChatEngine.from_defaults(llm=llm, memory=memory, system_prompt="You are terse.")
    if kind == "context":
        return ContextChatEngine.from_defaults(FixedRetriever(), llm=llm, memory=memory, system_prompt="Be kind.")
    return CondensePlusContextChatEngine.from_defaults(FixedRetriever(), llm=llm, memory=memory,
                                                       system_prompt="Be kind.")


def wait_for(memory: TieredChatMemory, count: int) -> None:
    deadline = time.time() + 10
    while len(memory.get_all()) < count and time.time() < deadline:
        time.sleep(0.01)


@pytest.mark.parametrize("kind", ["simple", "context", "condense_plus"])
@pytest.mark.parametrize("mode", ["sync", "stream"])
def test_long_conversation_stays_in_budget_and_loses_nothing(tmp_path, kind, mode) -> None:
    llm = RecordingLLM(max_tokens=6, is_chat_model=True)
    memory = TieredChatMemory.from_defaults(path=tmp_path, session_id=f"{kind}-{mode}", config=SMALL,
                                            embed_model=False)
    engine = make_engine(kind, llm, memory)
    for i in range(TURNS):
        message = f"Turn {i}: please note that item {i} costs {i * 3} euros and is blue."
        if mode == "sync":
            engine.chat(message)
        else:
            response = engine.stream_chat(message)
            for _ in response.response_gen:
                pass
            wait_for(memory, 2 * (i + 1))
    # Nothing lost: every turn is in the journal, in order.
    history = memory.get_all()
    assert len(history) == 2 * TURNS
    assert history[0].content.startswith("Turn 0:")
    assert history[-2].content.startswith(f"Turn {TURNS - 1}:")
    stats = memory.tiered.stats()
    assert stats.summary_cursor > 0
    assert memory.tiered.summary
    chats = llm.calls
    assert chats
    for call in chats:
        assert system_count(call) <= 1
    # The summary reached the LLM in the last call, with the recent turn.
    last = text_of(chats[-1])
    assert "Summary of earlier conversation" in last
    assert f"Turn {TURNS - 2}" in last or f"Turn {TURNS - 1}" in last
    assert memory.last_context is not None
    assert memory.last_context.tokens.total <= SMALL.context_tokens
    memory.close()


@pytest.mark.parametrize("kind", ["simple", "context", "condense_plus"])
async def test_async_and_astream(tmp_path, kind) -> None:
    llm = RecordingLLM(max_tokens=6, is_chat_model=True)
    memory = TieredChatMemory.from_defaults(path=tmp_path, session_id="a", config=SMALL, embed_model=False)
    engine = make_engine(kind, llm, memory)
    for i in range(12):
        await engine.achat(f"Async turn {i} about the red kite number {i}.")
    response = await engine.astream_chat("Streaming turn about the green kite.")
    async for _ in response.async_response_gen():
        pass
    deadline = time.time() + 10
    while len(await memory.aget_all()) < 26 and time.time() < deadline:
        await memory.aget()
    history = await memory.aget_all()
    assert len(history) == 26
    assert history[-2].content == "Streaming turn about the green kite."
    assert all(system_count(c) <= 1 for c in llm.calls)
    memory.close()


def test_simple_engine_accounts_for_its_system_prompt(tmp_path) -> None:
    memory = TieredChatMemory.from_defaults(path=tmp_path, session_id="t", config=SMALL, embed_model=False)
    assert len(memory.tokenizer_fn("hello world")) == 2
    llm = RecordingLLM(max_tokens=6, is_chat_model=True)
    prompt = "You are a careful assistant. " * 20
    engine = SimpleChatEngine.from_defaults(llm=llm, memory=memory, system_prompt=prompt)
    for i in range(15):
        engine.chat(f"Question {i} about apples and pears, number {i}.")
    assert memory.last_context.tokens.budget < SMALL.context_tokens - len(memory.tokenizer_fn(prompt)) + 1
    memory.close()


def test_condense_question_engine_gets_history(tmp_path) -> None:
    from llama_index.core.chat_engine import CondenseQuestionChatEngine
    from llama_index.core.query_engine import CustomQueryEngine

    class Echo(CustomQueryEngine):
        def custom_query(self, query_str: str) -> str:
            return f"answer to {query_str[:30]}"

    llm = RecordingLLM(max_tokens=6, is_chat_model=True)
    memory = TieredChatMemory.from_defaults(path=tmp_path, session_id="cq", config=SMALL, embed_model=False)
    engine = CondenseQuestionChatEngine.from_defaults(query_engine=Echo(), llm=llm, memory=memory)
    engine.chat("My favourite colour is teal.")
    engine.chat("What is my favourite colour?")
    assert "teal" in llm.prompts[-1]  # the condense prompt carried the history
    assert len(memory.get_all()) == 4
    memory.close()
