"""What the keyword budget costs in recall where a history is long: LongMemEval's haystacks merged into one.

    .venv/bin/python benchmarks/keyword_budget_recall.py \\
        --data ../shared/data/longmemeval/longmemeval_s_dev.json --budgets 2000,none,1000,500,250,125 \\
        --json benchmarks/results/keyword-budget-recall.json

A keyword search ranks at most ``keyword_budget`` matches (``langmem_tiers.journal.keyword_budget``):
over it, the query's rarer terms, or the newest matches of its rarest. No evaluation haystack reaches
the budget (2,000: a LongMemEval haystack holds ~500 messages), so what it costs in recall was never
measured. Here every haystack of the file (or ``--haystacks``) is merged into one history (the eval
harness's ``--merge``: each session once, oldest first; the 30 dev haystacks make ~1,500 sessions and
~15,000 messages, thirty times a haystack), ingested once by "ours" (the evaluation's configuration,
the real local embedder), and every question is asked of all of it once per budget, the journal's
budget set between the rounds (``none``: every match ranked). A question's scores are the runner's
(``context_*`` of what ``context()`` delivers, ``answer_recall``, ``search()``'s ``recall@k``).

Each question's terms are counted in the merged journal first (every record's index, journal-wide),
so the row says which questions a budget bounds: ``terms_matches`` is the sum of its terms' matches
(a budget at or above it ranks the question exactly as without one). The rounds run in the order
given, once the scope's HNSW graph is installed (a first query starts its build; ``graph_wait_s``), so the
first budget's context() times include the process warming (list the default first).

``--postgres``: the journal is a throwaway PostgreSQL server (the vectors stay in the embedded Chroma, as
the default's), opened with no held keyword postings, so each budget round is the bm25 statement's. A last
round, ``held``, then reads the scopes' postings into the process (``journal.postgres_postings``: what a
scope past 20,000 records gets, ranking every match) and asks again: it must score as the ``none`` round
does, question by question (``held_moved_against_none``). Term counts are the journal's own, per lexeme
(``postgres._count_matches``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from langmem_tiers.eval.ablate import ask
from langmem_tiers.eval.datasets import load_longmemeval, merge_haystacks
from langmem_tiers.eval.metrics import TextIndex, percentile
from langmem_tiers.eval.ours import OursRetriever, ours_config
from langmem_tiers.eval.retrievers import make_embedder
from langmem_tiers.eval.runner import _aggregate, metric_names, parse_indices, select
from langmem_tiers.journal import postgres
from langmem_tiers.journal.base import search_terms
from langmem_tiers.journal.postgres_postings import DEFAULT_MAX_BYTES
from langmem_tiers.journal.sqlite import SqliteJournal

KS = (5, 10)
HEADLINE = ("context_session_recall_all", "context_message_recall_any", "answer_recall",
            "session_recall_all@10")


def parse_budgets(text: str) -> list[int | None]:
    out: list[int | None] = []
    for part in text.split(","):
        part = part.strip().lower()
        out.append(None if part == "none" else int(part))
    return out


def term_matches(journal: Any, question: str, records: int) -> dict[str, int]:
    """Each of the question's search terms (PostgreSQL: each distinct lexeme of them): its matches in the
    journal's index of every record (the journal's own count, capped above the ``records`` it holds: every
    match)."""
    if isinstance(journal, SqliteJournal):
        return {term: SqliteJournal._count_matches(journal._sql, term, records + 1).matches
                for term in search_terms(question)}
    with journal._autocommit() as db:  # per lexeme, as the journal's plan counts them (postgres._count_matches)
        counts, _ = postgres._count_matches(db, journal._query_terms(question, []), records + 1)
        return {c.term: c.matches for c in counts}


def count_records(journal: Any) -> int:
    if isinstance(journal, SqliteJournal):
        return int(journal._sql.one("SELECT count(*) FROM records")[0])
    with journal._autocommit() as db:
        return int(db.one("SELECT count(*) FROM records")[0])


def hold_postings(retriever: Any, question: str) -> dict[str, int]:
    """Turn a PostgreSQL journal's held postings on and read them for every scope the questions search
    (recall's and the profile's may list different sessions: each is built after a search finds it large),
    asking ``question`` until no build is left to start."""
    journal = retriever.memory.journal
    journal.keyword_postings.max_bytes = DEFAULT_MAX_BYTES
    journal.keyword_postings.size_from = 0  # any scope a search finds over the budget, --haystacks of a few too
    for _ in range(8):
        before = journal.keyword_postings.stats()["entries"]
        retriever.context(question)
        journal.keyword_postings.wait_build()
        if journal.keyword_postings.stats()["entries"] == before:
            break
    return journal.keyword_postings.stats()


def ask_round(retriever: Any, merged: Any, asked: Sequence[Any], index: Any) -> tuple[dict[str, Any], list[float]]:
    """Every question asked once: its scores and context() times."""
    per_question, ms = {}, []
    for q in asked:
        scores, took = ask(retriever, "longmemeval", merged, q, KS, index)
        per_question[q.qid] = {name: round(v, 4) for name, v in sorted(scores.items())}
        ms.append(took)
    return per_question, ms


def moved(questions: dict[str, dict[str, float]], unbounded: dict[str, dict[str, float]]) -> list[str]:
    """The questions whose recall scores differ from the unbounded round's (its tokens may differ alone)."""
    def recall(scores: dict[str, float]) -> dict[str, float]:
        return {name: v for name, v in scores.items() if name != "context_tokens"}
    return sorted(qid for qid, s in questions.items() if recall(s) != recall(unbounded[qid]))


def run(data: Path, budgets: Sequence[int | None], indices: Sequence[int] | None,
        journal_url: str | None = None) -> dict[str, Any]:
    haystacks = load_longmemeval(data)
    merged = merge_haystacks(select(haystacks, indices))
    config = ours_config(keyword_cache_mb=0) if journal_url else ours_config()
    retriever = OursRetriever(make_embedder(), config, journal_url=journal_url)
    try:
        skipped = retriever.ingest(merged.sessions)
        asked = [q for q in merged.questions if q.excluded is None]
        # Past 20k vectors a scope's HNSW graph is built on a background thread, started by the scope's
        # first query (Chroma's filtered query answers until it is installed): one query starts it and the
        # rounds wait for it, so every round searches the same index and its times are the installed one's.
        start = time.perf_counter()
        retriever.query(asked[0].text, 1)
        retriever.memory.recall._scope_vectors.wait_builds()
        graph_s = time.perf_counter() - start
        journal = retriever.memory.journal
        records = count_records(journal)
        index = TextIndex(merged.messages)
        counts = {q.qid: term_matches(journal, q.text, records) for q in asked}
        default = journal.keyword_budget
        rounds: dict[str, Any] = {}
        names = metric_names("longmemeval", KS)
        try:
            for budget in budgets:
                journal.keyword_budget = budget
                per_question, ms = ask_round(retriever, merged, asked, index)
                rounds[str(budget).lower()] = {
                    "budget": budget, "overall": _aggregate(list(per_question.values()), names),
                    "context_p50_ms": round(percentile(ms, 50), 2),
                    "bounded_questions": sum(1 for c in counts.values()
                                             if budget is not None and sum(c.values()) > budget),
                    "questions": per_question,
                }
            if journal_url:  # every match ranked in the process: must score as the "none" round
                journal.keyword_budget = default
                held = hold_postings(retriever, asked[0].text)
                per_question, ms = ask_round(retriever, merged, asked, index)
                rounds["held"] = {"budget": None, "keyword_postings": held, "bounded_questions": 0,
                                  "overall": _aggregate(list(per_question.values()), names),
                                  "context_p50_ms": round(percentile(ms, 50), 2), "questions": per_question}
        finally:
            journal.keyword_budget = default
    finally:
        retriever.close()
    unbounded = rounds.get("none")
    for row in rounds.values():  # which questions a budget moved, against every match ranked
        if unbounded is not None:
            row["moved"] = moved(row["questions"], unbounded["questions"])
    return {"data": data.name, "journal": "postgresql" if journal_url else "sqlite",
            "haystacks": None if indices is None else list(indices),
            "sessions": len(merged.sessions), "messages": merged.n_messages, "records": records,
            "skipped": skipped, "questions": len(asked), "graph_wait_s": round(graph_s, 1),
            "terms_matches": {qid: sum(c.values()) for qid, c in counts.items()},
            "max_term_matches": {qid: max(c.values(), default=0) for qid, c in counts.items()},
            "rounds": rounds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="LongMemEval_S JSON file (official format)")
    parser.add_argument("--budgets", type=parse_budgets, default=[2000, None, 1000, 500, 250, 125],
                        help="comma-separated budgets, 'none' for no bound (default 2000,none,1000,500,250,125)")
    parser.add_argument("--haystacks", type=parse_indices, default=None, metavar="I,J,...",
                        help="merge only these haystacks (default: every one in the file)")
    parser.add_argument("--json", type=Path, default=None, dest="json_out")
    parser.add_argument("--postgres", action="store_true",
                        help="the journal on a throwaway PostgreSQL server, with a last 'held' round")
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        url = None
        if args.postgres:
            from tests.support.postgres import postgres_server

            url = stack.enter_context(postgres_server())
        result = run(args.data, args.budgets, args.haystacks, url)
    result["command"] = " ".join(["benchmarks/keyword_budget_recall.py", *sys.argv[1:]])
    for name, row in result["rounds"].items():
        print(json.dumps({"budget": name, **{k: row["overall"].get(k) for k in HEADLINE},
                          "context_p50_ms": row["context_p50_ms"], "bounded": row.get("bounded_questions"),
                          "moved": len(row.get("moved", []))}), flush=True)
    if args.json_out is not None:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
