"""Message validation (one table shared by the sync and async paths) and round trips."""

from __future__ import annotations

from typing import Any

import pytest

from langmem_tiers import InvalidMessageError, MemoryConfig, Message, ToolCall
from langmem_tiers.messages import make_message

CALL = {"id": "call_1", "name": "lookup", "arguments": '{"q": "x"}'}

# (id, role, content, fields, fragment the error message must contain)
INVALID: list[tuple[str, Any, Any, dict[str, Any], str]] = [
    ("none-content", "user", None, {}, "None"),
    ("int-content", "user", 42, {}, "int"),
    ("empty", "user", "", {}, "non-empty"),
    ("blank", "system", "   \n", {}, "non-empty"),
    ("nul", "user", "a\x00b", {}, "NUL"),
    ("lone-surrogate", "user", "bad \ud800 text", {}, "surrogate"),
    ("unknown-role", "robot", "hi", {}, "role"),
    ("none-role", None, "hi", {}, "role"),
    ("int-role", 3, "hi", {}, "role"),
    ("part-not-dict", "user", [42], {}, "part 0"),
    ("part-no-type", "user", [{"text": "hi"}], {}, "type"),
    ("text-part-no-text", "user", [{"type": "text"}], {}, "text"),
    ("image-no-source", "user", [{"type": "image_url"}], {}, "url"),
    ("part-not-json", "user", [{"type": "text", "text": "x", "blob": object()}], {}, "JSON"),
    ("tool-no-call-id", "tool", "42", {}, "tool_call_id"),
    ("tool-empty-call-id", "tool", "42", {"tool_call_id": ""}, "tool_call_id"),
    ("call-id-on-user", "user", "hi", {"tool_call_id": "c"}, "tool_call_id"),
    ("tool-calls-on-user", "user", "hi", {"tool_calls": [CALL]}, "tool_calls"),
    ("call-without-id", "assistant", "", {"tool_calls": [{"name": "f"}]}, "id"),
    ("call-without-name", "assistant", "", {"tool_calls": [{"id": "c"}]}, "name"),
    (
        "call-args-not-json",
        "assistant",
        "",
        {"tool_calls": [{"id": "c", "name": "f", "arguments": {1: object()}}]},
        "JSON",
    ),
    ("empty-name", "user", "hi", {"name": ""}, "name"),
    ("metadata-not-dict", "user", "hi", {"metadata": [1]}, "metadata"),
    ("metadata-not-json", "user", "hi", {"metadata": {"x": object()}}, "JSON"),
    ("created-at-text", "user", "hi", {"created_at": "yesterday"}, "created_at"),
    ("created-at-millis", "user", "hi", {"created_at": 1_764_000_000_000}, "milliseconds"),
    ("created-at-negative", "user", "hi", {"created_at": -5}, "created_at"),
    ("orphan-tool-result", "tool", "42", {"tool_call_id": "never_called"}, "unknown call"),
    ("oversize", "user", "x" * 101, {}, "max_message_chars"),
    ("unknown-field", "user", "hi", {"colour": "red"}, "unknown message field"),
]

VALID: list[tuple[str, str, Any, dict[str, Any]]] = [
    ("text", "user", "hello", {}),
    (
        "parts",
        "user",
        [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "http://x/a.png"}}],
        {},
    ),
    ("image-only", "user", [{"type": "image_url", "image_url": {"url": "http://x/a.png"}}], {}),
    ("string-parts", "user", ["plain part"], {}),
    ("japanese", "user", "東京で会いましょう", {}),
    ("emoji", "assistant", "ok 👍🏽", {}),
    ("tool-call-none-content", "assistant", None, {"tool_calls": [CALL]}),
    ("named", "user", "hi", {"name": "ada"}),
    ("at-limit", "user", "x" * 100, {}),
]


INVALID_PARAMS = [pytest.param(*c[1:], id=c[0]) for c in INVALID] + [
    pytest.param(
        "user", [{"type": "text", "text": "a\x00"}], {}, "NUL", id="dict-part-nul"
    ),
    pytest.param(
        "user",
        [{"type": "image_url", "image_url": {"url": "x\x00"}}],
        {},
        "NUL",
        id="image-url-nul",
    ),
]


@pytest.fixture
def memory(make_memory: Any) -> Any:
    return make_memory(config=MemoryConfig(max_message_chars=100, summary_retry_base_s=0))


@pytest.mark.parametrize(("role", "content", "fields", "fragment"), INVALID_PARAMS)
def test_add_refuses(memory: Any, role: Any, content: Any, fields: dict[str, Any], fragment: str) -> None:
    with pytest.raises(InvalidMessageError) as info:
        memory.add(role, content, **fields)
    assert fragment.lower() in str(info.value).lower()
    assert memory.messages() == []


@pytest.mark.parametrize(("role", "content", "fields", "fragment"), INVALID_PARAMS)
async def test_aadd_refuses(
    memory: Any, role: Any, content: Any, fields: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(InvalidMessageError) as info:
        await memory.aadd(role, content, **fields)
    assert fragment.lower() in str(info.value).lower()
    assert memory.messages() == []


@pytest.mark.parametrize(("role", "content", "fields"), [c[1:] for c in VALID], ids=[c[0] for c in VALID])
def test_add_accepts_and_round_trips(memory: Any, role: str, content: Any, fields: dict[str, Any]) -> None:
    stored = memory.add(role, content, **fields)
    assert stored.id is not None
    assert stored.created_at is not None
    (again,) = memory.messages()
    assert again == stored
    assert Message.from_dict(stored.to_dict()) == stored


@pytest.mark.parametrize(("role", "content", "fields"), [c[1:] for c in VALID], ids=[c[0] for c in VALID])
async def test_aadd_accepts(memory: Any, role: str, content: Any, fields: dict[str, Any]) -> None:
    stored = await memory.aadd(role, content, **fields)
    assert memory.messages() == [stored]


def test_add_messages_is_atomic(memory: Any) -> None:
    with pytest.raises(InvalidMessageError):
        memory.add_messages([{"role": "user", "content": "fine"}, {"role": "user", "content": None}])
    with pytest.raises(InvalidMessageError):
        memory.add_messages(
            [{"role": "user", "content": "fine"}, {"role": "tool", "content": "1", "tool_call_id": "orphan"}]
        )
    with pytest.raises(InvalidMessageError):
        memory.add_messages([])
    with pytest.raises(InvalidMessageError):
        memory.add_messages([42])
    assert memory.messages() == []


def test_tool_result_in_same_batch_or_later(memory: Any) -> None:
    memory.add("user", "what is 6*7?")
    memory.add_messages(
        [
            Message("assistant", "", tool_calls=(ToolCall("c1", "calc", '{"e": "6*7"}'),)),
            {"role": "tool", "content": "42", "tool_call_id": "c1"},
        ]
    )
    memory.add(
        "assistant",
        "",
        tool_calls=[
            {"id": "c2", "type": "function", "function": {"name": "calc", "arguments": {"e": "1+1"}}}
        ],
    )
    memory.add("tool", "2", tool_call_id="c2")
    roles = [m.role for m in memory.messages()]
    assert roles == ["user", "assistant", "tool", "assistant", "tool"]
    assert memory.messages()[3].tool_calls[0].arguments == '{"e": "1+1"}'


def test_message_text_includes_tool_calls_and_captions() -> None:
    m = make_message(
        "assistant",
        [
            {"type": "text", "text": "see"},
            {"type": "image_url", "image_url": {"url": "u"}, "caption": "a cat"},
        ],
        tool_calls=[CALL],
    )
    assert m.text == 'see\n[image_url: a cat]\nlookup({"q": "x"})'


def test_from_dict_refuses_non_mapping() -> None:
    with pytest.raises(InvalidMessageError):
        Message.from_dict(["user", "hi"])  # type: ignore[arg-type]


def test_errors_are_value_errors() -> None:
    with pytest.raises(ValueError):
        make_message("user", None)
