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
