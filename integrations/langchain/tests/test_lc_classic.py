"""TieredConversationMemory: a swap-in for ConversationSummaryBufferMemory in ConversationChain."""

from __future__ import annotations

import dataclasses
import warnings

import pytest
from langchain_core.messages import BaseMessage, SystemMessage
from langmem_tiers import ConfigError, TieredMemory
from lc_fakes import SMALL, conversation, recalled

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


def test_recall_is_keyed_on_the_input_being_answered(tmp_path) -> None:
    """Real embedder: the cat's name, evicted long ago, is recalled for the question asked now. Recall is
    held to its own share (``recall_k`` hits): filling the spare budget would bring back most of a history
    this small whatever the input, and the test could not tell which input recall was keyed on."""
    config = dataclasses.replace(SMALL, recall_uses_spare=False)
    with TieredMemory.open(tmp_path, session_id="s", config=config) as memory:
        mem = TieredConversationMemory(memory=memory, return_messages=True)
        mem.save_context({"input": "My cat is called Miso."}, {"response": "What a nice name."})
        for text in conversation(10):
            mem.save_context({"input": text}, {"response": "ok"})
        asked = mem.load_memory_variables({"input": "What is my cat called?"})["history"]
        assert "Miso" in recalled(asked)
        assert "My cat is called Miso." not in [m.text for m in asked]  # recalled, not in the window
        # Without an input, recall is keyed on the last stored user message (small talk).
        assert "Miso" not in recalled(mem.load_memory_variables({})["history"])


@pytest.mark.parametrize(
    ("options", "inputs", "outputs", "error"),
    [
        ({"input_key": "question"}, {"input": "hi"}, {"response": "ok"},
         r"input_key 'question' is missing from the inputs \(keys: \['input'\]\)"),
        ({}, {"input": "hi", "lang": "en"}, {"response": "ok"},
         r"one input key expected besides 'history' and 'stop', got \['input', 'lang'\]: set input_key"),
        ({"output_key": "answer"}, {"input": "hi"}, {"response": "ok"},
         r"output_key 'answer' is missing from the outputs \(keys: \['response'\]\)"),
        ({}, {"input": "hi"}, {"a": "x", "b": "y"},
         r"one output key expected, got \['a', 'b'\].*set output_key"),
    ],
    ids=["missing-input-key", "extra-input-key", "missing-output-key", "extra-output-key"],
)
def test_errors_name_the_missing_or_extra_keys(memory, options, inputs, outputs, error) -> None:
    mem = TieredConversationMemory(memory=memory, **options)
    with pytest.raises(ConfigError, match=error):
        mem.save_context(inputs, outputs)
    assert memory.messages() == []  # nothing half-written
    if "input_key" in options or len(inputs) > 1:
        with pytest.raises(ConfigError, match=error):
            mem.load_memory_variables(inputs)


def test_stop_and_the_memory_key_are_not_inputs(memory) -> None:
    mem = TieredConversationMemory(memory=memory)
    mem.save_context({"input": "I am Ada", "stop": ["\n"], "history": "..."}, {"output": "Hi"})
    assert [m.text for m in memory.messages()] == ["I am Ada", "Hi"]
