"""What recall filling the spare budget costs ``context()`` (issue 15, target 1): on, the default, against off.

    .venv/bin/python benchmarks/recall_share_cost.py --size 1000          # fills a fresh folder first
    .venv/bin/python benchmarks/recall_share_cost.py --reuse COPY         # a copy of a scale.py fill

``MemoryConfig.recall_uses_spare`` (default on) lets recall fill what the window, summary and profile
leave of the whole budget, not just ``recall_tokens``: ``context()`` then asks for enough hits to fill
it (up to 64) where ``recall_k`` (6) would do, and every rank list reads ``recall_depth`` candidates per
hit asked. This measures the price of that choice on one history: benchmarks/scale.py's configuration and
live session (one session, ``--layout one-session``), the same 60 adds it makes before sampling, then
``--questions`` questions, each asked under both settings in alternating order (one process, one index),
with the hits and recall tokens each delivered. A fresh fill is made as scale.py makes it (random filler vectors);
``--reuse`` measures a folder as it is, and a folder that an earlier run added a conversation to has a
fuller window, so recall is asked for fewer hits there.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale import LIVE_SESSION, LIVE_USER, _open_setup, fill, filler_question, line, pct

from langmem_tiers import TieredMemory


def measure(folder: Path, questions: int) -> dict[str, Any]:
    with _open_setup(folder, None, True) as setup:
        memory: TieredMemory = setup.for_session(LIVE_SESSION, user_id=LIVE_USER)
        on = memory.config
        settings = {"spare on (default)": on, "spare off": on.with_changes(recall_uses_spare=False)}
        writer = random.Random(1)
        for i in range(60):  # scale.py's state when it samples: 60 fresh messages in the window
            memory.add("user" if i % 2 == 0 else "assistant", line(writer))
        memory.flush()
        memory.context("What did we say about the plan?")
        scope_vectors = getattr(memory.recall, "_scope_vectors", None)
        if scope_vectors is not None:
            scope_vectors.wait_builds()  # an HNSW graph past 20k vectors: measure the installed index
        asker = random.Random(7)
        rows: dict[str, dict[str, list[float]]] = {
            name: {"ms": [], "hits": [], "recall_tokens": []} for name in settings}
        for i in range(questions + 10):
            question = filler_question(asker)
            for name in (list(settings) if i % 2 else list(settings)[::-1]):
                memory.config = settings[name]
                t = time.perf_counter()
                ctx = memory.context(question)
                ms = (time.perf_counter() - t) * 1000
                if i >= 10:  # the first ten warm both paths
                    rows[name]["ms"].append(ms)
                    rows[name]["hits"].append(len(ctx.recalled))
                    rows[name]["recall_tokens"].append(ctx.tokens.recall)
        stored = memory.journal.count_messages()
    return {"stored_messages": stored, "questions": questions, **{name: {
        "context_ms_p50": round(statistics.median(r["ms"]), 2), "context_ms_p95": round(pct(r["ms"], 0.95), 2),
        "hits_p50": statistics.median(r["hits"]), "recall_tokens_p50": statistics.median(r["recall_tokens"]),
    } for name, r in rows.items()}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--size", type=int, help="fill a fresh folder with this many messages in one session")
    where.add_argument("--reuse", type=Path, help="measure a folder benchmarks/scale.py filled (one-session)")
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--json", type=Path, help="write the result here")
    args = parser.parse_args(argv)
    folder = args.reuse
    if folder is None:
        folder = Path(tempfile.mkdtemp(prefix="lt-share-"))
        with _open_setup(folder, None, True) as setup:
            fill(setup, args.size, random.Random(args.size), True, "one-session", 100)
    result = measure(folder, args.questions)
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
