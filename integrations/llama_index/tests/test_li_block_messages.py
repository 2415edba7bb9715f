"""TieredMemoryBlock inside LlamaIndex's Memory; lossless ChatMessage conversion; adapters."""

from __future__ import annotations

import pytest
from langmem_tiers import MemoryConfig, SummaryRequest, TieredMemory
from langmem_tiers.messages import Message
from llama_index.core.base.llms.types import ChatMessage, ImageBlock, TextBlock, ThinkingBlock, ToolCallBlock
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.llms import MockLLM

from llama_index.memory.langmem_tiers import (
    LlamaIndexEmbedder,
    LlamaIndexSummarizer,
    TieredChatMemory,
    TieredMemoryBlock,
    from_chat_message,
    to_chat_message,
)

from .conftest import SMALL, text_of

CASES = [
    ChatMessage(role="user", content="hello"),
    ChatMessage(role="user", content=""),
    ChatMessage(role="assistant", blocks=[]),
    ChatMessage(role="developer", content="be brief"),
    ChatMessage(role="user", blocks=[TextBlock(text="look"), ImageBlock(url="https://x.test/cat.png", detail="high")]),
    ChatMessage(role="user", blocks=[ImageBlock(image=b"aGVsbG8=", image_mimetype="image/png")]),
    ChatMessage(role="assistant", blocks=[ThinkingBlock(content="hmm"), TextBlock(text="ok"),
                                          ToolCallBlock(tool_call_id="c1", tool_name="f", tool_kwargs={"a": 1}),
                                          ToolCallBlock(tool_call_id=None, tool_name="g", tool_kwargs="raw")]),
    ChatMessage(role="assistant", content="", additional_kwargs={"tool_calls": [
        {"id": "c2", "type": "function", "function": {"name": "f", "arguments": "{\"a\": 2}"}}]}),
    ChatMessage(role="tool", content="42", additional_kwargs={"tool_call_id": "c2", "name": "f"}),
    ChatMessage(role="tool", content="orphan result"),
    ChatMessage(role="model", content="from gemini", additional_kwargs={"extra": {"k": [1, 2]}}),
]


@pytest.mark.parametrize("message", CASES, ids=range(len(CASES)))
def test_conversion_is_lossless(message: ChatMessage) -> None:
    core = from_chat_message(message)
    assert to_chat_message(Message.from_dict(core.to_dict())) == message


def test_conversion_survives_the_journal(tmp_path) -> None:
    memory = TieredChatMemory.from_defaults(path=tmp_path, session_id="m", embed_model=False)
    memory.put(ChatMessage(role="user", content="go"))
    memory.put_messages(CASES[6:9])
    memory.put(CASES[9])  # a tool result whose call is unknown is kept, not refused
    assert memory.get_all() == [ChatMessage(role="user", content="go"), *CASES[6:10]]
    memory.close()


def test_memory_text_is_never_stored_back(tmp_path) -> None:
    memory = TieredChatMemory.from_defaults(path=tmp_path, session_id="m", config=SMALL, embed_model=False)
    for i in range(20):
        memory.put_messages([ChatMessage(role="user", content=f"Note {i} about plums."),
                             ChatMessage(role="assistant", content="ok")])
    got = memory.get()
    assert "Memory of this conversation" in text_of(got[:1])
    memory.set(got)
    assert "Memory of this conversation" not in text_of(memory.get_all())
    memory.close()


async def test_block_inside_memory_is_scoped_and_truncated(tmp_path, li_memory) -> None:
    block = TieredMemoryBlock(path=str(tmp_path), vectors=False, config=SMALL, priority=1)
    mem_a = li_memory(session_id="a", memory_blocks=[block], token_limit=400, token_flush_size=100,
                                 chat_history_token_ratio=0.5)
    mem_b = li_memory(session_id="b", memory_blocks=[block], token_limit=400)
    await mem_a.aput(ChatMessage(role="user", content="My locker code is 4417."))
    await mem_a.aput(ChatMessage(role="assistant", content="Noted."))
    for i in range(25):
        await mem_a.aput(ChatMessage(role="user", content=f"Filler {i}: the train leaves at {i} o'clock."))
        await mem_a.aput(ChatMessage(role="assistant", content="Right."))
    await mem_b.aput(ChatMessage(role="user", content="hello from b"))
    got = await mem_a.aget(input="What is my locker code?")
    text = text_of(got)
    assert "tiered_memory" in text
    assert "4417" in text
    assert "4417" not in text_of(await mem_b.aget())
    journal = block.memory_for("a")
    assert journal.stats().messages > 0
    assert block.memory_for("b").stats().messages == 0
    shorter = await block.atruncate(await block.aget([ChatMessage(role="user", content="locker code")],
                                                     session_id="a"), 150)
    assert shorter is None or journal.counter.count_text(shorter) < journal.counter.count_text(text)
    block.close()


def test_block_from_a_tiered_memory(tmp_path) -> None:
    tm = TieredMemory.open(tmp_path, session_id="fixed", embedder=False)
    block = TieredMemoryBlock(memory=tm)
    assert block.memory_for("ignored") is tm
    assert block.session_id == "fixed"
    tm.close()


async def test_adapters(tmp_path) -> None:
    summarizer = LlamaIndexSummarizer(MockLLM(max_tokens=4))
    request = SummaryRequest("", (Message("user", "I like tea"),), 50, len)
    assert summarizer.summarize(request) == "text text text text"
    assert await summarizer.asummarize(request) == "text text text text"
    embedder = LlamaIndexEmbedder(MockEmbedding(embed_dim=8))
    assert embedder.dimension == 8
    assert len((await embedder.aembed(["a", "b"]))[1]) == 8
    memory = TieredChatMemory.from_defaults(
        path=tmp_path, session_id="ad", config=MemoryConfig(context_tokens=700, window_tokens=300, summary_tokens=120,
                                                            recall_tokens=200),
        llm=MockLLM(max_tokens=5), embed_model=MockEmbedding(embed_dim=8))
    for i in range(20):
        memory.put_messages([ChatMessage(role="user", content=f"Fact {i}: the vase is {i} cm tall."),
                             ChatMessage(role="assistant", content="ok")])
    memory.flush()
    assert memory.tiered.summary.startswith("text")  # the LLM wrote it
    assert memory.search("vase", k=2)
    memory.close()
