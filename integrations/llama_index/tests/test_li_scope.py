"""MemoryConfig.recall_scope reaches TieredChatMemory and TieredMemoryBlock: a fact from the user's
earlier session reaches the LLM in a new session, another user's never does, and recall_scope="session"
keeps each session to itself. Real local embedding model, embedded Chroma, SQLite journal."""

from __future__ import annotations

import dataclasses
from typing import Any

from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.llms import ChatMessage

from llama_index.memory.langmem_tiers import TieredChatMemory, TieredMemoryBlock

from .conftest import SMALL, RecordingLLM, text_of

FACT = "My cat is called Pixel Whiskers."
QUESTION = "What is my cat called?"
SESSION_ONLY = dataclasses.replace(SMALL, recall_scope="session")


def answer(memory: Any, question: str = QUESTION) -> str:
    """What the LLM received when a SimpleChatEngine over ``memory`` answered ``question``."""
    llm = RecordingLLM(max_tokens=4, is_chat_model=True)
    SimpleChatEngine.from_defaults(llm=llm, memory=memory, system_prompt="Be brief.").chat(question)
    return text_of(llm.calls[-1])


def test_chat_memory_recalls_the_users_earlier_session_only(tmp_path, local_embedder) -> None:
    def open_session(session_id: str, user_id: str, config: Any = SMALL) -> TieredChatMemory:
        return TieredChatMemory.from_defaults(path=tmp_path, session_id=session_id, user_id=user_id, config=config,
                                              embed_model=local_embedder)

    monday = open_session("monday", "ada")
    engine = SimpleChatEngine.from_defaults(llm=RecordingLLM(max_tokens=4, is_chat_model=True), memory=monday)
    engine.chat(FACT)
    engine.chat("Thanks, that is all for today.")
    monday.close()

    tuesday = open_session("tuesday", "ada")
    assert tuesday.tiered.config.recall_scope == "user"  # the default reached the memory
    seen = answer(tuesday)
    assert "Pixel Whiskers" in seen
    assert "another conversation" in seen  # dated and labelled as coming from elsewhere
    assert any(h.namespace.session_id == "monday" for h in tuesday.last_context.recalled)

    bob = open_session("tuesday", "bob")  # same session id, another user
    assert "Pixel" not in answer(bob)
    assert "Pixel" not in text_of(bob.get(QUESTION))

    private = open_session("wednesday", "ada", SESSION_ONLY)
    assert private.tiered.config.recall_scope == "session"
    assert "Pixel" not in answer(private)
    for memory in (tuesday, bob, private):
        memory.close()


async def test_memory_block_recalls_the_users_earlier_session_only(tmp_path, local_embedder, li_memory) -> None:
    def block_for(user_id: str, config: Any = SMALL) -> TieredMemoryBlock:
        return TieredMemoryBlock(path=str(tmp_path), user_id=user_id, config=config, embed_model=local_embedder)

    ada = block_for("ada")
    monday = li_memory(session_id="monday", memory_blocks=[ada], token_limit=400, token_flush_size=100,
                                  chat_history_token_ratio=0.5)
    await monday.aput_messages([ChatMessage(role="user", content=FACT),
                                ChatMessage(role="assistant", content="Noted.")])
    for i in range(30):  # Memory flushes its oldest messages into the block
        await monday.aput_messages([ChatMessage(role="user", content=f"Gardening topic {i}: water the beans."),
                                    ChatMessage(role="assistant", content="Right.")])
    assert any("Pixel" in m.text for m in ada.memory_for("monday").messages())

    tuesday = li_memory(session_id="tuesday", memory_blocks=[ada], token_limit=2000)
    seen = answer(tuesday)
    assert "Pixel Whiskers" in seen
    assert "another conversation" in seen

    bob = block_for("bob")
    assert "Pixel" not in answer(li_memory(session_id="tuesday", memory_blocks=[bob], token_limit=2000))

    private = block_for("ada", SESSION_ONLY)
    assert "Pixel" not in answer(li_memory(session_id="wednesday", memory_blocks=[private],
                                                      token_limit=2000))
    for block in (ada, bob, private):
        block.close()
