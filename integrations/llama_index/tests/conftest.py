"""Shared fixtures: recording mock LLMs (faithful: they run the real mock logic) and small budgets."""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import pytest
from langmem_tiers import MemoryConfig
from llama_index.core.base.llms.types import ChatMessage, ChatResponse, MessageRole, ToolCallBlock
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
from llama_index.core.llms.mock import MockFunctionCallingLLM, MockLLM
from llama_index.core.memory import Memory
from pydantic import Field

# Budgets small enough that a few dozen turns evict, summarize and index.
SMALL = MemoryConfig(context_tokens=700, window_tokens=300, summary_tokens=120, recall_tokens=200)


class RecordingLLM(MockLLM):
    """MockLLM (replies "text text ...") that records every chat input and completion prompt."""

    calls: list[Any] = Field(default_factory=list, exclude=True)
    prompts: list[str] = Field(default_factory=list, exclude=True)

    @llm_chat_callback()
    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        self.calls.append(copy.deepcopy(list(messages)))
        return super().chat(messages, **kwargs)

    @llm_chat_callback()
    def stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> Any:
        self.calls.append(copy.deepcopy(list(messages)))
        return super().stream_chat(messages, **kwargs)

    # achat / astream_chat of a CustomLLM call chat / stream_chat: recorded there.

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        self.prompts.append(prompt)  # chat() of a CustomLLM also lands here, rendered
        return super().complete(prompt, formatted=formatted, **kwargs)


def text_of(messages: Sequence[ChatMessage]) -> str:
    return "\n".join(str(m.content or "") for m in messages)


def system_count(messages: Sequence[ChatMessage]) -> int:
    return sum(m.role == MessageRole.SYSTEM for m in messages)


def tool_then_answer(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
    """What a real function-calling model does: call the tool for a new question, then answer from its result."""
    last = messages[-1]
    tools = kwargs.get("tools") or []
    if last.role == MessageRole.TOOL:
        return ChatMessage(role="assistant", content=f"The tool says {last.content}.")
    if tools:
        return ChatMessage(role="assistant", blocks=[ToolCallBlock(
            tool_call_id=f"call-{len(messages)}", tool_name=tools[0].metadata.name, tool_kwargs={"city": "Paris"})])
    return ChatMessage(role="assistant", content="no tools")


class RecordingFunctionLLM(MockFunctionCallingLLM):
    """MockFunctionCallingLLM with a tool-calling generator, recording every chat input."""

    calls: list[Any] = Field(default_factory=list, exclude=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(response_generator=tool_then_answer, is_chat_model=True, **kwargs)

    @llm_chat_callback()
    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        self.calls.append(copy.deepcopy(list(messages)))
        return super().chat(messages, **kwargs)

    @llm_chat_callback()
    def stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> Any:
        self.calls.append(copy.deepcopy(list(messages)))
        return super().stream_chat(messages, **kwargs)

    @llm_chat_callback()
    async def astream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> Any:
        self.calls.append(copy.deepcopy(list(messages)))
        return await super().astream_chat(messages, **kwargs)


def react_step(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
    """A ReAct model: act once per question, then answer after the observation."""
    last = str(messages[-1].content or "")
    if "Observation:" in last:
        return ChatMessage(role="assistant", content="Thought: I can answer.\nAnswer: It is sunny in Paris.")
    return ChatMessage(role="assistant", content='Thought: I need the weather.\nAction: weather\n'
                       'Action Input: ' + json.dumps({"city": "Paris"}))


class RecordingReActLLM(RecordingFunctionLLM):
    def __init__(self, **kwargs: Any) -> None:
        MockFunctionCallingLLM.__init__(self, response_generator=react_step, is_chat_model=True, **kwargs)


@pytest.fixture
async def li_memory() -> AsyncIterator[Callable[..., Memory]]:
    """``Memory.from_defaults(**kwargs)`` (LlamaIndex's own memory) whose chat store is closed after the test.

    Its default chat store opens an in-memory aiosqlite database that nothing closes: left to the garbage
    collector, the connection warns (ResourceWarning) in whichever later test collects it.
    """
    from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

    engines: list[AsyncEngine] = []

    def make(**kwargs: Any) -> Memory:
        engine = create_async_engine("sqlite+aiosqlite:///:memory:")  # what Memory would open itself
        engines.append(engine)
        return Memory.from_defaults(async_engine=engine, **kwargs)

    yield make
    for engine in engines:
        await engine.dispose()


@pytest.fixture
def small() -> MemoryConfig:
    return SMALL


@pytest.fixture(scope="session")
def local_embedder() -> Any:
    """The real packaged all-MiniLM-L6-v2 model (langmem-tiers' local embedder), loaded once per process."""
    from langmem_tiers.embedders import LocalEmbedder, default_embedder

    if default_embedder() is None:
        pytest.skip("the local embedding model is not installed")
    embedder = LocalEmbedder()
    embedder.embed(["warm up"])
    return embedder
