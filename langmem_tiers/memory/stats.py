"""``stats()``: a snapshot of one session's tiers, with how recall works for this memory."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from langmem_tiers.journal.base import Namespace
from langmem_tiers.memory import reads
from langmem_tiers.metrics import MetricsSnapshot, index_lag

if TYPE_CHECKING:
    from langmem_tiers.memory.tiered import TieredMemory


@dataclass(frozen=True)
class Stats:
    """A snapshot of one session's tiers.

    ``recall_mode`` says how this handle recalls and why, as chosen at ``open()``: e.g.
    ``"vectors (local model st:all-MiniLM-L6-v2 on cpu, the default)"`` (the device a local model
    runs on: ``device="auto"`` picks cuda, then mps, then cpu) or ``"keywords only
    (sentence-transformers not installed: pip install 'langmem-tiers[local]' for vectors)"``.
    """

    session: Namespace
    messages: int
    window_messages: int
    window_tokens: int
    summary_tokens: int
    summary_cursor: int
    pending_summary_messages: int
    summary_failures: int
    last_summary_error: str | None
    records: int
    index_pending: int
    last_index_error: str | None
    # Measurements, not the session's state (left out of ==): seconds the oldest record still waiting
    # for the vector index has waited (a lower bound past 1,000 pending; None when none waits), and the
    # counters of this process (langmem_tiers.metrics).
    index_lag_s: float | None = field(default=None, compare=False)
    metrics: MetricsSnapshot = field(default_factory=MetricsSnapshot, compare=False)
    # Of this handle, not of the session (two handles on one session may differ): left out of == too.
    recall_mode: str = field(default="", compare=False)


def session_stats(m: TieredMemory) -> Stats:
    """The :class:`Stats` of ``m``'s session: what :meth:`TieredMemory.stats` returns."""
    m._check_open()
    state, window, pending = reads.snapshot(m)
    index_pending = m.journal.outbox_count([m._ns_id])
    return Stats(
        session=m.namespace, messages=m.journal.count_messages(m._ns_id),
        window_messages=len(window), window_tokens=sum(w.tokens for w in window),
        summary_tokens=state.summary_tokens, summary_cursor=state.summary_cursor,
        pending_summary_messages=pending, summary_failures=state.failures,
        last_summary_error=state.last_error, records=m.journal.count_records(m._ns_id),
        index_pending=index_pending, last_index_error=m.journal.outbox_error([m._ns_id]),
        index_lag_s=index_lag(m.journal, m._ns_id, index_pending), metrics=m.metrics.snapshot(),
        recall_mode=m._recall_mode,
    )
