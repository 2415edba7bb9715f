"""Load benchmark: many sessions written by threads while other threads query.

Writes ``--messages`` messages (user/assistant pairs) across ``--sessions`` sessions on one
SQLite journal, from ``--writers`` threads, while ``--readers`` threads run ``search`` and
``context`` on random sessions. Reports throughput, query latency, errors and memory (RSS
and its peak, from /proc/self/status, sampled during the run), then checks that every
acknowledged message is in the journal exactly once.

Quick run (defaults):        python benchmarks/load.py
The issue's figures:         python benchmarks/load.py --messages 100000 --sessions 1000

Not part of the test suite (``tests/reliability/test_rel_load_smoke.py`` runs a tiny version).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from timing import rss_kib

WORDS = ("copper harbor violet ledger quantum meadow river engine signal apple orbit glacier "
         "lantern falcon prism canyon velvet summit ember willow").split()


def build(path: Path, sessions: int, counter_name: str, window_tokens: int) -> tuple[Any, list[Any]]:
    from langmem_tiers import MemoryConfig, TieredMemory, TiktokenCounter, WordCounter
    from langmem_tiers.journal.base import Namespace
    from langmem_tiers.journal.sqlite import SqliteJournal
    from langmem_tiers.recall.engine import RecallIndex

    config = MemoryConfig(context_tokens=window_tokens * 3, window_tokens=window_tokens,
                          summary_tokens=window_tokens // 4, recall_tokens=window_tokens // 2)
    counter = WordCounter() if counter_name == "words" else TiktokenCounter.for_model(None)
    journal = SqliteJournal(path / "journal.sqlite3")
    recall = RecallIndex(journal, None, None)  # keyword recall; one journal shared by every session
    memories = [TieredMemory(journal, Namespace.of(f"s{i}", f"u{i % max(sessions // 10, 1)}"), config=config,
                             counter=counter, recall=recall, owns_journal=False) for i in range(sessions)]
    return journal, memories


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=5000, help="messages to write (default 5000)")
    parser.add_argument("--sessions", type=int, default=50, help="sessions (default 50)")
    parser.add_argument("--writers", type=int, default=4, help="writer threads (default 4)")
    parser.add_argument("--readers", type=int, default=2, help="query threads (default 2)")
    parser.add_argument("--counter", choices=("tiktoken", "words"), default="tiktoken")
    parser.add_argument("--window-tokens", type=int, default=300)
    parser.add_argument("--path", type=Path, default=None, help="folder for the journal (default: a temp dir)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.messages < 2 or args.sessions < 1 or args.writers < 1 or args.readers < 0:
        parser.error("need --messages >= 2, --sessions >= 1, --writers >= 1, --readers >= 0")

    tmp = None
    if args.path is None:
        tmp = tempfile.TemporaryDirectory(prefix="langmem-load-")
        args.path = Path(tmp.name)
    args.path.mkdir(parents=True, exist_ok=True)
    rss_start, _ = rss_kib()
    journal, memories = build(args.path, args.sessions, args.counter, args.window_tokens)

    pairs = args.messages // 2
    acked: list[list[int]] = [[] for _ in memories]
    errors: list[str] = []
    latencies: list[float] = []
    queries = [0]
    done = threading.Event()
    rss_samples: list[int] = []
    lock = threading.Lock()

    def writer(w: int) -> None:
        rng = random.Random(args.seed * 100 + w)
        mine = [i for i in range(args.sessions) if i % args.writers == w]
        share = pairs // args.writers + (1 if w < pairs % args.writers else 0)
        for n in range(share):
            i = mine[n % len(mine)] if mine else w % args.sessions
            words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 16)))
            try:
                stored = memories[i].add_messages([
                    {"role": "user", "content": f"w{w} n{n} tell me about {words}"},
                    {"role": "assistant", "content": f"Here is what I know about {words}."},
                ])
                with lock:
                    acked[i] += [m.id for m in stored]
            except Exception as e:
                errors.append(f"write: {type(e).__name__}: {e}")

    def reader(r: int) -> None:
        rng = random.Random(args.seed * 1000 + r)
        while not done.is_set():
            memory = memories[rng.randrange(len(memories))]
            start = time.perf_counter()
            try:
                if rng.random() < 0.5:
                    memory.search(" ".join(rng.sample(WORDS, 2)), k=5, scope=rng.choice(["session", "user"]))
                else:
                    memory.context()
            except Exception as e:
                errors.append(f"query: {type(e).__name__}: {e}")
            latencies.append(time.perf_counter() - start)
            queries[0] += 1

    def sampler() -> None:
        while not done.wait(0.5):
            rss_samples.append(rss_kib()[0])

    started = time.perf_counter()
    writers = [threading.Thread(target=writer, args=(w,)) for w in range(args.writers)]
    readers = [threading.Thread(target=reader, args=(r,)) for r in range(args.readers)]
    watch = threading.Thread(target=sampler)
    for t in (*writers, *readers, watch):
        t.start()
    for t in writers:
        t.join()
    write_s = time.perf_counter() - started
    done.set()
    for t in (*readers, watch):
        t.join()

    # every acknowledged message present exactly once, per-session order as acknowledged
    lost = dupes = 0
    for memory, ids in zip(memories, acked):
        stored = [m.id for m in memory.messages()]
        dupes += len(stored) - len(set(stored))
        have = set(stored)
        lost += sum(1 for i in ids if i not in have)
        if [i for i in stored if i in set(ids)] != sorted(ids):
            errors.append(f"order broken in {memory.namespace.session_id}")
    integrity = journal.integrity_check()
    total = journal.count_messages()
    rss_end, rss_peak = rss_kib()
    lat = sorted(latencies) or [0.0]

    def pct(p: float) -> float:
        return lat[min(int(p * len(lat)), len(lat) - 1)] * 1000

    print("langmem-tiers load benchmark")
    print(f"  messages written   {total} ({sum(map(len, acked))} acknowledged) in {args.sessions} sessions, "
          f"{args.writers} writer threads, {args.readers} query threads, counter={args.counter}")
    print(f"  write time         {write_s:.1f} s ({total / write_s:.0f} messages/s)")
    print(f"  queries            {queries[0]} (search/context), latency ms: "
          f"median {statistics.median(lat) * 1000:.1f}, "
          f"p95 {pct(0.95):.1f}, p99 {pct(0.99):.1f}, max {lat[-1] * 1000:.1f}")
    print(f"  memory (RSS)       start {rss_start / 1024:.0f} MiB, end {rss_end / 1024:.0f} MiB, "
          f"peak {rss_peak / 1024:.0f} MiB, max sampled {max(rss_samples or [rss_end]) / 1024:.0f} MiB")
    print(f"  journal            {(args.path / 'journal.sqlite3').stat().st_size / 2**20:.1f} MiB, "
          f"integrity {integrity}")
    print(f"  lost {lost}, duplicates {dupes}, errors {len(errors)}")
    for e in errors[:10]:
        print("   ", e)
    for m in memories:
        m.close()
    journal.close()
    if tmp is not None:
        tmp.cleanup()
    ok = not errors and lost == 0 and dupes == 0 and integrity == "ok" and total == sum(map(len, acked))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
