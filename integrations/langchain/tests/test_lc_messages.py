"""Lossless conversion LangChain <-> langmem-tiers, both ways, table-driven."""

from __future__ import annotations

import pytest
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langmem_tiers import InvalidMessageError, Message, TieredMemory

from langchain_langmem_tiers.messages import from_langchain, is_memory_message, to_langchain

CASES: list[BaseMessage] = [
    HumanMessage("hello", id="h1"),
    HumanMessage("hi", name="ada", id="h2", additional_kwargs={"x": 1}),
    HumanMessage(
        [
            "plain part",
            {"type": "text", "text": "typed part"},
            {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
        ],
        id="h3",
    ),
    SystemMessage("be brief", id="s1"),
    AIMessage(
        "sure",
        id="a1",
        response_metadata={"model_name": "fake", "finish_reason": "stop"},
        usage_metadata={"input_tokens": 3, "output_tokens": 1, "total_tokens": 4},
    ),
    AIMessage(
        "",
        id="a2",
        tool_calls=[
            {"name": "get_weather", "args": {"city": "Paris", "n": [1, 2]}, "id": "c1", "type": "tool_call"}
        ],
    ),
    AIMessage(
        "",
        id="a3",
        invalid_tool_calls=[
            {"name": "x", "args": "{bad", "id": "c9", "error": "json", "type": "invalid_tool_call"}
        ],
    ),
    AIMessage([{"type": "text", "text": "thinking..."}], id="a4", additional_kwargs={"refusal": None}),
    AIMessage("", id="a5"),  # empty replies occur in real logs (e.g. LongMemEval haystacks)
    AIMessage([], id="a6"),
    ToolMessage(
        "22C", tool_call_id="c1", id="t1", name="get_weather", artifact={"raw": [22]}, status="error"
    ),
    ChatMessage("note", role="user", id="c2"),
    HumanMessage("no id"),
]


@pytest.mark.parametrize("message", CASES, ids=lambda m: f"{m.type}-{m.id}")
def test_langchain_round_trip(message: BaseMessage) -> None:
    assert to_langchain(from_langchain(message)) == message


@pytest.mark.parametrize("message", CASES, ids=lambda m: f"{m.type}-{m.id}")
def test_round_trip_through_the_journal(tmp_path, message: BaseMessage) -> None:
    with TieredMemory.open(tmp_path, session_id="s", embedder=False) as memory:
        before = []
        if isinstance(message, ToolMessage):
            before = [AIMessage("", id="a", tool_calls=[{"name": "get_weather", "args": {}, "id": "c1"}])]
        memory.add_messages([from_langchain(m) for m in [*before, message]])
        assert to_langchain(memory.messages()[-1]) == message


def test_core_message_to_langchain_and_back() -> None:
    core = Message("assistant", "hello", metadata={"source": "import"}, id=5)
    lc = to_langchain(core)
    assert lc.id == "lmt-5"
    assert lc.additional_kwargs["langmem_tiers_metadata"] == {"source": "import"}
    again = from_langchain(lc)
    assert again.metadata["source"] == "import"
    assert again.content == "hello"


def test_memory_message_is_recognised() -> None:
    memory = Message("system", "Memory...", metadata={"langmem_tiers": "memory"})
    assert is_memory_message(memory)
    assert is_memory_message(to_langchain(memory))


def test_stream_chunk_becomes_message() -> None:
    chunk = AIMessageChunk(content="hi", id="x")
    restored = to_langchain(from_langchain(chunk))
    assert type(restored) is AIMessage
    assert restored.content == "hi"


def test_tool_call_without_id_keeps_none() -> None:
    msg = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": None}])
    assert to_langchain(from_langchain(msg)).tool_calls[0]["id"] is None


def test_legacy_function_message_is_refused() -> None:
    with pytest.raises(InvalidMessageError, match="FunctionMessage"):
        from_langchain(FunctionMessage("x", name="f"))


def test_an_empty_reply_is_stored_as_empty_text() -> None:
    assert from_langchain(AIMessage("", id="e")).content == ""


def test_rows_written_with_the_old_empty_marker_still_read_as_empty() -> None:
    # Before the journal accepted empty assistant messages, they were stored as one empty text part.
    marker = {"langchain": {"type": "ai", "id": "e", "empty": True}}
    old = Message("assistant", ({"type": "text", "text": ""},), metadata=marker)
    assert to_langchain(old) == AIMessage("", id="e")


def test_the_message_id_is_the_idempotency_key() -> None:
    assert from_langchain(HumanMessage("hi", id="m1")).key == "m1"
    assert from_langchain(HumanMessage("hi")).key is None
    long_id = "x" * 300
    key = from_langchain(HumanMessage("hi", id=long_id)).key
    assert key is not None
    assert key.startswith("sha256:")
    assert len(key) <= 256
    assert key == from_langchain(AIMessage("other", id=long_id)).key  # same id, same key
