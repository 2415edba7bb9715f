"""``python -m langmem_tiers.eval {locomo,longmemeval} --data PATH [--k 5,10,25] [--retriever NAME]``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from langmem_tiers.errors import LangmemTiersError
from langmem_tiers.eval.retrievers import RETRIEVERS
from langmem_tiers.eval.runner import BENCHMARKS, main_eval


def parse_k(text: str) -> list[int]:
    try:
        ks = [int(x) for x in text.split(",") if x.strip()]
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"--k {text!r} must be integers separated by commas, e.g. 5,10,25") from e
    if not ks or min(ks) < 1:
        raise argparse.ArgumentTypeError(f"--k {text!r} must hold integers >= 1, e.g. 5,10,25")
    return ks


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m langmem_tiers.eval", description=__doc__)
    p.add_argument("benchmark", choices=BENCHMARKS)
    p.add_argument("--data", type=Path, required=True, help="official LoCoMo / LongMemEval_S JSON file")
    p.add_argument("--k", type=parse_k, default=[5, 10, 25], help="comma-separated cutoffs (default 5,10,25)")
    p.add_argument("--retriever", choices=RETRIEVERS, default="ours")
    p.add_argument("--limit", type=int, default=None, help="first N conversations (LoCoMo) / questions (LongMemEval)")
    p.add_argument("--json", type=Path, default=None, dest="json_out", help="write the results here")
    return p


def main(argv: list[str] | None = None) -> int:
    from rich.console import Console

    args = build_parser().parse_args(argv)
    console = Console(stderr=True)
    try:
        main_eval(args.benchmark, args.data, args.k, args.retriever, args.limit, args.json_out, console)
    except LangmemTiersError as e:
        console.print(f"[red]error:[/red] {e}")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
