"""Races and cancellation: erasure versus in-flight summaries, cancelled adds, retries.

A summary computed from turns that were erased meanwhile must never be saved; a cancelled
``aadd`` must never leave the summary lock held; a retried add with the same key is stored once.
"""

from __future__ import annotations

import asyncio
import random
import threading
from pathlib import Path
from typing import Any

from langmem_tiers import MemoryConfig, SummaryRequest, TieredMemory, WordCounter

CONFIG = MemoryConfig(context_tokens=400, window_tokens=60, window_low_ratio=0.5, summary_tokens=40,
                      recall_tokens=100, summary_retry_base_s=0, summary_retry_max_s=0)
SECRET = "zanzibar-4471"


class GatedSummarizer:
    """Copies what it reads into the summary (as an LLM would), but only once the gate opens."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.gate = threading.Event()

    def summarize(self, request: SummaryRequest) -> str:
        self.started.set()
        assert self.gate.wait(30), "the test never opened the gate"
        # Folds the previous summary in first, as a real LLM keeps what it summarized before.
        words = (request.previous_summary + " " + " ".join(m.text for m in request.messages)).split()
        return " ".join(words[: request.max_tokens - 1])

    async def asummarize(self, request: SummaryRequest) -> str:
        return await asyncio.to_thread(self.summarize, request)


def _open(path: Path, summarizer: Any, **changes: Any) -> TieredMemory:
    return TieredMemory.open(path, session_id="s", user_id="ada", embedder=False, counter=WordCounter(),
                             summarizer=summarizer, config=CONFIG.with_changes(**changes))


def _fill(memory: TieredMemory, turns: int = 6) -> None:
    memory.add("user", f"my locker code is {SECRET} remember it")
    memory.add("assistant", "noted")
    for i in range(turns):
        memory.add("user", f"filler turn {i} " + "word " * 12)
        memory.add("assistant", "ok")


def test_forget_session_during_a_background_summary_is_not_undone(tmp_path: Path) -> None:
    summarizer = GatedSummarizer()
    with _open(tmp_path, summarizer, background_summary=True) as memory:
        _fill(memory)
        assert summarizer.started.wait(10)  # the summary of the secret turn is in flight
        memory.forget("session")
        summarizer.gate.set()
        memory.flush()
        assert SECRET not in memory.summary
        assert all(SECRET not in m.text for m in memory.messages())
    with _open(tmp_path, GatedSummarizer()) as again:
        assert SECRET not in again.summary
        assert again.messages() == []


def test_clear_during_a_summary_in_another_thread_is_not_undone(tmp_path: Path) -> None:
    summarizer = GatedSummarizer()
    with _open(tmp_path, summarizer) as memory:
        writer = threading.Thread(target=_fill, args=(memory,))
        writer.start()
        assert summarizer.started.wait(10)
        memory.clear()
        summarizer.gate.set()
        writer.join(30)
        assert not writer.is_alive()
        # Whatever the writer added after the clear stays; the secret was cleared before the summary saved.
        assert SECRET not in memory.summary
        assert all(SECRET not in m.text for m in memory.messages())


def test_forgetting_a_turn_erases_its_messages_and_the_summary_that_covered_it(tmp_path: Path) -> None:
    with _open(tmp_path, None) as memory:  # the offline extractive summarizer
        _fill(memory, turns=10)
        memory.flush()
        assert memory.stats().pending_summary_messages == 0
        # The turn itself (a fact extracted from it is a separate record, erased with the turn's messages).
        hit = next(h for h in memory.search(SECRET, k=5) if h.kind == "turn")
        assert SECRET in hit.text
        assert memory.forget(hit.record_id) >= 1
        memory.flush()
        assert all(SECRET not in m.text for m in memory.messages())
        assert SECRET not in memory.summary
        assert not memory.search(SECRET, k=5)
        assert SECRET not in "\n".join(m.text for m in memory.context(query=SECRET).messages)
        assert len(memory.messages()) == 20  # the other turns stay


async def test_cancelled_adds_never_hold_the_lock_and_retries_never_duplicate(tmp_path: Path) -> None:
    rng = random.Random(7)
    with _open(tmp_path, None) as memory:
        keys = [f"m{i}" for i in range(2000)]
        for key in keys:
            role = "user" if int(key[1:]) % 2 == 0 else "assistant"
            task = asyncio.ensure_future(memory.aadd(role, f"message {key} " + "word " * 6, key=key))
            for _ in range(rng.randrange(0, 6)):  # cancel at a random point of the add and its summary
                await asyncio.sleep(0)
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
        # The retry: every message again with its key; nothing may be stored twice.
        for key in keys:
            role = "user" if int(key[1:]) % 2 == 0 else "assistant"
            await memory.aadd(role, f"message {key} " + "word " * 6, key=key)
        await asyncio.wait_for(memory.aflush(), 60)
        stored = memory.messages()
        assert sorted(m.key or "" for m in stored) == sorted(keys)
        assert memory._summary_lock.acquire(blocking=False)
        memory._summary_lock.release()
        assert memory.stats().pending_summary_messages == 0
