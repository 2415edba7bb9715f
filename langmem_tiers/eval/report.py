"""Compare result files side by side: ``python -m langmem_tiers.eval.report a.json b.json ...``.

Like for like first: rows are grouped by benchmark and by unit (whole turns, then single
messages), ours first in each group, so every row sits beside its twins; each row names
its unit and how many messages a unit covers. Columns lead with what reaches the model at
equal total tokens (``context_*``, the budget and the tokens used), then recall@k of the
ranking (same unit and same k within a group), then cost.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langmem_tiers.eval.retrievers import UNIT_KINDS

UNIT_ORDER = {"turn": 0, "message": 1}


def load_results(paths: Sequence[Path]) -> list[dict[str, Any]]:
    out = []
    for path in paths:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if not isinstance(data, dict) or "overall" not in data:
            raise ValueError(f"{path} is not a result file of langmem_tiers.eval (no 'overall')")
        out.append(data)
    return out


def unit_kind(result: dict[str, Any]) -> str:
    cfg = result.get("config", {})
    return str(cfg.get("unit_kind") or UNIT_KINDS.get(str(cfg.get("retriever")), "?"))


def label(result: dict[str, Any]) -> str:
    """The retriever's name, with the ``--config`` overrides of ours when there were any."""
    cfg = result.get("config", {})
    name = str(cfg.get("retriever", "?"))
    overrides = cfg.get("overrides") or {}
    if overrides:
        name += " (" + ", ".join(f"{k}={v}" for k, v in overrides.items()) + ")"
    return name


def _ordered(results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    def key(item: tuple[int, dict[str, Any]]) -> tuple[str, int, int, int]:
        n, r = item
        ours = 0 if str(r.get("config", {}).get("retriever", "")).startswith("ours") else 1
        return str(r.get("benchmark", "")), UNIT_ORDER.get(unit_kind(r), 9), ours, n

    return [r for _, r in sorted(enumerate(results), key=key)]


def _metrics(results: Sequence[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """(delivery metrics, ranking metrics) in first-seen order; the lenient ``_by_id`` variants stay in the JSON."""
    context: list[str] = []
    ranked: list[str] = []
    for r in results:
        for m in r["overall"]:
            if m == "context_tokens" or m.endswith("_by_id"):
                continue
            target = ranked if "@" in m else context
            if m not in target:
                target.append(m)
    return context, ranked


def comparison_rows(results: Sequence[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the comparison, as strings (for a table or markdown)."""
    results = _ordered(results)
    context, ranked = _metrics(results)
    header = ["benchmark", "retriever", "unit", "msgs/unit", "layout", "n", *context, "budget", "ctx tokens",
              *ranked, "p50 ms", "ctx p50 ms", "ingest/s", "not ingested"]
    rows = []
    for r in results:
        counts = r.get("counts", {})
        cfg = r.get("config", {})

        def fmt(v: Any, digits: int = 3) -> str:
            return "-" if v is None else f"{v:.{digits}f}"

        # "turns_per_unit": the name result files written before 2026-11-26 used for the same count.
        per_unit = counts.get("messages_per_unit", counts.get("turns_per_unit"))
        rows.append(
            [
                str(r.get("benchmark", "?")),
                label(r),
                unit_kind(r),
                fmt(per_unit, 2),
                str(cfg.get("layout") or "-"),
                str(counts.get("questions_scored", "?")),
                *(fmt(r["overall"].get(m)) for m in context),
                str(cfg.get("context_budget", "-")),
                fmt(r["overall"].get("context_tokens"), 0),
                *(fmt(r["overall"].get(m)) for m in ranked),
                fmt(r.get("latency_ms", {}).get("p50"), 1),
                fmt(r.get("context_latency_ms", {}).get("p50"), 1),
                fmt(r.get("ingest_per_s"), 1),
                str(counts.get("not_ingested_total", "-")),
            ]
        )
    return header, rows


def to_markdown(results: Sequence[dict[str, Any]]) -> str:
    header, rows = comparison_rows(results)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines.extend("| " + " | ".join(row) + " |" for row in rows)
    return "\n".join(lines) + "\n"


def by_group_markdown(results: Sequence[dict[str, Any]], metric: str) -> str:
    """One metric per category / question type (rows: retrievers in like-for-like order)."""
    results = _ordered(results)
    groups: list[str] = []
    for r in results:
        table = r.get("by_category") or r.get("by_type") or {}
        groups.extend(g for g in table if g not in groups)
    header = ["retriever", "unit", *groups, "overall"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in results:
        table = r.get("by_category") or r.get("by_type") or {}
        cells = [table.get(g, {}).get(metric) for g in groups] + [r["overall"].get(metric)]
        lines.append("| " + " | ".join([label(r), unit_kind(r),
                                         *("-" if v is None else f"{v:.3f}" for v in cells)]) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m langmem_tiers.eval.report", description=__doc__)
    p.add_argument("files", nargs="+", type=Path)
    p.add_argument("--markdown", action="store_true", help="print a markdown table")
    p.add_argument("--by", metavar="METRIC", default=None,
                   help="instead: one METRIC (e.g. context_recall, recall@10) per category / question type")
    args = p.parse_args(argv)
    results = load_results(args.files)
    if args.by:
        sys.stdout.write(by_group_markdown(results, args.by))
        return 0
    if args.markdown:
        sys.stdout.write(to_markdown(results))
        return 0
    from rich.console import Console
    from rich.table import Table

    header, rows = comparison_rows(results)
    table = Table()
    for i, name in enumerate(header):
        table.add_column(name, justify="left" if i < 5 else "right")
    for row in rows:
        table.add_row(*row)
    Console().print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
