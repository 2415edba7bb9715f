"""How the ONNX runtime batches one embed call (issue 15, target 3): the run overhead, and the padding a plan costs.

    .venv/bin/python benchmarks/embed_batching.py --overhead
    .venv/bin/python benchmarks/embed_batching.py --shapes --repeats 7
    .venv/bin/python benchmarks/embed_batching.py --data ../shared/data/longmemeval/longmemeval_s_dev.json \\
        --haystacks 1 --rounds 5
    .venv/bin/python benchmarks/embed_batching.py --chat 1000 --caps 8,16,32,64,128 --rounds 5

``--overhead`` fits ``seconds = a + b * slots + c * n * L^2`` to forward runs of ``n`` texts padded to ``L``
tokens (slots = n * L, n in 1..8, L in 16..256, each shape timed ``--repeats`` times, medians), and prints
``a / b``: what one extra run costs in token slots, the constant ``onnx_runtime.RUN_OVERHEAD_TOKENS`` stands
for.

``--shapes`` prints the microseconds per token slot of runs of 1-64 texts of 32-256 tokens (medians of
``--repeats``): whether a larger batch computes a slot cheaper.

``--data`` ingests LongMemEval haystacks through the API once (``benchmarks/ingest.py``'s ``ingest``: an
add per message, a flush per session) and captures the background indexer's embed calls (about 8 texts
each), then compares plans of each call (its texts cut into model-sized pieces): sorted and cut every
``cap`` texts (sentence-transformers' plan, ours before) and ``plan_batches`` (ours now), at the
embedder's default cap and at each of ``--caps``. ``--chat N`` does the same on N short chat lines
(``benchmarks/ingest.py``'s chat workload: sessions of 100 messages). It prints the token slots and
runs each plan computes against the real tokens, and times every plan on the model, in rotated order
over ``--rounds`` rounds (medians). Dev data is only read here: the constant was fitted by
``--overhead`` on synthetic shapes, not on it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from langmem_tiers.embedders import onnx_runtime
from langmem_tiers.embedders.local import LocalEmbedder
from langmem_tiers.embedders.long_text import Pieces


def time_shapes(model: onnx_runtime.OnnxModel, shapes: list[tuple[int, int]],
                repeats: int) -> dict[tuple[int, int], float]:
    """Median seconds of one run of ``n`` texts padded to ``L`` tokens, per shape ``(n, L)``."""
    import numpy as np

    seconds: dict[tuple[int, int], list[float]] = {s: [] for s in shapes}
    for _ in range(repeats):
        for n, length in shapes:  # every shape once per pass: load spells spread over all of them
            ids = np.full((n, length), 2023, dtype=np.int64)  # one ordinary word piece, repeated
            feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
            t = time.perf_counter()
            model._session.run(None, {k: feeds[k] for k in model.inputs})
            seconds[(n, length)].append(time.perf_counter() - t)
    return {s: statistics.median(v) for s, v in seconds.items()}


def fit_overhead(model: onnx_runtime.OnnxModel, repeats: int) -> dict[str, float]:
    import numpy as np

    shapes = [(n, length) for n in (1, 2, 4, 8) for length in (16, 32, 64, 128, 256)]
    medians = time_shapes(model, shapes, repeats)
    # seconds = a + b * slots + c * n * L^2: attention grows with the square of the length, and leaving it
    # out would bend the line and bias its intercept (the run's fixed cost).
    design = np.array([[1.0, n * length, n * length**2] for n, length in shapes])
    y = np.array([medians[s] for s in shapes])
    (a, b, c), *_ = np.linalg.lstsq(design, y, rcond=None)
    return {"run_s": round(float(a), 6), "slot_s": float(b), "slot_length_s": float(c),
            "overhead_slots": round(float(a / b), 1)}


def slot_costs(model: onnx_runtime.OnnxModel, repeats: int) -> dict[str, float]:
    """Microseconds per token slot of a run, by shape: whether a larger batch computes a slot cheaper."""
    shapes = [(n, length) for length in (32, 128, 256) for n in (1, 2, 4, 8, 16, 32, 64) if n * length <= 8192]
    return {f"n={n} L={length}": round(s / (n * length) * 1e6, 1)
            for (n, length), s in time_shapes(model, shapes, repeats).items()}


def sorted_cut(lengths: Sequence[int], cap: int) -> list[list[int]]:
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    return [order[i:i + cap] for i in range(0, len(order), cap)]


def slots(lengths: Sequence[int], batches: list[list[int]]) -> int:
    return sum(len(b) * max(lengths[i] for i in b) for b in batches)


def workload(args: argparse.Namespace, emb: LocalEmbedder) -> list[list[str]]:
    """The embed calls the core makes ingesting the LongMemEval haystacks or the chat lines
    (benchmarks/ingest.py's ingest, captured)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from ingest import chat_sessions, ingest, longmemeval_sessions

    sessions = longmemeval_sessions(args.data, args.haystacks) if args.data else chat_sessions(args.chat)
    calls: list[list[str]] = ingest(sessions, emb)["embedded"]
    return calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--overhead", action="store_true", help="fit the run overhead in token slots")
    parser.add_argument("--shapes", action="store_true",
                        help="print the microseconds per token slot of runs of 1-64 texts of 32-256 tokens")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--data", type=Path, default=None, help="LongMemEval JSON")
    parser.add_argument("--haystacks", type=int, default=1)
    parser.add_argument("--chat", type=int, default=0, help="chat lines to ingest instead of --data (0: none)")
    parser.add_argument("--caps", type=lambda s: [int(x) for x in s.split(",")], default=[],
                        help="more caps (texts per run) to time plan_batches at, beside the default's")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    emb = LocalEmbedder(device="cpu", runtime="onnx")
    model = emb._model_runtime()
    assert isinstance(model, onnx_runtime.OnnxModel)
    emb.embed(["warm up"] * 8)
    if args.overhead:
        print(fit_overhead(model, args.repeats))
    if args.shapes:
        print(slot_costs(model, args.repeats))
    if args.data is None and not args.chat:
        return
    calls = workload(args, emb)
    pieces = [Pieces.of(c, emb._split).texts for c in calls]
    lengths = [[len(e.ids) for e in model._inputs.encode_batch([model._prepare(t) for t in p])] for p in pieces]
    planner = onnx_runtime.plan_batches
    # name -> (planner, cap): sentence-transformers' plan at the default cap, then ours at each cap
    plans: dict[str, tuple[Callable[..., list[list[int]]], int]] = {
        f"sorted_cut@{emb.batch_size}": (lambda ls, c, overhead=0: sorted_cut(ls, c), emb.batch_size)}
    for cap in dict.fromkeys([emb.batch_size, *args.caps]):
        plans[f"planned@{cap}"] = (planner, cap)
    print({"calls": len(calls), "texts": sum(len(p) for p in pieces),
           "real_tokens": sum(sum(ls) for ls in lengths),
           "slots": {name: sum(slots(ls, plan(ls, cap)) for ls in lengths) for name, (plan, cap) in plans.items()},
           "runs": {name: sum(len(plan(ls, cap)) for ls in lengths) for name, (plan, cap) in plans.items()}})
    timed: dict[str, list[float]] = {name: [] for name in plans}
    names = list(plans)
    try:
        for r in range(args.rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:  # rotated: spells spread over plans
                onnx_runtime.plan_batches, cap = plans[name]
                t = time.perf_counter()
                for p in pieces:
                    model.forward(p, cap)
                timed[name].append(time.perf_counter() - t)
    finally:
        onnx_runtime.plan_batches = planner
    if args.rounds:  # --rounds 0: the slots and runs only
        print({name: {"median_s": round(statistics.median(v), 2), "all_s": [round(x, 2) for x in v]}
               for name, v in timed.items()})


if __name__ == "__main__":
    main()
