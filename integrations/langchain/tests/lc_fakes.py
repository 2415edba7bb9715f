"""Fakes and helpers shared by the LangChain integration tests (see conftest.py)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langmem_tiers import MemoryConfig
from pydantic import Field

# Small budgets so a ~15-turn conversation evicts and summarizes.
SMALL = MemoryConfig(context_tokens=700, window_tokens=220, summary_tokens=90, recall_tokens=250, recall_k=4)

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
