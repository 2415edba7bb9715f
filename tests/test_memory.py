"""TieredMemory lifecycle: persistence across reopen, closed memories, sync/async parity."""

from __future__ import annotations

from typing import Any

import pytest

from langmem_tiers import MemoryClosedError


def fill(memory: Any, turns: int = 8) -> None:
    for i in range(turns):
        memory.add("user", f"turn {i} " + " ".join(f"w{i}x{j}" for j in range(20)))
        memory.add("assistant", f"reply {i} " + " ".join(f"r{i}x{j}" for j in range(10)))


def test_reopen_gives_same_window_summary_and_cursors(make_memory: Any) -> None:
    memory = make_memory()
    fill(memory)
    before = (memory.messages(), memory.window(), memory.summary, memory.stats())
    memory.close()
    again = make_memory()
    assert (again.messages(), again.window(), again.summary, again.stats()) == before


async def test_async_and_sync_agree(make_memory: Any) -> None:
    sync_memory = make_memory("sync")
    async_memory = make_memory("async")
    fill(sync_memory)
    for i in range(8):
        await async_memory.aadd("user", f"turn {i} " + " ".join(f"w{i}x{j}" for j in range(20)))
        await async_memory.aadd("assistant", f"reply {i} " + " ".join(f"r{i}x{j}" for j in range(10)))
    assert [m.text for m in sync_memory.window()] == [m.text for m in async_memory.window()]
    assert sync_memory.summary == async_memory.summary
    ctx_sync, ctx_async = sync_memory.context(), await async_memory.acontext()
    assert [m.text for m in ctx_sync.messages] == [m.text for m in ctx_async.messages]


def test_closed_memory_refuses_use(make_memory: Any) -> None:
    memory = make_memory()
    memory.add("user", "hi")
    memory.close()
    memory.close()  # idempotent
    for call in (
        lambda: memory.add("user", "x"),
        memory.context,
        memory.flush,
        memory.messages,
        memory.stats,
        memory.clear,
    ):
        with pytest.raises(MemoryClosedError):
            call()
