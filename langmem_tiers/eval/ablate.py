"""Ablations on one ingest: ours queried under several query-time configurations.

``python -m langmem_tiers.eval.ablate locomo --data PATH --haystacks 0,2 --variant
salient=recall_salient_weight=1.0 --variant when=recall_when_boost=0.5 --json OUT.json``

Each haystack (LoCoMo conversation, LongMemEval question) is ingested once with the base
configuration (the defaults of ours plus ``--config``); then every question is asked under each
variant in turn, the base first (``base``: no change), each variant changing only query-time
fields (:data:`QUERY_TIME_FIELDS`): an index-time switch needs its own ingest (run the
evaluation with ``--config``). Scores are the runner's (``recall@k`` of ``search()``, the
delivered context's ``context_*`` and ``answer_recall``), one block per variant, so one run gives
the whole ablation table (``--markdown`` prints it).

``--haystacks`` picks haystacks by their index in the file (the held-apart halves of
BENCHMARKS.md are fixed lists of indices).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from langmem_tiers.config import MemoryConfig
from langmem_tiers.errors import ConfigError, LangmemTiersError
from langmem_tiers.eval.__main__ import parse_setting
from langmem_tiers.eval.datasets import Haystack, Question
from langmem_tiers.eval.metrics import TextIndex, percentile
from langmem_tiers.eval.ours import OursRetriever, ours_config
from langmem_tiers.eval.retrievers import make_embedder
from langmem_tiers.eval.runner import (
    BENCHMARKS,
    Scores,
    _aggregate,
    _check_ks,
    _load,
    asked_at,
    metric_names,
    parse_indices,
    score_answer,
    score_context,
    score_question,
    select,
)

# MemoryConfig fields that act only when a query runs: a variant may change these and nothing else
# (the profile's two are read by context() alone: what it delivers of the memories extracted at ingest).
QUERY_TIME_FIELDS: Final = frozenset({
    "recall_salient_weight", "recall_time_boost", "recall_when_boost", "recall_session_weight",
    "recall_session_top", "recall_k", "recall_feedback_weight", "recall_feedback_docs",
    "recall_neighbor_weight", "recall_neighbor_docs", "recall_diversity", "recall_depth",
    "recall_rrf_k", "recall_keyword_weight", "recall_vector_weight",
    "profile_tokens", "profile_related_only",
})
BASE: Final = "base"


def parse_variant(text: str) -> tuple[str, dict[str, Any]]:
    """``"when=recall_when_boost=0.5,recall_k=8"`` -> ``("when", {"recall_when_boost": 0.5, "recall_k": 8})``."""
    name, sep, rest = text.partition("=")
    name = name.strip()
    if not sep or not name or not rest.strip():
        raise ConfigError(f"variant {text!r} must be NAME=FIELD=VALUE[,FIELD=VALUE...], "
                          "e.g. when=recall_when_boost=0.5")
    if name == BASE:
        raise ConfigError(f"variant name {BASE!r} is the unchanged configuration: choose another name")
    changes: dict[str, Any] = {}
    for part in rest.split(","):
        try:
            field, value = parse_setting(part)
        except argparse.ArgumentTypeError as e:
            raise ConfigError(f"variant {name!r}: {e}") from e
        if field not in QUERY_TIME_FIELDS:
            raise ConfigError(f"variant {name!r} changes {field!r}, which is not a query-time field "
                              f"({', '.join(sorted(QUERY_TIME_FIELDS))}): an index-time change needs its own "
                              "ingest (python -m langmem_tiers.eval ... --config FIELD=VALUE)")
        changes[field] = value
    return name, changes


def run_ablation(benchmark: str, haystacks: Sequence[Any], variants: Mapping[str, Mapping[str, Any]],
                 embedder: Any, *, base: MemoryConfig | None = None, k: Sequence[int] = (5, 10, 25),
                 progress: Callable[[str], None] | None = None,
                 checkpoint: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Ingest each haystack once with ``base``, then score every question under ``base`` and each variant.

    Every question is asked as of :func:`~langmem_tiers.eval.runner.asked_at` (the memory's clock).
    ``checkpoint`` gets the result so far after each haystack (a long run keeps what it measured).
    Returns ``{"variants": {name: {"changes", "overall", group: {...}, "context_p50_ms"}}, ...}``.
    """
    if benchmark not in BENCHMARKS:
        raise ConfigError(f"benchmark {benchmark!r} is unknown: choose one of {', '.join(BENCHMARKS)}")
    ks = _check_ks(k)
    base = base or ours_config()
    configs = {BASE: base, **{name: base.with_changes(**dict(ch)) for name, ch in variants.items()}}
    rows: dict[str, list[tuple[str, Scores]]] = defaultdict(list)
    context_ms: dict[str, list[float]] = defaultdict(list)
    ingest_s = 0.0
    n_messages = 0
    done: list[str] = []
    for hay in haystacks:
        retriever = OursRetriever(embedder, base)
        try:
            start = time.perf_counter()
            retriever.ingest(hay.sessions)
            ingest_s += time.perf_counter() - start
            n_messages += hay.n_messages
            index = TextIndex(hay.messages)
            for name, config in configs.items():
                if progress is not None:
                    progress(f"{hay.hid}: {name}")
                retriever.use(config)
                for q in hay.questions:
                    if q.excluded is not None:
                        continue
                    scores, ms = ask(retriever, benchmark, hay, q, ks, index)
                    context_ms[name].append(ms)
                    rows[name].append((q.category, scores))
        finally:
            retriever.close()
        done.append(hay.hid)
        if checkpoint is not None:
            checkpoint(_result(benchmark, ks, configs, variants, rows, context_ms, done, n_messages, ingest_s))
    return _result(benchmark, ks, configs, variants, rows, context_ms, done, n_messages, ingest_s)


def ask(retriever: OursRetriever, benchmark: str, hay: Haystack, q: Question, ks: Sequence[int],
        index: TextIndex) -> tuple[Scores, float]:
    """One question asked of an ingested store as of its date: the runner's scores (``search()``'s
    ``recall@k``, the delivered context's ``context_*``, ``answer_recall``) and ``context()``'s milliseconds."""
    retriever.ask_at(asked_at(hay, q))
    units = retriever.query(q.text, ks[-1])
    start = time.perf_counter()
    delivered = retriever.context(q.text)
    ms = (time.perf_counter() - start) * 1000.0
    scores = score_context(benchmark, hay, q, delivered, index)
    scores.update(score_answer(q, delivered)[0])
    scores.update(score_question(benchmark, hay, q, units, ks))
    return scores, ms


def _result(benchmark: str, ks: Sequence[int], configs: Mapping[str, MemoryConfig],
            variants: Mapping[str, Mapping[str, Any]], rows: Mapping[str, list[tuple[str, Scores]]],
            context_ms: Mapping[str, list[float]], done: Sequence[str], n_messages: int,
            ingest_s: float) -> dict[str, Any]:
    names = metric_names(benchmark, ks)
    group_key = "by_category" if benchmark == "locomo" else "by_type"
    out: dict[str, Any] = {}
    for name in configs:
        groups: dict[str, list[Scores]] = defaultdict(list)
        for cat, r in rows[name]:
            groups[cat].append(r)
        out[name] = {
            "changes": dict(variants.get(name, {})),
            "overall": _aggregate([r for _, r in rows[name]], names),
            group_key: {cat: _aggregate(groups[cat], names) for cat in sorted(groups)},
            "questions": len(rows[name]),
            "context_p50_ms": round(percentile(context_ms[name], 50), 2) if context_ms[name] else None,
        }
    return {"benchmark": benchmark, "haystacks": list(done), "messages": n_messages,
            "ingest_s": round(ingest_s, 2), "k": list(ks), "variants": out}


def markdown(result: Mapping[str, Any], metrics: Sequence[str] | None = None) -> str:
    """One row per variant: its changes, the chosen metrics and each category's first metric."""
    variants = result["variants"]
    group_key = "by_category" if result["benchmark"] == "locomo" else "by_type"
    first = next(iter(variants.values()))
    if metrics is None:
        metrics = (["context_recall", "answer_recall", "recall@10"] if result["benchmark"] == "locomo"
                   else ["context_session_recall_all", "context_message_recall_any", "answer_recall",
                         "session_recall_all@5", "message_recall_any@5"])
    groups = list(first[group_key])
    head = ["variant", "changes", *metrics, *(f"{group_key[3:]} {g}" for g in groups), "context() p50 ms"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, v in variants.items():
        changes = ", ".join(f"{k}={val}" for k, val in v["changes"].items()) or "-"
        cells = [name, changes, *(_fmt(v["overall"].get(m)) for m in metrics),
                 *(_fmt(v[group_key].get(g, {}).get(metrics[0])) for g in groups), _fmt(v["context_p50_ms"], 1)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m langmem_tiers.eval.ablate", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("benchmark", choices=BENCHMARKS)
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--haystacks", default=None,
                   help="comma-separated indices of the conversations / questions to run (default: all)")
    p.add_argument("--variant", action="append", default=[], metavar="NAME=FIELD=VALUE[,FIELD=VALUE]",
                   help="a query-time configuration to score beside the base (repeatable)")
    p.add_argument("--config", action="append", default=[], metavar="FIELD=VALUE",
                   help="a MemoryConfig field of the base (and so of every variant), e.g. an index-time one")
    p.add_argument("--json", type=Path, default=None, dest="json_out")
    p.add_argument("--markdown", action="store_true", help="print the ablation table as markdown")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        indices = parse_indices(args.haystacks) if args.haystacks else None
        variants = dict(parse_variant(v) for v in args.variant)
        base = ours_config(**dict(parse_setting(c) for c in args.config))
        haystacks = select(_load(args.benchmark, args.data, None), indices)
        started = time.time()
        command = " ".join(["python -m langmem_tiers.eval.ablate", *(argv or sys.argv[1:])])

        def save(result: dict[str, Any]) -> None:
            result["command"] = command
            if args.json_out is not None:
                args.json_out.parent.mkdir(parents=True, exist_ok=True)
                args.json_out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")

        result = run_ablation(args.benchmark, haystacks, variants, make_embedder(), base=base,
                              progress=lambda s: print(f"[{time.time() - started:7.0f}s] {s}", file=sys.stderr,
                                                       flush=True), checkpoint=save)
        save(result)
        if args.markdown:
            print(markdown(result))
    except (LangmemTiersError, argparse.ArgumentTypeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
