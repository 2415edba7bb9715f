"""``langmem-tiers demo``: a long conversation through a small budget, shown live."""

from __future__ import annotations

import shutil
import statistics
import time
from pathlib import Path
from typing import Any

from langmem_tiers.cli.conversation import FACTS, QUESTIONS, demo_turns
from langmem_tiers.config import MemoryConfig

DEMO_CONFIG = MemoryConfig(context_tokens=2400, window_tokens=1200, summary_tokens=400, recall_tokens=600,
                           recall_k=4)


def run_demo(path: str | Path, sessions: int = 8, turns_per_session: int = 40, no_vectors: bool = False,
             console: Any = None) -> dict[str, Any]:
    """Run the demo and return its figures (used by the tests and the README)."""
    from rich.console import Console
    from rich.panel import Panel
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    from langmem_tiers import TieredMemory
    from langmem_tiers.summarizers.openai import OpenAISummarizer

    console = console or Console()
    folder = Path(path)
    summarizer = OpenAISummarizer.from_env()
    console.print(Panel.fit(
        f"memory folder: [bold]{folder}[/]\nsummarizer: "
        f"{'OpenAI ' + summarizer.model if summarizer else 'extractive (offline; set OPENAI_API_KEY for an LLM)'}\n"
        f"budget: context {DEMO_CONFIG.context_tokens}, window {DEMO_CONFIG.window_tokens} "
        f"(evicts down to {DEMO_CONFIG.window_low_tokens}), summary cap {DEMO_CONFIG.summary_tokens}, "
        f"recall {DEMO_CONFIG.recall_tokens} tokens",
        title="langmem-tiers demo"))
    if (folder / "journal.sqlite3").exists():
        console.print(f"[dim]found a previous run in {folder}; starting the demo session afresh[/]")
        shutil.rmtree(folder)

    calls = {"summaries": 0}
    base: Any = summarizer
    if base is None:
        from langmem_tiers.summarizers.extractive import ExtractiveSummarizer

        base = ExtractiveSummarizer()
    counting = _Counting(base, calls)

    turns = list(demo_turns(sessions, turns_per_session))
    add_ms: list[float] = []
    rows = []
    with TieredMemory.open(folder, session_id="demo", user_id="demo-user", config=DEMO_CONFIG,
                           summarizer=counting, embedder=False if no_vectors else None) as memory:
        progress = Progress(TextColumn("[bold]session {task.fields[session]}"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("window {task.fields[window]} tok · summary {task.fields[summary]} tok"),
                            TimeElapsedColumn(), console=console)
        with progress:
            task = progress.add_task("turns", total=len(turns), session=1, window=0, summary=0)
            for index, turn in enumerate(turns):
                start = time.perf_counter()
                memory.add_messages(list(turn.messages))
                add_ms.append((time.perf_counter() - start) * 1000 / len(turn.messages))
                last_of_session = index + 1 == len(turns) or turns[index + 1].session != turn.session
                if index % 10 == 0 or last_of_session:
                    stats = memory.stats()
                    progress.update(task, session=turn.session + 1, window=stats.window_tokens,
                                    summary=stats.summary_tokens)
                if last_of_session:
                    ctx = memory.context()
                    rows.append((turn.session + 1, memory.stats(), ctx))
                progress.advance(task)
        memory.flush()

        table = Table(title="tokens per tier at the end of each session")
        for column in ("session", "messages", "window msgs", "window", "summary", "recall", "context",
                       "budget", "summaries"):
            table.add_column(column, justify="right")
        for session, stats, ctx in rows:
            t = ctx.tokens
            table.add_row(str(session), str(stats.messages), str(stats.window_messages), str(t.window),
                          str(t.summary), str(t.recall), str(t.total), str(t.budget))
        console.print(table)
        title = f"rolling summary ({memory.stats().summary_tokens} tokens)"
        console.print(Panel(memory.summary or "(empty)", title=title))

        answers = Table(title="questions about turns that left the window long ago")
        answers.add_column("question")
        answers.add_column("recalled (best hit)")
        answers.add_column("why", justify="right")
        found = 0
        query_ms = []
        for question, fact in QUESTIONS:
            start = time.perf_counter()
            hits = memory.search(question, k=3)
            query_ms.append((time.perf_counter() - start) * 1000)
            best = hits[0] if hits else None
            hit_fact = any(FACTS[fact][0] in h.text for h in hits)
            found += hit_fact
            why = "-"
            if best:
                why = f"kw {_rank(best.parts.get('keyword_rank'))} · vec {_rank(best.parts.get('vector_rank'))}"
            answers.add_row(question, (best.text[:110] if best else "(nothing)") + (" ✓" if hit_fact else ""), why)
        console.print(answers)
        stats = memory.stats()
        figures = {
            "turns": len(turns), "messages": stats.messages, "summarizer_calls": calls["summaries"],
            "summarizer_calls_per_100_turns": round(100 * calls["summaries"] / len(turns), 2),
            "add_ms_p50": round(statistics.median(add_ms), 3),
            "add_ms_p95": round(sorted(add_ms)[int(0.95 * (len(add_ms) - 1))], 3),
            "search_ms_p50": round(statistics.median(query_ms), 1),
            "recalled_facts": f"{found}/{len(QUESTIONS)}",
            "final_context_tokens": rows[-1][2].tokens.total if rows else 0,
        }
        timing = Table(title="figures")
        timing.add_column("what")
        timing.add_column("value", justify="right")
        for key, value in figures.items():
            timing.add_row(key, str(value))
        console.print(timing)
        console.print(f"[dim]everything is persisted in {folder}: try `langmem-tiers inspect --path {folder} "
                      f"--session demo --user demo-user`[/]")
        return figures


def _rank(value: float | None) -> str:
    return "-" if value is None or value != value else str(int(value))


class _Counting:
    """Counts summarizer calls for the demo's figures."""

    def __init__(self, inner: Any, calls: dict[str, int]) -> None:
        self.inner = inner
        self.calls = calls

    def summarize(self, request: Any) -> Any:  # the text, or a SummaryResult with extracted memories
        self.calls["summaries"] += 1
        return self.inner.summarize(request)

    async def asummarize(self, request: Any) -> Any:
        self.calls["summaries"] += 1
        return await self.inner.asummarize(request)
