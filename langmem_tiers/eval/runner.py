"""Run one benchmark with one retriever: ingest, query, deliver, score, time, write JSON.

Every haystack (LoCoMo conversation, LongMemEval question) gets a fresh retriever.
Each question is asked twice:

1. ``query(text, max(k))``: ``recall@k`` (LoCoMo) and session / message recall@k
   (LongMemEval); scores at smaller ``k`` use the prefix of that ranking. ``k`` counts
   the retriever's units (``config.unit``); latency is this query's wall time.
2. delivery: ours calls ``context(query=text)`` of the asking session; a baseline fills
   the same total token budget (``context_tokens`` of ours' config, same tokenizer) with
   its top units in rank order. ``context_*`` scores what that context holds
   (:func:`langmem_tiers.eval.metrics.present_messages`), ``context_tokens`` its size.
   ``answer_recall`` scores the same delivered text against the gold answer
   (:func:`langmem_tiers.semantic.answers.answer_recall`: short-span answers only, matched
   as normalized whole words, numbers as numbers; description answers excluded and
   counted in ``counts.answer_recall``).
3. with ``qa`` (``--answer [--judge]``): a chat model answers from that same delivered
   text and an LLM judge grades the answer (``qa_accuracy``, :mod:`langmem_tiers.eval.qa`);
   calls and tokens spent are in ``qa.usage``.

Messages a retriever could not ingest are counted by reason (``counts.not_ingested``),
never fatal.
"""

from __future__ import annotations

import json
import os
import platform
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from importlib import metadata
from pathlib import Path
from typing import Any

from langmem_tiers.config import MemoryConfig
from langmem_tiers.errors import ConfigError
from langmem_tiers.eval.datasets import (
    Haystack,
    Question,
    load_locomo,
    load_longmemeval,
    merge_haystacks,
    parse_lme_date,
)
from langmem_tiers.eval.delivery import deliver_ranked
from langmem_tiers.eval.metrics import (
    Delivered,
    TextIndex,
    Unit,
    answer_view,
    evidence_recall,
    mean,
    message_recall,
    messages_hit,
    named_messages,
    percentile,
    present_messages,
    session_recall,
    sessions_hit,
)
from langmem_tiers.eval.ours import Layout, ours_config
from langmem_tiers.eval.qa import QuestionAnswerer
from langmem_tiers.eval.ranking import RRF_K
from langmem_tiers.eval.retrievers import RetrieverSpec, describe_config, get_retriever
from langmem_tiers.semantic.answers import DESCRIPTION_TYPES, MAX_ANSWER_WORDS, answer_recall
from langmem_tiers.tokens import TiktokenCounter

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

LOCOMO_CONTEXT = ("context_recall", "context_recall_by_id", "context_tokens")
LME_CONTEXT = (
    "context_session_recall_any",
    "context_session_recall_all",
    "context_message_recall_any",
    "context_message_recall_all",
    "context_message_recall_any_by_id",
    "context_message_recall_all_by_id",
    "context_tokens",
)
ANSWER_METRICS = ("answer_recall",)
QA_METRICS = ("qa_accuracy",)
ANSWER_RULE = (
    "gold answer found in the delivered text as normalized whole words (case, accents and punctuation "
    "ignored; numbers as numbers, so 5 does not match 15; number words up to twenty as digits; ISO dates the "
    "systems add count as written-out dates (8 May 2023) for an answer naming a month or year, and not at all "
    "for any other answer, so a count never matches a date's digits); scored only "
    f"for short-span answers: more than {MAX_ANSWER_WORDS} words, or question type in "
    f"{list(DESCRIPTION_TYPES)}, is a description, excluded and counted"
)
LME_RANKED = ("session_recall_any", "session_recall_all", "message_recall_any", "message_recall_all")


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


def asked_at(hay: Haystack, question: Question) -> float:
    """When a question is asked: its dataset date (LongMemEval), else one minute after the haystack's
    newest message (LoCoMo asks about a finished conversation). Ours' memory clock is set to it, so
    "last week" in a question means the week before then, not before the day the run happens."""
    if question.date:
        return parse_lme_date(question.date)
    return max((m.created_at for m in hay.messages.values() if m.created_at), default=0.0) + 60.0


def score_question(benchmark: str, hay: Haystack, q: Question, units: Sequence[Unit], ks: Sequence[int]) -> Scores:
    """Ranking scores of one question, keyed like the JSON's ``overall`` (metrics that do not apply are absent)."""
    out: Scores = {}
    for k in ks:
        if benchmark == "locomo":
            out[f"recall@{k}"] = evidence_recall(units, q.gold_messages, k)
            continue
        if q.gold_sessions:
            out[f"session_recall_any@{k}"], out[f"session_recall_all@{k}"] = session_recall(
                units, hay.messages, q.gold_sessions, k)
        if q.gold_messages:
            out[f"message_recall_any@{k}"], out[f"message_recall_all@{k}"] = message_recall(
                units, q.gold_messages, k)
    return out


def score_context(benchmark: str, hay: Haystack, q: Question, delivered: Delivered, index: TextIndex) -> Scores:
    """Delivery scores of one question: what of its evidence the delivered context holds, and its tokens."""
    out: Scores = {"context_tokens": float(delivered.tokens)}
    if benchmark == "locomo":
        gold = q.gold_messages
        out["context_recall"] = len(present_messages(delivered, index, gold)) / len(gold)
        out["context_recall_by_id"] = len(named_messages(delivered, index, gold)) / len(gold)
        return out
    if q.gold_sessions:
        candidates = [m.key for s in hay.sessions for m in s if m.session_id in q.gold_sessions]
        out["context_session_recall_any"], out["context_session_recall_all"] = sessions_hit(
            present_messages(delivered, index, candidates), hay.messages, q.gold_sessions)
    if q.gold_messages:
        out["context_message_recall_any"], out["context_message_recall_all"] = messages_hit(
            present_messages(delivered, index, q.gold_messages), q.gold_messages)
        out["context_message_recall_any_by_id"], out["context_message_recall_all_by_id"] = messages_hit(
            named_messages(delivered, index, q.gold_messages), q.gold_messages)
    return out


def score_answer(q: Question, delivered: Delivered) -> tuple[Scores, str | None]:
    """``answer_recall`` of one question (1.0 or 0.0), or why it is not scored.

    The rule is :func:`langmem_tiers.semantic.answers.answer_recall`'s; the question's
    category (LoCoMo) or type (LongMemEval) is its question type.
    """
    if q.answer is None:
        return {}, "no gold answer"
    result = answer_recall([(q.category, q.answer, answer_view(delivered.text, q.answer))])
    if not result.scored:
        return {}, "description answer"
    return {"answer_recall": float(result.found)}, None


def metric_names(benchmark: str, ks: Sequence[int], qa: bool = False) -> list[str]:
    """Every metric of the benchmark, in table order: delivery at equal tokens first (what of the
    evidence, then of the answer, the context holds), then QA accuracy when asked for, then ranking at k."""
    answer = [*ANSWER_METRICS, *(QA_METRICS if qa else ())]
    if benchmark == "locomo":
        return [*LOCOMO_CONTEXT, *answer, *(f"recall@{k}" for k in ks)]
    return [*LME_CONTEXT, *answer, *(f"{m}@{k}" for m in LME_RANKED for k in ks)]


def _aggregate(rows: Sequence[Scores], names: Sequence[str]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for name in names:
        vals = [r[name] for r in rows if name in r]
        digits = 1 if name == "context_tokens" else 4
        out[name] = round(mean(vals), digits) if vals else None
    return out


def _load(benchmark: str, data: Path, limit: int | None, offset: int = 0) -> list[Haystack]:
    end = None if limit is None else offset + limit
    if benchmark == "locomo":
        return load_locomo(data, end)[offset:]
    if benchmark == "longmemeval":
        return load_longmemeval(data, end)[offset:]
    raise ConfigError(f"benchmark {benchmark!r} is unknown: choose one of {', '.join(BENCHMARKS)}")


def parse_indices(text: str) -> list[int]:
    """``"0,2"`` -> ``[0, 2]``: haystack indices as ``--haystacks`` takes them."""
    try:
        indices = [int(x) for x in text.split(",") if x.strip()]
    except ValueError as e:
        raise ConfigError(f"--haystacks {text!r} must be integers separated by commas") from e
    if not indices:
        raise ConfigError(f"--haystacks {text!r} names no haystack")
    return indices


def select(haystacks: Sequence[Any], indices: Sequence[int] | None) -> list[Any]:
    """The haystacks at these indices (in the order given); all of them for ``None``."""
    if indices is None:
        return list(haystacks)
    bad = [i for i in indices if not 0 <= i < len(haystacks)]
    if bad:
        raise ConfigError(f"haystack indices {bad} are outside 0..{len(haystacks) - 1} of this file")
    return [haystacks[i] for i in indices]


def _check_ks(k: Sequence[int]) -> list[int]:
    ks = sorted(set(k))
    if not ks or any(not isinstance(x, int) or x < 1 for x in ks):
        raise ConfigError(f"k ({list(k)!r}) must be one or more integers >= 1, e.g. --k 5,10,25")
    return ks


def cap_questions(haystacks: Sequence[Haystack], n: int | None) -> list[Haystack]:
    """At most ``n`` scored questions per haystack; the rest are marked excluded (and counted)."""
    if n is None:
        return list(haystacks)
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigError(f"limit_questions ({n!r}) must be an integer >= 1 or omitted")
    out = []
    for hay in haystacks:
        kept, questions = 0, []
        for q in hay.questions:
            if q.excluded is None:
                if kept >= n:
                    q = replace(q, excluded="beyond --limit-questions")
                else:
                    kept += 1
            questions.append(q)
        out.append(replace(hay, questions=tuple(questions)))
    return out


def _deliver(retriever: Any, text: str, hay: Haystack, budget: int, counter: TiktokenCounter,
             role: str) -> Delivered:
    own = getattr(retriever, "context", None)
    if callable(own):
        delivered: Delivered = own(text)
        return delivered
    return deliver_ranked(lambda depth: retriever.query(text, depth), hay.messages, budget, counter, role)


def run_benchmark(
    benchmark: str,
    haystacks: Sequence[Haystack],
    spec: RetrieverSpec,
    k: Sequence[int] = DEFAULT_K,
    console: Any = None,
    progress: bool = True,
    *,
    config: MemoryConfig | None = None,
    qa: QuestionAnswerer | None = None,
) -> dict[str, Any]:
    """Evaluate ``spec`` on loaded haystacks; returns the JSON-ready result.

    ``config`` is ours' configuration whose ``context_tokens`` (and tokenizer) the
    baselines' delivery budget follows; default: ``spec.config`` for ours, else the
    default of ours. ``qa`` answers (and grades) each question from its delivered context.
    """
    if benchmark not in BENCHMARKS:
        raise ConfigError(f"benchmark {benchmark!r} is unknown: choose one of {', '.join(BENCHMARKS)}")
    ks = _check_ks(k)
    kmax = ks[-1]
    ref = spec.config or config or ours_config()
    budget = ref.context_tokens
    counter = TiktokenCounter.for_model(ref.model, encoding=ref.encoding)
    rows: list[tuple[str, Scores]] = []
    excluded: Counter[str] = Counter()
    answer_excluded: dict[str, Counter[str]] = defaultdict(Counter)
    qa_failed: dict[str, Counter[str]] = defaultdict(Counter)
    per_question: list[dict[str, Any]] = []
    not_ingested: Counter[str] = Counter()
    latencies: list[float] = []
    context_ms: list[float] = []
    unit_sizes: list[int] = []
    ingest_s = 0.0
    n_messages = 0
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
            bar.update(t_hay, description=f"{spec.name}: ingest {hay.hid} ({hay.n_messages} messages)")
            not_ingested.update(hay.skipped)
            retriever = spec.factory()
            try:
                start = time.perf_counter()
                skipped = retriever.ingest(hay.sessions)
                ingest_s += time.perf_counter() - start
                not_ingested.update(dict(skipped or {}))
                n_messages += hay.n_messages
                index = TextIndex(hay.messages)
                bar.update(t_hay, description=f"{spec.name}: query {hay.hid}")
                for q in hay.questions:
                    if q.excluded is not None:
                        excluded[q.excluded] += 1
                        continue
                    ask_at = getattr(retriever, "ask_at", None)
                    if callable(ask_at):
                        ask_at(asked_at(hay, q))
                    start = time.perf_counter()
                    units = retriever.query(q.text, kmax)
                    latencies.append((time.perf_counter() - start) * 1000.0)
                    unit_sizes.extend(len(u) for u in units[:kmax])
                    start = time.perf_counter()
                    delivered = _deliver(retriever, q.text, hay, budget, counter, ref.summary_role)
                    context_ms.append((time.perf_counter() - start) * 1000.0)
                    scores = score_context(benchmark, hay, q, delivered, index)
                    answer_scores, why_not = score_answer(q, delivered)
                    scores.update(answer_scores)
                    if why_not is not None:
                        answer_excluded[why_not][q.category] += 1
                    record: dict[str, Any] = {"qid": q.qid, "category": q.category, "gold": q.answer,
                                              "answer_recall": answer_scores.get("answer_recall")}
                    if qa is not None:
                        outcome = qa.run(q.text, q.answer, delivered.text, q.date)
                        record.update(answer=outcome.answer, correct=outcome.correct, qa_error=outcome.error)
                        if outcome.correct is not None:
                            scores["qa_accuracy"] = float(outcome.correct)
                        elif outcome.error is not None:
                            qa_failed[q.category][outcome.error] += 1
                    scores.update(score_question(benchmark, hay, q, units, ks))
                    rows.append((q.category, scores))
                    # Every figure of the question, so two runs can be compared question by question.
                    record["scores"] = {name: round(v, 4) for name, v in sorted(scores.items())}
                    per_question.append(record)
                    bar.advance(t_q)
            finally:
                retriever.close()
            bar.advance(t_hay)
        bar.update(t_hay, description=f"{spec.name}: {unit_name}")

    names = metric_names(benchmark, ks, qa=qa is not None and qa.judge_model is not None)
    groups: dict[str, list[Scores]] = defaultdict(list)
    for cat, r in rows:
        groups[cat].append(r)
    group_key = "by_category" if benchmark == "locomo" else "by_type"
    per_unit = round(mean(unit_sizes), 2) if unit_sizes else None

    def ms(values: Sequence[float]) -> dict[str, float | None]:
        return {
            "p50": round(percentile(values, 50), 2) if values else None,
            "p95": round(percentile(values, 95), 2) if values else None,
            "mean": round(mean(values), 2) if values else None,
        }

    answer_scored = {cat: sum("answer_recall" in r for r in groups[cat]) for cat in sorted(groups)}
    result: dict[str, Any] = {
        "benchmark": benchmark,
        "overall": _aggregate([r for _, r in rows], names),
        group_key: {cat: _aggregate(groups[cat], names) for cat in sorted(groups)},
        "counts": {
            # Questions answer_recall scored, and those it left out by reason (per category / type).
            "answer_recall": {
                "scored": sum(answer_scored.values()),
                group_key: answer_scored,
                "excluded": {why: dict(sorted(c.items())) for why, c in sorted(answer_excluded.items())},
                "excluded_total": sum(sum(c.values()) for c in answer_excluded.values()),
            },
            "haystacks": len(haystacks),
            "messages": n_messages,
            "questions_scored": len(rows),
            group_key: {cat: len(groups[cat]) for cat in sorted(groups)},
            "excluded": dict(sorted(excluded.items())),
            # What could not be ingested (loader and retriever), by reason: an odd message is counted, not fatal.
            "not_ingested": dict(sorted(not_ingested.items())),
            "not_ingested_total": sum(not_ingested.values()),
            # Units are what k counts: a retriever whose units cover more messages sees more per k.
            "messages_per_unit": per_unit,
            "units_per_query": round(len(unit_sizes) / len(rows), 2) if rows else None,
        },
        "latency_ms": ms(latencies),
        "context_latency_ms": ms(context_ms),
        "ingest_per_s": round(n_messages / ingest_s, 1) if ingest_s > 0 else None,
        "ingest_s": round(ingest_s, 2),
        "config": {
            "retriever": spec.name,
            "unit": spec.unit,
            "unit_kind": spec.unit_kind,
            "k_counts": "retrieved units; a unit scores all the messages it covers",
            "query_k": kmax,
            "model": spec.model(),
            # Only ours has a layout and a window; the baselines index every message at once.
            "layout": spec.layout,
            "window": describe_config(spec.config) if spec.config is not None else None,
            "context_budget": budget,
            "context_delivery": (
                "context(query=question) of the asking session" if spec.config is not None else
                f"top units in rank order within {budget} total tokens ({counter.key})"
            ),
            "k": ks,
            "versions": _versions(),
            # Timings depend on the host; a busy one (load above its cores) inflates them.
            "host": {"cpus": os.cpu_count(), "loadavg_1m_start": load_start, "loadavg_1m_end": _loadavg()},
            "answer_recall_rule": ANSWER_RULE,
        },
        # One row per scored question: its answer_recall (None: not scored) and, with qa, the answer and verdict.
        "questions": per_question,
    }
    if qa is not None:
        result["qa"] = {
            **qa.describe(),
            "graded": sum("qa_accuracy" in r for _, r in rows),
            "not_graded": {cat: dict(sorted(c.items())) for cat, c in sorted(qa_failed.items())},
            "not_graded_total": sum(sum(c.values()) for c in qa_failed.values()),
            "usage": {role: u.to_json() for role, u in qa.usage.items()},
            "llm_calls": sum(u.calls for u in qa.usage.values()),
            "llm_tokens": sum(u.prompt_tokens + u.completion_tokens for u in qa.usage.values()),
        }
    return result


def _fmt(v: float | None, name: str = "") -> str:
    if v is None:
        return "-"
    return f"{v:.0f}" if name == "context_tokens" else f"{v:.3f}"


def _short(name: str) -> str:
    """Column names that fit 80 columns: ``context_session_recall_any`` -> ``sess_any``."""
    name = name.removeprefix("context_")
    return name.replace("session_recall", "sess").replace("message_recall", "msg")


def _print_summary(result: dict[str, Any], console: Any) -> None:
    from rich.table import Table

    group_key = "by_category" if "by_category" in result else "by_type"
    names = list(result["overall"])
    context = [n for n in names if n.startswith("context_") and not n.endswith("_by_id")]
    # One table for delivery at equal tokens, then one per ranking family, so each fits 80 columns.
    families: dict[str, list[str]] = {"context": context,
                                      "answer": [n for n in names if n in (*ANSWER_METRICS, *QA_METRICS)]}
    for name in names:
        if "@" in name:
            families.setdefault(name.split("@", 1)[0], []).append(name)
    cfg = result["config"]
    for family, cols in families.items():
        if not cols:
            continue
        title = (f"{result['benchmark']} / {cfg['retriever']} ({cfg['unit_kind']} units): "
                 + (f"delivered context, {cfg['context_budget']}-token budget" if family == "context"
                    else "the gold answer in the delivered context" if family == "answer"
                    else f"{family}@k"))
        table = Table(title=title)
        table.add_column(group_key.replace("by_", ""), no_wrap=True)
        table.add_column("n", justify="right")
        for name in cols:
            header = (_short(name) if family == "context" else name if family == "answer"
                      else "@" + name.split("@", 1)[1])
            table.add_column(header, justify="right")
        # The answer table counts the questions answer_recall scores (short-span gold answers).
        counts = result["counts"]["answer_recall"] if family == "answer" else result["counts"]
        total = counts["scored"] if family == "answer" else counts["questions_scored"]
        for cat, scores in result[group_key].items():
            table.add_row(cat, str(counts[group_key].get(cat, 0)), *(_fmt(scores[n], n) for n in cols))
        table.add_row("overall", str(total), *(_fmt(result["overall"][n], n) for n in cols), style="bold")
        console.print(table)
    lat, ctx = result["latency_ms"], result["context_latency_ms"]
    counts = result["counts"]
    console.print(
        f"query p50 {lat['p50']} ms, p95 {lat['p95']} ms; delivery p50 {ctx['p50']} ms; "
        f"ingest {result['ingest_per_s']} messages/s ({counts['messages']} messages in {result['ingest_s']} s); "
        f"excluded questions {counts['excluded']}"
    )
    ans = counts["answer_recall"]
    console.print(f"answer_recall: {ans['scored']} short-span answers scored; not scored {ans['excluded']}")
    if "qa" in result:
        qa = result["qa"]
        console.print(f"QA ({qa['answer_model']}, judge {qa['judge_model']}, {qa['base_url']}): {qa['graded']} "
                      f"graded, not graded {qa['not_graded']}; {qa['llm_calls']} LLM calls, "
                      f"{qa['llm_tokens']} tokens")
    if counts["not_ingested"]:
        table = Table(title=f"not ingested: {counts['not_ingested_total']} (counted, the run went on)")
        table.add_column("reason")
        table.add_column("messages", justify="right")
        for reason, n in counts["not_ingested"].items():
            table.add_row(reason, str(n))
        console.print(table)
    else:
        console.print("not ingested: 0")


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
    layout: Layout = "sessions",
    limit_questions: int | None = None,
    config_overrides: Mapping[str, Any] | None = None,
    qa: QuestionAnswerer | None = None,
    offset: int = 0,
    baseline_rrf_k: int = RRF_K,
    indices: Sequence[int] | None = None,
    merge: bool = False,
) -> dict[str, Any]:
    """Entry point of ``langmem-tiers eval``: load, run, print a table, write ``json_out``.

    ``limit`` caps conversations (LoCoMo) or questions (LongMemEval: one haystack each);
    ``offset`` skips the first conversations / questions (a long run split into shards:
    ``--offset 10 --limit 10``); ``indices`` instead picks haystacks by their index in the file (a
    held-apart half), scored as one run. ``limit_questions`` caps scored questions per haystack. ``layout`` and
    ``config_overrides`` (MemoryConfig fields) shape ours; the baselines' token budget
    follows the resulting ``context_tokens``. ``embedder`` overrides the default local
    MiniLM factory (tests). ``qa`` answers and grades every question from its delivered
    context (``--answer --judge``); it is closed here. ``baseline_rrf_k``: ``hybrid-turns``' RRF constant.
    ``merge``: the chosen haystacks as one history (:func:`~langmem_tiers.eval.datasets.merge_haystacks`),
    ingested once, every question asked of all of it.
    """
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ConfigError(f"limit ({limit!r}) must be an integer >= 1 or omitted")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ConfigError(f"offset ({offset!r}) must be an integer >= 0")
    if indices is not None and (limit is not None or offset):
        raise ConfigError("haystack indices pick the haystacks themselves: leave out limit and offset")
    ks = _check_ks(k)
    config = ours_config(**dict(config_overrides or {}))
    if embedder is None:
        spec = get_retriever(retriever, layout=layout, config=config, baseline_rrf_k=baseline_rrf_k)
    else:
        spec = get_retriever(retriever, embedder, layout=layout, config=config, baseline_rrf_k=baseline_rrf_k)
    loaded = _load(benchmark, Path(data), limit, offset) if indices is None else select(
        _load(benchmark, Path(data), None), indices)
    haystacks = cap_questions(loaded, limit_questions)
    if merge:
        haystacks = [merge_haystacks(haystacks)]
    try:
        result = run_benchmark(benchmark, haystacks, spec, ks, console=console, progress=console is not None,
                               config=config, qa=qa)
    finally:
        if qa is not None:
            qa.close()
    result["config"]["data"] = Path(data).name
    result["config"]["limit"] = limit
    result["config"]["offset"] = offset
    result["config"]["haystacks"] = None if indices is None else list(indices)
    result["config"]["limit_questions"] = limit_questions
    result["config"]["merged"] = merge
    if config_overrides:
        result["config"]["overrides"] = dict(config_overrides)
    if json_out is not None:  # first: a long run's results never depend on the printing
        Path(json_out).parent.mkdir(parents=True, exist_ok=True)
        Path(json_out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    if console is not None:
        _print_summary(result, console)
    return result
