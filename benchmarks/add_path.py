"""The add path's and context()'s cost as one user's history grows through the API (issue 15: flat in
history length), extracted memories included.

    .venv/bin/python benchmarks/add_path.py --messages 50000 --block 5000 --json OUT

One user writes short chat lines (the ingest benchmark's, in sessions of 100 messages) through the
public API: ``add()`` per message and ``flush()`` per session, keyword-only recall (``embedder=False``)
so that the embedder's cost, measured by ``ingest.py``, does not hide the add path's. The offline
summarizer folds evicted turns and extracts memories from them, as by default. Per block of
``--block`` messages it reports the wall seconds, the process's CPU seconds (every thread: the
background summary worker too) and the user's current memories at the block's end; then it times
``--queries`` calls of ``context(question)`` in a new session of the user (``recall_scope="user"``:
the profile and recall reach every session), each question two filler words, and reports their p50
and p95. A flat path costs the same per block however many messages came before. (The scale benchmark
fills its history with turn records only, without the memories extracted here.)
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ingest import chat_sessions
from scale import filler_question, pct

from langmem_tiers import MemoryConfig, TieredMemory


def context_ms(root: TieredMemory, queries: int, rng: random.Random) -> list[float]:
    """``context(question)`` times, in ms, in a fresh session of the user."""
    out = []
    with root.for_session(f"ask-{rng.random()}", user_id="u") as memory:
        memory.add("user", "Hello again.")
        for _ in range(queries):
            question = filler_question(rng)
            t = time.perf_counter()
            memory.context(question)
            out.append((time.perf_counter() - t) * 1000)
        memory.clear()  # erase the question session: the next block's history is the writes alone
    return out


def run(messages: int, block: int, queries: int) -> list[dict[str, float]]:
    rows: list[dict[str, float]] = []
    rng = random.Random(51)
    sessions = chat_sessions(messages)
    with tempfile.TemporaryDirectory(prefix="lt-add-path-") as folder:
        config = MemoryConfig(recall_scope="user")
        with TieredMemory.open(folder, session_id="setup", user_id="u", config=config, embedder=False) as root:
            wall, cpu, written = time.perf_counter(), time.process_time(), 0
            for i, session in enumerate(sessions):
                memory = root.for_session(f"s{i}", user_id="u")
                for role, text in session:
                    memory.add(role, text)
                memory.flush()
                memory.close()
                written += len(session)
                if written % block == 0 or i == len(sessions) - 1:
                    now_wall, now_cpu = time.perf_counter(), time.process_time()
                    memories = len(root.facts())  # the user's current memories, every session's
                    times = context_ms(root, queries, rng)
                    rows.append({"messages": written, "wall_s": round(now_wall - wall, 3),
                                 "cpu_s": round(now_cpu - cpu, 3), "current_memories": memories,
                                 "context_p50_ms": round(pct(times, 0.5), 2),
                                 "context_p95_ms": round(pct(times, 0.95), 2)})
                    print(json.dumps(rows[-1]), flush=True)
                    wall, cpu = time.perf_counter(), time.process_time()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--block", type=int, default=5_000, help="messages per reported block (a multiple of 100)")
    parser.add_argument("--queries", type=int, default=30, help="context() calls timed after each block")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    rows = run(args.messages, args.block, args.queries)
    if args.json:
        args.json.write_text(json.dumps({"messages": args.messages, "block": args.block, "machine": platform.machine(),
                                         "python": platform.python_version(), "blocks": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
