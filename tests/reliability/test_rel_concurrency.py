"""Concurrent writers: threads sharing one memory, threads with their own memories on one
folder, asyncio tasks, and 4 processes on one SQLite journal (keyword-only, and with vectors
through a real ``chroma run`` server). No loss, no duplicates, each writer's order kept,
window invariants hold."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.reliability.workers import check_session, open_memory
from tests.support.chroma_server import chroma_server

ROOT = Path(__file__).resolve().parents[2]
THREADS = 8
TURNS = 15


def _turn(memory, writer: int, turn: int) -> list[int]:  # type: ignore[no-untyped-def]
    stored = memory.add_messages([
        {"role": "user", "content": f"w{writer} t{turn} what about quantum ledgers"},
        {"role": "assistant", "content": f"w{writer} t{turn} ledgers are violet"},
    ])
    return [m.id for m in stored]


def _run_threads(target, n: int) -> None:  # type: ignore[no-untyped-def]
    errors: list[BaseException] = []

    def wrap(i: int) -> None:
        try:
            target(i)
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=wrap, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors


def test_threads_share_one_memory(tmp_path: Path) -> None:
    acked: list[list[int]] = [[] for _ in range(THREADS)]
    with open_memory(tmp_path, "shared") as memory:
        _run_threads(lambda i: [acked[i].extend(_turn(memory, i, t)) for t in range(TURNS)], THREADS)
        memory.flush()
        assert check_session(memory, acked) == THREADS * TURNS * 2
        assert memory.journal.integrity_check() == "ok"
    print(f"\n[concurrency] threads sharing one memory: {THREADS} writers, {THREADS * TURNS * 2} messages")


def test_threads_with_own_memories_same_and_different_sessions(tmp_path: Path) -> None:
    """Threads 0-3 write session 'same' through their own TieredMemory; 4-7 their own sessions."""
    acked: list[list[int]] = [[] for _ in range(THREADS)]

    def writer(i: int) -> None:
        with open_memory(tmp_path, "same" if i < 4 else f"own-{i}") as memory:
            for t in range(TURNS):
                acked[i].extend(_turn(memory, i, t))
            memory.flush()

    _run_threads(writer, THREADS)
    with open_memory(tmp_path, "same") as memory:
        memory.flush()
        assert check_session(memory, acked[:4]) == 4 * TURNS * 2
    for i in range(4, THREADS):
        with open_memory(tmp_path, f"own-{i}") as memory:
            assert check_session(memory, [acked[i]]) == TURNS * 2


async def test_asyncio_tasks_same_and_different_sessions(tmp_path: Path) -> None:
    shared = open_memory(tmp_path, "shared")
    own = [open_memory(tmp_path, f"own-{i}") for i in range(4)]
    acked: list[list[int]] = [[] for _ in range(THREADS)]

    async def task(i: int) -> None:
        memory = shared if i < 4 else own[i - 4]
        for t in range(TURNS):
            stored = await memory.aadd_messages([
                {"role": "user", "content": f"w{i} t{t} async question"},
                {"role": "assistant", "content": f"w{i} t{t} async answer"},
            ])
            acked[i] += [m.id for m in stored]
            if t % 5 == 4:
                await memory.asearch("async question")

    try:
        await asyncio.gather(*(task(i) for i in range(THREADS)))
        await shared.aflush()
        assert check_session(shared, acked[:4]) == 4 * TURNS * 2
        for i, memory in enumerate(own):
            await memory.aflush()
            assert check_session(memory, [acked[4 + i]]) == TURNS * 2
    finally:
        for memory in (shared, *own):
            memory.close()


def _processes(path: Path, n: int, turns: int, chroma: str | None = None) -> list[dict[str, list[int]]]:
    cmd = [sys.executable, "-m", "tests.reliability.workers", str(path)]
    procs = [subprocess.Popen([*cmd, str(i), str(turns), *([chroma] if chroma else [])], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(n)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


def _check_processes(path: Path, results: list[dict[str, list[int]]], turns: int, chroma: str | None) -> None:
    with open_memory(path, "shared", chroma=chroma) as memory:
        memory.flush()
        assert check_session(memory, [r["shared"] for r in results]) == len(results) * turns * 2
        assert memory.journal.integrity_check() == "ok"
        assert memory.stats().index_pending == 0
        if chroma:
            recall = memory.recall
            assert recall is not None
            assert recall.store is not None
            from langmem_tiers.journal.base import Scope

            for i in range(len(results)):
                with open_memory(path, f"own-{i}", chroma=chroma) as own:
                    records = own.journal.scoped_records([own._ns_id])
                    where = recall.where(Scope("session", own.namespace))
                    assert recall.store.count(where=where) == len(records) > 0
            assert memory.search("copper question", k=3)
    for i, r in enumerate(results):
        with open_memory(path, f"own-{i}", chroma=chroma) as own:
            assert check_session(own, [r["own"]]) == turns * 2


def test_four_processes_keyword_only(tmp_path: Path) -> None:
    results = _processes(tmp_path, 4, 20)
    _check_processes(tmp_path, results, 20, None)
    print("\n[concurrency] 4 processes keyword-only: 4 writers x 2 sessions, 320 messages")


@pytest.mark.server
def test_four_processes_with_chroma_server(tmp_path: Path) -> None:
    with chroma_server(tmp_path / "chroma") as (host, port):
        url = f"http://{host}:{port}"
        results = _processes(tmp_path / "mem", 4, 12, url)
        _check_processes(tmp_path / "mem", results, 12, url)
    print("\n[concurrency] 4 processes with a Chroma server: 192 messages")
