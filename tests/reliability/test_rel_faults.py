"""Fault injection: summarizer failures (raises, slow, garbage, overlong), a failing embedder,
a Chroma server stopped and restarted mid-ingest, a full disk. Nothing acknowledged is lost,
errors are typed, and everything recovers once the fault is removed."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from langmem_tiers import JournalError, SummarizerError, SummaryRequest
from langmem_tiers.embedders.callable import CallableEmbedder
from langmem_tiers.journal.base import Scope
from langmem_tiers.summarizers.extractive import ExtractiveSummarizer
from tests.reliability.workers import CONFIG, check_session, hashed_vectors, open_memory
from tests.support.chroma_server import _heartbeat, chroma_executable, free_port

FAULTS: list[str] = []


class Switchable:
    """A summarizer whose answer is scripted: ``mode`` is ok, raise, sleep, none, int, empty, long, surrogate."""

    def __init__(self, mode: str = "ok", sleep_s: float = 0.0) -> None:
        self.mode, self.sleep_s, self.calls = mode, sleep_s, 0
        self.inner = ExtractiveSummarizer()

    def summarize(self, request: SummaryRequest) -> Any:
        self.calls += 1
        if self.sleep_s:
            time.sleep(self.sleep_s)
        answers: dict[str, Any] = {"none": None, "int": 123, "empty": "  ", "long": "word " * 5000,
                                   "surrogate": "summary \ud800 text"}
        if self.mode == "raise":
            raise TimeoutError("LLM request timed out")
        if self.mode in answers:
            return answers[self.mode]
        return self.inner.summarize(request)

    async def asummarize(self, request: SummaryRequest) -> Any:
        return self.summarize(request)


def _ingest(memory: Any, turns: int, tag: str = "t") -> list[int]:
    ids: list[int] = []
    for t in range(turns):
        stored = memory.add_messages([{"role": "user", "content": f"{tag}{t} question about the copper harbor"},
                                      {"role": "assistant", "content": f"{tag}{t} the harbor is copper"}])
        ids += [m.id for m in stored]
    return ids


@pytest.mark.parametrize("mode", ["raise", "none", "int", "empty"])
def test_summarizer_failure_loses_nothing_and_recovers(mode: str, tmp_path: Path) -> None:
    summarizer = Switchable(mode)
    with open_memory(tmp_path, "s", summarizer=summarizer) as memory:
        ids = _ingest(memory, 12)  # adds never raise: the summary failure is recorded, turns stay pending
        stats = memory.stats()
        assert stats.pending_summary_messages > 0
        assert stats.summary_failures >= 1
        assert stats.last_summary_error
        with pytest.raises(SummarizerError):
            memory.flush()
        assert [m.id for m in memory.messages()] == ids
        assert any(o.tier == "pending" for o in memory.context().left_out)
        summarizer.mode = "ok"
        memory.flush()
        assert memory.stats().pending_summary_messages == 0
        assert memory.summary
        check_session(memory, [ids])
    FAULTS.append(f"summarizer {mode}")


def test_overlong_summary_is_capped(tmp_path: Path) -> None:
    with open_memory(tmp_path, "s", summarizer=Switchable("long")) as memory:
        ids = _ingest(memory, 12)
        memory.flush()
        assert memory.stats().summary_tokens <= CONFIG.summary_tokens
        check_session(memory, [ids])
    FAULTS.append("summarizer overlong")


def test_slow_summarizer_in_background_does_not_block_adds(tmp_path: Path) -> None:
    summarizer = Switchable("ok", sleep_s=0.4)
    with open_memory(tmp_path, "s", summarizer=summarizer,
                     config=CONFIG.with_changes(background_summary=True)) as memory:
        start = time.monotonic()
        ids = _ingest(memory, 12)
        elapsed = time.monotonic() - start
        assert elapsed < 0.4 * max(summarizer.calls, 1) + 2.0
        memory.flush()
        assert memory.stats().pending_summary_messages == 0
        check_session(memory, [ids])
    FAULTS.append("summarizer slow (background)")


def test_summary_with_lone_surrogate_is_a_typed_failure(tmp_path: Path) -> None:
    with open_memory(tmp_path, "s", summarizer=Switchable("surrogate")) as memory:
        _ingest(memory, 12)
        with pytest.raises(SummarizerError):
            memory.flush()


def test_failing_embedder_keeps_rows_pending_then_recovers(tmp_path: Path) -> None:
    broken = {"on": True}

    def embed(texts: list[str]) -> list[list[float]]:
        if broken["on"]:
            raise ConnectionError("embedding endpoint down")
        return hashed_vectors(texts)

    memory = open_memory(tmp_path, "s", chroma="embedded")
    memory.recall.embedder = memory._drivers.embedder = CallableEmbedder(embed, dimension=16, key="test:hashed16")
    try:
        ids = _ingest(memory, 12)
        memory.flush()  # indexing fails quietly: rows stay pending
        stats = memory.stats()
        assert stats.index_pending > 0
        assert "embedding endpoint down" in (stats.last_index_error or "")
        assert memory.search("copper harbor", k=3), "keyword recall keeps working"
        broken["on"] = False
        memory.journal._db.execute("UPDATE outbox SET retry_at = 0")  # skip the backoff
        memory.flush()
        assert memory.stats().index_pending == 0
        records = memory.journal.scoped_records([memory._ns_id])
        assert memory.recall.store.count(where=memory.recall.where(Scope("session", memory.namespace))) == len(records)
        check_session(memory, [ids])
    finally:
        memory.close()
    FAULTS.append("embedder failure")


def _start_chroma(path: Path, port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([chroma_executable(), "run", "--path", str(path), "--host", "127.0.0.1",
                             "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not _heartbeat("127.0.0.1", port):
        assert proc.poll() is None, "chroma run exited"
        assert time.monotonic() < deadline, "chroma run did not start"
        time.sleep(0.1)
    return proc


@pytest.mark.server
def test_chroma_server_restart_mid_ingest(tmp_path: Path) -> None:
    port = free_port()
    server = _start_chroma(tmp_path / "chroma", port)
    url = f"http://127.0.0.1:{port}"
    try:
        with open_memory(tmp_path / "mem", "s", chroma=url) as memory:
            ids = _ingest(memory, 8, "a")
            memory.flush()
            assert memory.stats().index_pending == 0
            server.terminate()
            server.wait(10)
            ids += _ingest(memory, 8, "b")  # adds keep working while Chroma is down
            memory.flush()
            assert memory.stats().index_pending > 0
            assert memory.search("copper harbor", k=3), "keyword recall answers while Chroma is down"
            server = _start_chroma(tmp_path / "chroma", port)
            memory.journal._db.execute("UPDATE outbox SET retry_at = 0")  # skip the backoff
            memory.flush()
            assert memory.stats().index_pending == 0
            records = memory.journal.scoped_records([memory._ns_id])
            where = memory.recall.where(Scope("session", memory.namespace))
            assert memory.recall.store.count(where=where) == len(records)
            check_session(memory, [ids])
    finally:
        server.terminate()
        server.wait(10)
    FAULTS.append("chroma server stop/restart")


def test_full_disk_is_a_typed_error_and_recovers(tmp_path: Path) -> None:
    with open_memory(tmp_path, "s") as memory:
        ids = _ingest(memory, 3)
        db = memory.journal._db
        pages = db.execute("PRAGMA page_count").fetchone()[0]
        db.execute(f"PRAGMA max_page_count = {pages + 2}")
        big = "disk " * 20_000
        errors: list[str] = []
        for _ in range(20):
            before = memory.journal.count_messages(memory._ns_id)
            try:
                ids += [m.id for m in memory.add_messages([{"role": "user", "content": big},
                                                           {"role": "assistant", "content": big}])]
            except JournalError as e:
                errors.append(str(e))
                assert memory.journal.count_messages(memory._ns_id) == before, "half-written batch"
        assert errors
        assert all("full" in e.lower() for e in errors), errors
        assert memory.journal.integrity_check() == "ok"
        db.execute("PRAGMA max_page_count = 1073741823")
        ids += _ingest(memory, 3, "after")
        memory.flush()
        check_session(memory, [ids])
    FAULTS.append("disk full (max_page_count)")


def test_zz_fault_summary() -> None:
    print(f"\n[faults] injected: {FAULTS}")
