"""Does a query's embedding gain from running alongside its keyword search? (issue 15; not a timed test)

    .venv/bin/python benchmarks/embed_overlap.py FOLDER [--questions 300]

FOLDER is a copy of a folder ``benchmarks/scale.py`` filled (it is opened as ``scale.py --reuse``
opens it, and written to). For scale.py's questions, each timed in turn: the local embedder alone on
the question; the journal's keyword search of the live user's sessions alone (60 candidates, a fixed
number: recall asks for its own); the two one after the other; and the embedding on a thread while the
keyword search runs on the caller's (what a ``Start``/``Join`` of the embedding would do in recall).
Each is run twice, in
a child process each: with onnxruntime's defaults (intra-op threads on every physical core, spinning
while they wait for work) and with spinning off. Prints one JSON line per setting with the p50s.

Why it exists: session 44 built the overlap (the embedding started before the keyword search and
joined after it) and measured no gain; this reproduces why (BENCHMARKS.md, issue 15, session 44).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

WARMUP = 20  # questions run first, untimed


def no_spinning() -> None:
    """Make every onnxruntime session of this process keep its idle intra-op threads from spinning.
    onnxruntime's own session option; the embedder has no parameter for it, so the session class is
    wrapped here, before the embedder loads its model (a probe, not a product path)."""
    import onnxruntime

    real = onnxruntime.InferenceSession

    def session(path: Any, sess_options: Any = None, *args: Any, **kwargs: Any) -> Any:
        options = sess_options or onnxruntime.SessionOptions()
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        return real(path, options, *args, **kwargs)

    onnxruntime.InferenceSession = session


def _ms(fn: Any) -> float:
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1000


def probe(folder: Path, questions: int, spinning: bool) -> dict[str, Any]:
    if not spinning:
        no_spinning()
    from scale import LIVE_SESSION, LIVE_USER, _open_setup, filler_question

    from langmem_tiers.journal.base import Scope

    rng = random.Random(7)
    asked = [filler_question(rng)
             for _ in range(questions + WARMUP)]
    with _open_setup(folder, None, True) as setup:
        memory = setup.for_session(LIVE_SESSION, user_id=LIVE_USER)
        assert memory.recall is not None
        assert memory.recall.embedder is not None
        embedder, journal = memory.recall.embedder, memory.recall.journal
        ns_ids = journal.scope_listing(Scope("user", memory.namespace)).ids
        times: dict[str, list[float]] = {"embed": [], "keyword": [], "one_after_the_other": [], "alongside": []}

        def alongside(question: str) -> None:
            thread = threading.Thread(target=embedder.embed, args=([question],))
            thread.start()
            journal.keyword_search(question, ns_ids, 60)
            thread.join()

        for i, question in enumerate(asked):
            runs = {"embed": lambda: embedder.embed([question]),
                    "keyword": lambda: journal.keyword_search(question, ns_ids, 60),
                    "one_after_the_other": lambda: (embedder.embed([question]),
                                                    journal.keyword_search(question, ns_ids, 60)),
                    "alongside": lambda: alongside(question)}
            for name, fn in runs.items():
                ms = _ms(fn)
                if i >= WARMUP:
                    times[name].append(ms)
    return {"spinning": spinning, "sessions": len(ns_ids), "questions": questions,
            **{f"{name}_ms_p50": round(statistics.median(ms), 2) for name, ms in times.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path, help="a copy of a folder scale.py filled (it is written to)")
    parser.add_argument("--questions", type=int, default=300)
    parser.add_argument("--child", choices=["spinning", "no-spinning"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(probe(args.folder, args.questions, args.child == "spinning")), flush=True)
        return
    for setting in ("spinning", "no-spinning"):  # a process each: the option holds for a whole process
        subprocess.run([sys.executable, __file__, str(args.folder), "--questions", str(args.questions),
                        "--child", setting], check=True, env=os.environ)


if __name__ == "__main__":
    main()
