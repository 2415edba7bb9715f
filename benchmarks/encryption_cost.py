"""What per-user encryption costs: add() and context(query) latency with encryption on vs off.

    .venv/bin/python benchmarks/encryption_cost.py                          # SQLite, 2,000 messages
    .venv/bin/python benchmarks/encryption_cost.py --messages 500 --adds 100 --queries 50   # quick
    .venv/bin/python benchmarks/encryption_cost.py --postgres postgresql://user@host:5432/db
    .venv/bin/python benchmarks/encryption_cost.py --tokenizer tiktoken --embedder local --out FILE

Two memories of one backend are filled with the same seeded conversation through the public
API, one plaintext and one opened with a keyring (AES-256-GCM per field, blind keyword index).
The timed calls then alternate between them call by call (the order flips every call), so a
machine whose load drifts charges both sides alike. Figures: p50 / p95 / mean in milliseconds
of ``add()`` (a durable append: sealing, blind tokens of the evicted turns' records, the commit)
and of ``context(query)`` (window, summary, profile and recall read back and opened), and the
on/off ratio of the p50s. ``--embedder local`` adds vector recall (the same on both sides:
vectors are not encrypted); the default is keyword recall only, which isolates the journal.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import shutil
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from langmem_tiers import MemoryConfig, TieredMemory, TiktokenCounter, WordCounter
from langmem_tiers.keyring import FolderKeyRing

WORDS = ("budget trip Porto wedding flight piano lesson billing migration marathon cabin password lunch recipe "
         "peanut allergy Subaru boot space sister speech reminder calendar invoice report sprint deploy database "
         "cache latency garden basil podcast history hike harbor locker copper violin museum ferry").split()


def sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def conversation(seed: int, turns: int) -> Iterator[tuple[str, str]]:
    rng = random.Random(seed)
    for i in range(turns):
        yield "user", f"Turn {i}: {sentence(rng, 12)} My note {rng.randrange(10**6)}."
        yield "assistant", sentence(rng, 18)


def questions(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    return [f"What did I say about the {rng.choice(WORDS)} and the {rng.choice(WORDS)}?" for _ in range(count)]


@contextmanager
def pair(backend: str, folder: Path, postgres: str | None, open_memory: Callable[..., TieredMemory]
         ) -> Iterator[tuple[TieredMemory, TieredMemory]]:
    """A plaintext memory and an encrypted one on fresh storage of one backend."""
    keys = folder / "keys"
    with ExitStack() as stack:
        if backend == "sqlite":
            off = stack.enter_context(open_memory(folder / "off"))
            on = stack.enter_context(open_memory(folder / "on", keyring=FolderKeyRing(keys)))
        else:
            from langmem_tiers.journal.postgres import PostgresJournal

            assert postgres is not None
            suffix = uuid.uuid4().hex[:8]
            journals = [PostgresJournal(postgres, schema=f"enc_bench_off_{suffix}"),
                        PostgresJournal(postgres, schema=f"enc_bench_on_{suffix}", keyring=FolderKeyRing(keys))]
            stack.callback(_drop_schemas, postgres, [j.schema for j in journals])
            for journal in journals:
                stack.callback(journal.close)
            off, on = (stack.enter_context(open_memory(None, journal=j)) for j in journals)
        yield off, on


def _drop_schemas(url: str, schemas: list[str]) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        for schema in schemas:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"p50_ms": round(1000 * ordered[len(ordered) // 2], 3),
            "p95_ms": round(1000 * ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))], 3),
            "mean_ms": round(1000 * statistics.fmean(ordered), 3), "n": len(ordered)}


def timed_alternating(call_off: Callable[[int], Any], call_on: Callable[[int], Any],
                      count: int) -> tuple[list[float], list[float]]:
    """Time ``count`` calls on each side, alternating, the order flipped every call."""
    off_times: list[float] = []
    on_times: list[float] = []
    for i in range(count):
        sides = [(call_off, off_times), (call_on, on_times)]
        for call, times in (sides if i % 2 == 0 else sides[::-1]):
            start = time.perf_counter()
            call(i)
            times.append(time.perf_counter() - start)
    return off_times, on_times


def run_backend(backend: str, args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    config = MemoryConfig(background_summary=False, background_index=False)
    counter = WordCounter() if args.tokenizer == "words" else TiktokenCounter.for_model(None)
    embedder: Any = False
    if args.embedder == "local":
        from langmem_tiers.embedders.local import LocalEmbedder

        embedder = LocalEmbedder()

    def open_memory(path: Path | None, *, journal: Any = None, keyring: Any = None) -> TieredMemory:
        if journal is None:
            assert path is not None
            return TieredMemory.open(path, session_id="bench", user_id="ada", config=config, counter=counter,
                                     embedder=embedder, keyring=keyring)
        from langmem_tiers.journal.base import Namespace
        from langmem_tiers.recall.engine import RecallIndex

        # A PostgreSQL journal with keyword recall (a Chroma server would add the same cost to both sides).
        return TieredMemory(journal, Namespace.of("bench", "ada"), config=config, counter=counter,
                            recall=RecallIndex(journal, None, None), owns_journal=False)

    with pair(backend, folder, args.postgres, open_memory) as (off, on):
        filled = time.perf_counter()
        prefill = list(conversation(args.seed, args.messages // 2))
        for memory in (off, on):
            for start in range(0, len(prefill), 2):
                memory.add_messages([{"role": r, "content": c} for r, c in prefill[start:start + 2]])
            memory.flush()
        fill_s = time.perf_counter() - filled
        timed = list(conversation(args.seed + 1, (args.adds + 1) // 2))
        add_off, add_on = timed_alternating(lambda i: off.add(*timed[i]), lambda i: on.add(*timed[i]), args.adds)
        off.flush()
        on.flush()
        asked = questions(args.seed + 2, args.queries)
        for memory in (off, on):  # warm caches on both sides alike
            memory.context(asked[0])
        ctx_off, ctx_on = timed_alternating(lambda i: off.context(asked[i]), lambda i: on.context(asked[i]),
                                            args.queries)
        same = [m.text for m in off.context(asked[0]).messages] == [m.text for m in on.context(asked[0]).messages]
    result = {"backend": backend, "messages": args.messages, "fill_s": round(fill_s, 1),
              "same_context_on_and_off": same,
              "add": {"off": percentiles(add_off), "on": percentiles(add_on)},
              "context": {"off": percentiles(ctx_off), "on": percentiles(ctx_on)}}
    for op in ("add", "context"):
        result[op]["p50_ratio"] = round(result[op]["on"]["p50_ms"] / result[op]["off"]["p50_ms"], 2)
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=2000, help="messages in each journal before timing")
    parser.add_argument("--adds", type=int, default=300, help="timed add() calls per side")
    parser.add_argument("--queries", type=int, default=100, help="timed context(query) calls per side")
    parser.add_argument("--postgres", help="also run on this PostgreSQL URL (temporary schemas, dropped after)")
    parser.add_argument("--folder", type=Path, help="where the SQLite journals and keys go (default: a temp folder)")
    parser.add_argument("--tokenizer", choices=("words", "tiktoken"), default="words",
                        help="WordCounter (default) or the real tiktoken counter (needs its local encoding)")
    parser.add_argument("--embedder", choices=("none", "local"), default="none",
                        help="keyword recall only (default) or the local MiniLM model with embedded Chroma")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, help="also write the JSON results to this file")
    args = parser.parse_args(argv)
    folder = args.folder or Path(tempfile.mkdtemp(prefix="langmem-enc-bench-"))
    results = {"machine": {"python": platform.python_version(), "platform": platform.platform()},
               "runs": []}
    try:
        for backend in ["sqlite"] + (["postgres"] if args.postgres else []):
            run = run_backend(backend, args, folder / backend)
            results["runs"].append(run)
            for op in ("add", "context"):
                off, on = run[op]["off"], run[op]["on"]
                print(f"{backend:8} {op:8} off p50 {off['p50_ms']:8.3f} ms  p95 {off['p95_ms']:8.3f} ms | "
                      f"on p50 {on['p50_ms']:8.3f} ms  p95 {on['p95_ms']:8.3f} ms | p50 x{run[op]['p50_ratio']}")
    finally:
        if args.folder is None:
            shutil.rmtree(folder, ignore_errors=True)
    text = json.dumps(results, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
