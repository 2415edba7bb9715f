"""Run one benchmark with one retriever: ingest, query, score, time, write JSON.

Every haystack (LoCoMo conversation, LongMemEval question) gets a fresh retriever.
Each question is asked once with ``k = max(ks)``; scores at smaller ``k`` use the
prefix of that ranking, and latency is that one query's wall time. ``k`` counts the
retriever's units (see ``config.unit`` in the JSON).
"""

from __future__ import annotations

import json
import os
import platform
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from langmem_tiers.errors import ConfigError
from langmem_tiers.eval.datasets import Haystack, Question, load_locomo, load_longmemeval
from langmem_tiers.eval.metrics import (
    Unit,
    evidence_recall,
    mean,
    percentile,
    session_recall,
    turn_recall_any,
)
from langmem_tiers.eval.retrievers import OURS_BUDGETS, RetrieverSpec, get_retriever

BENCHMARKS = ("locomo", "longmemeval")
DEFAULT_K = (5, 10, 25)

_VERSIONED = (
    "langmem-tiers",
    "sentence-transformers",
    "torch",
    "bm25s",
    "chromadb",
    "langchain-core",
    "langchain-classic",
    "langchain-chroma",
    "llama-index-core",
)

Scores = dict[str, float]


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in _VERSIONED:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def _loadavg() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):  # not on Windows
        return None


def score_question(benchmark: str, hay: Haystack, q: Question, units: Sequence[Unit], ks: Sequence[int]) -> Scores:
    """Scores of one question, keyed like the JSON's ``overall`` (metrics that do not apply are absent)."""
    out: Scores = {}
    for k in ks:
        if benchmark == "locomo":
            out[f"recall@{k}"] = evidence_recall(units, q.gold_turns, k)
        else:
            if q.gold_sessions:
                any_, all_ = session_recall(units, hay.turns, q.gold_sessions, k)
                out[f"session_recall_any@{k}"] = any_
                out[f"session_recall_all@{k}"] = all_
            if q.gold_turns:
                out[f"turn_recall_any@{k}"] = turn_recall_any(units, q.gold_turns, k)
    return out


def _metric_names(benchmark: str, ks: Sequence[int]) -> list[str]:
    if benchmark == "locomo":
        return [f"recall@{k}" for k in ks]
    return [f"{m}@{k}" for m in ("session_recall_any", "session_recall_all", "turn_recall_any") for k in ks]


def _aggregate(rows: Sequence[Scores], names: Sequence[str]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for name in names:
        vals = [r[name] for r in rows if name in r]
        out[name] = round(mean(vals), 4) if vals else None
    return out


def _load(benchmark: str, data: Path, limit: int | None) -> list[Haystack]:
    if benchmark == "locomo":
        return load_locomo(data, limit)
    if benchmark == "longmemeval":
        return load_longmemeval(data, limit)
    raise ConfigError(f"benchmark {benchmark!r} is unknown: choose one of {', '.join(BENCHMARKS)}")


def _check_ks(k: Sequence[int]) -> list[int]:
    ks = sorted(set(k))
    if not ks or any(not isinstance(x, int) or x < 1 for x in ks):
        raise ConfigError(f"k ({list(k)!r}) must be one or more integers >= 1, e.g. --k 5,10,25")
    return ks


def run_benchmark(
    benchmark: str,
    haystacks: Sequence[Haystack],
    spec: RetrieverSpec,
    k: Sequence[int] = DEFAULT_K,
    console: Any = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Evaluate ``spec`` on loaded haystacks; returns the JSON-ready result."""
    if benchmark not in BENCHMARKS:
        raise ConfigError(f"benchmark {benchmark!r} is unknown: choose one of {', '.join(BENCHMARKS)}")
    ks = _check_ks(k)
    kmax = ks[-1]
    rows: list[tuple[str, Scores]] = []
    excluded: dict[str, int] = defaultdict(int)
    latencies: list[float] = []
    unit_sizes: list[int] = []
    ingest_s = 0.0
    n_turns = 0
    scored = [q for h in haystacks for q in h.questions if q.excluded is None]
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=not progress,
        transient=False,
    )
    unit_name = "conversations" if benchmark == "locomo" else "haystacks"
    spec.warmup()
    load_start = _loadavg()
    with bar:
        t_hay = bar.add_task(f"{spec.name}: {unit_name}", total=len(haystacks))
        t_q = bar.add_task(f"{spec.name}: questions", total=len(scored))
        for hay in haystacks:
            bar.update(t_hay, description=f"{spec.name}: ingest {hay.hid} ({hay.n_turns} turns)")
            retriever = spec.factory()
            try:
                start = time.perf_counter()
                retriever.ingest(hay.sessions)
                ingest_s += time.perf_counter() - start
                n_turns += hay.n_turns
                bar.update(t_hay, description=f"{spec.name}: query {hay.hid}")
                for q in hay.questions:
                    if q.excluded is not None:
                        excluded[q.excluded] += 1
                        continue
                    start = time.perf_counter()
                    units = retriever.query(q.text, kmax)
                    latencies.append((time.perf_counter() - start) * 1000.0)
                    unit_sizes.extend(len(u) for u in units[:kmax])
                    rows.append((q.category, score_question(benchmark, hay, q, units, ks)))
                    bar.advance(t_q)
            finally:
                retriever.close()
            bar.advance(t_hay)
        bar.update(t_hay, description=f"{spec.name}: {unit_name}")

    names = _metric_names(benchmark, ks)
    groups: dict[str, list[Scores]] = defaultdict(list)
    for cat, r in rows:
        groups[cat].append(r)
    group_key = "by_category" if benchmark == "locomo" else "by_type"
    return {
        "benchmark": benchmark,
        "overall": _aggregate([r for _, r in rows], names),
        group_key: {cat: _aggregate(groups[cat], names) for cat in sorted(groups)},
        "counts": {
            "haystacks": len(haystacks),
            "turns": n_turns,
            "questions_scored": len(rows),
            group_key: {cat: len(groups[cat]) for cat in sorted(groups)},
            "excluded": dict(sorted(excluded.items())),
            # Units are what k counts: a retriever whose units cover more turns sees more per k.
            "turns_per_unit": round(mean(unit_sizes), 2) if unit_sizes else None,
            "units_per_query": round(len(unit_sizes) / len(rows), 2) if rows else None,
        },
        "latency_ms": {
            "p50": round(percentile(latencies, 50), 2) if latencies else None,
            "p95": round(percentile(latencies, 95), 2) if latencies else None,
            "mean": round(mean(latencies), 2) if latencies else None,
        },
        "ingest_per_s": round(n_turns / ingest_s, 1) if ingest_s > 0 else None,
        "ingest_s": round(ingest_s, 2),
        "config": {
            "retriever": spec.name,
            "unit": spec.unit,
            "k_counts": "retrieved units; a unit scores all the turns it covers",
            "query_k": kmax,
            "model": spec.model(),
            # Only "ours" has a window; the baselines index every turn at once.
            "window": OURS_BUDGETS if spec.name == "ours" else None,
            "k": ks,
            "versions": _versions(),
            # Timings depend on the host; a busy one (load above its cores) inflates them.
            "host": {"cpus": os.cpu_count(), "loadavg_1m_start": load_start, "loadavg_1m_end": _loadavg()},
        },
    }


def _print_summary(result: dict[str, Any], console: Any) -> None:
    from rich.table import Table

    group_key = "by_category" if "by_category" in result else "by_type"
    # One small table per metric family (recall, session_recall_any, ...) so it fits 80 columns.
    families: dict[str, list[str]] = defaultdict(list)
    for name in result["overall"]:
        families[name.split("@", 1)[0]].append(name)

    def fmt(v: float | None) -> str:
        return "-" if v is None else f"{v:.3f}"

    for family, names in families.items():
        table = Table(title=f"{result['benchmark']} / {result['config']['retriever']}: {family}@k")
        table.add_column(group_key.replace("by_", ""), no_wrap=True)
        table.add_column("n", justify="right")
        for name in names:
            table.add_column("@" + name.split("@", 1)[1], justify="right")
        for cat, scores in result[group_key].items():
            table.add_row(cat, str(result["counts"][group_key][cat]), *(fmt(scores[n]) for n in names))
        table.add_row(
            "overall",
            str(result["counts"]["questions_scored"]),
            *(fmt(result["overall"][n]) for n in names),
            style="bold",
        )
        console.print(table)
    lat = result["latency_ms"]
    console.print(
        f"query latency p50 {lat['p50']} ms, p95 {lat['p95']} ms; ingest {result['ingest_per_s']} turns/s "
        f"({result['counts']['turns']} turns in {result['ingest_s']} s); "
        f"excluded {result['counts']['excluded']}"
    )


def main_eval(
    benchmark: str,
    data: Path,
    k: list[int],
    retriever: str,
    limit: int | None,
    json_out: Path | None,
    console: Any,
    *,
    embedder: Callable[[], Any] | None = None,
) -> dict[str, Any]:
    """Entry point of ``langmem-tiers eval``: load, run, print a table, write ``json_out``.

    ``limit`` caps conversations (LoCoMo) or questions (LongMemEval). ``embedder``
    overrides the default local MiniLM factory (tests).
    """
    if limit is not None and limit < 1:
        raise ConfigError(f"limit ({limit}) must be >= 1 or omitted")
    ks = _check_ks(k)
    spec = get_retriever(retriever) if embedder is None else get_retriever(retriever, embedder)
    haystacks = _load(benchmark, Path(data), limit)
    result = run_benchmark(benchmark, haystacks, spec, ks, console=console, progress=console is not None)
    result["config"]["data"] = Path(data).name
    result["config"]["limit"] = limit
    if console is not None:
        _print_summary(result, console)
    if json_out is not None:
        Path(json_out).parent.mkdir(parents=True, exist_ok=True)
        Path(json_out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result
