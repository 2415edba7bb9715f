"""``python -m langmem_tiers.eval {locomo,longmemeval} --data PATH [--retriever NAME] [--layout sessions|single]``.

Reports recall@k of the ranking, ``context_*`` of what reaches the model at equal total
tokens (ours: ``context()``; baselines: their top units within the same budget) and
``answer_recall``: the share of questions whose short gold answer is in that context
(offline). ``--answer --judge`` (with OPENAI_API_KEY, OPENAI_BASE_URL for any compatible
server) also answers each question from that context with a chat model and grades it with
an LLM judge: QA accuracy, with the calls and tokens spent.

Before and after the semantic tier, like for like (same budget, same data):
``--config extract_memories=false --config profile_tokens=0`` turns off extraction and
the profile (before); the defaults have both on (after).

Ablations of query-time switches on one ingest: ``python -m langmem_tiers.eval.ablate``
(see :mod:`langmem_tiers.eval.ablate`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from langmem_tiers.errors import ConfigError, LangmemTiersError
from langmem_tiers.eval.ours import LAYOUTS
from langmem_tiers.eval.qa import (
    DEFAULT_ANSWER_MODEL,
    DEFAULT_JUDGE_MODEL,
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT_S,
    QuestionAnswerer,
)
from langmem_tiers.eval.ranking import RRF_K
from langmem_tiers.eval.retrievers import RETRIEVERS
from langmem_tiers.eval.runner import BENCHMARKS, main_eval, parse_indices


def parse_k(text: str) -> list[int]:
    try:
        ks = [int(x) for x in text.split(",") if x.strip()]
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"--k {text!r} must be integers separated by commas, e.g. 5,10,25") from e
    if not ks or min(ks) < 1:
        raise argparse.ArgumentTypeError(f"--k {text!r} must hold integers >= 1, e.g. 5,10,25")
    return ks


def _parse_int(text: str, minimum: int) -> int:
    try:
        n = int(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"{text!r} must be an integer >= {minimum}") from e
    if n < minimum:
        raise argparse.ArgumentTypeError(f"{text!r} must be an integer >= {minimum}")
    return n


def _parse_indices(text: str) -> list[int]:
    try:
        return parse_indices(text)
    except ConfigError as e:
        raise argparse.ArgumentTypeError(str(e)) from e


def parse_positive(text: str) -> int:
    return _parse_int(text, 1)


_BOOLEANS = {"true": True, "false": False}


def parse_count(text: str) -> int:
    return _parse_int(text, 0)


def parse_setting(text: str) -> tuple[str, Any]:
    """``recall_k=12`` -> ``("recall_k", 12)``: true / false, then ints, then floats, else the string."""
    name, sep, raw = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"--config {text!r} must be FIELD=VALUE, e.g. recall_k=12")
    if raw.strip().lower() in _BOOLEANS:
        return name.strip(), _BOOLEANS[raw.strip().lower()]
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
    p.add_argument("--offset", type=parse_count, default=0,
                   help="skip the first N conversations / questions (run a long benchmark in shards: "
                        "--offset 10 --limit 10)")
    p.add_argument("--haystacks", type=_parse_indices, default=None, metavar="I,J,...",
                   help="only the conversations / questions at these indices in the file, scored as one run "
                        "(a held-apart half: --haystacks 1,3,4); not with --offset or --limit")
    p.add_argument("--merge", action="store_true",
                   help="the chosen haystacks as one history, ingested once, every question asked of all of it "
                        "(LongMemEval: its haystacks share one pool of sessions; 30 merged are ~15,000 messages)")
    p.add_argument("--limit-questions", type=parse_positive, default=None,
                   help="at most N scored questions per conversation / haystack")
    p.add_argument("--config", type=parse_setting, action="append", default=[], metavar="FIELD=VALUE",
                   help="a MemoryConfig field of ours (repeatable), e.g. --config recall_k=12; the baselines' "
                        "token budget follows context_tokens. Before the semantic tier: --config "
                        "extract_memories=false --config profile_tokens=0 (after: the defaults)")
    p.add_argument("--baseline-rrf-k", type=parse_positive, default=RRF_K,
                   help=f"the RRF constant of hybrid-turns (default {RRF_K}; ours' is --config recall_rrf_k=N)")
    p.add_argument("--json", type=Path, default=None, dest="json_out", help="write the results here")
    qa = p.add_argument_group("QA accuracy (online: OPENAI_API_KEY, OPENAI_BASE_URL for a compatible server)")
    qa.add_argument("--answer", action="store_true",
                    help="answer each question from its delivered context with a chat model")
    qa.add_argument("--judge", action="store_true",
                    help="grade each answer CORRECT / WRONG with an LLM judge (needs --answer): qa_accuracy")
    qa.add_argument("--answer-model", default=DEFAULT_ANSWER_MODEL, help=f"default {DEFAULT_ANSWER_MODEL}")
    qa.add_argument("--judge-model", default=DEFAULT_JUDGE_MODEL, help=f"default {DEFAULT_JUDGE_MODEL}")
    qa.add_argument("--llm-timeout", type=float, default=DEFAULT_TIMEOUT_S,
                    help=f"seconds per LLM request (default {DEFAULT_TIMEOUT_S:g})")
    qa.add_argument("--llm-retries", type=int, default=DEFAULT_RETRIES,
                    help=f"retries of a failed LLM request (default {DEFAULT_RETRIES}); a request that still "
                         "fails is counted, never fatal")
    return p


def build_qa(args: argparse.Namespace) -> QuestionAnswerer | None:
    """The answerer of ``--answer [--judge]``, or ``None``; raises ConfigError without a key."""
    if args.judge and not args.answer:
        raise ConfigError("--judge grades the answers of --answer: add --answer")
    if not args.answer:
        return None
    return QuestionAnswerer.from_env(judge=args.judge, answer_model=args.answer_model,
                                     judge_model=args.judge_model, timeout=args.llm_timeout,
                                     retries=args.llm_retries)


def main(argv: list[str] | None = None) -> int:
    from rich.console import Console

    args = build_parser().parse_args(argv)
    console = Console(stderr=True)
    try:
        qa = build_qa(args)  # before any ingestion: a missing key fails in a second, not after an hour
        main_eval(args.benchmark, args.data, args.k, args.retriever, args.limit, args.json_out, console,
                  layout=args.layout, limit_questions=args.limit_questions, config_overrides=dict(args.config),
                  qa=qa, offset=args.offset, baseline_rrf_k=args.baseline_rrf_k, indices=args.haystacks,
                  merge=args.merge)
    except LangmemTiersError as e:
        console.print(f"[red]error:[/red] {e}", soft_wrap=True, highlight=False)  # one line, never wrapped
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
