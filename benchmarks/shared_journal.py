"""Keyword search in a journal shared by many users: what each user's search finds, and its cost (not a timed test).

    .venv/bin/python benchmarks/shared_journal.py --records 200000 --users 20 --json OUT.json
    .venv/bin/python benchmarks/shared_journal.py --records 200000 --users 20 --postgres --json OUT.json

A journal (SQLite, or with ``--postgres`` a throwaway PostgreSQL server on 127.0.0.1) is filled with
``--records`` records of scale.py's filler lines by ``--users`` users who write one after another (users
active in different months), in sessions of ``--per-session`` records, a fact every ``--memories-every``
turns; written through the journal in one transaction per session, no embedder (PostgreSQL then analyzed, as
autovacuum would have done; rows from before session 54's last runs had not been). Then, for every user,
``--queries`` plain questions (scale.py's ``filler_question``: every word of them fills the history)
searched over all of the user's sessions (the user scope), k = ``--k``, twice: every kind, and facts only
(what the profile and the memory tools ask). Each search runs with the journal's keyword budget and
without one (``keyword_budget = None``: every match ranked, the truth of how many the scope holds).

A row per user (oldest first): the budgeted search's mean hits, how many searches came back short of k
where the unbounded one found k, the share of the unbounded search's hits it also found (mean over the
questions; from session 56), the searches planned again on the scope's own matches
(``keyword_budget.crowded_out``; absent in trees before it), and the budgeted search's p50 / p95 ms. The
unbounded search's time is printed beside it, not a target. Before/after: run each tree's copy of the
package with ``PYTHONPATH``. ``--walk-probe`` times instead how a search planned again walks its scope's
matches on SQLite (``MAX_SCOPE_TERMS``), and on PostgreSQL how each question's words' newest matches are
read (``_newest_matches``). ``--budget N`` sets the journal's keyword budget;
``--common-word`` adds "the trip" to every question, a word of about half the filler lines.
``--question-words N,M,...`` asks instead questions of N distinct filler words each (a pasted paragraph),
then of M, ... on the same fill (each row says its ``question_words``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.append(str(Path(__file__).resolve().parents[1]))  # tests.support; PYTHONPATH (a before tree) first

from scale import VOCAB, filler_question, line, pct

import langmem_tiers.journal.postgres as postgres_module
import langmem_tiers.journal.sqlite as sqlite_module
from langmem_tiers.journal.base import Namespace, NewRecord, search_terms
from langmem_tiers.journal.sqlite import SqliteJournal


def fill(journal: Any, records: int, users: int, per_session: int, memories_every: int) -> dict[str, list[int]]:
    """Each user's session ids, users writing one after another."""
    sessions = max(records // per_session, users)
    by_user: dict[str, list[int]] = {f"user-{u}": [] for u in range(users)}
    rng = random.Random(records)
    clock = 1_000.0
    for s in range(sessions):
        user = f"user-{s * users // sessions}"
        ns_id = journal.namespace_id(Namespace(f"s{s}", user)) or 0
        batch = []
        for i in range(per_session):
            kind = "fact" if memories_every and i % memories_every == memories_every - 1 else "turn"
            batch.append(NewRecord(kind, line(rng), created_at=clock))
            clock += 1.0
        journal.add_records(ns_id, batch)
        by_user[user].append(ns_id)
    return by_user


@contextlib.contextmanager
def replans_counted() -> Iterator[list[int]]:
    """Counts the searches that planned again on their scope's own matches (trees with ``crowded_out``)."""
    count = [0]
    patched = []
    for module in (sqlite_module, postgres_module):
        real = getattr(module, "crowded_out", None)
        if real is None:
            continue

        def counted(*args: Any, _real: Any = real) -> bool:
            crowded = bool(_real(*args))
            count[0] += crowded
            return crowded

        patched.append((module, real))
        module.crowded_out = counted  # type: ignore[attr-defined]
    try:
        yield count
    finally:
        for module, real in patched:
            module.crowded_out = real  # type: ignore[attr-defined]


def long_question(rng: random.Random, words: int) -> str:
    """A question of ``words`` distinct filler words (of 420), as a user who pastes a paragraph asks."""
    return "What about " + ", ".join(rng.sample(VOCAB, words)) + "?"


def search(journal: Any, query: str, ns_ids: list[int], k: int, kinds: list[str] | None,
           budget: Any) -> tuple[list[int], float]:
    journal.keyword_budget = budget
    t = time.perf_counter()
    hits = journal.keyword_search(query, ns_ids, k, kinds)
    return [h.record_id for h in hits], (time.perf_counter() - t) * 1000


def measure(journal: Any, by_user: dict[str, list[int]], queries: list[str], k: int) -> list[dict[str, Any]]:
    budget = journal.keyword_budget
    rows = []
    for user, ns_ids in by_user.items():
        for label, kinds in (("every kind", None), ("facts", ["fact"])):
            found, short, took, unbounded_ms, shared = [], 0, [], [], []
            with replans_counted() as replans:
                for q in queries:
                    hits, ms = search(journal, q, ns_ids, k, kinds, budget)
                    found.append(len(hits))
                    took.append(ms)
                    truth, ms = search(journal, q, ns_ids, k, kinds, None)
                    unbounded_ms.append(ms)
                    short += len(hits) < k <= len(truth)
                    if truth:
                        shared.append(len(set(hits) & set(truth)) / len(truth))
            journal.keyword_budget = budget
            rows.append({"user": user, "kinds": label, "sessions": len(ns_ids), "mean_hits": statistics.mean(found),
                         "short_of_k": short, "searches": len(queries), "replanned": replans[0],
                         "unbounded_hits_kept": round(statistics.mean(shared), 3) if shared else None,
                         "p50_ms": round(statistics.median(took), 2), "p95_ms": round(pct(took, 0.95), 2),
                         "unbounded_p50_ms": round(statistics.median(unbounded_ms), 2)})
            print(json.dumps(rows[-1]), flush=True)
    return rows


def walk_probe(journal: SqliteJournal, by_user: dict[str, list[int]], words: list[str]) -> list[dict[str, Any]]:
    """SQLite: a word's matches in the first N sessions (in write order), counted up to the budget + 1 as a
    search planned again counts them, narrowed by FTS5's scope terms and looked up in records, each forced
    (``sqlite.MAX_SCOPE_TERMS``); the two must agree."""
    sessions = [n for ns_ids in by_user.values() for n in ns_ids]
    cap = (journal.keyword_budget or 0) + 1
    rows = []
    for size in (n for n in (25, 64, 200, 1000, 5000) if n <= len(sessions)):
        scope = (sessions[:size], None)
        took: dict[str, list[float]] = {"narrowed": [], "looked_up": []}
        for word in words:
            counts = []
            for way, bound in (("narrowed", size), ("looked_up", 0)):
                sqlite_module.MAX_SCOPE_TERMS = bound  # type: ignore[attr-defined]
                t = time.perf_counter()
                counts.append(SqliteJournal._count_matches(journal._sql, word, cap, scope=scope))
                took[way].append((time.perf_counter() - t) * 1000)
            assert counts[0] == counts[1], counts
        rows.append({"sessions": size, **{f"{w}_ms_p50": round(statistics.median(v), 2) for w, v in took.items()}})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def postgres_walk_probe(journal: Any, queries: list[str]) -> list[dict[str, Any]]:
    """PostgreSQL: each question's words' newest budget + 1 matches in the journal, as a search whose every word is
    over the budget reads them (``postgres._newest_matches``); run each tree's copy with ``PYTHONPATH``."""
    cap = (journal.keyword_budget or 0) + 1
    took, words = [], []
    with journal._autocommit() as db:
        for q in queries:
            lexemes = [str(db.one("SELECT to_tsquery('english', ?)::text", [w])[0]) for w in search_terms(q)]
            lexemes = [x for x in lexemes if x]
            words.append(len(lexemes))
            t = time.perf_counter()
            postgres_module._newest_matches(db, lexemes, cap)
            took.append((time.perf_counter() - t) * 1000)
    rows = [{"words_per_question": max(words), "questions": len(queries),
             "newest_matches_ms_p50": round(statistics.median(took), 2), "ms_p95": round(pct(took, 0.95), 2)}]
    print(json.dumps(rows[-1]), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--per-session", type=int, default=100)
    parser.add_argument("--memories-every", type=int, default=6)
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--postgres", action="store_true", help="a throwaway PostgreSQL server instead of SQLite")
    parser.add_argument("--budget", type=int, default=None,
                        help="the journal's keyword budget (default: its own, keyword_budget.KEYWORD_BUDGET)")
    parser.add_argument("--common-word", action="store_true",
                        help="questions that also hold 'trip', a word of about half the filler lines")
    parser.add_argument("--question-words", type=lambda v: [int(x) for x in v.split(",")], default=None,
                        metavar="N,M,...", help="instead of two-word questions, questions of N distinct filler "
                        "words each (a pasted paragraph), then of M, ... on the same fill")
    parser.add_argument("--walk-probe", action="store_true",
                        help="instead of the searches: SQLite, time counting a word's matches in the first N "
                             "sessions narrowed by scope terms and looked up (MAX_SCOPE_TERMS); PostgreSQL, "
                             "time reading each question's words' newest matches (_newest_matches)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        if args.postgres:
            from tests.support.postgres import postgres_server

            journal: Any = postgres_module.PostgresJournal(stack.enter_context(postgres_server()))
        else:
            folder = Path(tempfile.mkdtemp(prefix="lt-shared-journal-"))
            stack.callback(shutil.rmtree, folder, ignore_errors=True)
            journal = SqliteJournal(folder / "journal.sqlite3")
        stack.callback(journal.close)
        if args.budget is not None:
            journal.keyword_budget = args.budget
        t = time.perf_counter()
        by_user = fill(journal, args.records, args.users, args.per_session, args.memories_every)
        if args.postgres:  # the planner's statistics, as autovacuum keeps them (a fresh bulk fill has none yet)
            with journal._autocommit() as db:
                db.execute("ANALYZE records")
        head = {"records": args.records, "users": args.users, "backend": "postgres" if args.postgres else "sqlite",
                "common_word": args.common_word,
                "k": args.k, "keyword_budget": journal.keyword_budget, "fill_s": round(time.perf_counter() - t, 1)}
        print(json.dumps(head), flush=True)
        rng = random.Random(7)
        queries = [filler_question(rng, plain=True) for _ in range(args.queries)]
        if args.common_word:
            queries = [q.replace("What about ", "What about the trip, ") for q in queries]
        if args.walk_probe and args.postgres:
            rows = postgres_walk_probe(journal, queries)
        elif args.walk_probe:
            words = [w for q in queries for w in search_terms(q) if w not in ("what", "about", "and")][:6]
            rows = walk_probe(journal, by_user, words)
        elif args.question_words:
            rows = [{"question_words": n, **row} for n in args.question_words
                    for row in measure(journal, by_user, [long_question(rng, n) for _ in range(args.queries)], args.k)]
        else:
            rows = measure(journal, by_user, queries, args.k)
        if args.json:
            args.json.write_text(json.dumps({**head, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
