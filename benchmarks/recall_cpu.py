"""The recall engine's Python work per ``context()`` at 100k, part by part (issue 15, twelfth step; not a timed test).

    .venv/bin/python benchmarks/recall_cpu.py --data ../shared/data/locomo/locomo_dev.json

A ``context()`` at 100k messages in one session asks for ~61 hits, so each rank list reaches 274
deep and ~540 candidates are read, fused twice and selected from (benchmarks/scale.py
``--breakdown``). This times the three CPU-bound parts on inputs of those sizes made of real text
(LoCoMo's turns, as recall records hold them), so one tree can be compared with another
(``git worktree add`` the other, run this file from it):

1. ``journal.records()`` of 537 random ids of a SQLite journal holding the turns (decoding included);
2. ``fuse()`` of a keyword and a vector list of 274 ids each and a neighbor list of 10;
3. ``NearDuplicates`` over the word sets of 61 records, the selection's dedupe.

Medians of ``--rounds`` rounds; each part's answers are checked equal to the first round's.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from time_expression import turn_texts  # LoCoMo's turns as recall records hold them

from langmem_tiers.journal.base import Namespace, NewRecord
from langmem_tiers.journal.sqlite import SqliteJournal
from langmem_tiers.recall.fusion import FusionParams, NearDuplicates, fuse, word_set

READ, DEPTH, HITS = 537, 274, 61  # a 100k one-session context()'s sizes (the eleventh step's counts)


def median_ms(fn: Callable[[Any], Any], inputs: list[Any], rounds: int,
              digest: Callable[[Any], Any] = lambda a: a) -> tuple[float, list[Any]]:
    """The median over rounds of ``fn``'s ms per input, and the ``digest`` of its answers (equal in every
    round). Only digests are kept: thousands of records kept from round to round would make the
    collector's full passes, not the part, what is timed."""
    took, first = [], None
    for _ in range(rounds):
        t = time.perf_counter()
        answers = [digest(fn(x)) for x in inputs]
        took.append((time.perf_counter() - t) / len(inputs) * 1000)
        first = answers if first is None else first
        assert answers == first, "a part answered differently in another round"
    return round(statistics.median(took), 3), first or []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="LoCoMo JSON (locomo_dev.json)")
    parser.add_argument("--calls", type=int, default=40, help="inputs per part")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--json", type=Path, help="also write the result here")
    args = parser.parse_args()
    rng = random.Random(15)
    texts = turn_texts(args.data)
    with tempfile.TemporaryDirectory() as folder:
        journal = SqliteJournal(Path(folder) / "journal.sqlite3")
        try:
            ns_id = journal.namespace_id(Namespace("s", "u")) or 0
            ids = journal.add_records(ns_id, [NewRecord("turn", t, (2 * i, 2 * i + 1), created_at=1e9 + 60 * i)
                                              for i, t in enumerate(texts)])
            id_sets = [sorted(rng.sample(ids, min(READ, len(ids)))) for _ in range(args.calls)]
            records_ms, _ = median_ms(journal.records, id_sets, args.rounds,
                                      lambda rs: [(r.id, r.text, r.created_at, r.namespace) for r in rs])
            read = [journal.records(s) for s in id_sets]
        finally:
            journal.close()
    by_id = {str(r.id): r for rs in read for r in rs}
    now = 1e9 + 60 * len(texts)

    def fused(chosen: list[str]) -> list[tuple[str, float]]:
        out = fuse(chosen[:DEPTH], chosen[DEPTH // 2:DEPTH // 2 + DEPTH], params=FusionParams(),
                   ages={c: now - by_id[c].created_at for c in chosen}, importances=dict.fromkeys(chosen, 0.5),
                   extra=[(chosen[-10:], 0.5)])
        return [(c, parts.total) for c, parts in out]

    fuse_inputs = [[str(r.id) for r in rs] for rs in read]
    fuse_ms, _ = median_ms(fused, fuse_inputs, args.rounds)

    def deduped(sets: list[frozenset[str]]) -> list[bool]:
        near = NearDuplicates(0.85)
        return [near.keep(s) for s in sets]

    word_sets = [[word_set(r.text) for r in rng.sample(rs, HITS)] for rs in read]
    dedupe_ms, kept = median_ms(deduped, word_sets, args.rounds)
    result = {"turns": len(texts), "records() ms (537 ids)": records_ms, "fuse() ms": fuse_ms,
              "NearDuplicates ms (61 sets)": dedupe_ms, "kept of 61": statistics.mean(map(sum, kept))}
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
