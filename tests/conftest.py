"""Shared fixtures of the core suite: a word counter, deterministic summarizer fakes,
keyword-only memories on a real SQLite journal, and the real local embedding model
(loaded once per process)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from langmem_tiers import MemoryConfig, SummaryRequest, TieredMemory, WordCounter

_unique = itertools.count()


class RecordingSummarizer:
    """A faithful fake LLM summarizer: appends one line per new message, records every request."""

    def __init__(self) -> None:
        self.requests: list[SummaryRequest] = []

    def summarize(self, request: SummaryRequest) -> str:
        self.requests.append(request)
        if request.compress:
            words = request.previous_summary.split()
            return " ".join(words[-max(request.max_tokens - 1, 1) :])
        lines = [line for line in request.previous_summary.splitlines() if line]
        lines += [f"{m.role} said {' '.join(m.text.split()[:3])}" for m in request.messages]
        text = "\n".join(lines)
        # Stay within the cap the way a good LLM does: forget the oldest lines first.
        while request.count_tokens(text) > request.max_tokens and len(lines) > 1:
            lines.pop(0)
            text = "\n".join(lines)
        return text

    async def asummarize(self, request: SummaryRequest) -> str:
        return self.summarize(request)


class FailingSummarizer:
    """Raises like an LLM API outage; counts calls."""

    def __init__(self, error: Exception | None = None) -> None:
        self.calls = 0
        self.error = error or ConnectionError("LLM endpoint unreachable")

    def summarize(self, request: SummaryRequest) -> str:
        self.calls += 1
        raise self.error

    async def asummarize(self, request: SummaryRequest) -> str:
        return self.summarize(request)


class OvershootingSummarizer:
    """Ignores max_tokens on the first request and on the first ``overshoot_compress`` compress requests."""

    def __init__(self, overshoot_compress: int = 1) -> None:
        self.requests: list[SummaryRequest] = []
        self.overshoot_compress = overshoot_compress

    def summarize(self, request: SummaryRequest) -> str:
        self.requests.append(request)
        compress_calls = sum(1 for r in self.requests if r.compress)
        if not request.compress or compress_calls <= self.overshoot_compress:
            return " ".join(f"fact{i}." for i in range(request.max_tokens * 3))
        return " ".join(f"fact{i}." for i in range(request.max_tokens))

    async def asummarize(self, request: SummaryRequest) -> str:
        return self.summarize(request)


@pytest.fixture
def words() -> WordCounter:
    return WordCounter()


# Small budgets in words; no retry backoff so tests never wait.
SMALL_CONFIG = MemoryConfig(
    context_tokens=400,
    window_tokens=100,
    window_low_ratio=0.6,
    summary_tokens=40,
    recall_tokens=100,
    summary_retry_base_s=0,
    summary_retry_max_s=0,
)


@pytest.fixture
def small_config() -> MemoryConfig:
    return SMALL_CONFIG


@pytest.fixture
def recording_summarizer() -> RecordingSummarizer:
    return RecordingSummarizer()


@pytest.fixture
def failing_summarizer() -> FailingSummarizer:
    return FailingSummarizer()


@pytest.fixture
def overshooting_summarizer() -> OvershootingSummarizer:
    return OvershootingSummarizer()


@pytest.fixture
def fakes() -> Any:
    """The fake classes, for tests that build several."""
    import types

    return types.SimpleNamespace(
        Recording=RecordingSummarizer, Failing=FailingSummarizer, Overshooting=OvershootingSummarizer
    )


@pytest.fixture
def make_memory(tmp_path: Path, small_config: MemoryConfig) -> Iterator[Callable[..., TieredMemory]]:
    """Opens keyword-only memories (real SQLite journal) with a WordCounter; closes them after the test."""
    opened: list[TieredMemory] = []

    def make(
        session_id: str = "s1", *, path: Path | None = None, config: MemoryConfig | None = None, **kwargs: Any
    ) -> TieredMemory:
        kwargs.setdefault("embedder", False)
        kwargs.setdefault("counter", WordCounter())
        memory = TieredMemory.open(
            path or tmp_path, session_id=session_id, config=config or small_config, **kwargs
        )
        opened.append(memory)
        return memory

    yield make
    for memory in opened:
        memory.close()


@pytest.fixture(scope="session")
def local_embedder() -> Any:
    """The real packaged all-MiniLM-L6-v2 model, loaded once per test process."""
    from langmem_tiers.embedders.local import LocalEmbedder, default_embedder

    if default_embedder() is None:
        pytest.skip("the local embedding model is not installed")
    embedder = LocalEmbedder()
    embedder.embed(["warm up"])
    return embedder


@pytest.fixture
def collection_name() -> str:
    """A unique Chroma collection name per test."""
    return f"test_core_{next(_unique)}"
