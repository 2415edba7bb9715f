"""context() of two trees on the same fill, calls alternating, contexts compared (issue 15; not a timed test).

    git worktree add BEFORE REV                          # BEFORE: any folder outside this checkout
    cp -r FILL COPY_A && cp -r FILL COPY_B               # FILL: a folder benchmarks/scale.py filled
    .venv/bin/python benchmarks/context_ab.py --trees BEFORE . --fills COPY_A COPY_B

This host's speed drifts by more than a small change gains between two runs of ``scale.py``. Here each
tree serves ``context()`` in a process of its own (its code on ``PYTHONPATH``, its own copy of the fill,
opened as ``scale.py --reuse`` opens it), and the questions (the scale benchmark's) go to both in turn,
the first tree first on even questions and second on odd ones, so a drift weighs on both alike. The
contexts the model would receive (``Context.to_openai()``) are compared question by question and the
differing ones counted. They are a yardstick only: on a scope whose in-process index is an HNSW graph,
two processes built two graphs on every core (usearch's threaded add is not deterministic), and one tree
against itself (``--trees . .``) differed on every question at 100k in one session; at 10k of one user in
100 sessions, below the graph's size, it still differed on some (not explained yet). Since session 56 a
graph is built on one thread, the same in both processes: at 100k in one session the tree against itself
gave the same context on 110 of 110 questions (10 of them the warm-up's). Prints and writes
(``--json``) each tree's p50, p95 and mean.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

WARMUP = 10  # questions each tree answers first, untimed (model, caches, the vector index's build)
ADDS_SEED = 60  # the filler lines --adds puts into the live session


def worker(fill: str, adds: int, conversation: bool = False) -> None:
    """Serve context() on ``fill`` for the questions read from stdin, one JSON answer a line (run in the
    tree's own folder: its benchmarks/scale.py opens the fill, its package serves). ``adds`` filler lines
    go into the live session first, alternating user and assistant (the same lines in both trees). With
    ``conversation``, each question is added as the user's message before its context() and a filler
    reply after it, then ``flush()`` (scale.py's "in a conversation" figures)."""
    sys.path.insert(0, str(Path.cwd() / "benchmarks"))
    from scale import LIVE_SESSION, LIVE_USER, _open_setup, line

    with _open_setup(fill, None, True) as setup:
        memory = setup.for_session(LIVE_SESSION, user_id=LIVE_USER)
        rng = random.Random(ADDS_SEED)
        for i in range(adds):
            memory.add("user" if i % 2 == 0 else "assistant", line(rng))
        memory.flush()
        memory.context("What did we say about the plan?")
        scope_vectors = getattr(memory.recall, "_scope_vectors", None)
        if scope_vectors is not None:
            scope_vectors.wait_builds()
        print("AB ready", flush=True)
        for question in sys.stdin:
            question = question.rstrip("\n")
            if conversation:
                memory.add("user", question)
            t = time.perf_counter()
            context = memory.context(question)
            ms = (time.perf_counter() - t) * 1000
            if conversation:
                memory.add("assistant", line(rng))
                memory.flush()
            digest = hashlib.sha256(json.dumps(context.to_openai(), sort_keys=True, default=str).encode()).hexdigest()
            print("AB " + json.dumps({"ms": ms, "digest": digest}), flush=True)


def answer(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    for line in process.stdout:
        if line.startswith("AB "):
            return line[3:].strip()
    raise RuntimeError(f"a worker ended early (exit {process.wait()}): see its stderr above")


def tree_label(tree: Path) -> str:
    """The tree's commit, marked when its tracked files differ from it (a working tree under test)."""
    rev = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    changed = subprocess.run(["git", "-C", str(tree), "diff", "--quiet", "HEAD"], capture_output=True).returncode == 1
    return (rev.stdout.strip() or tree.name) + (" + uncommitted changes" if changed else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trees", nargs=2, type=Path, required=True, help="two checkouts (worktrees) to compare")
    parser.add_argument("--fills", nargs=2, required=True, help="a copy of one filled folder for each tree")
    parser.add_argument("--questions", type=int, default=300)
    parser.add_argument("--adds", type=int, default=0,
                        help="filler messages added to the live session before the questions (scale.py's "
                             "sampling state: --adds 60): the window then holds turns, as in a conversation")
    parser.add_argument("--conversation", action="store_true",
                        help="add each question as the user's message before its context(), and a reply after")
    parser.add_argument("--pause", type=float, default=0.0, metavar="MS",
                        help="wait this long before each call: the other process's onnxruntime threads, which "
                             "spin after each run, are then asleep, as between the turns of a conversation")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.adds, args.conversation)
        return
    workers = []
    for tree, fill in zip(args.trees, args.fills):
        tree = tree.resolve()
        env = {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{tree / 'benchmarks'}"}
        workers.append(subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--trees", ".", ".",
                                         "--fills", fill, fill, "--worker", fill, "--adds", str(args.adds),
                                         *(["--conversation"] if args.conversation else [])],
                                        cwd=tree, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
    try:
        for w in workers:
            answer(w)  # "ready"
        from scale import filler_question  # the scale benchmark's questions, over its filler's words

        rng = random.Random(7)
        questions = [filler_question(rng)
                     for _ in range(WARMUP + args.questions)]
        took: list[list[float]] = [[], []]
        differing = 0
        for n, question in enumerate(questions):
            order = (0, 1) if n % 2 == 0 else (1, 0)
            digests = {}
            for i in order:
                w = workers[i]
                assert w.stdin is not None
                time.sleep(args.pause / 1000)
                w.stdin.write(question + "\n")
                w.stdin.flush()
                reply = json.loads(answer(w))
                digests[i] = reply["digest"]
                if n >= WARMUP:
                    took[i].append(reply["ms"])
            differing += digests[0] != digests[1]
    finally:
        for w in workers:
            if w.stdin is not None:
                w.stdin.close()
            w.wait()
    result: dict[str, Any] = {"questions": args.questions, "adds": args.adds, "pause_ms": args.pause,
                              "conversation": args.conversation,
                              "differing_contexts": differing,
                              "questions_compared": len(questions), "trees": {}}
    labels = [tree_label(tree) for tree in args.trees]
    if labels[0] == labels[1]:  # one tree against itself: keep both rows
        labels = [f"{labels[0]} (first)", f"{labels[1]} (second)"]
    for label, ms in zip(labels, took):
        ms.sort()
        result["trees"][label] = {"p50_ms": round(statistics.median(ms), 2),
                                  "p95_ms": round(ms[int(0.95 * len(ms))], 2),
                                  "mean_ms": round(statistics.mean(ms), 2)}
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
