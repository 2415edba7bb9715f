"""Where LoCoMo's evidence that misses the delivered context is (issue 19): a diagnosis, not a score.

    .venv/bin/python benchmarks/missed_evidence.py --data ../shared/data/locomo/locomo_dev.json \\
        --haystacks 0,2 --json OUT.json

For every scored question of the chosen conversations (by index in the file: ``0,2`` is the tuning
half A of BENCHMARKS.md, ``1,3,4`` half B), "ours" ingests as the evaluation does, delivers
``context()`` at the evaluation's budget (asked as of the dataset time), and for each evidence message
the delivered context lacks (by the harness's own rule, ``metrics.present_messages``) reports:

* its rank in ``search()`` over the user's sessions, asked ``--depth`` deep (whole turns, one hit per
  turn): near the delivery's cut, a better ordering would deliver it; far below, only new recall would;
* whether its session already has a turn in the context, and then how many messages away the nearest
  delivered message of that session is (1: the message right next to a delivered one).

Counts by LoCoMo category come with each. Nothing is tuned here: this says what kind of change could
deliver the evidence that is missed, before one is built.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from langmem_tiers.eval.datasets import load_locomo
from langmem_tiers.eval.metrics import TextIndex, present_messages
from langmem_tiers.eval.ours import OursRetriever, ours_config
from langmem_tiers.eval.retrievers import make_embedder
from langmem_tiers.eval.runner import asked_at

RANK_BUCKETS = (25, 50, 100, 200)


def rank_bucket(rank: int | None) -> str:
    if rank is None:
        return "not ranked"
    for cut in RANK_BUCKETS:
        if rank <= cut:
            return f"<= {cut}"
    return f"> {RANK_BUCKETS[-1]}"


def diagnose(data: Path, haystacks: list[int], depth: int) -> dict[str, Any]:
    hays = load_locomo(data)
    embedder = make_embedder()
    missed: list[dict[str, Any]] = []
    evidence = 0
    units: list[int] = []
    for h in haystacks:
        hay = hays[h]
        index = TextIndex(hay.messages)
        order = {m.key: (i, m.session_id) for session in hay.sessions for i, m in enumerate(session)}
        ours = OursRetriever(embedder, ours_config())
        try:
            ours.ingest(hay.sessions)
            for q in hay.questions:
                if q.excluded or not q.gold_messages:
                    continue
                ours.ask_at(asked_at(hay, q))
                delivered = ours.context(q.text)
                units.append(delivered.units)
                present = present_messages(delivered, index, q.gold_messages)
                evidence += len(q.gold_messages)
                lacking = [g for g in sorted(q.gold_messages) if g not in present]
                if not lacking:
                    continue
                rank: dict[str, int] = {}
                for i, unit in enumerate(ours.query(q.text, depth)):
                    for key in unit:
                        rank.setdefault(key, i + 1)
                for g in lacking:
                    position, session = order[g]
                    near = [abs(order[k][0] - position) for k in delivered.keys
                            if k in order and order[k][1] == session]
                    missed.append({"haystack": h, "question": q.qid, "category": q.category, "message": g,
                                   "search_rank": rank.get(g), "session_in_context": bool(near),
                                   "distance": min(near) if near else None})
        finally:
            ours.close()
    return {
        "haystacks": haystacks, "depth": depth, "evidence": evidence, "missed": len(missed),
        "delivered_units_median": sorted(units)[len(units) // 2] if units else 0,
        "missed_by_category": dict(sorted(Counter(m["category"] for m in missed).items())),
        "missed_by_search_rank": dict(Counter(rank_bucket(m["search_rank"]) for m in missed)),
        "missed_session_in_context": dict(Counter(
            f"category {m['category']}, session {'in' if m['session_in_context'] else 'not in'} context"
            for m in missed)),
        "missed_distance_to_delivered": dict(sorted(Counter(
            m["distance"] for m in missed if m["distance"] is not None).items())),
        "rows": missed,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="LoCoMo JSON (the dev file)")
    parser.add_argument("--haystacks", required=True, help="conversation indices, comma-separated")
    parser.add_argument("--depth", type=int, default=400, help="how deep search() ranks (default 400)")
    parser.add_argument("--json", type=Path, help="write the counts and one row per missed message here")
    args = parser.parse_args(argv)
    result = diagnose(args.data, [int(h) for h in args.haystacks.split(",")], args.depth)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    summary = {k: v for k, v in result.items() if k != "rows"}
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
