"""LlamaIndexSummarizer extracts memories in the summary call through ``structured_predict``,
against a faithful fake LLM (JSON when asked for the output class, text otherwise)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from langmem_tiers import SummaryRequest, TieredMemory
from langmem_tiers.messages import Message
from langmem_tiers.summarizers.base import SummaryResult
from llama_index.core.llms import CompletionResponse, CompletionResponseGen, CustomLLM, LLMMetadata
from llama_index.core.llms.callbacks import llm_completion_callback

from llama_index.memory.langmem_tiers import LlamaIndexSummarizer

from .conftest import SMALL


class JsonLLM(CustomLLM):
    """A completion LLM that answers the structured prompt (it carries the output schema) with
    JSON, and any other prompt with plain text; ``mode="garbage"`` answers off-schema."""

    mode: str = "good"
    calls: int = 0

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(is_chat_model=False, is_function_calling_model=False)

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self.calls += 1
        if '"memories"' not in prompt:
            return CompletionResponse(text="Plain summary of the turns.")
        if self.mode == "garbage":
            return CompletionResponse(text="Sorry, I cannot produce JSON today.")
        ids = [int(i) for i in re.findall(r"\[#(\d+)\][^\n]*user: [^\n]*cat is called", prompt)]
        memories = [{"text": "The user's cat is called Miso", "kind": "fact", "key": "cat_name", "subject": "user",
                     "relation": "cat_name", "object": "Miso", "confidence": 0.9, "message_ids": ids}] if ids else []
        return CompletionResponse(text=json.dumps({"summary": "The user talked about their cat.",
                                                   "memories": memories}))

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        yield self.complete(prompt, formatted, **kwargs)


REQUEST = SummaryRequest("", (Message("user", "My cat is called Miso.", id=5),), 100, len, extract=True)


def test_structured_predict_returns_summary_and_memories_in_one_call() -> None:
    llm = JsonLLM()
    result = LlamaIndexSummarizer(llm).summarize(REQUEST)
    assert isinstance(result, SummaryResult)
    assert result.text == "The user talked about their cat."
    assert [(m.key, m.message_ids, m.triple and m.triple.object) for m in result.memories] == [
        ("cat_name", (5,), "Miso")]
    assert llm.calls == 1


async def test_async_structured_predict() -> None:
    llm = JsonLLM()
    result = await LlamaIndexSummarizer(llm).asummarize(REQUEST)
    assert isinstance(result, SummaryResult)
    assert len(result.memories) == 1
    assert llm.calls == 1


def test_off_schema_reply_falls_back_to_a_plain_summary() -> None:
    llm = JsonLLM(mode="garbage")
    result = LlamaIndexSummarizer(llm).summarize(REQUEST)
    assert isinstance(result, SummaryResult)
    assert result.text == "Plain summary of the turns."
    assert result.memories == ()
    assert result.extraction_error


def test_a_model_that_never_answers_in_shape_stops_costing_an_extra_call() -> None:
    llm = JsonLLM(mode="garbage")
    summarizer = LlamaIndexSummarizer(llm)
    for _ in range(5):
        summarizer.summarize(REQUEST)
    # Three failed structured calls (each followed by a plain one), then plain calls only.
    assert llm.calls == 3 * 2 + 2


@pytest.mark.parametrize("mode", ["good", "garbage"])
def test_through_the_memory(tmp_path, mode: str) -> None:
    with TieredMemory.open(tmp_path, session_id="s", user_id="u", config=SMALL, embedder=False,
                           summarizer=LlamaIndexSummarizer(JsonLLM(mode=mode))) as memory:
        memory.add("user", "By the way, my cat is called Miso.")
        memory.add("assistant", "Lovely name!")
        for i in range(12):
            memory.add("user", f"Small talk number {i} about the weather, which is fine again today.")
            memory.add("assistant", "Indeed, quite fine weather for the season.")
        memory.flush()
        keyed = [f for f in memory.facts() if f.key]
        assert [f.key for f in keyed] == ["cat_name"]
        expected = "The user's cat is called Miso" if mode == "good" else "my cat is called Miso"
        assert keyed[0].text.startswith(expected)
        assert keyed[0].source == (memory.messages()[0].id,)
