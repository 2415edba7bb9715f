"""What a deleted record costs the next keyword search of a large scope whose postings are held (PostgreSQL).

    .venv/bin/python benchmarks/held_postings_deletes.py --records 100000 --sessions 1000 --json OUT.json

PostgreSQL ranks a scope past 20,000 records in the process, from postings it holds
(``journal.postgres_postings``) and brings up to date before each search. An agent with working memory
replaces a record at every set (the old value's record is deleted), as do ``forget()`` and expiry. This
fills one user's ``--records`` records (synthetic text: ``keyword_postings.py``'s Zipf words) in
``--sessions`` sessions on a throwaway server, builds the user scope's postings, then alternates rounds in
the newest session: a record added and, in the ``delete`` rounds, the record added before it deleted, each
followed by a user-scope ``keyword_search(k=10)``, timed (the search applies what changed). ``add`` rounds
are the same with nothing deleted. p50 / p95 ms of each, and the held postings' stats at the end.

Up to session 64 a deletion made the next search read the session again whole and pack every posting
(0.3-0.4 s at 1M rows); from session 65 it reads the session's record ids and unlinks the rows gone
(``Postings.drop``). Not a timed test.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.append(str(Path(__file__).resolve().parents[1]))

from keyword_postings import words
from scale import pct

from langmem_tiers.journal.base import Namespace, NewRecord
from langmem_tiers.journal.postgres import PostgresJournal
from tests.support.postgres import postgres_server

VOCAB = 50_000
WORDS_PER_RECORD = 14


def text(rng: np.random.Generator) -> str:
    return " ".join(words(rng, WORDS_PER_RECORD, VOCAB))


def run(url: str, records: int, sessions: int, rounds: int, seed: int, postings_mb: int | None) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    journal = PostgresJournal(url, schema=f"deletes_{uuid.uuid4().hex[:12]}")
    if postings_mb is not None:
        journal.keyword_postings.max_bytes = postings_mb * 2**20
    try:
        ns_ids = [int(journal.namespace_id(Namespace(f"s{i}", "u"))) for i in range(sessions)]  # type: ignore[arg-type]
        started = time.perf_counter()
        per = records // sessions
        for ns_id in ns_ids:
            journal.add_records(ns_id, [NewRecord("turn", text(rng)) for _ in range(per)])
        fill_s = time.perf_counter() - started
        # The commonest words: over the keyword budget, so the search asks for the scope's postings.
        journal.keyword_search(" ".join(f"w{r}" for r in range(21, 25)), ns_ids, 10)
        journal.keyword_postings.wait_build()
        built = journal.keyword_postings.stats()
        if not built["entries"]:
            raise SystemExit(f"the scope's postings were not built: {built}")
        live = ns_ids[-1]
        (previous,) = journal.add_records(live, [NewRecord("turn", text(rng))])
        timings: dict[str, list[float]] = {"add": [], "delete": []}
        for i in range(2 * rounds):
            kind = "delete" if i % 2 else "add"
            (added,) = journal.add_records(live, [NewRecord("turn", text(rng))])
            if kind == "delete":
                journal.delete_records([previous])
            previous = added
            query = " ".join(words(rng, int(rng.integers(2, 5)), VOCAB))
            t = time.perf_counter()
            journal.keyword_search(query, ns_ids, 10)
            timings[kind].append((time.perf_counter() - t) * 1000)
        row: dict[str, Any] = {"records": records, "sessions": sessions, "rounds": rounds,
                               "fill_s": round(fill_s, 1), "held_at_build": built,
                               "held_at_end": journal.keyword_postings.stats()}
        for kind, ms in timings.items():
            row[f"{kind}_search_ms_p50"] = round(pct(ms[5:], 0.5), 2)  # the first few: the process warming
            row[f"{kind}_search_ms_p95"] = round(pct(ms[5:], 0.95), 2)
        return row
    finally:
        journal.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--sessions", type=int, default=1_000)
    ap.add_argument("--rounds", type=int, default=100, help="rounds of each kind (add, delete), alternated")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--postings-mb", type=int, default=None,
                    help="the held postings' byte bound (default: the journal's); a tree before a93a889 declined "
                         "1M records' build under the default (its projection scaled the vocabulary)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    with postgres_server() as url:
        row = run(url, args.records, args.sessions, args.rounds, args.seed, args.postings_mb)
    row["command"] = " ".join(["benchmarks/held_postings_deletes.py", *sys.argv[1:]])
    print(json.dumps(row))
    if args.json:
        args.json.write_text(json.dumps(row, indent=1) + "\n")


if __name__ == "__main__":
    main()
