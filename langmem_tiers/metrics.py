"""In-process counters that show memory working: what ``context()`` delivered, summaries, sweeps.

Kept by every :class:`~langmem_tiers.TieredMemory` (and shared by the handles
``for_session`` makes, so an app server sees its whole process), updated in
memory on each call: no journal query, a lock and a few additions per
``context()``. They describe this process since it started or since
:meth:`MemoryMetrics.reset`, not the deployment: replicas each keep their own.
``stats()`` returns a :class:`MetricsSnapshot`.

Token figures per tier are the mean over every ``context()`` call counted and the
95th percentile over the last :data:`RECENT_CALLS` calls (a bounded window, so
memory stays constant however long the process runs).
"""

from __future__ import annotations

import math
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    from langmem_tiers.context import Context
    from langmem_tiers.journal.base import Journal

INDEX_LAG_ROWS = 1000  # pending rows read at most to date the oldest (a lower bound past it)
TIERS = ("pinned", "working", "profile", "summary", "recall", "window", "total")
RECENT_CALLS = 1024


@dataclass(frozen=True)
class TierFigures:
    """Tokens one tier took per ``context()`` call: mean over all calls, p95 over the recent ones."""

    mean: float
    p95: float


@dataclass(frozen=True)
class MetricsSnapshot:
    """What :meth:`MemoryMetrics.snapshot` returns (and ``stats().metrics``).

    ``recall_hit_share`` is the fraction of ``context()`` calls that delivered at least one
    recalled record (the "memory hit ratio"); ``None`` before the first call.
    """

    context_calls: int = 0
    calls_with_recall: int = 0
    recall_hit_share: float | None = None
    skills_delivered: int = 0
    tokens: dict[str, TierFigures] = field(default_factory=dict)
    summaries: int = 0
    summary_failures: int = 0
    expired_erased: int = 0
    since: float = 0.0


class MemoryMetrics:
    """Thread-safe counters, updated in memory (see the module docstring). ``reset()`` starts afresh."""

    def __init__(self, clock: Callable[[], float] | None = None) -> None:
        import time

        self._clock = clock or time.time
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        """Zero every counter (e.g. after a deploy, or between benchmark phases)."""
        with self._lock:
            self._calls = 0
            self._with_recall = 0
            self._skills = 0
            self._sums = dict.fromkeys(TIERS, 0)
            self._recent: deque[tuple[int, ...]] = deque(maxlen=RECENT_CALLS)
            self._summaries = 0
            self._summary_failures = 0
            self._expired = 0
            self._since = self._clock()

    def observe_context(self, context: Context) -> None:
        """Count one assembled context (called by ``context()`` / ``acontext()``)."""
        t = context.tokens
        row = (t.pinned, t.working, t.profile, t.summary, t.recall, t.window, t.total)
        skills = sum(1 for h in context.recalled if h.kind == "skill")
        with self._lock:
            self._calls += 1
            self._with_recall += bool(context.recalled)
            self._skills += skills
            for name, value in zip(TIERS, row):
                self._sums[name] += value
            self._recent.append(row)

    def observe_summary(self, ok: bool) -> None:
        """Count one summarizer call that was saved (``ok``) or failed."""
        with self._lock:
            if ok:
                self._summaries += 1
            else:
                self._summary_failures += 1

    def observe_expired(self, erased: int) -> None:
        """Count memories erased because they expired (``cleanup()`` or the periodic sweep)."""
        with self._lock:
            self._expired += erased

    def snapshot(self) -> MetricsSnapshot:
        """The figures so far, read under one lock (see :class:`MetricsSnapshot`)."""
        with self._lock:
            calls, recent = self._calls, list(self._recent)
            tokens = {
                name: TierFigures(round(self._sums[name] / calls, 1) if calls else 0.0,
                                  float(_p95([row[i] for row in recent])))
                for i, name in enumerate(TIERS)
            }
            return MetricsSnapshot(
                context_calls=calls, calls_with_recall=self._with_recall,
                recall_hit_share=round(self._with_recall / calls, 4) if calls else None,
                skills_delivered=self._skills, tokens=tokens, summaries=self._summaries,
                summary_failures=self._summary_failures, expired_erased=self._expired, since=self._since,
            )


def _p95(values: list[int]) -> int:
    """Nearest-rank 95th percentile (0 for no values)."""
    if not values:
        return 0
    ordered = sorted(values)
    return ordered[max(math.ceil(0.95 * len(ordered)) - 1, 0)]


def index_lag(journal: Journal, ns_id: int, pending: int, now: float | None = None) -> float | None:
    """Seconds the oldest record of a session has waited for the vector index, by the record's time.

    Events are left out (their time is when they happened, not when they were stored); past
    :data:`INDEX_LAG_ROWS` pending rows this is a lower bound (the journal lists the newest).
    ``None`` when nothing is pending. One read, in ``stats()`` only.
    """
    import time

    if not pending:
        return None
    rows = [r for r in journal.pending_records([ns_id], min(pending, INDEX_LAG_ROWS)) if r.kind != "event"]
    if not rows:
        return None
    return round(max((time.time() if now is None else now) - min(r.created_at for r in rows), 0.0), 3)
