"""The async management API runs the same flows as the sync one (results and journal state agree,
errors too), and awaits the embedder's async path on the event loop instead of a thread wrapper."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from langmem_tiers import ConfigError, InvalidMessageError, MemoryConfig, TieredMemory, WordCounter
from langmem_tiers.memory_types.fields import EXPIRES_AT
from langmem_tiers.recall.hits import RecallHit
from langmem_tiers.semantic.types import Fact

NOW = 1_000_000.0  # a fixed clock, so expiry stamps agree between the two memories


def seed(memory: TieredMemory) -> dict[str, int]:
    """The same history in every memory: turns, near-duplicate facts, a keyed fact, an event and a skill."""
    for i in range(6):
        memory.add("user", f"question {i} about the garden and the roses number {i}")
        memory.add("assistant", f"answer {i}: water the roses every morning {i}")
    ids = {
        "tea": memory.remember("Ada likes green tea in the morning", tags=["drink"]),
        "tea2": memory.remember("Ada likes green tea in the mornings", tags=["taste"], importance=0.9),
        "city": memory.remember("Ada lives in Paris", key="home_city"),
        "deploy": memory.record_event("deploy", "shipped v2 of the garden app", at=NOW - 50),
        "skill": memory.remember("Water roses at dawn", kind="skill", triggers=["roses"]),
    }
    ids["turn"] = next(r.id for r in memory.journal.scoped_records([memory._ns_id], ["turn"]))
    return ids


def state(memory: TieredMemory) -> Any:
    """What an operation may change, without the wall-clock times that differ between two runs."""
    records = memory.journal.scoped_records(memory._user_ns_ids())
    return {
        "messages": [(m.role, m.text) for m in memory.messages()],
        "window": [m.text for m in memory.window()],
        "summary": memory.summary,
        "records": [(r.id, r.kind, r.text, r.pinned, r.importance, sorted(r.tags), r.valid_to is None,
                     r.metadata.get("merged_from"), r.metadata.get(EXPIRES_AT)) for r in records],
        "links": memory.journal.links([r.id for r in records]),
        "index_pending": memory.stats().index_pending,
    }


def plain(result: Any) -> Any:
    """A result without its wall-clock parts (hits and facts by id, kind and text)."""
    if isinstance(result, list):
        return [plain(r) for r in result]
    if isinstance(result, (RecallHit, Fact)):
        return (getattr(result, "record_id", getattr(result, "id", None)), result.kind, result.text)
    return result


Ids = dict[str, int]


@dataclass(frozen=True)
class Case:
    name: str
    sync: Callable[[TieredMemory, Ids], Any]
    run_async: Callable[[TieredMemory, Ids], Awaitable[Any]]
    raises: type[Exception] | None = None


CASES = [
    Case("remember", lambda m, i: m.remember("Ada lives in Lyon", key="home_city", ttl=60),
         lambda m, i: m.aremember("Ada lives in Lyon", key="home_city", ttl=60)),
    Case("remember refuses", lambda m, i: m.remember("", kind="fact"), lambda m, i: m.aremember("", kind="fact"),
         raises=InvalidMessageError),
    Case("record_event", lambda m, i: m.record_event("deploy", "rolled back v2", "ok", at=NOW - 10),
         lambda m, i: m.arecord_event("deploy", "rolled back v2", "ok", at=NOW - 10)),
    Case("facts", lambda m, i: m.facts(True, ["fact", "event"]), lambda m, i: m.afacts(True, ["fact", "event"])),
    Case("forget a memory", lambda m, i: m.forget(i["tea"]), lambda m, i: m.aforget(i["tea"])),
    Case("forget a turn", lambda m, i: m.forget(i["turn"]), lambda m, i: m.aforget(i["turn"])),
    Case("forget the session", lambda m, i: m.forget("session"), lambda m, i: m.aforget("session")),
    Case("forget refuses", lambda m, i: m.forget("everyone"), lambda m, i: m.aforget("everyone"),
         raises=ConfigError),
    Case("cleanup dry run", lambda m, i: m.cleanup(max_age=0), lambda m, i: m.acleanup(max_age=0)),
    Case("cleanup", lambda m, i: m.cleanup(max_age=0, kinds=["fact"], dry_run=False),
         lambda m, i: m.acleanup(max_age=0, kinds=["fact"], dry_run=False)),
    Case("consolidate", lambda m, i: m.consolidate(0.5), lambda m, i: m.aconsolidate(0.5)),
    Case("link", lambda m, i: m.link(i["tea"], i["city"], "same person", 0.5),
         lambda m, i: m.alink(i["tea"], i["city"], "same person", 0.5)),
    Case("link refuses", lambda m, i: m.link(i["tea"], 10**6), lambda m, i: m.alink(i["tea"], 10**6),
         raises=ConfigError),
    Case("pin", lambda m, i: m.pin(i["city"]), lambda m, i: m.apin(i["city"])),
    Case("expire", lambda m, i: m.expire(i["tea"], 30), lambda m, i: m.aexpire(i["tea"], 30)),
    Case("clear", lambda m, i: m.clear(), lambda m, i: m.aclear()),
    Case("clear keeping memories", lambda m, i: m.clear(keep_memories=True),
         lambda m, i: m.aclear(keep_memories=True)),
    Case("reindex", lambda m, i: m.reindex(), lambda m, i: m.areindex()),
    Case("compact", lambda m, i: m.compact(), lambda m, i: m.acompact()),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
async def test_async_management_does_what_sync_does(make_memory: Any, tmp_path: Path, case: Case) -> None:
    memories = []
    for name in ("sync", "async"):
        memory = make_memory(user_id="ada", path=tmp_path / name)
        memory.clock = lambda: NOW
        memories.append((memory, seed(memory)))
    (sync_memory, sync_ids), (async_memory, async_ids) = memories
    assert sync_ids == async_ids
    assert state(sync_memory) == state(async_memory)

    if case.raises is not None:
        with pytest.raises(case.raises) as sync_error:
            case.sync(sync_memory, sync_ids)
        with pytest.raises(case.raises) as async_error:
            await case.run_async(async_memory, async_ids)
        assert str(async_error.value) == str(sync_error.value)
    else:
        assert plain(await case.run_async(async_memory, async_ids)) == plain(case.sync(sync_memory, sync_ids))
    assert state(async_memory) == state(sync_memory)


class LoopCheckingEmbedder:
    """The real local model behind a probe: records which path embedded (sync ``embed`` or awaited
    ``aembed``) and, on the async path, waits for a tick of another task: it can only get one while
    the event loop keeps running during the operation."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.key = inner.key
        self.sync_calls: list[str] = []
        self.async_calls = 0
        self.tick = asyncio.Event()

    @property
    def dimension(self) -> int:
        return int(self.inner.dimension)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.sync_calls.append(threading.current_thread().name)
        return list(self.inner.embed(texts))

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        self.async_calls += 1
        self.tick.clear()
        await asyncio.wait_for(self.tick.wait(), timeout=10)  # another task ran meanwhile
        return list(await self.inner.aembed(texts))


async def _ticking(embedder: LoopCheckingEmbedder, stop: asyncio.Event) -> None:
    while not stop.is_set():
        embedder.tick.set()
        await asyncio.sleep(0.001)


ASYNC_EMBEDDING_OPS: list[tuple[str, Callable[[TieredMemory, Ids], Awaitable[Any]]]] = [
    ("aremember", lambda m, i: m.aremember("Ada keeps bees on the roof", kind="fact")),
    ("arecord_event", lambda m, i: m.arecord_event("harvest", "forty jars of honey")),
    ("aconsolidate", lambda m, i: m.aconsolidate(0.5)),
    ("apin", lambda m, i: m.apin(i["city"])),
    ("aexpire", lambda m, i: m.aexpire(i["tea"], 30)),
    ("areindex", lambda m, i: m.areindex()),
]


@pytest.mark.parametrize(("name", "op"), ASYNC_EMBEDDING_OPS, ids=[n for n, _ in ASYNC_EMBEDDING_OPS])
async def test_async_management_awaits_the_embedder_on_the_loop(
        tmp_path: Path, local_embedder: Any, name: str, op: Callable[[TieredMemory, Ids], Awaitable[Any]]) -> None:
    embedder = LoopCheckingEmbedder(local_embedder)
    config = replace(MemoryConfig(), background_index=False)  # indexing inside the operation, not after it

    def open_memory() -> TieredMemory:
        return TieredMemory.open(tmp_path, session_id="s1", user_id="ada", config=config, embedder=embedder,
                                 counter=WordCounter())

    with open_memory() as memory:
        memory.clock = lambda: NOW
        ids = seed(memory)
    # A fresh handle: vectors the seeding computed are cached per handle, and every operation here must
    # embed (the kept record of a merge, the re-pinned or re-expiring record, everything on reindex).
    with open_memory() as memory:
        memory.clock = lambda: NOW
        stop = asyncio.Event()
        ticker = asyncio.create_task(_ticking(embedder, stop))
        embedder.sync_calls.clear()
        embedder.async_calls = 0
        try:
            await op(memory, ids)
        finally:
            stop.set()
            await ticker
        assert embedder.sync_calls == [], f"{name} embedded through the sync path"
        assert embedder.async_calls > 0, f"{name} queued a vector but never awaited aembed"
        assert memory.stats().index_pending == 0
