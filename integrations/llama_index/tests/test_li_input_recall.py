"""Recall is keyed on the question being answered, whatever order the engine or agent calls us in.

llama-index-core 0.14: SimpleChatEngine and the agents ``put`` the question, then ``get()`` without
``input``; the Context, CondensePlusContext and CondenseQuestion engines ``get(input=question)`` before
``put``. Each one, in each of its modes, must deliver to the LLM a fact that left the window many turns
ago, recalled for the current question (the previous question was about something else).
"""

from __future__ import annotations

from typing import Any

import pytest
from llama_index.core.agent.workflow import FunctionAgent, ReActAgent
from llama_index.core.chat_engine import (
    CondensePlusContextChatEngine,
    CondenseQuestionChatEngine,
    ContextChatEngine,
    SimpleChatEngine,
)
from llama_index.core.llms import ChatMessage, MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.tools import FunctionTool

from llama_index.memory.langmem_tiers import TieredChatMemory

from .conftest import SMALL, RecordingFunctionLLM, RecordingLLM, RecordingReActLLM, text_of
from .test_li_engines import FixedRetriever

FACT = "My cat is called Pixel Whiskers."
QUESTION = "What is my cat called?"
FILLER_TURNS = 24


def memory_with_evicted_fact(path: Any) -> TieredChatMemory:
    """A session whose first turn stated FACT, followed by enough other turns to evict it.

    Summaries come from a MockLLM that writes "text text ...", so the fact can reach the LLM
    only through recall, keyed on the question.
    """
    memory = TieredChatMemory.from_defaults(path=path, session_id="s", config=SMALL, embed_model=False,
                                            llm=MockLLM(max_tokens=4))
    history = [ChatMessage(role="user", content=FACT), ChatMessage(role="assistant", content="Noted.")]
    for i in range(FILLER_TURNS):
        history += [ChatMessage(role="user", content=f"Gardening topic {i}: tomatoes need {i} litres weekly."),
                    ChatMessage(role="assistant", content="Right.")]
    memory.put_messages(history)
    assert all("Pixel" not in m.text for m in memory.tiered.window())  # scrolled out of the window
    assert "Pixel" not in memory.tiered.summary
    return memory


def seen_by(llm: Any) -> str:
    """Everything the LLM received: chat inputs and completion prompts."""
    return text_of([m for call in llm.calls for m in call]) + "\n" + "\n".join(getattr(llm, "prompts", []))


def build_engine(kind: str, llm: RecordingLLM, memory: TieredChatMemory) -> Any:
    if kind == "simple":
        return SimpleChatEngine.from_defaults(llm=llm, memory=memory, system_prompt="Be terse.")
    if kind == "context":
        return ContextChatEngine.from_defaults(FixedRetriever(), llm=llm, memory=memory, system_prompt="Be kind.")
    if kind == "condense_plus":
        return CondensePlusContextChatEngine.from_defaults(FixedRetriever(), llm=llm, memory=memory)
    # The query engine answers with the same LLM; the history reaches it in the condense prompt.
    query_engine = RetrieverQueryEngine.from_args(FixedRetriever(), llm=llm)
    return CondenseQuestionChatEngine.from_defaults(query_engine=query_engine, llm=llm, memory=memory)


async def ask(engine: Any, mode: str) -> None:
    if mode == "chat":
        engine.chat(QUESTION)
    elif mode == "achat":
        await engine.achat(QUESTION)
    elif mode == "stream_chat":
        response = engine.stream_chat(QUESTION)
        for _ in response.response_gen:  # ends once the engine's thread has stored the answer
            pass
    else:
        response = await engine.astream_chat(QUESTION)
        async for _ in response.async_response_gen():
            pass
        if response.awrite_response_to_history_task is not None:
            await response.awrite_response_to_history_task


@pytest.mark.parametrize("mode", ["chat", "achat", "stream_chat", "astream_chat"])
@pytest.mark.parametrize("kind", ["simple", "context", "condense_plus", "condense_question"])
async def test_every_chat_engine_delivers_the_evicted_fact(tmp_path, kind: str, mode: str) -> None:
    memory = memory_with_evicted_fact(tmp_path)
    llm = RecordingLLM(max_tokens=5, is_chat_model=True)
    await ask(build_engine(kind, llm, memory), mode)
    assert "Pixel Whiskers" in seen_by(llm)
    assert memory.last_context is not None
    assert any("Pixel Whiskers" in h.text for h in memory.last_context.recalled)  # recalled, for this question
    stored = [(m.role.value, m.content) for m in memory.get_all()]
    assert stored[-2] == ("user", QUESTION)  # stored once, after the others, with its answer
    user_turns = [content for role, content in stored if role == "user"]
    assert user_turns[-1] == QUESTION
    assert user_turns.count(QUESTION) == 1
    memory.close()


def weather(city: str = "Paris") -> str:
    """Weather of a city."""
    return f"sunny in {city}"


@pytest.mark.parametrize("mode", ["run", "stream_events"])
@pytest.mark.parametrize("kind", ["function", "react"])
async def test_every_agent_delivers_the_evicted_fact(tmp_path, kind: str, mode: str) -> None:
    memory = memory_with_evicted_fact(tmp_path)
    tool = FunctionTool.from_defaults(weather)
    llm: Any
    if kind == "function":
        llm = RecordingFunctionLLM()
        agent: Any = FunctionAgent(tools=[tool], llm=llm, system_prompt="You answer questions.")
    else:
        llm = RecordingReActLLM()
        agent = ReActAgent(tools=[tool], llm=llm)
    handler = agent.run(user_msg=QUESTION, memory=memory)
    if mode == "stream_events":
        events = [event async for event in handler.stream_events()]
        assert events
    await handler
    assert llm.calls
    assert "Pixel Whiskers" in text_of(llm.calls[0])  # the first model call already had it
    assert any("Pixel Whiskers" in h.text for h in memory.last_context.recalled)
    memory.close()
