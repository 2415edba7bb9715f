"""Python's full garbage collections inside context(), with and without ``gc.freeze()`` after warm-up.

    .venv/bin/python benchmarks/gc_pauses.py --records 10000 --calls 400 --json OUT

A serving process holds the objects of every library it imported (about 90,000 tracked objects here:
chromadb, onnxruntime, tiktoken, pydantic...). CPython's oldest generation is collected when enough
objects have survived into it since the last such collection, and each of those collections walks all of
them. ``gc.freeze()`` (CPython >= 3.7) moves everything alive into a permanent generation that
collections skip. The application decides (it is process-wide state, not the library's to set).

One fill of ``--records`` filler messages (scale.py's many-sessions layout, an extracted fact every six
turns, random filler vectors), then per mode a fresh process opens it, warms up with 20 ``context()``
calls, collects and freezes or not (``--modes``), and times ``--calls`` calls of ``context(question)``
(scale.py's plain questions), with every collection timed by generation (``gc.callbacks``). The modes'
order rotates over ``--rounds``.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale import LIVE_SESSION, LIVE_USER, _open_setup, fill, filler_question, pct
from timing import collections_timed


def measure(folder: Path, calls: int, mode: str) -> dict[str, Any]:
    rng = random.Random(5)
    with _open_setup(folder, None, True) as setup:
        memory = setup.for_session(LIVE_SESSION, user_id=LIVE_USER)
        for _ in range(20):
            memory.context(filler_question(rng, True))
        if mode in ("collect", "freeze"):
            gc.collect()
        if mode == "freeze":
            gc.freeze()
        took = []
        with collections_timed() as seconds:
            for _ in range(calls):
                t = time.perf_counter()
                memory.context(filler_question(rng, True))
                took.append((time.perf_counter() - t) * 1000)
    pauses = {g: [s * 1000 for s in v] for g, v in seconds.items()}
    took.sort()
    return {
        "mode": mode, "calls": calls, "tracked_objects_after": len(gc.get_objects()),
        "context_ms": {"p50": round(pct(took, 0.5), 2), "p95": round(pct(took, 0.95), 2),
                       "p99": round(pct(took, 0.99), 2), "max": round(took[-1], 2)},
        "collections": {f"gen{g}": {"count": len(v), "mean_ms": round(sum(v) / len(v), 3),
                                    "max_ms": round(max(v), 2), "ms_per_call": round(sum(v) / calls, 3)}
                        for g, v in sorted(pauses.items())},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=10000, help="filler messages of the one user")
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--modes", type=lambda s: s.split(","), default=["plain", "collect", "freeze"],
                        help="after warm-up: nothing (plain), gc.collect() (collect), gc.collect() and gc.freeze()")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of every mode, the order rotated each round")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--measure", type=Path, default=None, help=argparse.SUPPRESS)  # a child's folder
    parser.add_argument("--mode", default="plain", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure is not None:
        print(json.dumps(measure(args.measure, args.calls, args.mode)))
        return
    rows = []
    with tempfile.TemporaryDirectory(prefix="lt-gc-") as folder:
        with _open_setup(folder, None, True) as setup:
            fill(setup, args.records, random.Random(args.records), True, "many-sessions", 100, memories_every=6)
        for r in range(args.rounds):
            shift = r % len(args.modes)
            for mode in [*args.modes[shift:], *args.modes[:shift]]:
                child = [sys.executable, __file__, "--measure", folder, "--calls", str(args.calls), "--mode", mode]
                out = subprocess.run(child, check=True, capture_output=True, text=True)
                row = json.loads(out.stdout.strip().splitlines()[-1])
                row["round"] = r
                print(json.dumps(row), flush=True)
                rows.append(row)
    if args.json:
        meta = {"command": " ".join(["benchmarks/gc_pauses.py", *sys.argv[1:]]), "records": args.records,
                "python": sys.version.split()[0]}
        args.json.write_text(json.dumps({"run": meta, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
