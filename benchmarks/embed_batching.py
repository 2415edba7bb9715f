"""How the ONNX runtime batches one embed call (issue 15, target 3): the run overhead, and the padding a plan costs.

    .venv/bin/python benchmarks/embed_batching.py --overhead
    .venv/bin/python benchmarks/embed_batching.py --data ../shared/data/longmemeval/longmemeval_s_dev.json \\
        --haystacks 1 --rounds 5

``--overhead`` fits ``seconds = a + b * slots + c * n * L^2`` to forward runs of ``n`` texts padded to ``L``
tokens (slots = n * L, n in 1..8, L in 16..256, each shape timed ``--repeats`` times, medians), and prints
``a / b``: what one extra run costs in token slots, the constant ``onnx_runtime.RUN_OVERHEAD_TOKENS`` stands
for.

``--data`` ingests LongMemEval haystacks through the API once (``benchmarks/ingest.py``'s ``ingest``: an
add per message, a flush per session) and captures the background indexer's embed calls (about 8 texts
each), then compares two plans of each call (its texts cut into model-sized pieces): sorted and cut every
``cap`` texts (sentence-transformers' plan, ours before) and ``plan_batches`` (ours now). It prints the
token slots each plan computes against the real tokens, and times both on the model, alternating over
``--rounds`` rounds (medians). Dev data is only read here: the constant was fitted by ``--overhead`` on
synthetic shapes, not on it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from langmem_tiers.embedders import onnx_runtime
from langmem_tiers.embedders.local import LocalEmbedder
from langmem_tiers.embedders.long_text import Pieces


def fit_overhead(model: onnx_runtime.OnnxModel, repeats: int) -> dict[str, float]:
    import numpy as np

    shapes = [(n, length) for n in (1, 2, 4, 8) for length in (16, 32, 64, 128, 256)]
    seconds: dict[tuple[int, int], list[float]] = {s: [] for s in shapes}
    for _ in range(repeats):
        for n, length in shapes:  # every shape once per pass: load spells spread over all of them
            ids = np.full((n, length), 2023, dtype=np.int64)  # one ordinary word piece, repeated
            feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
            t = time.perf_counter()
            model._session.run(None, {k: feeds[k] for k in model.inputs})
            seconds[(n, length)].append(time.perf_counter() - t)
    # seconds = a + b * slots + c * n * L^2: attention grows with the square of the length, and leaving it
    # out would bend the line and bias its intercept (the run's fixed cost).
    design = np.array([[1.0, n * length, n * length**2] for n, length in shapes])
    y = np.array([statistics.median(seconds[s]) for s in shapes])
    (a, b, c), *_ = np.linalg.lstsq(design, y, rcond=None)
    return {"run_s": round(float(a), 6), "slot_s": float(b), "slot_length_s": float(c),
            "overhead_slots": round(float(a / b), 1)}


def sorted_cut(lengths: Sequence[int], cap: int) -> list[list[int]]:
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    return [order[i:i + cap] for i in range(0, len(order), cap)]


def slots(lengths: Sequence[int], batches: list[list[int]]) -> int:
    return sum(len(b) * max(lengths[i] for i in b) for b in batches)


def workload(path: Path, haystacks: int, emb: LocalEmbedder) -> list[list[str]]:
    """The embed calls the core makes ingesting these haystacks (benchmarks/ingest.py's ingest, captured)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from ingest import ingest, longmemeval_sessions

    calls: list[list[str]] = ingest(longmemeval_sessions(path, haystacks), emb)["embedded"]
    return calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--overhead", action="store_true", help="fit the run overhead in token slots")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--data", type=Path, default=None, help="LongMemEval JSON")
    parser.add_argument("--haystacks", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    emb = LocalEmbedder(device="cpu", runtime="onnx")
    model = emb._model_runtime()
    assert isinstance(model, onnx_runtime.OnnxModel)
    emb.embed(["warm up"] * 8)
    if args.overhead:
        print(fit_overhead(model, args.repeats))
    if args.data is None:
        return
    calls = workload(args.data, args.haystacks, emb)
    pieces = [Pieces.of(c, emb._split).texts for c in calls]
    lengths = [[len(e.ids) for e in model._inputs.encode_batch([model._prepare(t) for t in p])] for p in pieces]
    cap = emb.batch_size
    real = sum(sum(ls) for ls in lengths)
    print({"calls": len(calls), "texts": sum(len(p) for p in pieces), "real_tokens": real,
           "slots_sorted_cut": sum(slots(ls, sorted_cut(ls, cap)) for ls in lengths),
           "slots_planned": sum(slots(ls, onnx_runtime.plan_batches(ls, cap)) for ls in lengths),
           "runs_sorted_cut": sum(len(sorted_cut(ls, cap)) for ls in lengths),
           "runs_planned": sum(len(onnx_runtime.plan_batches(ls, cap)) for ls in lengths)})
    planner = onnx_runtime.plan_batches
    timed: dict[str, list[float]] = {"sorted_cut": [], "planned": []}
    try:
        for r in range(args.rounds):
            for name in (["sorted_cut", "planned"] if r % 2 == 0 else ["planned", "sorted_cut"]):
                onnx_runtime.plan_batches = planner if name == "planned" else (  # type: ignore[assignment]
                    lambda ls, c, overhead=0: sorted_cut(ls, c))
                t = time.perf_counter()
                for p in pieces:
                    model.forward(p, cap)
                timed[name].append(time.perf_counter() - t)
    finally:
        onnx_runtime.plan_batches = planner  # type: ignore[assignment]
    print({name: {"median_s": round(statistics.median(v), 2), "all_s": [round(x, 2) for x in v]}
           for name, v in timed.items()})


if __name__ == "__main__":
    main()
