"""Compare result files side by side: ``python -m langmem_tiers.eval.report a.json b.json ...``.

One row per result file: the ``overall`` scores, latency, ingest throughput and how
many turns a unit covers (what ``k`` counts differs between retrievers).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def load_results(paths: Sequence[Path]) -> list[dict[str, Any]]:
    out = []
    for path in paths:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if not isinstance(data, dict) or "overall" not in data:
            raise ValueError(f"{path} is not a result file of langmem_tiers.eval (no 'overall')")
        out.append(data)
    return out


def comparison_rows(results: Sequence[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the comparison, as strings (for a table or markdown)."""
    metrics: list[str] = []
    for r in results:
        metrics.extend(m for m in r["overall"] if m not in metrics)
    header = ["benchmark", "retriever", "n", *metrics, "p50 ms", "p95 ms", "ingest/s", "turns/unit"]
    rows = []
    for r in results:
        counts = r.get("counts", {})

        def fmt(v: Any, digits: int = 3) -> str:
            return "-" if v is None else f"{v:.{digits}f}"

        rows.append(
            [
                str(r.get("benchmark", "?")),
                str(r.get("config", {}).get("retriever", "?")),
                str(counts.get("questions_scored", "?")),
                *(fmt(r["overall"].get(m)) for m in metrics),
                fmt(r.get("latency_ms", {}).get("p50"), 1),
                fmt(r.get("latency_ms", {}).get("p95"), 1),
                fmt(r.get("ingest_per_s"), 1),
                fmt(counts.get("turns_per_unit"), 2),
            ]
        )
    return header, rows


def to_markdown(results: Sequence[dict[str, Any]]) -> str:
    header, rows = comparison_rows(results)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines.extend("| " + " | ".join(row) + " |" for row in rows)
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m langmem_tiers.eval.report", description=__doc__)
    p.add_argument("files", nargs="+", type=Path)
    p.add_argument("--markdown", action="store_true", help="print a markdown table")
    args = p.parse_args(argv)
    results = load_results(args.files)
    if args.markdown:
        sys.stdout.write(to_markdown(results))
        return 0
    from rich.console import Console
    from rich.table import Table

    header, rows = comparison_rows(results)
    table = Table()
    for i, name in enumerate(header):
        table.add_column(name, justify="left" if i < 2 else "right")
    for row in rows:
        table.add_row(*row)
    Console().print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
