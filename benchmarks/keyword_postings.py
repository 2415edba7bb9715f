"""The held keyword postings' own costs (``journal.postgres_postings.Postings``), no server: build, rank, grow.

    .venv/bin/python benchmarks/keyword_postings.py --sizes 100000,1000000 --json OUT.json

PostgreSQL ranks a scope past 20,000 records in the process from postings it reads once
(``postgres_postings``); ``benchmarks/scale.py --servers`` times that inside ``search()``. This times the
structure alone on synthetic rows, so each of its steps has a figure a command reproduces: rows of
``--lexemes`` lexemes on average (Poisson), drawn from a Zipf vocabulary of ``--vocab`` words (exponent
1.1, as word frequencies run, its ``STOP_WORDS`` commonest left out as both journals' parsers leave stop
words out: the commonest word then matches ~6% of rows), each counted once or twice. Per size:

* ``build_s``: appending the rows in chunks of ``READ_CHUNK`` (as a build reads them), then one pack;
* ``rank_ms``: p50 / p95 of ``rank(k=10)`` for queries of 2-6 lexemes drawn as the rows' are (common
  words: p50 ~29% of the rows match at 1M); ``rank_selective_ms``: the same for words drawn evenly from
  the vocabulary (a few hundred matches each: questions of names and rarer words);
* ``turn_ms``: p50 / p95 of what a conversation turn costs a held scope: two rows appended, then a rank
  (a pack is due after ``MERGE_FROM`` appended rows and an eighth of the rest: ``merge_ms``);
* ``merge_ms``: one pack of ``MERGE_FROM`` appended rows into the size's postings (every posting
  copied into its place: its cost is that of every posting, whatever the rows appended);
* ``drop_ms``: dropping one namespace of 100 packed rows (a deleted record's session read again, or an erasure
  seen from another process: the rows unlinked from their words by a pass over the packed postings,
  ``Postings._scrub``; until session 65 the postings were packed again without them);
* ``drop_appended_ms``: the same for a namespace of 100 rows appended since the last pack (the live session,
  where an agent's working memory deletes a record at each set: no pass over the packed postings);
* ``bytes``: ``nbytes()``'s estimate beside the arrays' real bytes; and what a build's byte bound projects
  for the size after its first chunk (``Postings.projected``: rows and postings scaled, the vocabulary as it
  is), beside the first chunk's bytes scaled whole (the rule before session 65, which declined 1M rows).

Synthetic text measures the structure's costs at a size, not ranking quality (the PostgreSQL contract
tests check the ranking equals the statement's). Not a timed test.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.append(str(Path(__file__).resolve().parents[1]))

from scale import pct

from langmem_tiers.journal.postgres_postings import MERGE_FROM, READ_CHUNK, Postings

PER_NAMESPACE = 100  # rows per namespace (a session)
STOP_WORDS = 20  # the Zipf ranks below this are not drawn (stop words)


def words(rng: np.random.Generator, count: int, vocab: int) -> list[str]:
    """``count`` words of the vocabulary, Zipf-distributed past its stop words."""
    ranks = rng.zipf(1.1, count) + STOP_WORDS
    return [f"w{r % vocab}" for r in ranks.tolist()]


def rows(rng: np.random.Generator, start: int, count: int, vocab: int,
         lexemes: float) -> list[tuple[int, int, str, int, list[str], list[int]]]:
    """``count`` synthetic rows ``(id, namespace, kind, length, lexemes, counts)`` from id ``start``."""
    sizes = np.maximum(1, rng.poisson(lexemes, count))
    drawn = words(rng, int(sizes.sum()), vocab)
    counts = rng.integers(1, 3, len(drawn))
    out, at = [], 0
    for i, n in enumerate(sizes.tolist()):
        lex = dict.fromkeys(drawn[at:at + n])
        cnt = counts[at:at + len(lex)].tolist()
        rid = start + i
        out.append((rid, rid // PER_NAMESPACE, "fact" if rid % 6 == 0 else "turn", int(sum(cnt)), list(lex), cnt))
        at += n
    return out


def real_bytes(p: Postings) -> int:
    return sum(a.nbytes for a in (p.ids, p.ns, p.dl, p.kind, p.live, p.offsets, p.rows, p.tf, p._seen, p._acc))


def measure(size: int, vocab: int, lexemes: float, samples: int, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    chunks = [rows(rng, start, min(READ_CHUNK, size - start), vocab, lexemes)
              for start in range(1, size + 1, READ_CHUNK)]
    started = time.perf_counter()
    postings = Postings()
    first_chunk: tuple[float, float] | None = None
    for chunk in chunks:
        postings.append(chunk)
        if first_chunk is None:  # what a build's byte bound projects after its first chunk (ScopePostings._read)
            first_chunk = (postings.projected(size), postings.nbytes() * size / postings.size)
    postings.pack()
    build_s = time.perf_counter() - started
    del chunks
    queries = [words(rng, int(rng.integers(2, 7)), vocab) for _ in range(samples)]
    rank_ms = []
    for q in queries:
        t = time.perf_counter()
        postings.rank(q, None, 10)
        rank_ms.append((time.perf_counter() - t) * 1000)
    selective_ms = []
    for _ in range(samples):
        q = [f"w{w}" for w in rng.integers(STOP_WORDS, vocab, int(rng.integers(2, 7))).tolist()]
        t = time.perf_counter()
        postings.rank(q, None, 10)
        selective_ms.append((time.perf_counter() - t) * 1000)
    turn_ms, next_id = [], size + 1
    for q in queries:
        turn = rows(rng, next_id, 2, vocab, lexemes)
        next_id += 2
        t = time.perf_counter()
        postings.append(turn)
        postings.pack_if_due()
        postings.rank(q, ["turn"], 10)
        turn_ms.append((time.perf_counter() - t) * 1000)
    postings.pack()
    postings.append(rows(rng, next_id, MERGE_FROM, vocab, lexemes))
    next_id += MERGE_FROM
    t = time.perf_counter()
    postings.pack()
    merge_ms = (time.perf_counter() - t) * 1000
    t = time.perf_counter()
    postings.drop([int(postings.ns[len(postings.ns) // 2])])
    drop_ms = (time.perf_counter() - t) * 1000
    next_id = (next_id // PER_NAMESPACE + 1) * PER_NAMESPACE  # a namespace of its own
    postings.append(rows(rng, next_id, PER_NAMESPACE, vocab, lexemes))
    t = time.perf_counter()
    postings.drop([next_id // PER_NAMESPACE])
    drop_appended_ms = (time.perf_counter() - t) * 1000
    postings.pack()  # the dropped rows out of the arrays, as bytes_arrays below counts them
    return {"size": size, "vocab": vocab, "lexemes_mean": lexemes, "postings": len(postings.rows),
            "held_lexemes": len(postings.vocab), "build_s": round(build_s, 2),
            "rank_ms_p50": round(pct(rank_ms, 0.5), 3), "rank_ms_p95": round(pct(rank_ms, 0.95), 3),
            "rank_selective_ms_p50": round(pct(selective_ms, 0.5), 3),
            "rank_selective_ms_p95": round(pct(selective_ms, 0.95), 3),
            "turn_ms_p50": round(pct(turn_ms, 0.5), 3), "turn_ms_p95": round(pct(turn_ms, 0.95), 3),
            "merge_ms": round(merge_ms, 1), "drop_ms": round(drop_ms, 1),
            "drop_appended_ms": round(drop_appended_ms, 2),
            "bytes_estimated": postings.nbytes(), "bytes_arrays": real_bytes(postings),
            "bytes_projected_after_first_chunk": round(first_chunk[0]) if first_chunk else None,
            "bytes_scaled_after_first_chunk": round(first_chunk[1]) if first_chunk else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100000,1000000")
    ap.add_argument("--vocab", type=int, default=50_000)
    ap.add_argument("--lexemes", type=float, default=12.0, help="mean distinct lexemes per row")
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    out = [measure(int(s), args.vocab, args.lexemes, args.samples, args.seed) for s in args.sizes.split(",")]
    for row in out:
        print(json.dumps(row))
    if args.json:
        args.json.write_text(json.dumps({"rows": out}, indent=1) + "\n")


if __name__ == "__main__":
    main()
