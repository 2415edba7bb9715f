"""Fakes and helpers shared by the LangChain integration tests (see conftest.py)."""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langmem_tiers import MemoryConfig
from pydantic import ConfigDict, Field, PrivateAttr

# Small budgets so a ~15-turn conversation evicts and summarizes.
SMALL = MemoryConfig(context_tokens=700, window_tokens=220, summary_tokens=90, recall_tokens=250, recall_k=4)

RECALL_HEADER = "Recalled from earlier conversation"

WEATHER = re.compile(r"weather in (\w+)", re.IGNORECASE)


class ScriptedChatModel(BaseChatModel):
    """A deterministic tool-calling chat model that records its inputs."""

    inputs: list[list[BaseMessage]] = Field(default_factory=list)
    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "scripted-fake"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        return self

    def _reply(self, messages: list[BaseMessage]) -> AIMessage:
        self.inputs.append(list(messages))
        self.calls += 1
        last = messages[-1]
        if isinstance(last, ToolMessage):
            return AIMessage(f"The tool says: {last.text}")
        text = last.text if isinstance(last, HumanMessage) else ""
        match = WEATHER.search(text)
        if match:
            call = {
                "name": "get_weather",
                "args": {"city": match.group(1)},
                "id": f"call_{self.calls}",
                "type": "tool_call",
            }
            return AIMessage("", tool_calls=[call])
        return AIMessage(f"Noted, thank you: {text[:60]}")

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages))])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        reply = self._reply(messages)
        words = re.split(r"(\s+)", str(reply.content))
        for i, word in enumerate(words):
            chunk = AIMessageChunk(content=word)
            if i == len(words) - 1:
                chunk.tool_call_chunks = [
                    {
                        "name": c["name"],
                        "args": __import__("json").dumps(c["args"]),
                        "id": c["id"],
                        "index": j,
                        "type": "tool_call_chunk",
                    }
                    for j, c in enumerate(reply.tool_calls)
                ]
                chunk.chunk_position = "last"
            yield ChatGenerationChunk(message=chunk)


def conversation(n: int = 14) -> list[str]:
    """Filler user turns, each with a distinct fact."""
    topics = [
        "garden",
        "bicycle",
        "kitchen",
        "holiday",
        "piano",
        "library",
        "office",
        "car",
        "aquarium",
        "camera",
        "balcony",
        "workshop",
        "telescope",
        "sailboat",
        "studio",
        "cellar",
    ]
    return [
        f"Turn {i}: today I spent time on my {topics[i % len(topics)]} project and it went fine, "
        f"step {i} of the plan is done."
        for i in range(n)
    ]


class MeetingChatModel(ScriptedChatModel):
    """A ScriptedChatModel that answers only when ``parties`` calls are inside it at once.

    Proves that requests overlap: each call waits (sync on threads, async on the loop) until
    the other calls have arrived, so every request has read its history before any answers.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    parties: int = 2
    _barrier: threading.Barrier | None = PrivateAttr(default=None)
    _arrived: int = PrivateAttr(default=0)
    _all_in: asyncio.Event | None = PrivateAttr(default=None)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if self._barrier is None:
            self._barrier = threading.Barrier(self.parties, timeout=60)
        self._barrier.wait()
        return super()._generate(messages, stop, run_manager, **kwargs)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if self._all_in is None:
            self._all_in = asyncio.Event()
        self._arrived += 1
        if self._arrived == self.parties:
            self._all_in.set()
        await asyncio.wait_for(self._all_in.wait(), timeout=60)
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages))])


def recalled(messages: Sequence[BaseMessage]) -> str:
    """The recall section of the memory message in a model input ("" when nothing was recalled)."""
    for m in messages:
        if isinstance(m, SystemMessage) and RECALL_HEADER in m.text:
            return m.text.split(RECALL_HEADER, 1)[1]
    return ""


def model_text(messages: Sequence[BaseMessage]) -> str:
    """Everything a model input holds, as one text (to assert what never reached the model)."""
    return "\n".join(m.text for m in messages)


def small_talk(n: int) -> list[str]:
    """Varied small talk without pets, names or codes."""
    lines = [
        "The weather was mild today and the bus came on time.",
        "I finally finished the book I started last month.",
        "We had pasta for dinner, nothing special.",
        "The neighbours are repainting their fence again.",
        "I went for a short walk in the park after lunch.",
        "Work was quiet, mostly emails and a long meeting.",
        "I tried a new coffee place, it was fine.",
        "The train was a little crowded this morning.",
    ]
    return [f"{lines[i % len(lines)]} (small talk {i})" for i in range(n)]
