"""Three replicas on one PostgreSQL journal and one Chroma server: add, search, forget, get killed.

Three processes (``replica_worker.py``) each serve five users, adding keyed messages (every fifth
add is sent twice, as after a lost answer), searching, and two of them ``forget("user")`` a user
the others keep writing to. Replica 1 is SIGKILLed mid-run and restarted; it re-sends the adds it
never saw acknowledged, with the same keys. Afterwards the journal and the Chroma collection are
read directly and the figures printed on one line:

* acknowledged: distinct message keys whose add returned;
* lost: acknowledged, not erased by a forget, and absent from the journal;
* duplicated: a key (or its text) stored more than once;
* indexed twice: vector ids upserted more than once (each replica logs every id it upserted), besides
  the killed replica's last batches, which it may have upserted but not acknowledged (counted apart);
* resurrected: a journal row, summary or vector of data a forget erased (acknowledged before
  that forget started), or a vector whose record is gone;
* foreign: search or context hits of another user.

Goal: 0 for all but acknowledged. The embedder is a deterministic 16-d hashing embedder
(``workers.hashed_embedder``): the model is not under test, and three model loads would dominate.

Run: ``.venv/bin/python -m pytest tests/reliability/test_rel_replicas.py -q -s``
"""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.replica_worker import LEASE_S, TURNS, USERS, key_of, open_memories, open_store, read_events
from tests.support.chroma_server import chroma_server, unique_collection

pytest.importorskip("chromadb")

REPLICAS = 3
KILLED = 1
KILL_AFTER_ACKS = 12
START_TIMEOUT_S = 120.0
ROOT = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("replica_worker.py")


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    from tests.support.postgres import postgres_url

    with postgres_url() as url:
        yield url


@pytest.fixture(scope="module")
def chroma_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with chroma_server(tmp_path_factory.mktemp("chroma-replicas")) as (host, port):
        yield f"http://{host}:{port}"


def _spawn(replica: int, pg_url: str, chroma_url: str, collection: str, out: Path, resume: bool = False
           ) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "ANONYMIZED_TELEMETRY": "False", "OMP_NUM_THREADS": "1"}
    args = [sys.executable, str(WORKER), str(replica), pg_url, chroma_url, collection, str(out)]
    # The worker writes its own copy of the log descriptor; the parent's is closed once it has started.
    with open(out / f"worker-{replica}{'-resumed' if resume else ''}.log", "ab") as log:
        return subprocess.Popen([*args, "--resume"] if resume else args, cwd=ROOT, env=env, stdout=log,
                                stderr=subprocess.STDOUT)


def _logs(out: Path) -> str:
    return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in sorted(out.glob("worker-*.log")))


def _acks(out: Path, replica: int) -> int:
    return sum(1 for e in read_events(out / f"events-{replica}.jsonl") if e.get("ev") == "ack")


def _last_event(out: Path, replica: int) -> str | None:
    path = out / f"events-{replica}.jsonl"
    with open(path, "rb") as f:
        f.seek(max(0, path.stat().st_size - 400))
        lines = f.read().splitlines()
    try:
        return str(json.loads(lines[-1])["ev"]) if lines else None
    except (json.JSONDecodeError, KeyError):
        return None


def _run_replicas(pg_url: str, chroma_url: str, collection: str, out: Path) -> dict[str, Any]:
    procs = {r: _spawn(r, pg_url, chroma_url, collection, out) for r in range(REPLICAS)}
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not all((out / f"ready-{r}").exists() for r in range(REPLICAS)):
            dead = [r for r, p in procs.items() if p.poll() is not None]
            assert not dead, f"replicas {dead} exited before the start\n{_logs(out)}"
            assert time.monotonic() < deadline, "replicas did not start\n" + _logs(out)
            time.sleep(0.05)
        (out / "go").touch()
        while _acks(out, KILLED) < KILL_AFTER_ACKS:
            assert procs[KILLED].poll() is None, "the replica to kill finished first\n" + _logs(out)
            assert time.monotonic() < deadline + START_TIMEOUT_S, "the replica to kill stalled\n" + _logs(out)
            time.sleep(0.01)
        # Kill inside an add (its intent logged, its answer not yet): the case a retry by key must cover.
        aim = time.monotonic() + 10
        while _last_event(out, KILLED) != "intent" and time.monotonic() < aim:
            assert procs[KILLED].poll() is None, "the replica to kill finished first\n" + _logs(out)
            time.sleep(0.0005)
        killed_pid = procs[KILLED].pid
        procs[KILLED].send_signal(signal.SIGKILL)
        procs[KILLED].wait(30)
        killed_at = _acks(out, KILLED)
        procs[KILLED] = _spawn(KILLED, pg_url, chroma_url, collection, out, resume=True)
        for r, p in procs.items():
            assert p.wait(START_TIMEOUT_S) == 0, f"replica {r} failed\n{_logs(out)}"
        return {"killed_after_acks": killed_at, "killed_pid": killed_pid}
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait(10)


def _drain_leftovers(pg_url: str, chroma_url: str, collection: str, out: Path) -> None:
    """Index what a killed replica had claimed: wait out its lease, then flush from a fresh handle."""
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        left = conn.execute("SELECT coalesce(max(claimed_until - extract(epoch from clock_timestamp())), 0) "
                            "FROM langmem_tiers.outbox").fetchone()
    wait = float(left[0]) if left else 0.0
    if wait > 0:
        time.sleep(min(wait, LEASE_S) + 0.2)
    store = open_store(chroma_url, collection, out / "upserts-verify.jsonl")
    memories = open_memories(pg_url, store, replica=99)
    try:
        for memory in memories.values():
            memory.flush()
    finally:
        for memory in memories.values():
            memory.close()
        store.close()


def _journal(pg_url: str) -> dict[str, Any]:
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        messages = conn.execute("SELECT n.user_id, m.key, m.content FROM langmem_tiers.messages m "
                                "JOIN langmem_tiers.namespaces n ON n.ns = m.ns").fetchall()
        records = conn.execute("SELECT id, ns FROM langmem_tiers.records").fetchall()
        namespaces = {int(r[0]) for r in conn.execute("SELECT ns FROM langmem_tiers.namespaces").fetchall()}
        texts = [str(r[0]) for table in ("messages", "records", "state", "outbox")
                 for r in conn.execute(f"SELECT x::text FROM langmem_tiers.{table} x").fetchall()]
    return {"messages": messages, "records": {int(r[0]): int(r[1]) for r in records}, "namespaces": namespaces,
            "texts": texts}


def _upserts(out: Path) -> list[dict[str, Any]]:
    """Every logged upsert ({"ids", "pid"}), over every replica's log (and the final drain's), in log order."""
    lines = []
    for path in sorted(out.glob("upserts-*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                lines.append(json.loads(line))
            except json.JSONDecodeError:  # a line cut by the kill: that upsert's ids are not counted
                continue
    return lines


def _in_flight_at_kill(upserts: list[dict[str, Any]], killed_pid: int) -> set[str]:
    """Ids the killed process upserted but may not have acknowledged in the outbox before SIGKILL.

    Upsert and acknowledgement are two systems, so a kill between them leaves the claim to expire and
    another replica indexes those ids again: at-least-once by design, and harmless (an upsert by id).
    Each of its memories (one per user) indexes one batch at a time, so only its last batch per memory
    can be in that gap: the ids of its last ``len(USERS)`` upserts.
    """
    own = [u for u in upserts if u.get("pid") == killed_pid]
    return {i for u in own[-len(USERS):] for i in u["ids"]}


def _vectors(chroma_url: str, collection: str) -> list[tuple[str, dict[str, Any]]]:
    store = open_store(chroma_url, collection, Path(os.devnull))
    try:
        got = store._collection.get(include=["metadatas"])
        return list(zip(got["ids"], got["metadatas"]))
    finally:
        store.close()


@pytest.mark.server
def test_three_replicas_lose_duplicate_and_resurrect_nothing(pg_url: str, chroma_url: str, tmp_path: Path) -> None:
    collection = unique_collection("replicas")
    started = time.monotonic()
    run = _run_replicas(pg_url, chroma_url, collection, tmp_path)
    _drain_leftovers(pg_url, chroma_url, collection, tmp_path)

    events = {r: read_events(tmp_path / f"events-{r}.jsonl") for r in range(REPLICAS)}
    acks = {e["key"]: e for evs in events.values() for e in evs if e.get("ev") == "ack"}
    forgets = {e["user"]: e for evs in events.values() for e in evs if e.get("ev") == "forgot"}
    assert set(forgets) == {"dee", "eve"}
    resent = sum(len(e["pending"]) for e in events[KILLED] if e.get("ev") == "resumed")
    retried = [e for e in acks.values() if e.get("retried")]

    journal = _journal(pg_url)
    stored_keys = collections.Counter(k for _, k, _ in journal["messages"] if k)
    by_text = collections.Counter(str(c).split()[0].strip('"') for _, _, c in journal["messages"])
    must_exist, must_be_gone = [], []
    for key, ack in acks.items():
        forgot = forgets.get(ack["user"])
        if forgot is None or ack["t0"] > forgot["t1"]:
            must_exist.append(key)  # no forget touched it
        elif ack["t1"] < forgot["t0"]:
            must_be_gone.append(key)  # acknowledged before the forget began: erased for good
        # else: the add overlapped the forget, either outcome is right
    lost = [k for k in must_exist if stored_keys[k] == 0]
    duplicated = [k for k, n in stored_keys.items() if n > 1] + [k for k, n in by_text.items() if n > 1]
    resurrected_rows = [k for k in must_be_gone if any(k in t for t in journal["texts"])]

    upserts = _upserts(tmp_path)
    upserted = collections.Counter(i for u in upserts for i in u["ids"])
    in_flight = _in_flight_at_kill(upserts, run["killed_pid"])
    reindexed_after_kill = [i for i, n in upserted.items() if n > 1 and i in in_flight]
    indexed_twice = [i for i, n in upserted.items() if n - (i in in_flight) > 1]
    vectors = _vectors(chroma_url, collection)
    orphan_vectors = [i for i, meta in vectors
                      if meta.get("record_id") not in journal["records"]
                      or meta.get("ns") not in journal["namespaces"]]
    unindexed = len(set(journal["records"]) - {meta.get("record_id") for _, meta in vectors})
    foreign = sum(e["foreign"] for evs in events.values() for e in evs if e.get("ev") == "search")
    searches = sum(1 for evs in events.values() for e in evs if e.get("ev") == "search")
    retry_changed_id = [e["key"] for e in retried if not e["same_id"]]
    elapsed = time.monotonic() - started

    line = (f"three replicas (PostgreSQL + chroma run, hashing embedder, replica {KILLED} SIGKILLed after "
            f"{run['killed_after_acks']} acks and restarted, {resent} unacknowledged adds re-sent, {len(retried)} "
            f"lost answers re-sent, {len(forgets)} users forgotten, {searches} searches): acknowledged "
            f"{len(acks)} ({len(must_be_gone)} of them erased by a forget), lost {len(lost)}, "
            f"duplicated {len(duplicated)}, indexed twice {len(indexed_twice)} (besides {len(reindexed_after_kill)} "
            f"in flight at the kill, indexed again after its lease), "
            f"resurrected {len(resurrected_rows) + len(orphan_vectors)} (rows {len(resurrected_rows)}, vectors "
            f"{len(orphan_vectors)}), foreign hits {foreign}, unindexed {unindexed}; {elapsed:.0f} s")
    print(f"\n[replicas] {line}")
    assert len(acks) == REPLICAS * TURNS * 2, "every scripted add must be acknowledged"
    assert must_be_gone, "the script must erase acknowledged data"
    assert set(must_exist) <= set(by_text), "every stored text starts with its key (the duplicate check reads it)"
    assert not lost, f"lost: {lost}"
    assert not duplicated, f"duplicated: {duplicated}"
    assert not indexed_twice, f"indexed twice: {indexed_twice[:10]}"
    assert not resurrected_rows, f"resurrected rows: {resurrected_rows}"
    assert not orphan_vectors, f"vectors of erased records: {orphan_vectors[:10]}"
    assert foreign == 0
    assert unindexed == 0, "every record has its vector once the leases ran out"
    assert not retry_changed_id or all(acks[k]["user"] in forgets for k in retry_changed_id)
    assert {key_of(KILLED, 0, "user"), key_of(KILLED, TURNS - 1, "assistant")} <= set(acks)
    assert set(USERS) >= {a["user"] for a in acks.values()}
