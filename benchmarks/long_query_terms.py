"""Long messages as keyword queries, on real text: what a search costs, and what capping their words loses.

    .venv/bin/python benchmarks/long_query_terms.py --data ../shared/data/longmemeval/longmemeval_s_dev.json \
        [--postgres] --caps 256,64,32,16 --json OUT.json

``context()`` and the middleware search with the newest user message, and users paste paragraphs: of
LongMemEval's user messages, the ones used here hold 33 to 1,228 distinct content words (median 41),
where no question of the dev data holds more than 14. A journal of text only (SQLite, or with
``--postgres`` a throwaway PostgreSQL server, analyzed; no embedder) holds the haystacks ``--history``
(default 0-19) merged, each message a ``turn`` record of one user's sessions (~1,000 sessions, ~10,000
records: over the keyword budget). The queries are the user messages of more than ``--min-words`` content
words from the sessions of the other haystacks that the history does not hold (new messages asked of the
history), and, in a last row, the questions of the history's haystacks. Per row, with the journal's keyword
budget: p50 / p95 ms of a search (k = ``--k``), a digest of every hit and score (equal in two trees: the same
records, scores and order; run each tree's copy with ``PYTHONPATH``), and for the long messages the share
of the **truth's** top k found, the truth being the same search with every word (256) and no budget. Per
``--caps`` value, ``journal.base.MAX_QUERY_TERMS`` (the words a query keeps: the longest, as the rarer): the
256 row is the budget's own cost, the rows below it a smaller cap's on top. Hits kept are a proxy (the
keyword ranking's agreement with itself), not an answer's recall.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.append(str(Path(__file__).resolve().parents[1]))

from scale import pct

import langmem_tiers.journal.base as journal_base
from langmem_tiers.eval.datasets import load_longmemeval, merge_haystacks
from langmem_tiers.eval.runner import parse_indices, select
from langmem_tiers.journal.base import Namespace, NewRecord
from langmem_tiers.journal.sqlite import SqliteJournal
from langmem_tiers.text import query_words


def fill(journal: Any, sessions: Any) -> list[int]:
    """One user's sessions, oldest first, one ``turn`` record per message; their namespace ids."""
    ns_ids = []
    for session in sessions:
        ns_id = journal.namespace_id(Namespace(session[0].session_id, "user")) or 0
        journal.add_records(ns_id, [NewRecord("turn", m.text, created_at=float(i)) for i, m in enumerate(session)])
        ns_ids.append(ns_id)
    return ns_ids


def search(journal: Any, query: str, ns_ids: list[int], k: int, cap: int,
           budget: int | None) -> tuple[list[tuple[int, float]], float]:
    journal_base.MAX_QUERY_TERMS = cap  # search_terms reads it at each call
    journal.keyword_budget = budget
    t = time.perf_counter()
    hits = journal.keyword_search(query, ns_ids, k)
    return [(h.record_id, round(h.score, 9)) for h in hits], (time.perf_counter() - t) * 1000


def measure(journal: Any, label: str, queries: list[str], truths: list[list[int]] | None, ns_ids: list[int],
            k: int, cap: int, budget: int | None) -> dict[str, Any]:
    """One row: p50 / p95 ms, the share of each truth's hits kept (when given), and a digest of every hit with
    its score (the same digest in two trees: the same records, scores and order)."""
    took, kept, digest = [], [], hashlib.sha256()
    for i, query in enumerate(queries):
        hits, ms = search(journal, query, ns_ids, k, cap, budget)
        took.append(ms)
        digest.update(repr(hits).encode())
        if truths and truths[i]:
            kept.append(len({h for h, _ in hits} & set(truths[i])) / len(truths[i]))
    return {"queries": label, "count": len(queries), "cap": cap, "p50_ms": round(statistics.median(took), 2),
            "p95_ms": round(pct(took, 0.95), 2), "truth_hits_kept": round(statistics.mean(kept), 3) if kept else None,
            "hits_sha256": digest.hexdigest()[:16]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="LongMemEval_S JSON file (official format)")
    parser.add_argument("--history", type=parse_indices, default=list(range(20)), metavar="I,J,...",
                        help="haystacks merged into the searched history (default 0-19)")
    parser.add_argument("--caps", type=lambda v: [int(x) for x in v.split(",")], default=[256, 64, 32, 16])
    parser.add_argument("--min-words", type=int, default=32, help="queries: user messages of more content words")
    parser.add_argument("--queries", type=int, default=200, help="at most this many, in the file's order")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--postgres", action="store_true", help="a throwaway PostgreSQL server instead of SQLite")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    haystacks = load_longmemeval(args.data)
    history = merge_haystacks(select(haystacks, args.history))
    held = {s[0].session_id for s in history.sessions}
    queries = list(dict.fromkeys(
        m.text for i, hay in enumerate(haystacks) if i not in args.history for s in hay.sessions
        if s and s[0].session_id not in held for m in s
        if m.role == "user" and len(query_words(m.text)) > args.min_words))[:args.queries]
    with contextlib.ExitStack() as stack:
        if args.postgres:
            from langmem_tiers.journal.postgres import PostgresJournal
            from tests.support.postgres import postgres_server

            journal: Any = PostgresJournal(stack.enter_context(postgres_server()))
        else:
            folder = Path(tempfile.mkdtemp(prefix="lt-long-queries-"))
            stack.callback(shutil.rmtree, folder, ignore_errors=True)
            journal = SqliteJournal(folder / "journal.sqlite3")
        stack.callback(journal.close)
        ns_ids = fill(journal, history.sessions)
        if args.postgres:  # the planner's statistics, as autovacuum keeps them
            with journal._autocommit() as db:
                db.execute("ANALYZE records")
        budget = journal.keyword_budget
        truths = [[h for h, _ in search(journal, q, ns_ids, args.k, 256, None)[0]] for q in queries]
        words = [len(query_words(q)) for q in queries]
        head = {"data": args.data.name, "backend": "postgres" if args.postgres else "sqlite",
                "history_haystacks": args.history, "sessions": len(ns_ids),
                "records": sum(len(s) for s in history.sessions), "queries": len(queries),
                "query_words_p50": statistics.median(words), "query_words_max": max(words), "k": args.k,
                "keyword_budget": budget, "truth": "every word (256), no budget"}
        print(json.dumps(head), flush=True)
        questions = [q.text for q in history.questions]
        rows = []
        for _ in range(2):  # the first round warms the pages and held term counts; the second is reported
            rows = [measure(journal, "long messages", queries, truths, ns_ids, args.k, cap, budget)
                    for cap in args.caps]
            rows.append(measure(journal, "questions", questions, None, ns_ids, args.k, 256, budget))
        for row in rows:
            print(json.dumps(row), flush=True)
        if args.json:
            args.json.write_text(json.dumps({**head, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
