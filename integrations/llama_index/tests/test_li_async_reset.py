"""TieredChatMemory.areset: the core's native aclear, with reset()'s refusal of a partial reset."""

from __future__ import annotations

from pathlib import Path

import pytest
from langmem_tiers.errors import ConfigError
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.storage.chat_store.base_db import MessageStatus

from llama_index.memory.langmem_tiers import TieredChatMemory


async def test_areset_erases_the_session(tmp_path: Path) -> None:
    memory = TieredChatMemory.from_defaults(path=tmp_path, session_id="s", embed_model=False)
    try:
        await memory.aput(ChatMessage(role="user", content="My name is Ada."))
        memory.tiered.remember("Ada drinks green tea.")
        await memory.areset()
        assert await memory.aget_all() == []
        assert memory.tiered.facts() == []
    finally:
        memory.close()


async def test_areset_refuses_a_partial_reset_and_keeps_the_session(tmp_path: Path) -> None:
    memory = TieredChatMemory.from_defaults(path=tmp_path, session_id="s", embed_model=False)
    try:
        await memory.aput(ChatMessage(role="user", content="My name is Ada."))
        with pytest.raises(ConfigError, match="would erase part of the session"):
            await memory.areset(MessageStatus.ACTIVE)
        assert [m.content for m in await memory.aget_all()] == ["My name is Ada."]
    finally:
        memory.close()
