"""The local embedder on an accelerator: what ``device="auto"`` picks, whether its vectors are the CPU's, how fast.

    .venv/bin/python benchmarks/accelerator_embedder.py --vectors OUT.npy          # here: the reference
    python3 benchmarks/accelerator_embedder.py --reference OUT.npy --json R.json   # on a GPU machine

Issue 15 asks that ``LocalEmbedder`` use a GPU when one is present (``device="auto"``: CUDA, then
MPS, then the CPU) and say which in ``stats()``; the test suite checks the choice with torch made
to report an accelerator, because CI has none. This runs the real thing where a GPU exists:

* which device ``"auto"`` resolves to and why (the driver files ``_accelerator_possible`` looks for);
* the vectors of a fixed text set (short chat lines and long turns that the long-text splitter cuts)
  from ``"auto"`` (torch on the accelerator), from the CPU on onnxruntime (the default runtime there)
  and on torch: the largest difference and the smallest cosine between them, and, with
  ``--reference``, against the CPU vectors another machine wrote with ``--vectors`` (which writes
  them and measures nothing else), e.g. the development machine with the same weights;
* texts per second by batch size on each, and one short query's latency (p50 of ``--queries``).

No part of the core is involved beyond ``LocalEmbedder`` (no journal, no Chroma), so the script
runs wherever torch and sentence-transformers do. Not a test: the figures go to BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale import line  # the scale benchmark's filler lines: one vocabulary

from langmem_tiers.embedders import local as local_mod
from langmem_tiers.embedders.local import LocalEmbedder, pick_device


def texts(short: int, long: int) -> list[str]:
    """``short`` chat lines of ~18 words and ``long`` turns of 150-600 words (cut by the splitter)."""
    rng = random.Random(48)
    out = [line(rng) for _ in range(short)]
    out += [" ".join(line(rng) for _ in range(rng.randint(8, 33))) for _ in range(long)]
    return out


def compare(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    return {"max_abs_diff": float(np.abs(a - b).max()), "min_cosine": float((a * b).sum(axis=1).min())}


def throughput(embedder: LocalEmbedder, items: list[str], sizes: list[int]) -> dict[str, float]:
    """Texts per second of one ``embed`` call over ``items`` at each batch size (best of two), on the
    embedder's device and runtime (a process loads a model once per device and runtime)."""
    out: dict[str, float] = {}
    for size in sizes:
        sized = LocalEmbedder(device=embedder.device, runtime=embedder.runtime, batch_size=size)
        best = min(_seconds(lambda e=sized: e.embed(items)) for _ in range(2))
        out[str(size)] = round(len(items) / best, 1)
    return out


def query_ms(embedder: LocalEmbedder, n: int) -> float:
    rng = random.Random(7)
    questions = [f"What did we say about {line(rng)}" for _ in range(n)]
    return round(statistics.median(_seconds(lambda q=q: embedder.embed([q])) * 1000 for q in questions), 2)


def _seconds(fn: Any) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--short", type=int, default=512, help="chat lines in the text set")
    p.add_argument("--long", type=int, default=128, help="long turns in the text set")
    p.add_argument("--batch-sizes", default="8,64,256")
    p.add_argument("--queries", type=int, default=100)
    p.add_argument("--vectors", type=Path, help="only write the CPU (onnx) vectors of the text set here (.npy)")
    p.add_argument("--reference", type=Path, help="compare with vectors another machine wrote (--vectors)")
    p.add_argument("--json", type=Path)
    args = p.parse_args()

    items = texts(args.short, args.long)
    if args.vectors is not None:  # the reference of another machine: nothing else is measured
        np.save(args.vectors, np.asarray(LocalEmbedder(device="cpu").embed(items), dtype=np.float32))
        return
    sizes = [int(s) for s in args.batch_sizes.split(",")]
    row: dict[str, Any] = {
        "machine": f"{platform.machine()} {os.cpu_count()} cores, python {platform.python_version()}",
        "driver_files": {f: os.path.exists(f) for f in local_mod._LINUX_GPU_DEVICES},
        "accelerator_possible": local_mod._accelerator_possible(),
        "auto_device": pick_device(),
        "texts": {"short": args.short, "long": args.long},
    }
    try:
        import torch

        row["torch"] = torch.__version__
        if torch.cuda.is_available():
            row["gpu"] = torch.cuda.get_device_name(0)
    except ImportError:
        row["torch"] = None
    embedders = {"auto": LocalEmbedder(), "cpu onnx": LocalEmbedder(device="cpu"),
                 "cpu torch": LocalEmbedder(device="cpu", runtime="torch")}
    vectors: dict[str, np.ndarray] = {}
    for name, emb in embedders.items():
        t = time.perf_counter()
        vectors[name] = np.asarray(emb.embed(items), dtype=np.float32)
        row[name] = {"device": emb.device, "runtime": emb.runtime, "default_batch": emb.batch_size,
                     "first_embed_s": round(time.perf_counter() - t, 2)}
        print(name, row[name], flush=True)
    row["agreement"] = {f"{a} vs {b}": compare(vectors[a], vectors[b])
                        for a, b in (("auto", "cpu onnx"), ("auto", "cpu torch"), ("cpu onnx", "cpu torch"))}
    if args.reference is not None:
        reference = np.load(args.reference)
        row["agreement"].update({f"{name} vs reference": compare(vectors[name], reference) for name in vectors})
    print(json.dumps(row["agreement"]), flush=True)
    for name, emb in embedders.items():
        row[name]["texts_per_s_by_batch"] = throughput(emb, items, sizes)
        row[name]["query_ms_p50"] = query_ms(emb, args.queries)
        print(name, row[name], flush=True)
    if args.json is not None:
        args.json.write_text(json.dumps(row, indent=1) + "\n")


if __name__ == "__main__":
    main()
