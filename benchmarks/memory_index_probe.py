"""The profile's keyword search of facts through each of SQLite's keyword indexes, on a fill of scale.py.

    .venv/bin/python benchmarks/memory_index_probe.py --reuse FOLDER [--questions 60 --rounds 2]

``FOLDER`` is a folder ``benchmarks/scale.py`` filled (its printed ``folder``), e.g. with ``--sizes
1000000 --layout many-sessions --memories-every 6``. Each round times the search ``context()`` makes for
its profile (``keyword_search(question, every session, PROFILE_MATCHES, PROFILE_KINDS)``) over the same
questions of filler words, first through the memories' own index (schema v13), then through every
record's index as before it (the search made to pick ``records_fts`` for memories too). Over the keyword
budget the two differ; within it both rank every record's index. ``--budget`` lowers the budget to try the
script on a small fill.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale import filler_question

from langmem_tiers.journal import sqlite
from langmem_tiers.journal.keyword_budget import KEYWORD_BUDGET
from langmem_tiers.memory.context_flow import PROFILE_MATCHES
from langmem_tiers.semantic.profile import PROFILE_KINDS


def timed(search: Callable[[str], int], questions: list[str]) -> dict[str, float]:
    ms, hits = [], []
    for question in questions:
        start = time.perf_counter()
        hits.append(search(question))
        ms.append((time.perf_counter() - start) * 1000)
    return {"p50_ms": round(statistics.median(ms), 2), "mean_hits": round(statistics.mean(hits), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reuse", type=Path, required=True, metavar="FOLDER", help="a folder scale.py filled")
    parser.add_argument("--questions", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--budget", type=int, default=KEYWORD_BUDGET)
    args = parser.parse_args()
    journal = sqlite.SqliteJournal(args.reuse / "journal.sqlite3")
    journal.keyword_budget = args.budget
    ns_ids = [int(r[0]) for r in journal._sql.all("SELECT ns FROM namespaces")]
    facts = int(journal._sql.one("SELECT count(*) FROM records WHERE kind <> 'turn'")[0])
    rng = random.Random(7)
    questions = [filler_question(rng, plain=True) for _ in range(args.questions)]

    def search(question: str) -> int:
        return len(journal.keyword_search(question, ns_ids, PROFILE_MATCHES, list(PROFILE_KINDS)))

    memory_index = sqlite.MEMORY_INDEX
    print(json.dumps({"sessions": len(ns_ids), "memories": facts, "budget": args.budget}))
    try:
        for round_no in range(args.rounds):
            row = {"round": round_no, "memory_index": timed(search, questions)}
            sqlite.MEMORY_INDEX = sqlite.RECORDS_INDEX  # as before schema v13: every record's index
            try:
                row["every_record_index"] = timed(search, questions)
            finally:
                sqlite.MEMORY_INDEX = memory_index
            print(json.dumps(row), flush=True)
    finally:
        journal.close()


if __name__ == "__main__":
    main()
