"""Ingest through the public API against the embedding floor, in one run (issue 15, target 3).

    .venv/bin/python benchmarks/ingest.py --chat 1000 \\
        --data ../shared/data/longmemeval/longmemeval_s_dev.json --haystacks 1 --rounds 3 \\
        --json benchmarks/results/ingest.json

Two workloads, each ingested into a fresh embedded store (SQLite + Chroma) with the real local
embedder on the CPU: (a) ``--chat`` short chat lines (user/assistant turns of about 18 words, in
sessions of 100 messages), (b) ``--haystacks`` LongMemEval haystacks (long turns), one session
per dataset session. Ingest is what an application does: ``add()`` per message and ``flush()`` at
the end of each session (the evaluation harness does the same); the background indexer embeds
while adds go on.

The floor is the embedder alone on exactly the texts the core embedded during that ingest (the
recall records: whole turns, long ones cut into chunks by langmem_tiers.recall.units; captured
from the embedder's calls), in one call, at the best batch size of a sweep (``--batch-sizes`` on
``--sweep`` texts spread over the workload, each size timed ``--sweep-rounds`` times in rotated
order, the median kept), and in the fastest place: ``--floor-modes`` times it on a fresh worker
thread (where the core's indexer embeds) and on the main thread with 1 and with 2 torch threads,
and keeps the fastest of each round (all are reported: on this shared 2-core machine the main
thread with torch's default 2 threads ran 2-3x slower than a worker thread under load). The
machine is shared, so the floor and the ingest alternate over ``--rounds`` rounds (ingest first
in even rounds, the floor first in odd ones) and every round gives its own ratio; the median and
the spread are reported. ``--replay`` adds a third leg per round: the core's own embed calls
replayed alone (same texts per call, the embedder's default batch size), which splits "the calls
are smaller than the floor's" from "the embedder shares the CPU with the adds".

Where the time goes (per ingest round): ``embedder_busy_s`` is the wall time during which an
embed call ran (the union of the calls' intervals), so ``ingest = floor + (busy - floor) +
(ingest - busy)``: the embedder running slower than alone, then the time it sat idle (adds not
overlapped, Chroma upserts, outbox transactions). Counters name the parts: the benchmark wraps,
on the live objects, the embedder's ``embed`` (and inside it the runtime's ``forward`` and the
long-text splitter), the Chroma store's ``upsert``, the journal's write transactions and outbox
calls, the token counter, and the chunker; each sums wall time over all threads (the background
indexer overlaps adds, so counters can add up to more than the wall time). The wrappers cost a
few microseconds a call.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale import line  # the scale benchmark's filler lines: one vocabulary
from timing import Counters

from langmem_tiers import MemoryConfig, TieredMemory
from langmem_tiers.embedders.local import LocalEmbedder
from langmem_tiers.recall import units

Sessions = list[list[tuple[str, str]]]
Interval = tuple[float, float]


def merged(intervals: Sequence[Interval]) -> list[Interval]:
    out: list[Interval] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def overlap(xs: Sequence[Interval], ys: Sequence[Interval]) -> float:
    """Seconds covered by both interval lists (each without overlaps of its own)."""
    return sum(max(0.0, min(b, d) - max(a, c)) for a, b in xs for c, d in ys)


def chat_sessions(messages: int, per_session: int = 100) -> Sessions:
    rng = random.Random(15)
    out: Sessions = []
    for start in range(0, messages, per_session):
        n = min(per_session, messages - start)
        out.append([("user" if i % 2 == 0 else "assistant", line(rng)) for i in range(n)])
    return out


def longmemeval_sessions(path: Path, haystacks: int) -> Sessions:
    from langmem_tiers.eval.datasets import iter_longmemeval

    out: Sessions = []
    for haystack in iter_longmemeval(path, limit=haystacks):
        out.extend([[(m.role, m.text) for m in session if m.text.strip()] for session in haystack.sessions])
    return [s for s in out if s]


def ingest(sessions: Sessions, embedder: LocalEmbedder, embedded_vectors: str | None = None,
           synchronous: str | None = None, known: dict[str, list[float]] | None = None,
           sleep_per_text: float = 0.0) -> dict[str, Any]:
    """Add every message through the API, flush per session; returns timings, the breakdown, the texts
    and their vectors. ``synchronous``: the journal's SQLite setting instead of its default FULL (what
    durability costs). ``known``: vectors of an earlier ingest of the same sessions, by text: the
    embedder answers from them without running the model, after sleeping ``sleep_per_text`` seconds a
    text (the model-free leg: the indexer keeps the cadence, so the batches, of a real model, and the
    process's CPU time is what the rest of ingest costs)."""
    counters = Counters()
    embedded: list[list[str]] = []
    vectors: dict[str, list[float]] = {}
    embed_spans: list[Interval] = []
    spans_lock = threading.Lock()
    undo: list[Callable[[], None]] = []
    runtime = embedder._model_runtime()  # onnxruntime or torch: what embed() runs the model on
    original_embed = embedder.embed

    def capturing_embed(texts: Sequence[str]) -> list[list[float]]:
        t = time.perf_counter()
        try:
            if known is not None:
                time.sleep(sleep_per_text * len(texts))
                return [known[text] for text in texts]
            got = original_embed(texts)
            vectors.update(zip(texts, got))
            return got
        finally:
            with spans_lock:
                embedded.append(list(texts))
                embed_spans.append((t, time.perf_counter()))

    embedder.embed = capturing_embed  # type: ignore[method-assign]
    undo.append(lambda: setattr(embedder, "embed", original_embed))
    counters.wrap(embedder, "embed", "embedder.embed (all of it)", undo)
    counters.wrap(embedder, "_split", "  long-text splitter (tokenizes texts > 254 bytes)", undo)
    counters.wrap(runtime, "forward", f"  model forward ({embedder.runtime}: tokenize + run)", undo)
    counters.wrap(units, "chunk_words", "chunk_words (recall units)", undo)
    config = MemoryConfig(recall_scope="user", embedded_vectors=embedded_vectors)  # type: ignore[arg-type]
    folder = Path(tempfile.mkdtemp(prefix="lt-ingest-"))
    add_spans: list[Interval] = []
    flush_spans: list[Interval] = []
    records = 0
    with TieredMemory.open(folder, session_id="setup", user_id="u", config=config, embedder=embedder) as root:
        journal = root.journal
        if synchronous is not None:
            journal._db.execute(f"PRAGMA synchronous={synchronous}")  # type: ignore[attr-defined]
        counters.wrap_cm(journal, "write", "journal write transactions (add path)", undo)
        for attr in ("claim_outbox", "outbox_done", "records"):
            counters.wrap(journal, attr, "journal outbox/record reads (indexer)", undo)
        assert root.recall is not None
        assert root.recall.store is not None
        counters.wrap(root.recall.store, "upsert", "vector store upsert", undo)
        counters.wrap(root.counter, "count_message", "token counter (tiktoken)", undo)
        t0 = time.perf_counter()
        cpu0 = time.process_time()
        for i, session in enumerate(sessions):
            memory = root.for_session(f"s{i}", user_id="u")
            t = time.perf_counter()
            for role, text in session:
                memory.add(role, text)
            t1 = time.perf_counter()
            memory.flush()
            t2 = time.perf_counter()
            add_spans.append((t, t1))
            flush_spans.append((t1, t2))
            records += journal.count_records(memory._ns_id)
            memory.close()
        t_end = time.perf_counter()
        cpu_s = time.process_time() - cpu0
    for u in reversed(undo):
        u()
    wall = t_end - t0
    busy = merged(embed_spans)
    busy_s = sum(b - a for a, b in busy)
    add_s = sum(b - a for a, b in add_spans)
    flush_s = sum(b - a for a, b in flush_spans)
    during_adds = overlap(busy, add_spans)
    during_flush = overlap(busy, flush_spans)
    return {
        "wall_s": wall, "cpu_s": cpu_s, "add_s": add_s, "flush_s": flush_s, "records": records,
        "messages": sum(len(s) for s in sessions), "embedded": embedded, "vectors": vectors,
        "embedder_busy_s": busy_s, "embed_during_adds_s": during_adds, "embed_during_flush_s": during_flush,
        "embedder_idle_during_adds_s": add_s - during_adds, "embedder_idle_during_flush_s": flush_s - during_flush,
        "counters_s_calls": {k: (round(v, 2), counters.calls[k]) for k, v in sorted(counters.seconds.items())},
    }


def timed_embed(embedder: LocalEmbedder, texts: list[str], batch_size: int, mode: str = "worker") -> float:
    """Seconds to embed ``texts`` in one call, on a fresh worker thread (as the core's indexer does) or on
    the main thread with ``main:N`` torch threads (the torch runtime; onnxruntime keeps its own pool)."""
    emb = LocalEmbedder(embedder._model, batch_size=batch_size, device=embedder.device,
                        runtime=embedder.runtime)  # the same loaded model, another batch size
    if mode == "worker":
        took: list[float] = []

        def run() -> None:
            t = time.perf_counter()
            emb.embed(texts)
            took.append(time.perf_counter() - t)

        worker = threading.Thread(target=run)
        worker.start()
        worker.join()
        return took[0]
    if emb.runtime != "torch":
        t = time.perf_counter()
        emb.embed(texts)
        return time.perf_counter() - t
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(int(mode.split(":")[1]))
    try:
        t = time.perf_counter()
        emb.embed(texts)
        return time.perf_counter() - t
    finally:
        torch.set_num_threads(before)


def sweep(texts: list[str], embedder: LocalEmbedder, sizes: Sequence[int], size: int,
          rounds: int) -> dict[str, Any]:
    """Batch sizes on a sample spread over the workload (its length mix), rotated order, median per size."""
    step = max(len(texts) // max(size, 1), 1)
    sample = texts[::step][:size]
    got: dict[int, list[float]] = defaultdict(list)
    for r in range(rounds):
        shift = r % len(sizes)
        for bs in [*sizes[shift:], *sizes[:shift]]:
            got[bs].append(timed_embed(embedder, sample, bs))
    median = {bs: statistics.median(v) for bs, v in got.items()}
    best = min(median, key=lambda b: median[b])
    return {"texts": len(sample), "rounds": rounds, "best_batch": best,
            "median_s_by_batch": {b: round(s, 2) for b, s in sorted(median.items())},
            "all_s_by_batch": {b: [round(s, 2) for s in v] for b, v in sorted(got.items())}}


def replay(calls: list[list[str]], embedder: LocalEmbedder) -> float:
    """The core's embed calls alone, in order, on a worker thread (where the indexer makes them)."""
    took: list[float] = []

    def run() -> None:
        t = time.perf_counter()
        for call in calls:
            embedder.embed(call)
        took.append(time.perf_counter() - t)

    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    return took[0]


def spread(values: Sequence[float]) -> dict[str, float]:
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3),
            "max": round(max(values), 3)}


def report(name: str, sessions: Sessions, embedder: LocalEmbedder, args: argparse.Namespace) -> dict[str, Any]:
    ingests: list[dict[str, Any]] = []
    floors: list[float] = []
    floor_cpus: list[float] = []
    floors_by_mode: dict[str, list[float]] = defaultdict(list)
    replays: list[float] = []
    frees: list[dict[str, Any]] = []
    known: dict[str, list[float]] = {}
    calls: list[list[str]] = []
    texts: list[str] = []
    best = 0
    sweep_row: dict[str, Any] = {}
    for r in range(args.rounds):
        legs = ["ingest", "floor"] if r % 2 == 0 else ["floor", "ingest"]
        if args.replay:
            legs.append("replay")
        if args.model_free:
            legs.append("model-free")
        for leg in legs:
            if leg == "ingest":
                got = ingest(sessions, embedder, args.embedded_vectors, args.synchronous)
                got_calls = got.pop("embedded")
                known.update(got.pop("vectors"))
                if not texts:  # the first ingest names the texts; the sweep runs once they are known
                    calls = got_calls
                    texts = [t for call in calls for t in call]
                    sweep_row = sweep(texts, embedder, args.batch_sizes, args.sweep, args.sweep_rounds)
                    best = sweep_row["best_batch"]
                    print(f"{name}: sweep {sweep_row['median_s_by_batch']} -> batch {best}", flush=True)
                got["embed_calls"] = len(got_calls)
                got["texts_embedded"] = sum(len(c) for c in got_calls)
                ingests.append(got)
            elif leg == "floor":
                if not texts:  # odd rounds only come after an ingest named the texts
                    raise RuntimeError("the floor needs the texts of an ingest first")
                by_mode: dict[str, float] = {}
                cpu_by_mode: dict[str, float] = {}
                for mode in args.floor_modes:
                    cpu = time.process_time()
                    by_mode[mode] = timed_embed(embedder, texts, best, mode)
                    cpu_by_mode[mode] = time.process_time() - cpu
                    floors_by_mode[mode].append(by_mode[mode])
                fastest = min(by_mode, key=lambda m: by_mode[m])  # the floor: the embedder alone at its best
                floors.append(by_mode[fastest])
                floor_cpus.append(cpu_by_mode[fastest])
            elif leg == "model-free":
                free = ingest(sessions, embedder, args.embedded_vectors, args.synchronous, known=known,
                              sleep_per_text=floors[-1] / len(texts))
                frees.append({"wall_s": free["wall_s"], "cpu_s": free["cpu_s"]})
            else:
                replays.append(replay(calls, embedder))
        print(f"{name}: round {r}: ingest {ingests[-1]['wall_s']:.2f} s, floor {floors[-1]:.2f} s, "
              f"ratio {floors[-1] / ingests[-1]['wall_s']:.3f}", flush=True)
    ratios = [f / g["wall_s"] for f, g in zip(floors, ingests)]
    # The breakdown of the round whose ratio is the median (an actual round, not a mix of rounds).
    mid = sorted(range(len(ratios)), key=lambda i: ratios[i])[len(ratios) // 2]
    g, floor_s = ingests[mid], floors[mid]
    words = sum(len(t.split()) for t in texts)
    rounds = [{"ingest_s": round(i["wall_s"], 2), "floor_s": round(f, 2), "speed_ratio": round(f / i["wall_s"], 3),
               "ingest_cpu_s": round(i["cpu_s"], 2), "floor_cpu_s": round(floor_cpus[n], 2),
               **({"replay_s": round(replays[n], 2)} if replays else {}),
               **({"model_free_s": round(frees[n]["wall_s"], 2), "model_free_cpu_s": round(frees[n]["cpu_s"], 2)}
                  if frees else {})}
              for n, (i, f) in enumerate(zip(ingests, floors))]
    cpu_row: dict[str, Any] = {
        "ingest": spread([i["cpu_s"] for i in ingests]), "floor": spread(floor_cpus),
        # Cores the floor keeps busy (onnxruntime's spinning threads included): the cores the model holds.
        "floor_cores_busy": spread([c / f for c, f in zip(floor_cpus, floors)]),
    }
    if frees:
        # The rest of ingest, measured with the model answered from the vectors it gave before; at best
        # it runs beside the model on the floor's cores, so ingest >= floor + rest / cores busy, and
        # floor / that = the model's share of ingest's CPU, floor CPU / (floor CPU + rest).
        cpu_row["model_free_ingest"] = spread([x["cpu_s"] for x in frees])
        cpu_row["ceiling_ratio"] = spread([c / (c + x["cpu_s"]) for c, x in zip(floor_cpus, frees)])
    row = {
        "workload": name, "messages": g["messages"], "records": g["records"], "texts_embedded": len(texts),
        "words_per_text": round(words / max(len(texts), 1), 1),
        "embed_calls": g["embed_calls"], "texts_per_call": round(g["texts_embedded"] / max(g["embed_calls"], 1), 1),
        "embedder_default_batch": embedder.batch_size,
        "best_batch": best, "sweep": sweep_row,
        # target 3 reads "ingest at >= 0.9 of the floor": floor time / ingest time, as a speed ratio
        "speed_ratio_floor_over_ingest": spread(ratios),
        "ingest_s": spread([i["wall_s"] for i in ingests]), "floor_s": spread(floors),
        "floor_s_by_mode": {m: [round(x, 2) for x in v] for m, v in floors_by_mode.items()},
        "messages_per_s": round(g["messages"] / g["wall_s"], 1),
        "cpu_s": cpu_row,
        "rounds": rounds,
        "median_round": mid,
        "breakdown_median_round_s": {
            "ingest": round(g["wall_s"], 2),
            "floor (embedder alone, best batch, one call)": round(floor_s, 2),
            "embedder slower inside ingest (busy - floor)": round(g["embedder_busy_s"] - floor_s, 2),
            "embedder idle (ingest - busy)": round(g["wall_s"] - g["embedder_busy_s"], 2),
            "  of which during adds (add path not overlapped)": round(g["embedder_idle_during_adds_s"], 2),
            "  of which during flush (upserts, outbox, summaries)": round(g["embedder_idle_during_flush_s"], 2),
            "embedder busy": round(g["embedder_busy_s"], 2),
            "  of which during adds (overlapped)": round(g["embed_during_adds_s"], 2),
            "  of which during flush": round(g["embed_during_flush_s"], 2),
            "add phase": round(g["add_s"], 2), "flush phase": round(g["flush_s"], 2),
            **({"core's calls replayed alone": round(replays[mid], 2)} if replays else {}),
        },
        "counters_s_calls_median_round": g["counters_s_calls"],
    }
    print(json.dumps(row), flush=True)
    return row


def warm_up(embedder: LocalEmbedder) -> None:
    """Load the model and import the stores' code before anything is timed."""
    embedder.embed(["warm up the model"])
    with TieredMemory.open(Path(tempfile.mkdtemp(prefix="lt-warm-")), session_id="w", user_id="u",
                           embedder=embedder) as memory:
        for i in range(4):
            memory.add("user" if i % 2 == 0 else "assistant", f"warm up message {i}")
        memory.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chat", type=int, default=1000, help="short chat messages to ingest (0: none)")
    parser.add_argument("--data", type=Path, default=None, help="LongMemEval JSON (longmemeval_s_dev.json)")
    parser.add_argument("--haystacks", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3, help="floor/ingest pairs per workload (alternating order)")
    parser.add_argument("--sweep", type=int, default=128, help="texts the batch-size sweep embeds")
    parser.add_argument("--sweep-rounds", type=int, default=2)
    parser.add_argument("--batch-sizes", type=lambda s: [int(x) for x in s.split(",")], default=[8, 16, 32, 64, 128])
    parser.add_argument("--floor-modes", type=lambda s: s.split(","), default=["worker", "main:1", "main:2"],
                        help="where the floor embeds: 'worker' (a fresh thread, as the indexer) or 'main:N' (the "
                             "main thread, N torch threads); each round's floor is the fastest")
    parser.add_argument("--sessions", type=int, default=0, help="LongMemEval: only the first N sessions (0: all)")
    parser.add_argument("--replay", action="store_true", help="also replay the core's embed calls alone each round")
    parser.add_argument("--model-free", action="store_true",
                        help="also ingest each round with the model answered from the vectors it gave before: "
                             "the CPU the rest of ingest needs, and the ratio it leaves at best (ceiling_ratio)")
    parser.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch's default)")
    parser.add_argument("--runtime", choices=["auto", "onnx", "torch"], default="auto",
                        help="LocalEmbedder's runtime (auto: onnxruntime on the CPU)")
    parser.add_argument("--embedded-vectors", choices=["chroma", "sqlite"], default=None,
                        help="the embedded folder's vector store (MemoryConfig.embedded_vectors; default Chroma)")
    parser.add_argument("--synchronous", choices=["FULL", "NORMAL"], default=None,
                        help="the journal's SQLite synchronous setting (default FULL: each add() on disk before it "
                             "returns); NORMAL shows what that durability costs ingest")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    embedder = LocalEmbedder(device="cpu", runtime=args.runtime)
    warm_up(embedder)
    rows: list[dict[str, Any]] = []
    if args.chat:
        rows.append(report(f"chat lines ({args.chat} messages)", chat_sessions(args.chat), embedder, args))
    if args.data is not None:
        sessions = longmemeval_sessions(args.data, args.haystacks)
        if args.sessions:
            sessions = sessions[:args.sessions]
        first = f", first {args.sessions} sessions" if args.sessions else ""
        label = f"LongMemEval ({args.haystacks} haystacks{first})"
        rows.append(report(label, sessions, embedder, args))
    if args.json:
        meta = {"command": " ".join(sys.argv), "runtime": embedder.runtime, "torch_threads": torch.get_num_threads(),
                "vector_store": args.embedded_vectors or "chroma", "synchronous": args.synchronous or "FULL",
                "python": platform.python_version(), "torch": torch.__version__}
        args.json.write_text(json.dumps({"run": meta, "workloads": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
