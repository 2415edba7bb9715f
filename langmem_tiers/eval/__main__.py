"""``python -m langmem_tiers.eval {locomo,longmemeval} --data PATH [--retriever NAME] [--layout sessions|single]``.

Reports recall@k of the ranking and ``context_*`` of what reaches the model at equal total
tokens (ours: ``context()``; baselines: their top units within the same budget).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from langmem_tiers.errors import LangmemTiersError
from langmem_tiers.eval.ours import LAYOUTS
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


def parse_positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"{text!r} must be an integer >= 1") from e
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be an integer >= 1")
    return n


def parse_setting(text: str) -> tuple[str, Any]:
    """``recall_k=12`` -> ``("recall_k", 12)``: ints, then floats, else the string."""
    name, sep, raw = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"--config {text!r} must be FIELD=VALUE, e.g. recall_k=12")
    value: Any = raw
    for cast in (int, float):
        try:
            value = cast(raw)
            break
        except ValueError:
            continue
    return name.strip(), value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m langmem_tiers.eval", description=__doc__)
    p.add_argument("benchmark", choices=BENCHMARKS)
    p.add_argument("--data", type=Path, required=True, help="official LoCoMo / LongMemEval_S JSON file")
    p.add_argument("--k", type=parse_k, default=[5, 10, 25], help="comma-separated cutoffs (default 5,10,25)")
    p.add_argument("--retriever", choices=RETRIEVERS, default="ours")
    p.add_argument("--layout", choices=LAYOUTS, default="sessions",
                   help="ours: each dataset session its own session of one user, questions from a fresh "
                        "session (sessions, default), or everything in one session (single)")
    p.add_argument("--limit-conversations", "--limit", type=parse_positive, default=None, dest="limit",
                   help="first N conversations (LoCoMo) / questions (LongMemEval: one haystack each)")
    p.add_argument("--limit-questions", type=parse_positive, default=None,
                   help="at most N scored questions per conversation / haystack")
    p.add_argument("--config", type=parse_setting, action="append", default=[], metavar="FIELD=VALUE",
                   help="a MemoryConfig field of ours (repeatable), e.g. --config recall_k=12; the baselines' "
                        "token budget follows context_tokens")
    p.add_argument("--json", type=Path, default=None, dest="json_out", help="write the results here")
    return p


def main(argv: list[str] | None = None) -> int:
    from rich.console import Console

    args = build_parser().parse_args(argv)
    console = Console(stderr=True)
    try:
        main_eval(args.benchmark, args.data, args.k, args.retriever, args.limit, args.json_out, console,
                  layout=args.layout, limit_questions=args.limit_questions, config_overrides=dict(args.config))
    except LangmemTiersError as e:
        console.print(f"[red]error:[/red] {e}")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
