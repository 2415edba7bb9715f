"""The background indexer thread: wake-ups, coalescing bursts, stop and the flush handshake; and which
writes of a TieredMemory wake it.

The drain is a counter in the thread's tests (the real index flow is covered through TieredMemory in
the recall tests); what is tested is when the thread calls it.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from langmem_tiers import TieredMemory
from langmem_tiers.errors import ConfigError
from langmem_tiers.recall.indexer import BackgroundIndexer
from langmem_tiers.tokens import WordCounter

from .conftest import SMALL_CONFIG


class Drains:
    def __init__(self) -> None:
        self.calls = 0
        self.called = threading.Event()

    def __call__(self) -> int:
        self.calls += 1
        self.called.set()
        return 0


def _wait_until(condition: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_a_wake_up_drains_without_coalescing() -> None:
    drains = Drains()
    indexer = BackgroundIndexer(drains)
    try:
        indexer.wake()
        assert drains.called.wait(30)
    finally:
        indexer.stop()
    assert drains.calls == 1


def test_a_burst_of_wake_ups_is_drained_once_when_coalescing() -> None:
    drains = Drains()
    indexer = BackgroundIndexer(drains, coalesce_s=5.0, coalesce_max_s=0.5)
    try:
        for _ in range(20):  # adds in a burst: each within coalesce_s of the last
            indexer.wake()
        assert drains.called.wait(30)
        time.sleep(0.1)  # a second drain, if one were coming, would start now
    finally:
        indexer.stop()
    assert drains.calls == 1


def test_flush_waiting_on_working_gets_it_after_the_coalesced_drain() -> None:
    drains = Drains()
    indexer = BackgroundIndexer(drains, coalesce_s=5.0, coalesce_max_s=0.3)
    try:
        indexer.wake()
        _wait_until(indexer.working.locked)  # the thread is coalescing, holding the lock
        with indexer.working:  # what flush() does (wait_free): it must not overtake the drain
            assert drains.calls == 1
    finally:
        indexer.stop()


def test_stop_while_coalescing_leaves_the_rows_pending() -> None:
    drains = Drains()
    indexer = BackgroundIndexer(drains, coalesce_s=60.0, coalesce_max_s=60.0)
    indexer.wake()
    _wait_until(indexer.working.locked)
    indexer.stop()  # returns without waiting out the burst
    assert drains.calls == 0
    indexer.wake()  # after stop: no new thread, nothing drained
    assert drains.calls == 0


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"coalesce_s": -1}, "coalesce_s (-1)"),
    ({"coalesce_max_s": True}, "coalesce_max_s (True)"),
    ({"interval": 0}, "interval (0)"),
    ({"interval": "5"}, "interval ('5')"),
])
def test_bad_timings_are_refused(kwargs: dict[str, object], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        BackgroundIndexer(lambda: 0, **kwargs)  # type: ignore[arg-type]


# --- when add() wakes it ---------------------------------------------------------------------------

def _memory(path: Path, embedder: Any) -> TieredMemory:
    return TieredMemory.open(path, session_id="s1", user_id="ada", config=SMALL_CONFIG, counter=WordCounter(),
                             embedder=embedder)


def _count_wakes(memory: TieredMemory) -> list[int]:
    """One entry per wake-up of the memory's background indexer from now on (it still wakes)."""
    recall = memory.recall
    assert recall is not None
    wakes: list[int] = []
    real = recall.wake_indexer

    def counted() -> None:
        wakes.append(1)
        real()

    recall.wake_indexer = counted  # type: ignore[method-assign]
    return wakes


def test_only_an_add_that_writes_a_turn_record_wakes_the_indexer(tmp_path: Path, local_embedder: Any) -> None:
    with _memory(tmp_path, local_embedder) as memory:
        wakes = _count_wakes(memory)
        memory.add("user", "I planted tomatoes on the balcony.")
        assert wakes == []  # a turn opened: nothing to embed yet
        memory.add("assistant", "Lovely: water them in the morning.")
        assert len(wakes) == 1  # the answered turn is a record now
        memory.add("user", "And basil beside them.")
        assert len(wakes) == 1  # it closes the answered turn, which is not indexed again
        memory.add_messages([{"role": "assistant", "content": "Basil likes the sun."},
                             {"role": "user", "content": "Thanks!"}])
        assert len(wakes) == 2
        memory.flush()
        assert memory.stats().index_pending == 0
        assert "tomatoes" in memory.search("what did I plant on the balcony?", k=3)[0].text


def test_memories_a_summary_extracts_wake_the_indexer(tmp_path: Path, local_embedder: Any) -> None:
    """Their records come from the summary, not from an add: the summary wakes the indexer for them."""
    with _memory(tmp_path, local_embedder) as memory:
        wakes = _count_wakes(memory)
        memory.add("user", "I live in Porto near the river.")
        memory.add("assistant", "Porto is lovely.")
        replies = 1
        while not memory.facts():  # small talk until the fact's turn leaves the window and is summarized
            assert replies < 20, "the fact's turn was never summarized"
            memory.add("user", f"small talk {replies} " + " ".join(f"filler{replies}x{j}" for j in range(12)))
            memory.add("assistant", "Noted.")
            replies += 1
        assert [f.key for f in memory.facts()] == ["location"]
        assert len(wakes) == replies + 1  # each answered turn's record, and the summary's memory


class LockWatchingEmbedder:
    """The real local model, noting for each call whether the memory's summary lock was held."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.dimension, self.key = inner.dimension, inner.key
        self.memory: TieredMemory | None = None
        self.calls: list[tuple[tuple[str, ...], bool]] = []

    def embed(self, texts: Any) -> Any:
        held = False
        if self.memory is not None:
            lock = self.memory._summary_lock
            held = not lock.acquire(blocking=False)
            if not held:
                lock.release()
        self.calls.append((tuple(texts), held))
        return self.inner.embed(texts)


def test_inline_indexing_embeds_a_summarys_memories_after_its_lock(tmp_path: Path, local_embedder: Any) -> None:
    """With ``background_index`` off the summary's memories are embedded on the caller's path, once the
    summary lock is released: another summary of the session does not wait on the embedding."""
    embedder = LockWatchingEmbedder(local_embedder)
    config = replace(SMALL_CONFIG, background_index=False)
    with TieredMemory.open(tmp_path, session_id="s1", user_id="ada", config=config, counter=WordCounter(),
                           embedder=embedder) as memory:
        embedder.memory = memory
        memory.add("user", "I live in Porto near the river.")
        memory.add("assistant", "Porto is lovely.")
        replies = 1
        while not memory.facts():
            assert replies < 20, "the fact's turn was never summarized"
            memory.add("user", f"small talk {replies} " + " ".join(f"filler{replies}x{j}" for j in range(12)))
            memory.add("assistant", "Noted.")
            replies += 1
        fact = memory.facts()[0]
        assert memory.stats().index_pending == 0  # embedded inline, nothing waits for a drain
        held = [h for texts, h in embedder.calls if fact.text in texts]
        assert held == [False]
