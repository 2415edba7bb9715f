"""Core latency and cost figures (issue 2's report; not a timed test).

    .venv/bin/python benchmarks/core_latency.py                      # 1k and 100k messages, keyword + vector recall
    .venv/bin/python benchmarks/core_latency.py --sizes 1000 --quick # a fast smoke run
    .venv/bin/python benchmarks/core_latency.py --vocab small        # worst case: every record matches every query

Text: ``--vocab zipf`` (default) draws words from 5,000 synthetic words with Zipf-distributed
frequencies, as natural language has; ``--vocab small`` uses 33 words, so every query word is
in about a third of all records and keyword ranking must score most of the session.

For each journal size N, a session is filled with N messages through the public API
(user/assistant turns, add_messages per turn), everything is indexed, then:
- add(): durable appends (SQLite WAL, synchronous=FULL: committed before returning);
- context(): the budgeted context with recall for a fresh question.
Then the demo conversation runs at a 2,000-token window and counts summarizer calls per 100 turns.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from langmem_tiers import MemoryConfig, TieredMemory
from langmem_tiers.cli.conversation import demo_turns
from langmem_tiers.summarizers.extractive import ExtractiveSummarizer

WORDS = ("budget trip Porto wedding flight piano lesson billing migration marathon cabin password lunch "
         "recipe peanut allergy Subaru boot space sister speech reminder calendar invoice report sprint "
         "deploy database cache latency garden basil podcast history hike").split()


ZIPF_WORDS = [f"{a}{b}{c}" for a in ("ka", "lo", "mi", "ne", "pu", "ra", "so", "ti", "vu", "ze")
              for b in ("b", "d", "g", "k", "m", "n", "p", "r", "s", "t")
              for c in ("ao", "el", "in", "or", "us", "ax", "ey", "ib", "on", "um", "ar", "et", "iz",
                        "op", "uk", "av", "ek", "il", "ot", "ud", "aj", "em", "ix", "oz", "ug",
                        "ab", "ef", "ih", "ol", "ut", "ac", "eg", "im", "oy", "uz", "ad", "eh", "ir",
                        "ow", "uv", "ag", "ej", "is", "ob", "ux", "ah", "ep", "it", "oc", "uy")]
ZIPF_WEIGHTS = [1 / (rank + 1) ** 1.1 for rank in range(len(ZIPF_WORDS))]
VOCAB = "zipf"


def sentence(rng: random.Random, n: int = 14) -> str:
    if VOCAB == "zipf":
        words = rng.choices(ZIPF_WORDS, weights=ZIPF_WEIGHTS, k=n)
    else:
        words = [rng.choice(WORDS) for _ in range(n)]
    return " ".join(words).capitalize() + "."


def question(rng: random.Random) -> str:
    pick = (lambda: rng.choices(ZIPF_WORDS, weights=ZIPF_WEIGHTS)[0]) if VOCAB == "zipf" else (
        lambda: rng.choice(WORDS))
    return f"What did I say about the {pick()} and the {pick()}?"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(size: int, vectors: bool, samples: int) -> dict[str, Any]:
    rng = random.Random(size)
    config = MemoryConfig(context_tokens=4000, window_tokens=2000, summary_tokens=400, recall_tokens=800)
    folder = Path(tempfile.mkdtemp(prefix="lt-bench-"))
    with TieredMemory.open(folder, session_id="bench", user_id="u", config=config,
                           embedder=None if vectors else False) as memory:
        start = time.perf_counter()
        for _ in range(size // 2):
            memory.add_messages([{"role": "user", "content": sentence(rng)},
                                 {"role": "assistant", "content": sentence(rng)}])
        fill_s = time.perf_counter() - start
        memory.flush()
        index_s = time.perf_counter() - start - fill_s
        add_ms = []
        for i in range(samples):
            t0 = time.perf_counter()
            memory.add("user" if i % 2 == 0 else "assistant", sentence(rng))
            add_ms.append((time.perf_counter() - t0) * 1000)
        memory.flush()
        context_ms = []
        for _ in range(samples):
            t0 = time.perf_counter()
            ctx = memory.context(question(rng))
            context_ms.append((time.perf_counter() - t0) * 1000)
        stats = memory.stats()
    return {
        "messages": stats.messages, "recall": "keyword+vector" if vectors else "keyword", "vocab": VOCAB,
        "fill_s": round(fill_s, 1), "index_s": round(index_s, 1),
        "add_ms_p50": round(statistics.median(add_ms), 3), "add_ms_p95": round(pct(add_ms, 0.95), 3),
        "context_ms_p50": round(statistics.median(context_ms), 2),
        "context_ms_p95": round(pct(context_ms, 0.95), 2),
        "recalled_per_context": len(ctx.recalled),
    }


def summarizer_calls(window_tokens: int = 2000) -> dict[str, Any]:
    calls = 0
    inner = ExtractiveSummarizer()

    class Counting:
        def summarize(self, request: Any) -> str:
            nonlocal calls
            calls += 1
            return inner.summarize(request)

        async def asummarize(self, request: Any) -> str:
            return self.summarize(request)

    turns = list(demo_turns())
    config = MemoryConfig(context_tokens=4000, window_tokens=window_tokens, summary_tokens=400, recall_tokens=800)
    with TieredMemory.open(tempfile.mkdtemp(prefix="lt-cost-"), session_id="cost", config=config,
                           summarizer=Counting(), embedder=False) as memory:
        for turn in turns:
            memory.add_messages(list(turn.messages))
        memory.flush()
    return {"turns": len(turns), "window_tokens": window_tokens, "summarizer_calls": calls,
            "calls_per_100_turns": round(100 * calls / len(turns), 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,100000")
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--no-vectors", action="store_true", help="keyword recall only")
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    parser.add_argument("--vocab", choices=("zipf", "small"), default="zipf")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    samples = 50 if args.quick else args.samples
    global VOCAB
    VOCAB = args.vocab
    results: dict[str, Any] = {
        "machine": f"{platform.machine()}, {platform.processor() or 'cpu'}, python {platform.python_version()}",
        "date": time.strftime("%Y-%m-%d"), "latency": [],
    }
    for size in (int(s) for s in args.sizes.split(",")):
        row = measure(size, vectors=not args.no_vectors, samples=samples)
        results["latency"].append(row)
        print(json.dumps(row))
    results["summarizer"] = summarizer_calls()
    print(json.dumps(results["summarizer"]))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
