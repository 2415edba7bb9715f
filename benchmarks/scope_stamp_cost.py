"""What a user's scope stamp and a keyword search's scope count cost, and what schema v11's triggers add to a
write (issue 15's fifteenth step; not a timed test).

    .venv/bin/python benchmarks/scope_stamp_cost.py --reads FOLDER [--rounds 30]
    .venv/bin/python benchmarks/scope_stamp_cost.py --writes [--rounds 10]

``--reads FOLDER``: a folder ``benchmarks/scale.py`` filled (copy it first: opening it migrates an older
journal), its live user's scope (scale.py's ``LIVE_USER``). Median ms over ``--rounds`` reads, warm:
- the stamp as the aggregate over the user's namespaces rows (``_STAMP``: PostgreSQL's read, and SQLite's
  before schema v11) against the row the triggers keep (``_KEPT_STAMP``);
- the scope count a keyword search makes (``sql_core.scope_size``, the namespaces bound in growing
  chunks) against one statement binding every namespace at once (the count before the chunks), capped
  at the keyword budget + 1 alike;
- the scope's listing read whole, as after a delete or a pin anywhere in the scope (``Journal.scope_listing``
  with its kept listings dropped: every namespaces row, and what each holds, one index probe a thing).

``--writes``: CPU and wall microseconds per single-record ``add_records`` into two fresh journals of
1,000 sessions, one as schema v11 makes it and one with its stamp triggers and index dropped; 200
writes per round, the two journals alternating first, ``--rounds`` rounds, medians.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale import LIVE_USER

from langmem_tiers.journal.base import Namespace, NewRecord, Scope
from langmem_tiers.journal.keyword_budget import KEYWORD_BUDGET
from langmem_tiers.journal.sql_core import Sql, scope_size
from langmem_tiers.journal.sql_journal import _KEPT_STAMP, _STAMP, ListingCache
from langmem_tiers.journal.sqlite import SqliteJournal

V11_OBJECTS = ("TRIGGER namespaces_stamp_ai", "TRIGGER namespaces_stamp_ad", "TRIGGER namespaces_stamp_au",
               "TRIGGER namespaces_keep_group", "INDEX namespaces_growth")
WRITES_PER_ROUND = 200


def one_statement_count(db: Sql, ns_ids: list[int], cap: int) -> int:
    """The scope count as it was before the chunks: every namespace bound in one statement."""
    members, args = db.in_(ns_ids)
    return int(db.one(f"SELECT count(*) FROM (SELECT 1 FROM records WHERE ns {members} LIMIT ?) s", [*args, cap])[0])


def median_ms(journal: SqliteJournal, read: Callable[[Sql], Any], rounds: int) -> float:
    with journal._autocommit() as db:
        read(db)  # warm
        took = []
        for _ in range(rounds):
            start = time.perf_counter()
            read(db)
            took.append((time.perf_counter() - start) * 1000)
    return round(statistics.median(took), 3)


def whole_listing_ms(journal: SqliteJournal, rounds: int) -> float:
    """Median ms of the live user's scope listing read from scratch (no kept listing to grow from)."""
    with journal._autocommit() as db:
        session = str(db.one("SELECT session_id FROM namespaces WHERE user_id=? LIMIT 1", (LIVE_USER,))[0])
    scope = Scope("user", Namespace(session, LIVE_USER))
    took = []
    for _ in range(rounds + 1):  # the first warms
        journal._listings = ListingCache()
        start = time.perf_counter()
        journal.scope_listing(scope)
        took.append((time.perf_counter() - start) * 1000)
    return round(statistics.median(took[1:]), 3)


def reads(folder: Path, rounds: int) -> None:
    journal = SqliteJournal(folder / "journal.sqlite3")
    try:
        with journal._autocommit() as db:
            ids = [int(r[0]) for r in db.all("SELECT ns FROM namespaces WHERE user_id=? ORDER BY ns", (LIVE_USER,))]
        where, args = " WHERE user_id=?", (LIVE_USER,)
        cap = KEYWORD_BUDGET + 1
        print({"namespaces": len(ids),
               "stamp_aggregate_ms": median_ms(journal, lambda db: db.one(f"{_STAMP}{where}", args), rounds),
               "stamp_kept_row_ms": median_ms(journal, lambda db: db.one(f"{_KEPT_STAMP}{where}", args), rounds),
               "scope_count_one_statement_ms": median_ms(journal, lambda db: one_statement_count(db, ids, cap), rounds),
               "scope_count_chunks_ms": median_ms(journal, lambda db: scope_size(db, ids, None, cap), rounds),
               "listing_whole_ms": whole_listing_ms(journal, rounds)})
    finally:
        journal.close()


def writes(rounds: int) -> None:
    journals: dict[str, tuple[SqliteJournal, list[int]]] = {}
    for name in ("v11", "v11 without its stamp triggers and index"):
        journal = SqliteJournal(Path(tempfile.mkdtemp(prefix="lt-stamp-")) / "journal.sqlite3")
        sessions = [journal.namespace_id(Namespace(f"s{i}", "u")) or 0 for i in range(1000)]
        if name != "v11":
            with journal._txn() as db:
                for item in V11_OBJECTS:
                    db.execute(f"DROP {item}")
        journals[name] = (journal, sessions)
    cpu: dict[str, list[float]] = {name: [] for name in journals}
    wall: dict[str, list[float]] = {name: [] for name in journals}
    names = list(journals)
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            journal, sessions = journals[name]
            c0, w0 = time.process_time(), time.perf_counter()
            for i in range(WRITES_PER_ROUND):
                journal.add_records(sessions[(r * WRITES_PER_ROUND + i) % len(sessions)],
                                    [NewRecord("turn", f"a turn about kayaks number {i}")])
            cpu[name].append((time.process_time() - c0) / WRITES_PER_ROUND * 1e6)
            wall[name].append((time.perf_counter() - w0) / WRITES_PER_ROUND * 1e6)
    for name, (journal, _) in journals.items():
        journal.close()
        print({"journal": name, "cpu_us_per_write": round(statistics.median(cpu[name]), 1),
               "wall_us_per_write": round(statistics.median(wall[name]), 1)})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--reads", type=Path, metavar="FOLDER")
    mode.add_argument("--writes", action="store_true")
    parser.add_argument("--rounds", type=int, default=None)
    args = parser.parse_args()
    if args.reads is not None:
        reads(args.reads, args.rounds or 30)
    else:
        writes(args.rounds or 10)


if __name__ == "__main__":
    main()
