"""SQLite keyword ranking of a scope, streamed or joined, by the scope's share of the journal (issue 15).

    .venv/bin/python benchmarks/keyword_scope.py --records 100000 --sessions 1000 --json OUT.json

A SQLite journal is filled with ``--records`` filler records (scale.py's lines: a small vocabulary, so
a query's words match ~2% of the journal each) in ``--sessions`` sessions of one user, written through
the journal in large transactions; no embedder. Then ``keyword_search`` with the scale benchmark's
questions (k = 58, what ``context()`` asks at this size) over three scopes: every session (the
user's scope when one user holds the journal), a tenth of them, one. Each scope is timed with each way
of ranking forced (``SqliteJournal._ranked_streamed``, ``_ranked_joined``) and with the journal's own
choice, in rotated order over ``--rounds`` rounds, and the hits of the two ways are compared (they must
be equal). Not a timed test: the figures go to BENCHMARKS.md with this command.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale import filler_question, line

from langmem_tiers.journal.base import Namespace, NewRecord
from langmem_tiers.journal.sqlite import SqliteJournal

WAYS = ("streamed", "joined", "chosen")


def fill(journal: SqliteJournal, records: int, sessions: int, rng: random.Random) -> list[int]:
    per = max(records // sessions, 1)
    ns_ids = []
    for s in range(sessions):
        ns_id = journal.namespace_id(Namespace(f"s{s}", "u")) or 0
        journal.add_records(ns_id, [NewRecord("turn", line(rng), created_at=1000.0 + s * per + i) for i in range(per)])
        ns_ids.append(ns_id)
    return ns_ids


def timed(journal: SqliteJournal, way: str, queries: list[str], ns_ids: list[int],
          k: int) -> tuple[list[float], list[list[int]]]:
    chosen = SqliteJournal.__dict__["_ranking"]
    if way != "chosen":
        forced = getattr(SqliteJournal, f"_ranked_{way}")
        SqliteJournal._ranking = staticmethod(lambda db, ns_ids, kinds=None: forced)  # type: ignore[method-assign]
    try:
        took, hits = [], []
        for q in queries:
            t = time.perf_counter()
            found = journal.keyword_search(q, ns_ids, k)
            took.append((time.perf_counter() - t) * 1000)
            hits.append([h.record_id for h in found])
        return took, hits
    finally:
        SqliteJournal._ranking = chosen  # type: ignore[method-assign]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--sessions", type=int, default=1_000)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--k", type=int, default=58)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    rng = random.Random(args.records)
    folder = Path(tempfile.mkdtemp(prefix="lt-keyword-scope-"))
    journal = SqliteJournal(folder / "journal.sqlite3")
    try:
        t = time.perf_counter()
        ns_ids = fill(journal, args.records, args.sessions, rng)
        fill_s = round(time.perf_counter() - t, 1)
        print(json.dumps({"records": args.records, "sessions": args.sessions, "fill_s": fill_s}))
        queries = [filler_question(rng) for _ in range(args.queries)]
        scopes = {"every session": ns_ids, "a tenth of the sessions": ns_ids[: max(len(ns_ids) // 10, 1)],
                  "one session": ns_ids[:1]}
        rows: list[dict[str, Any]] = []
        for label, scope in scopes.items():
            took: dict[str, list[float]] = {w: [] for w in WAYS}
            hits: dict[str, list[list[int]]] = {}
            for r in range(args.rounds):
                for way in WAYS[r % 3:] + WAYS[:r % 3]:
                    ms, found = timed(journal, way, queries, scope, args.k)
                    took[way] += ms
                    hits[way] = found
            row = {"scope": label, "sessions": len(scope), "share_of_sessions": round(len(scope) / len(ns_ids), 3),
                   "same_hits": hits["streamed"] == hits["joined"] == hits["chosen"],
                   **{f"{w}_ms_p50": round(statistics.median(v), 2) for w, v in took.items()}}
            rows.append(row)
            print(json.dumps(row), flush=True)
        if args.json:
            args.json.write_text(json.dumps({"records": args.records, "sessions": args.sessions, "k": args.k,
                                             "rows": rows}, indent=2))
    finally:
        journal.close()


if __name__ == "__main__":
    main()
