"""What a search's reads of records by id cost, as the number of a user's sessions grows (PostgreSQL, SQLite).

    .venv/bin/python benchmarks/record_reads.py --records 100000 --sessions 1000,10000 --json OUT.json

Every ``search()`` and ``context()`` reads its candidates by id (``journal.records``: ~100 ids for a
``search(k=10)``, ~340 for a ``context()`` of the scale benchmark) and the turns beside its best five
(``journal.beside``). This fills one user's ``--records`` records (the scale benchmark's filler turns) in
each of ``--sessions`` session counts, on a throwaway PostgreSQL server (``--backend postgres``, the
default) or in a SQLite file, then times those reads over random ids of the user's records: p50 / p95 ms
of each, on a new handle ("first": as a serving process after a restart, which knows none of the sessions
yet) and over the same ids again ("again"). Run a tree before with it on ``PYTHONPATH`` to compare.

Up to session 65 the reads joined every row to its namespace (PostgreSQL hash-joined the whole namespaces
table, 10,000 rows for a user of 10,000 sessions), and PostgreSQL's ``beside`` was a UNION ALL of two walks
per record, planned on every run; from session 66 a record's session is resolved from the journal's cache
of namespaces and ``beside`` is one LATERAL statement. Not a timed test.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.append(str(Path(__file__).resolve().parents[1]))

from scale import line, pct

from langmem_tiers.journal.base import Journal, Namespace, NewRecord
from langmem_tiers.journal.postgres import PostgresJournal
from langmem_tiers.journal.sqlite import SqliteJournal
from tests.support.postgres import postgres_server


def fill(journal: Journal, records: int, sessions: int, rng: random.Random) -> list[int]:
    """One user's records, a turn each, spread evenly over ``sessions`` sessions; their ids."""
    ids: list[int] = []
    per = records // sessions
    for i in range(sessions):
        ns_id = journal.namespace_id(Namespace(f"s{i}", "u"))
        assert ns_id is not None
        ids += journal.add_records(ns_id, [NewRecord("turn", f"user: {line(rng)}\nassistant: {line(rng)}")
                                           for _ in range(per)])
    return ids


def records(journal: Journal, ids: list[int]) -> object:
    return journal.records(ids)


def beside(journal: Journal, ids: list[int]) -> object:
    return journal.beside(ids, "turn", 4)


# Each read: how many ids a draw holds, and the read.
READS: dict[str, tuple[int, Callable[[Journal, list[int]], object]]] = {
    "records(100)": (100, records), "records(340)": (340, records), "beside(5 turns)": (5, beside)}


def timed(read: Callable[[list[int]], object], draws: list[list[int]]) -> tuple[float, float]:
    ms = []
    for ids in draws:
        started = time.perf_counter()
        read(ids)
        ms.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(ms), 3), round(pct(ms, 0.95), 3)


def run(open_journal: Callable[[], Journal], records: int, sessions: int, samples: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    started = time.perf_counter()
    with contextlib.closing(open_journal()) as writer:
        ids = fill(writer, records, sessions, rng)
    row: dict[str, Any] = {"records": len(ids), "sessions": sessions, "fill_s": round(time.perf_counter() - started, 1)}
    for name, (size, read_of) in READS.items():
        draws = [rng.sample(ids, size) for _ in range(samples)]
        # Each kind of read on a new handle, as a serving process after a restart ("first": it knows none of
        # the sessions yet, and its first statements are not prepared), then the same draws again ("again").
        with contextlib.closing(open_journal()) as journal:
            read = functools.partial(read_of, journal)
            row[f"{name} first p50 / p95 ms"] = timed(read, draws)
            row[f"{name} again p50 / p95 ms"] = timed(read, draws)
    return row


@contextlib.contextmanager
def journals(backend: str, url: str | None) -> Iterator[Callable[[], Journal]]:
    """Opens handles on one throwaway journal (a schema of the server, or a SQLite file)."""
    if backend == "postgres":
        assert url is not None
        schema = f"reads_{uuid.uuid4().hex[:12]}"
        yield lambda: PostgresJournal(url, schema=schema)
        return
    with tempfile.TemporaryDirectory(prefix="lt-reads-") as folder:
        yield lambda: SqliteJournal(Path(folder) / "journal.sqlite3")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--sessions", default="1000,10000", help="session counts, comma-separated")
    parser.add_argument("--backend", choices=["postgres", "sqlite"], default="postgres")
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    rows = []
    with contextlib.ExitStack() as stack:
        url = stack.enter_context(postgres_server()) if args.backend == "postgres" else None
        for sessions in (int(s) for s in args.sessions.split(",")):
            with journals(args.backend, url) as open_journal:
                row = {"backend": args.backend, **run(open_journal, args.records, sessions, args.samples, args.seed)}
            print(json.dumps(row), flush=True)
            rows.append(row)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
