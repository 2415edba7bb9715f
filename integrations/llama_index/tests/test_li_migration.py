"""Migration from LlamaIndex's own memories: from_defaults arguments, to_string, status, initial_token_count,
set(), restoring from_memory, caller keys."""

from __future__ import annotations

from typing import Any

import pytest
from langmem_tiers import ConfigError, InvalidMessageError, MemoryConfig, TieredMemory
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.llms import ChatMessage, MockLLM
from llama_index.core.memory import ChatMemoryBuffer
from llama_index.core.memory.memory import InsertMethod
from llama_index.core.storage.chat_store import SimpleChatStore
from llama_index.core.storage.chat_store.base_db import MessageStatus

from llama_index.memory.langmem_tiers import TieredChatMemory
from llama_index.memory.langmem_tiers.messages import KEY_FIELD

from .conftest import SMALL, RecordingLLM, text_of


def turns(n: int, start: int = 0) -> list[ChatMessage]:
    out = []
    for i in range(start, start + n):
        out += [ChatMessage(role="user", content=f"Note {i}: the blue vase on shelf {i} holds {i * 2} tulips."),
                ChatMessage(role="assistant", content=f"Noted {i}.")]
    return out


def open_memory(path: Any, **kwargs: Any) -> TieredChatMemory:
    kwargs.setdefault("session_id", "s")
    kwargs.setdefault("embed_model", False)
    return TieredChatMemory.from_defaults(path=path, **kwargs)


# --- from_defaults ---------------------------------------------------------------------------------


def test_token_limit_is_the_context_budget(tmp_path) -> None:
    memory = open_memory(tmp_path, token_limit=1000)
    config = memory.tiered.config
    default = MemoryConfig()
    assert config.context_tokens == 1000
    # The shares keep the default proportions.
    assert config.window_tokens == default.window_tokens * 1000 // default.context_tokens
    assert config.summary_tokens == default.summary_tokens * 1000 // default.context_tokens
    assert config.recall_tokens == default.recall_tokens * 1000 // default.context_tokens
    memory.put_messages(turns(40))
    memory.get()
    assert memory.last_context.tokens.budget == 1000
    assert memory.last_context.tokens.total <= 1000
    assert len(memory.get_all()) == 80
    memory.close()


def test_token_limit_scales_a_given_config_and_keeps_its_other_settings(tmp_path) -> None:
    memory = open_memory(tmp_path, token_limit=1400, config=MemoryConfig(
        context_tokens=700, window_tokens=300, summary_tokens=120, recall_tokens=200, recall_scope="session"))
    config = memory.tiered.config
    assert (config.context_tokens, config.window_tokens, config.summary_tokens, config.recall_tokens) == (
        1400, 600, 240, 400)
    assert config.recall_scope == "session"
    memory.close()


def test_llm_sizes_the_budget_like_chat_memory_buffer(tmp_path) -> None:
    llm = MockLLM(max_tokens=4)
    buffer = ChatMemoryBuffer.from_defaults(llm=llm)
    memory = open_memory(tmp_path, llm=llm)
    assert memory.tiered.config.context_tokens == buffer.token_limit
    memory.close()


def test_memory_ratio_and_flush_size(tmp_path) -> None:
    memory = open_memory(tmp_path, token_limit=2000, chat_history_token_ratio=0.7, token_flush_size=300,
                         insert_method=InsertMethod.SYSTEM)
    config = memory.tiered.config
    assert config.window_tokens == 1400
    assert config.window_low_tokens == 1100  # the window evicts 300 tokens at once
    assert config.window_tokens + config.summary_tokens + config.recall_tokens <= 2000
    assert memory.insert_method == "system"
    memory.close()


@pytest.mark.parametrize(("kwargs", "named"), [
    ({"chat_store": SimpleChatStore()}, ["chat_store", "journal"]),
    ({"tokenizer_fn": len}, ["tokenizer_fn", "tiktoken"]),
    ({"memory_blocks": []}, ["memory_blocks", "TieredMemoryBlock"]),
    ({"async_database_uri": "sqlite+aiosqlite:///x.db", "table_name": "t"}, ["async_database_uri", "table_name"]),
    ({"summarize_prompt": "x", "colour": "red"}, ["summarize_prompt", "colour"]),
    ({"token_limit": 0}, ["token_limit (0)"]),
    ({"token_limit": 1000, "token_flush_size": 600}, ["token_flush_size (600)", "window (500 tokens)"]),
    ({"chat_history_token_ratio": 1.5}, ["chat_history_token_ratio (1.5)"]),
    ({"session_id": "a", "chat_store_key": "b"}, ["session_id ('a')", "chat_store_key ('b')"]),
])
def test_arguments_without_a_meaning_here_are_refused_by_name(tmp_path, kwargs: dict[str, Any],
                                                             named: list[str]) -> None:
    with pytest.raises(ConfigError) as raised:
        open_memory(tmp_path, **kwargs)
    assert isinstance(raised.value, ValueError)  # LlamaIndex's own memories raise ValueError too
    for word in named:
        assert word in str(raised.value)


def test_chat_store_key_names_the_session(tmp_path) -> None:
    memory = TieredChatMemory.from_defaults(path=tmp_path, chat_store_key="user-7", embed_model=False)
    assert memory.session_id == "user-7"
    memory.close()


# --- to_string / from_string ---------------------------------------------------------------------


def test_to_string_round_trip(tmp_path) -> None:
    memory = open_memory(tmp_path, user_id="ada", token_limit=1000)
    memory.put_messages(turns(3))
    text = memory.to_string()
    memory.close()
    restored = TieredChatMemory.from_string(text, llm=MockLLM(max_tokens=3))
    assert isinstance(restored, TieredChatMemory)
    assert (restored.session_id, restored.user_id) == ("s", "ada")
    assert restored.tiered.config.context_tokens == 1000
    assert [m.content for m in restored.get_all()] == [m.content for m in turns(3)]
    restored.close()


# --- status ----------------------------------------------------------------------------------------


async def test_status_splits_window_and_evicted(tmp_path) -> None:
    memory = open_memory(tmp_path, config=SMALL)
    memory.put_messages(turns(30))
    everything = memory.get_all()
    active = memory.get_all(status=MessageStatus.ACTIVE)
    archived = await memory.aget_all(status=MessageStatus.ARCHIVED)
    assert active
    assert archived
    assert archived + active == everything
    assert [m.content for m in active] == [m.text for m in memory.tiered.window()]
    assert await memory.aget_all(status="active") == active
    with pytest.raises(ConfigError, match="status"):
        memory.get_all(status="deleted")
    memory.close()


async def test_reset_erases_the_session_and_refuses_a_partial_status(tmp_path) -> None:
    memory = open_memory(tmp_path, config=SMALL)
    memory.put_messages(turns(30))
    for status in (MessageStatus.ACTIVE, MessageStatus.ARCHIVED):
        with pytest.raises(ConfigError, match="reset"):
            await memory.areset(status=status)
        with pytest.raises(ConfigError, match="reset"):
            memory.reset(status=status)
    assert len(memory.get_all()) == 60  # nothing erased by a refused call
    await memory.areset(status=None)
    assert memory.get_all() == []
    memory.close()


# --- get(initial_token_count=...) -------------------------------------------------------------------


def test_a_larger_prompt_gets_fewer_messages(tmp_path) -> None:
    memory = open_memory(tmp_path, config=SMALL)
    memory.put_messages(turns(30))
    full = memory.get()
    totals, counts = [], []
    for initial in (0, 300, 400, 500):
        got = memory.get(initial_token_count=initial)
        totals.append(memory.last_context.tokens.total)
        counts.append(len(got))
        assert memory.last_context.tokens.total + initial <= SMALL.context_tokens
        assert got[-2].content.endswith(full[-2].content)  # the newest turn is always there
    assert totals == sorted(totals, reverse=True)
    assert len(set(totals)) == len(totals)
    assert counts == sorted(counts, reverse=True)
    assert counts[-1] < counts[0]
    memory.close()


async def test_when_only_the_prompt_fits_the_current_turn_comes_back_alone(tmp_path) -> None:
    memory = open_memory(tmp_path, config=SMALL)
    memory.put_messages(turns(30))
    memory.put(ChatMessage(role="user", content="And what about the red vase on the top shelf?"))
    for got in (memory.get(initial_token_count=SMALL.context_tokens - 3),
                await memory.aget(initial_token_count=SMALL.context_tokens)):
        assert [m.content for m in got] == ["And what about the red vase on the top shelf?"]
    with pytest.raises(ValueError, match="Initial token count exceeds token limit"):
        memory.get(initial_token_count=SMALL.context_tokens + 1)
    with pytest.raises(ValueError, match="Initial token count exceeds token limit"):
        await memory.aget(initial_token_count=SMALL.context_tokens + 1)
    with pytest.raises(ConfigError, match="initial_token_count"):
        memory.get(initial_token_count=-5)
    memory.close()


def test_simple_chat_engine_with_a_long_system_prompt(tmp_path) -> None:
    memory = open_memory(tmp_path, config=SMALL)
    llm = RecordingLLM(max_tokens=4, is_chat_model=True)
    prompt = "You are a careful assistant who answers in one line. " * 12
    engine = SimpleChatEngine.from_defaults(llm=llm, memory=memory, system_prompt=prompt)
    for i in range(12):
        engine.chat(f"Question {i}: how tall is the vase number {i}?")
    last = llm.calls[-1]
    assert last[0].content == prompt
    assert last[-1].content.endswith("Question 11: how tall is the vase number 11?")
    assert memory.last_context.tokens.total + len(memory.tokenizer_fn(prompt)) <= SMALL.context_tokens
    memory.close()


# --- from_memory on an anonymous memory; set() keeps the user's memories -----------------------------


def test_from_memory_of_an_anonymous_session_restores_from_to_dict(tmp_path) -> None:
    tm = TieredMemory.open(tmp_path, session_id="anon", embedder=False)
    memory = TieredChatMemory.from_memory(tm)
    memory.put(ChatMessage(role="user", content="I am anonymous."))
    data = memory.to_dict()
    assert data["user_id"] is None
    assert data["agent_id"] is None
    tm.close()
    restored = TieredChatMemory.from_dict(data)
    assert restored.tiered.namespace == tm.namespace
    assert [m.content for m in restored.get_all()] == ["I am anonymous."]
    restored.close()


def pinned_memory(path: Any) -> TieredChatMemory:
    memory = open_memory(path, user_id="ada", config=SMALL)
    memory.tiered.remember("Ada is allergic to peanuts.", "fact", pinned=True)
    memory.put_messages(turns(3))
    return memory


async def test_set_with_the_history_extended_appends_and_keeps_memories(tmp_path) -> None:
    memory = pinned_memory(tmp_path)
    history = memory.get_all()
    memory.set([*history, *turns(1, start=3)])
    await memory.aset([*memory.get(), *turns(1, start=4)])  # what get() returned, memory text included
    assert [m.content for m in memory.get_all()] == [m.content for m in turns(5)]
    assert "Ada is allergic to peanuts." in text_of(memory.get())
    # An engine given chat_history= the stored history stores the new question once.
    engine = SimpleChatEngine.from_defaults(llm=RecordingLLM(max_tokens=3, is_chat_model=True), memory=memory)
    engine.chat("Anything else?", chat_history=memory.get_all())
    assert [m.content for m in memory.get_all()].count("Anything else?") == 1
    assert len(memory.get_all()) == 12
    memory.close()


def test_set_with_another_history_keeps_the_users_pinned_memories(tmp_path) -> None:
    memory = pinned_memory(tmp_path)
    memory.set([ChatMessage(role="user", content="A fresh start.")])
    assert [m.content for m in memory.get_all()] == ["A fresh start."]
    assert "Ada is allergic to peanuts." in text_of(memory.get())
    memory.close()


def test_set_with_another_history_replaces_the_messages(tmp_path) -> None:
    memory = pinned_memory(tmp_path)
    memory.set([ChatMessage(role="user", content="A fresh start.")])
    assert [m.content for m in memory.get_all()] == ["A fresh start."]
    memory.close()


async def test_set_with_bad_input_erases_nothing(tmp_path) -> None:
    memory = pinned_memory(tmp_path)
    bad: Any = [ChatMessage(role="user", content="A fresh start."), {"role": "user", "content": "a dict"}]
    with pytest.raises(InvalidMessageError, match="ChatMessage"):
        memory.set(bad)
    with pytest.raises(InvalidMessageError, match="ChatMessage"):
        await memory.aset(bad)
    assert [m.content for m in memory.get_all()] == [m.content for m in turns(3)]
    memory.close()


# --- idempotency keys ---------------------------------------------------------------------------------


async def test_a_caller_key_stores_a_retried_message_once(tmp_path) -> None:
    memory = open_memory(tmp_path)
    keyed = ChatMessage(role="user", content="Book the table.", additional_kwargs={KEY_FIELD: "msg-1"})
    memory.put(keyed)
    await memory.aput(keyed)  # a retry after a cancelled or timed-out call
    memory.put_messages([keyed, ChatMessage(role="assistant", content="Booked.")])
    assert [m.content for m in memory.get_all()] == ["Book the table.", "Booked."]
    assert memory.get_all()[0] == keyed  # the key round-trips
    # Without a key, two equal messages are two messages: no key is invented.
    memory.put(ChatMessage(role="user", content="Again."))
    memory.put(ChatMessage(role="user", content="Again."))
    assert [m.content for m in memory.get_all()].count("Again.") == 2
    memory.close()
