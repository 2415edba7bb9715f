"""PostgreSQL's GIN pending list: what it costs keyword searches, and what updating the index at once costs adds.

    .venv/bin/python benchmarks/postgres_gin_pending.py --records 100000 --adds 25000 --json OUT.json

A GIN index built with ``fastupdate = on`` (PostgreSQL's default) puts new entries in a pending list,
unsorted, merged into the index when the list passes ``gin_pending_list_limit`` (4 MB) or on VACUUM;
meanwhile every search of the index reads the whole list. A journal that takes a message at a time
always has one, between empty and 4 MB. This fills a throwaway PostgreSQL server on 127.0.0.1 with
``--records`` records of scale.py's filler lines (one user, sessions of 100, a fact every 6 turns;
``shared_journal.fill``), vacuums and analyzes it, then for each mode of ``--modes`` in turn (the
records_tsv index altered to it, the list merged by VACUUM first): ``--adds`` one-record adds into a
new session of the user (``--long``: turns of ~108 words, six filler lines, instead of one line of
18), and every ``--search-every`` adds a keyword search over all the user's sessions (scale.py's plain
questions, k = 10), with the pending list's size read after it (``pageinspect``'s
``gin_metapage_info``); then the mode's records are deleted, so each mode starts from the same
journal. A row per mode: add and search p50 / p95 / max ms, the pending list's mean and
largest size in pages (8 kB). Modes run in the order given, so ``on,off,on,off`` alternates them.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.append(str(Path(__file__).resolve().parents[1]))  # tests.support; PYTHONPATH (a before tree) first

from scale import filler_question, line, pct
from shared_journal import fill

from langmem_tiers.journal.base import Namespace, NewRecord
from langmem_tiers.journal.postgres import PostgresJournal


def pending_pages(journal: PostgresJournal) -> int:
    with journal._autocommit() as db:
        return int(db.one("SELECT n_pending_pages FROM gin_metapage_info(get_raw_page('records_tsv', 0))")[0])


def run_mode(journal: PostgresJournal, mode: str, ns_ids: list[int], adds: int, search_every: int,
             long: bool, rng: random.Random, label: str) -> dict[str, Any]:
    with journal._autocommit() as db:
        db.execute(f"ALTER INDEX records_tsv SET (fastupdate = {mode})")
        db.execute("VACUUM records")  # merges the list left by the previous mode
    live = journal.namespace_id(Namespace(f"live-{label}", "user-0")) or 0
    scope = [*ns_ids, live]
    questions = [filler_question(rng, plain=True) for _ in range(64)]
    add_ms, search_ms, pending, added = [], [], [], []
    for i in range(adds):
        text = " ".join(line(rng) for _ in range(6)) if long else line(rng)
        t = time.perf_counter()
        added += journal.add_records(live, [NewRecord("turn", text)])
        add_ms.append((time.perf_counter() - t) * 1000)
        if i % search_every == search_every - 1:
            t = time.perf_counter()
            journal.keyword_search(questions[(i // search_every) % len(questions)], scope, 10)
            search_ms.append((time.perf_counter() - t) * 1000)
            pending.append(pending_pages(journal))
    journal.delete_records(added)  # every mode starts from the same journal
    row = {"fastupdate": mode, "adds": adds, "long_turns": long, "searches": len(search_ms),
           "add_p50_ms": round(statistics.median(add_ms), 3), "add_p95_ms": round(pct(add_ms, 0.95), 3),
           "add_max_ms": round(max(add_ms), 1),
           "search_p50_ms": round(statistics.median(search_ms), 2), "search_p95_ms": round(pct(search_ms, 0.95), 2),
           "search_max_ms": round(max(search_ms), 1),
           "pending_pages_mean": round(statistics.mean(pending), 1), "pending_pages_max": max(pending)}
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--adds", type=int, default=25_000)
    parser.add_argument("--search-every", type=int, default=250)
    parser.add_argument("--modes", default="on,off,on,off", help="fastupdate settings, in order")
    parser.add_argument("--long", action="store_true", help="turns of six filler lines instead of one")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    modes = args.modes.split(",")
    if not set(modes) <= {"on", "off"}:
        parser.error("--modes takes on and off")
    from tests.support.postgres import postgres_server

    with postgres_server() as url:
        journal = PostgresJournal(url)
        try:
            t = time.perf_counter()
            ns_ids = fill(journal, args.records, 1, 100, 6)["user-0"]
            with journal._autocommit() as db:
                db.execute("CREATE EXTENSION IF NOT EXISTS pageinspect")
                db.execute("VACUUM ANALYZE records")
            head = {"records": args.records, "adds": args.adds, "search_every": args.search_every,
                    "long_turns": args.long, "fill_s": round(time.perf_counter() - t, 1)}
            print(json.dumps(head), flush=True)
            rng = random.Random(args.records)
            rows = [run_mode(journal, mode, ns_ids, args.adds, args.search_every, args.long, rng, f"{i}")
                    for i, mode in enumerate(modes)]
        finally:
            journal.close()
    if args.json:
        args.json.write_text(json.dumps({**head, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
