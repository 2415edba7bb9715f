"""What the pages show, computed from the public ``TieredMemory`` API (no HTML here)."""

from __future__ import annotations

import collections
import datetime as dt
import json
import math
import threading
from dataclasses import dataclass, field
from typing import Any

from langmem_tiers.context import Context
from langmem_tiers.journal.base import Namespace, Scope
from langmem_tiers.memory import Stats, TieredMemory
from langmem_tiers.messages import Message
from langmem_tiers.recall.hits import RecallHit

TIERS = ("summarized", "pending", "window")
TIER_LABELS = {"summarized": "in the summary", "pending": "evicted, waiting for the summarizer",
               "window": "in the window"}


def tier_of(message_id: int, cursor: int, window_start: int | None) -> str:
    """Where a message lives now: the window, the summary (up to its cursor), or evicted and pending."""
    if window_start is not None and message_id >= window_start:
        return "window"
    return "summarized" if message_id <= cursor else "pending"


@dataclass
class TimelineItem:
    message: Message
    tier: str
    results: list[Message] = field(default_factory=list)  # tool results folded under their call
    recalled: bool = False

    @property
    def arguments(self) -> list[tuple[str, str, str]]:
        return [(c.id, c.name, _pretty(c.arguments)) for c in self.message.tool_calls]


@dataclass
class Page:
    """One page of a session's timeline, with the cursors of its neighbours."""

    items: list[TimelineItem]
    after: int
    next_after: int | None
    window_after: int | None
    stats: Stats
    summary: str
    version: int
    prev_after: int | None = None


def timeline(memory: TieredMemory, after: int | None, limit: int, recalled: frozenset[int] = frozenset()) -> Page:
    """The page after message id ``after``; ``None`` opens on the window (the newest turns)."""
    stats = memory.stats()
    window = memory.window()
    window_start = window[0].id if window else None
    window_after = (window_start - 1) if window_start is not None else None
    if after is None:
        after = max(0, window_after) if window_after is not None else 0
    messages = memory.messages_page(after=after, limit=limit + 1)
    more = len(messages) > limit
    messages = messages[:limit]
    items: list[TimelineItem] = []
    by_call: dict[str, TimelineItem] = {}
    for m in messages:
        tier = tier_of(m.id or 0, stats.summary_cursor, window_start)
        if m.role == "tool" and m.tool_call_id in by_call:
            by_call[m.tool_call_id].results.append(m)
            continue
        item = TimelineItem(m, tier, recalled=(m.id or 0) in recalled)
        items.append(item)
        for call in m.tool_calls:
            by_call[call.id] = item
    next_after = (messages[-1].id or 0) if more and messages else None
    prev_after = previous_after(memory, messages[0].id or 0, limit) if messages and after > 0 else None
    return Page(items, after, next_after, window_after, stats, memory.summary, memory.version(), prev_after)


def previous_after(memory: TieredMemory, first_id: int, limit: int) -> int | None:
    """The ``after`` cursor of the page before the one starting at ``first_id`` (None on the first page).

    Reads forward only (the public paging): from a guess ``span`` ids back, doubled until it holds a
    page of this session's messages or reaches the start. Message ids are shared by all sessions,
    so a session interleaved with others needs a wider span; a lone session needs one read.
    """
    span = 2 * limit
    while True:
        guess = max(0, first_id - 1 - span)
        before: collections.deque[int] = collections.deque(maxlen=limit)
        cursor = guess
        while True:
            rows = memory.messages_page(after=cursor, limit=min(10_000, max(limit, span)))
            ids = [m.id or 0 for m in rows]
            before.extend(i for i in ids if i < first_id)
            if not rows or ids[-1] >= first_id:
                break
            cursor = ids[-1]
        if not before:
            return None
        if len(before) == limit or guess == 0:
            return max(0, before[0] - 1) if guess > 0 or len(before) == limit else 0
        span *= 4


@dataclass
class QueryResult:
    query: str
    context: Context
    explanation: str
    hits: list[RecallHit]
    recalled_message_ids: frozenset[int]
    error: str | None = None


def run_query(memory: TieredMemory, query: str, budget: int | None = None) -> QueryResult:
    """What the model would receive for ``query`` (``context()``), with every recall hit's score parts."""
    ctx = memory.context(query, budget=budget)
    ids = frozenset(i for h in ctx.recalled for i in h.message_ids)
    return QueryResult(query, ctx, ctx.explain(), list(ctx.recalled), ids)


@dataclass(frozen=True)
class MemoryRow:
    record_id: int
    kind: str
    text: str
    importance: float
    pinned: bool
    key: str | None
    valid_from: float
    valid_to: float | None  # set once a newer memory with the same key superseded it
    source: str  # "explicit", or the messages it was extracted from

    @property
    def current(self) -> bool:
        return self.valid_to is None


def memories(memory: TieredMemory) -> list[MemoryRow]:
    """The user's memories (``facts()``, superseded ones included as history): pinned first, then
    current before superseded, newest first."""
    if memory.recall is None:
        return []
    # facts() has no pinned flag: the recall index lists the pinned ones (what context() delivers first).
    pinned = {r.id for r in memory.recall.pinned(Scope("user", memory.namespace))}
    rows = [MemoryRow(f.id, f.kind, f.text, f.importance, f.id in pinned, f.key, f.valid_from, f.valid_to,
                      "explicit" if f.source == "explicit" else "messages " + ", ".join(f"#{i}" for i in f.source))
            for f in memory.facts(include_superseded=True)]
    rows.sort(key=lambda r: (not r.pinned, not r.current, -r.valid_from))
    return rows


# --- tokens per tier over the conversation (an inline SVG, cached per session version) ---------------

_plot_cache: dict[tuple[Namespace, int], str] = {}
_plot_lock = threading.Lock()
PLOT_BUCKETS = 120
PLOT_SAMPLE = 6000
COLORS = {"summarized": "#8e7cc3", "pending": "#e69138", "window": "#3d85c6"}


def tier_plot(memory: TieredMemory) -> str:
    """A stacked bar chart: the conversation cut into up to 120 slices, each slice's tokens by tier.

    Long sessions count the tokens of a sample of messages per slice (at most :data:`PLOT_SAMPLE`
    in all) and scale by the slice's message count per tier: 100k messages read in about a second
    instead of tokenizing every one. Computed once per session version; concurrent requests wait
    for the first instead of repeating it.
    """
    key = (memory.namespace, memory.version())
    with _plot_lock:
        cached = _plot_cache.get(key)
        if cached is not None:
            return cached
        stats = memory.stats()
        window = memory.window()
        window_start = window[0].id if window else None
        messages = list(memory.iter_messages())
        every = max(1, -(-len(messages) // PLOT_SAMPLE))
        counted = [memory.counter.count_message(m) if i % every == 0 else -1 for i, m in enumerate(messages)]
        points = [(tier_of(m.id or 0, stats.summary_cursor, window_start), t) for m, t in zip(messages, counted)]
        svg = render_plot(points, sampled=every > 1)
        if len(_plot_cache) > 64:
            _plot_cache.clear()
        _plot_cache[key] = svg
        return svg


def render_plot(points: list[tuple[str, int]], width: int = 720, height: int = 180, sampled: bool = False) -> str:
    """Stacked bars of tokens per tier; ``points`` are (tier, tokens) per message, oldest first
    (tokens -1: not counted, estimated from the counted messages of its slice)."""
    n = len(points)
    buckets = min(PLOT_BUCKETS, max(n, 1))
    counts = [dict.fromkeys(TIERS, 0) for _ in range(buckets)]
    measured = [[0, 0] for _ in range(buckets)]  # tokens and messages counted per slice
    for i, (tier, tokens) in enumerate(points):
        b = i * buckets // max(n, 1)
        counts[b][tier] += 1
        if tokens >= 0:
            measured[b][0] += tokens
            measured[b][1] += 1
    mean = [t / c if c else 0.0 for t, c in measured]
    sums = [{tier: round(counts[b][tier] * mean[b]) for tier in TIERS} for b in range(buckets)]
    top = max((sum(b.values()) for b in sums), default=0) or 1
    pad_left, pad_bottom, pad_top = 48, 22, 20
    plot_w, plot_h = width - pad_left - 8, height - pad_bottom - pad_top
    bar_w = plot_w / buckets
    parts = [(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="tokens per tier over the conversation" '
             'font-family="sans-serif" font-size="11">'),
             f'<rect width="{width}" height="{height}" fill="#ffffff"/>']
    for tick in (0, 0.5, 1):
        y = pad_top + plot_h * (1 - tick)
        parts.append(f'<line x1="{pad_left}" x2="{width - 8}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
        parts.append(f'<text x="{pad_left - 4}" y="{y + 4:.1f}" text-anchor="end" fill="#555">'
                     f'{math.floor(top * tick)}</text>')
    for i, bucket in enumerate(sums):
        y = pad_top + plot_h
        for tier in TIERS:
            h = plot_h * bucket[tier] / top
            if h <= 0:
                continue
            y -= h
            parts.append(f'<rect x="{pad_left + i * bar_w:.2f}" y="{y:.2f}" width="{max(bar_w - 0.5, 0.5):.2f}" '
                         f'height="{h:.2f}" fill="{COLORS[tier]}"><title>{tier}: {bucket[tier]} tokens</title></rect>')
    legend_x = pad_left
    for tier in TIERS:
        total = sum(b[tier] for b in sums)
        parts.append(f'<rect x="{legend_x}" y="{height - 14}" width="10" height="10" fill="{COLORS[tier]}"/>')
        parts.append(f'<text x="{legend_x + 14}" y="{height - 5}" fill="#333">{tier} ({total} tokens)</text>')
        legend_x += 190
    note = " (tokens estimated from a sample)" if sampled else ""
    parts.append(f'<text x="{width - 8}" y="12" text-anchor="end" fill="#555">'
                 f'{n} messages, oldest to newest{note}</text>')
    parts.append("</svg>")
    return "".join(parts)


# --- small formatting helpers for the templates ------------------------------------------------------

def when(ts: float | None) -> str:
    if not ts:
        return "-"
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def score_part(value: Any) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "-"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.4f}"
    return str(int(value)) if isinstance(value, (int, float)) else str(value)


def _pretty(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments), ensure_ascii=False)
    except ValueError:
        return arguments
