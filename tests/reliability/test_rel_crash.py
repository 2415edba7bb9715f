"""Crash safety: a child ingests a scripted conversation and is SIGKILLed at random moments.

After every kill the parent reopens the journal and checks that every acknowledged
message is present exactly once and in order, that at most the last (unacknowledged)
batch of the killed child was committed besides, that summary and cursors are
consistent, that the outbox catches up and that ``PRAGMA integrity_check`` is ok.

Two flavours share one loop: keyword-only children (``embedder=False``, fast to start) and
children with vectors in the real embedded Chroma (``PersistentClient``) and a deterministic
hashing embedder. In the Chroma flavour only the child touches the Chroma folder (one
process per path); the next child, on startup, drains the outbox, compares Chroma's rows
with the journal's records, calls ``reindex()`` if a kill left Chroma behind (the journal is
the source of truth) and checks that recall answers; it reports this on a ``CHECK`` line.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from langmem_tiers import MemoryConfig, TieredMemory, WordCounter
from tests.reliability.workers import LEASE_S

CHILD = Path(__file__).with_name("child_ingest.py")
SEED = int(os.environ.get("LANGMEM_CRASH_SEED", "1234"))


@dataclass
class CrashLog:
    acked: list[tuple[int, str]] = field(default_factory=list)
    kills: int = 0
    phases: Counter[str] = field(default_factory=Counter)
    reindexed: int = 0
    checks: list[dict] = field(default_factory=list)


class Child:
    def __init__(self, path: Path, run: int, mode: str, verify_only: bool = False) -> None:
        cmd = [sys.executable, str(CHILD), str(path), "--run", str(run), "--mode", mode, "--seed", str(SEED)]
        if verify_only:
            cmd.append("--verify-only")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     cwd=str(Path(__file__).parents[2]))
        self.lines: list[str] = []
        self.ready = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            if line.startswith("READY"):
                self.ready.set()
        self.ready.set()

    def finish(self) -> tuple[list[str], str]:
        self.proc.wait(timeout=60)
        self._reader.join(timeout=10)
        err = self.proc.stderr.read() if self.proc.stderr else ""
        for pipe in (self.proc.stdout, self.proc.stderr):  # closed here, not by the garbage collector
            if pipe is not None:
                pipe.close()
        return self.lines, err


def _config() -> MemoryConfig:
    return MemoryConfig(context_tokens=400, window_tokens=100, window_low_ratio=0.6, summary_tokens=40,
                        recall_tokens=100, summary_retry_base_s=0, summary_retry_max_s=0, index_lease_s=LEASE_S)


def _check_check_line(lines: list[str], err: str, log: CrashLog) -> None:
    checks = [json.loads(line[6:]) for line in lines if line.startswith("CHECK ")]
    assert checks, f"child printed no CHECK line; stderr:\n{err[-3000:]}"
    info = checks[0]
    log.checks.append(info)
    assert info["outbox_after_flush"] == 0, info
    if info["mode"] in ("chroma", "sqlite"):
        log.reindexed += int(info["reindexed"])
        assert info["vectors"] == info["records"], info
        assert info["vector_ids_match"], info
    if info["records"]:
        assert info["recall_hits"] > 0, info


def _tag(message) -> str:  # type: ignore[no-untyped-def]
    """The scripted tag of a journal message (``r3t7u``, ``r3t7a``, ``r3t7t``; ``r3t7c`` for a tool call)."""
    if message.content:
        return str(message.content.split()[0])
    return message.tool_calls[0].id.removeprefix("call-") + "c"


def _verify_journal(path: Path, log: CrashLog, runs_killed: set[int], flush: bool) -> None:
    """Reopen and check the journal against what the children acknowledged."""
    db = sqlite3.connect(str(path / "journal.sqlite3"))
    try:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        db.execute("INSERT INTO records_fts (records_fts) VALUES ('integrity-check')")
    finally:
        db.close()
    with TieredMemory.open(path, session_id="crash", user_id="u-crash", config=_config(), counter=WordCounter(),
                           embedder=False) as memory:
        messages = memory.messages()
        ids = [m.id for m in messages]
        tags = [_tag(m) for m in messages]
        by_id = dict(zip(ids, tags))
        # every acknowledged message is present exactly once, with its content, in acknowledged order
        acked_ids = [i for i, _ in log.acked]
        assert acked_ids == sorted(acked_ids), "acknowledged ids must increase in acknowledgement order"
        missing = [(i, t) for i, t in log.acked if i not in by_id]
        assert not missing, f"acknowledged messages lost: {missing[:5]}"
        wrong = [(i, t, by_id[i]) for i, t in log.acked if by_id[i] != t]
        assert not wrong, f"acknowledged ids hold other content: {wrong[:5]}"
        dupes = [t for t, n in Counter(tags).items() if n > 1]
        assert not dupes, f"duplicated messages: {dupes[:5]}"
        # besides acknowledged messages, only the in-flight batch of a killed child may be committed
        acked_set = set(acked_ids)
        extra = [m for m in messages if m.id not in acked_set]
        for m in extra:
            assert int(_tag(m)[1:].split("t")[0]) in runs_killed, f"unacknowledged message of a clean run: {m}"
        per_run = Counter(_tag(m).split("t")[0] for m in extra)
        assert all(n <= 2 for n in per_run.values()), per_run
        # cursors: window starts at a user message or the first message; summary cursor behind it
        with memory.journal.read() as rx:
            state = rx.state(memory._ns_id)
        if messages:
            first = next(m for m in messages if m.id >= state.window_start)
            assert first.role == "user" or first.id == messages[0].id, (state, first)
            # Nothing evicted yet (a child killed within its first turns) leaves both at 0.
            assert state.summary_cursor < state.window_start or state.window_start == state.summary_cursor == 0, state
            if state.summary_cursor:
                assert state.summary, "a summary cursor without a summary"
        # every evicted message is covered by a turn record (written in the eviction's transaction)
        records = memory.journal.scoped_records([memory._ns_id], ["turn"])
        covered = {i for r in records for i in r.message_ids}
        evicted = {m.id for m in messages if m.id < state.window_start}
        assert evicted <= covered, sorted(evicted - covered)[:5]
        if flush:
            # Rows a killed child had claimed stay leased to it until the lease runs out (another
            # replica cannot tell a dead holder from a slow one); then flush takes them over.
            time.sleep(LEASE_S * 1.2)
            memory.flush()
            stats = memory.stats()
            assert stats.pending_summary_messages == 0
            assert stats.index_pending == 0, "the outbox did not catch up"
            with memory.journal.read() as rx:
                after = rx.state(memory._ns_id)
            assert after.summary_cursor == max(i for i in ids if i < after.window_start) if evicted else True
            if records:
                assert memory.search(records[-1].text.split()[2], k=3), "keyword recall answers after a crash"


def _crash_loop(path: Path, mode: str, kills: int, log: CrashLog, delay: tuple[float, float],
                rng: random.Random, run0: int) -> None:
    killed: set[int] = set()
    for n in range(kills):
        run = run0 + n
        child = Child(path, run, mode)
        assert child.ready.wait(90), "child did not get READY"
        if child.proc.poll() is not None:
            lines, err = child.finish()
            pytest.fail(f"child exited early ({child.proc.returncode}):\n{err[-3000:]}")
        time.sleep(rng.uniform(*delay))
        child.proc.send_signal(signal.SIGKILL)
        lines, err = child.finish()
        assert child.proc.returncode == -signal.SIGKILL, err[-3000:]
        log.kills += 1
        killed.add(run)
        _check_check_line(lines, err, log)
        phases = [line.split()[1] for line in lines if line.startswith("PHASE ")]
        log.phases[phases[-1] if phases else "startup"] += 1
        log.acked += [(int(line.split()[1]), line.split()[2]) for line in lines if line.startswith("ACK ")]
        _verify_journal(path, log, killed, flush=(mode == "kw"))
    if mode != "kw":  # the last kill is checked by one more (verify-only) child
        child = Child(path, run0 + kills, mode, verify_only=True)
        lines, err = child.finish()
        assert child.proc.returncode == 0, err[-3000:]
        _check_check_line(lines, err, log)
        _verify_journal(path, log, killed, flush=False)


def _report(name: str, log: CrashLog, logs: dict) -> None:
    logs[name] = log
    print(f"\n[crash:{name}] kills={log.kills} acknowledged={len(log.acked)} lost=0 "
          f"kill-phases={dict(log.phases)} chroma-reindexed={log.reindexed}")


CRASH_LOGS: dict[str, CrashLog] = {}


def test_crash_keyword_children(tmp_path: Path) -> None:
    log = CrashLog()
    _crash_loop(tmp_path, "kw", 16, log, (0.05, 0.9), random.Random(SEED), run0=1)
    assert log.kills == 16
    assert len(log.acked) > 100
    _report("kw", log, CRASH_LOGS)


@pytest.mark.parametrize(("mode", "seed"), [("chroma", SEED + 1), ("sqlite", SEED + 4)])
def test_crash_children_with_a_vector_store(tmp_path: Path, mode: str, seed: int) -> None:
    """Embedded Chroma, or vectors in SQLite (``embedded_vectors="sqlite"``)."""
    log = CrashLog()
    _crash_loop(tmp_path, mode, 6, log, (0.05, 1.2), random.Random(seed), run0=1)
    assert log.kills == 6
    assert log.acked
    _report(mode, log, CRASH_LOGS)


@pytest.mark.slow
def test_crash_long_run(tmp_path: Path) -> None:
    """The long run: 60 keyword-only and 20 Chroma kills (80 in all)."""
    kw, ch = CrashLog(), CrashLog()
    _crash_loop(tmp_path / "kw", "kw", 60, kw, (0.02, 1.5), random.Random(SEED + 2), run0=1)
    _crash_loop(tmp_path / "chroma", "chroma", 20, ch, (0.02, 1.5), random.Random(SEED + 3), run0=1)
    assert kw.kills + ch.kills >= 50
    _report("slow-kw", kw, CRASH_LOGS)
    _report("slow-chroma", ch, CRASH_LOGS)
