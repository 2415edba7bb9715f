"""Extraction in the OpenAI summary call, against a real loopback OpenAI server through the real
openai client: one structured request, robust parsing, failures that never block the summary,
and the same number of calls per 100 turns with extraction on and off."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from langmem_tiers import TieredMemory, WordCounter
from langmem_tiers.errors import SummarizerError
from langmem_tiers.messages import Message
from langmem_tiers.summarizers.base import SummaryRequest, SummaryResult
from langmem_tiers.summarizers.openai import OpenAISummarizer
from tests.support.openai_server import FakeOpenAIServer, RecordedRequest, Reply

from .conftest import SMALL_CONFIG

pytest.importorskip("openai")

TIMEOUT = 0.5
REQUEST = SummaryRequest(
    previous_summary="User is Ada.",
    messages=(Message("user", "I moved to Lisbon last month.", id=11, created_at=1714000000.0),
              Message("assistant", "Congratulations!", id=12)),
    max_tokens=200, count_tokens=lambda t: len(t.split()), extract=True,
)
GOOD = json.dumps({"summary": "Ada moved to Lisbon.", "memories": [
    {"text": "Ada lives in Lisbon", "kind": "fact", "key": "home_city", "subject": "Ada", "relation": "lives_in",
     "object": "Lisbon", "confidence": 0.95, "message_ids": [11]}]})


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as s:
        yield s


@pytest.fixture
async def summarizer(server: FakeOpenAIServer) -> AsyncIterator[OpenAISummarizer]:
    s = OpenAISummarizer("gpt-4o-mini", base_url=server.base_url, api_key="sk-test", timeout=TIMEOUT)
    yield s
    await s.aclose()


def test_one_structured_request_returns_summary_and_memories(server: FakeOpenAIServer,
                                                             summarizer: OpenAISummarizer) -> None:
    server.push(Reply(GOOD))
    result = summarizer.summarize(REQUEST)
    assert isinstance(result, SummaryResult)
    assert result.text == "Ada moved to Lisbon."
    assert result.extraction_error is None
    [memory] = result.memories
    assert (memory.key, memory.message_ids, memory.triple and memory.triple.object) == ("home_city", (11,), "Lisbon")
    [body] = server.bodies("chat")
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["name"] == "summary_with_memories"
    prompt = body["messages"][1]["content"]
    assert "[#11] [2024-04-24 23:06] user: I moved to Lisbon last month." in prompt
    assert '"memories"' in prompt
    assert "Reply with the summary text only." not in prompt


async def test_async_and_json_object_mode(server: FakeOpenAIServer) -> None:
    s = OpenAISummarizer("m", base_url=server.base_url, api_key="k", timeout=TIMEOUT, structured_output="json_object")
    server.push(Reply("```json\n" + GOOD + "\n```"))
    result = await s.asummarize(REQUEST)
    await s.aclose()
    assert isinstance(result, SummaryResult)
    assert len(result.memories) == 1
    assert server.bodies("chat")[0]["response_format"] == {"type": "json_object"}


def test_compress_requests_never_ask_for_memories(server: FakeOpenAIServer, summarizer: OpenAISummarizer) -> None:
    server.push(Reply("Ada."))
    assert summarizer.summarize(SummaryRequest("User is Ada.", (), 5, len, compress=True, extract=True)) == "Ada."
    assert "response_format" not in server.bodies("chat")[0]


@pytest.mark.parametrize(("reply", "summary", "memories", "error"), [
    (Reply("Ada moved to Lisbon (plain prose)."), "Ada moved to Lisbon (plain prose).", 0, "not JSON"),
    (Reply('{"summary": "Ada moved.", "memories": [{"text": "Ada li', finish_reason="length"),
     "Ada moved.", 0, "cut at max_tokens"),
    (Reply('{"summary": "Ada moved.", "memories": [{"kind": "fact"}, {"text": "ok", "kind": "fact"}]}'),
     "Ada moved.", 1, None),
    (Reply('{"summary": "Ada moved.", "memories": [{"text": "x", "kind": "rumour"}]}'), "Ada moved.", 0,
     "rumour"),
    (Reply('{"summary": "Ada moved."}'), "Ada moved.", 0, "no memories field"),
], ids=["prose", "cut-after-summary", "partial", "all-bad", "no-memories"])
def test_malformed_or_partial_extraction_keeps_the_summary(server: FakeOpenAIServer, summarizer: OpenAISummarizer,
                                                           reply: Reply, summary: str, memories: int,
                                                           error: str | None) -> None:
    server.push(reply)
    result = summarizer.summarize(REQUEST)
    assert isinstance(result, SummaryResult)
    assert (result.text, len(result.memories)) == (summary, memories)
    if error is None:
        assert result.extraction_error is None
    else:
        assert result.extraction_error is not None
        assert error in result.extraction_error


@pytest.mark.parametrize("reply", [
    Reply('{"summary": "Ada mo', finish_reason="length"),
    Reply('{"memories": []}'),
    Reply("too late", delay=TIMEOUT * 6),
], ids=["cut-inside-summary", "no-summary", "timeout"])
def test_no_usable_summary_is_a_summarizer_error(server: FakeOpenAIServer, summarizer: OpenAISummarizer,
                                                 reply: Reply) -> None:
    server.push(reply)
    with pytest.raises(SummarizerError):
        summarizer.summarize(REQUEST)


def structured_chat(request: RecordedRequest) -> Reply:
    """A faithful stand-in for a model: JSON with a memory per user turn when asked, prose otherwise."""
    body = request.json or {}
    prompt = body["messages"][-1]["content"]
    if "response_format" not in body:
        return Reply("Short summary.")
    ids = [int(i) for i in re.findall(r"\[#(\d+)\][^\n]*user: ", prompt)]
    return Reply(json.dumps({"summary": "Summary of the turns.", "memories": [
        {"text": "The user's favourite colour is teal", "kind": "preference", "key": "favorite_color",
         "subject": "user", "relation": "favorite_color", "object": "teal", "confidence": 0.9,
         "message_ids": ids[:1]}] if ids else []}))


def test_calls_per_100_turns_equal_with_extraction_on_and_off(tmp_path: Path) -> None:
    calls = {}
    with FakeOpenAIServer(chat=structured_chat) as server:
        for on in (False, True):
            server.clear()
            summarizer = OpenAISummarizer("m", base_url=server.base_url, api_key="k", timeout=5)
            config = SMALL_CONFIG.with_changes(extract_memories=on)
            with TieredMemory.open(tmp_path / str(on), session_id="s", user_id="u", embedder=False,
                                   counter=WordCounter(), config=config, summarizer=summarizer) as memory:
                for i in range(100):
                    memory.add("user", f"turn {i}: my favourite colour is teal and " + "word " * 10)
                    memory.add("assistant", "reply " * 12)
                memory.flush()
                calls[on] = len(server.bodies("chat"))
                facts: list[Any] = memory.facts()
                assert [f.key for f in facts] == (["favorite_color"] if on else [])
            summarizer.close()
    print(f"\nOpenAI chat calls per 100 turns: extraction off {calls[False]}, on {calls[True]}")
    assert calls[True] == calls[False] > 0
