"""What a baseline delivers at equal tokens: its top units, in rank order, within a total budget.

A baseline has no window or summary: all it can give the model is its retrieved units.
It gets the same *total* budget as our whole ``context()`` (``MemoryConfig.context_tokens``),
counted with the same tokenizer and in the same framing: one memory message (our memory
message's headers, one ``"- [date] speaker: text"`` line per unit, as our recall lines read)
plus the reply priming. Units go in rank order until the next one does not fit; that one and
everything after it stay out (no skipping ahead to smaller units: a retriever's ranking is
what is measured).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence

from langmem_tiers.context import MEMORY_HEADER, RECALL_HEADER
from langmem_tiers.eval.datasets import DatasetMessage
from langmem_tiers.eval.metrics import Delivered, Unit
from langmem_tiers.messages import Message
from langmem_tiers.tokens import REPLY_PRIMING, TokenCounter

# First fill query depth; deepened (x4) while the budget still has room and the ranking goes on.
FILL_DEPTH = 64


def unit_line(unit: Unit, messages: Mapping[str, DatasetMessage]) -> str | None:
    """One unit as a recall line: ``"- [YYYY-MM-DD] speaker: text"`` (one line per message after the first)."""
    found = [messages[key] for key in unit if key in messages]
    if not found:
        return None
    created = min(m.created_at for m in found)
    label = f"[{dt.datetime.fromtimestamp(created, dt.timezone.utc).strftime('%Y-%m-%d')}] " if created else ""
    return "- " + label + "\n".join(m.line for m in found)


def _memory_message(lines: Sequence[str], role: str) -> Message:
    return Message(role, MEMORY_HEADER + "\n\n" + RECALL_HEADER + "\n" + "\n".join(lines),
                   metadata={"langmem_tiers": "memory"})


def _total(lines: Sequence[str], role: str, counter: TokenCounter) -> int:
    if not lines:
        return REPLY_PRIMING
    return counter.count_message(_memory_message(lines, role)) + REPLY_PRIMING


def fill_budget(ranked: Sequence[Unit], messages: Mapping[str, DatasetMessage], budget: int,
                counter: TokenCounter, role: str = "system") -> tuple[Delivered, bool]:
    """Deliver ``ranked`` units within ``budget`` total tokens.

    Returns the delivery and whether the budget stopped it (``False``: the ranking ran out
    first). Lines are counted one by one (plus the joining newline); a line the running sum
    says does not fit is checked against an exact count, and the result is recounted whole
    at the end, dropping the last units if the joined text counts more.
    """
    lines: list[str] = []
    units: list[Unit] = []
    used = _total(["x"], role, counter) - counter.count_text("x")  # framing + headers, no line
    full = False
    for unit in ranked:
        line = unit_line(unit, messages)
        if line is None:
            continue
        cost = counter.count_text(line) + 1
        if used + cost > budget:
            # The running sum is an estimate (tokens may merge across the joins): decide exactly.
            exact = _total([*lines, line], role, counter)
            if exact > budget:
                full = True
                break
            cost = exact - used
        lines.append(line)
        units.append(unit)
        used += cost
    total = _total(lines, role, counter)
    while lines and total > budget:
        lines.pop()
        units.pop()
        full = True
        total = _total(lines, role, counter)
    text = _memory_message(lines, role).text if lines else ""
    keys = frozenset(key for unit in units for key in unit if key in messages)
    return Delivered(text=text, keys=keys, tokens=total, units=len(units)), full


def deliver_ranked(query: Callable[[int], list[Unit]], messages: Mapping[str, DatasetMessage], budget: int,
                   counter: TokenCounter, role: str = "system") -> Delivered:
    """Ask ``query(k)`` deep enough to fill ``budget``, then :func:`fill_budget` it."""
    depth = FILL_DEPTH
    while True:
        ranked = query(depth)
        delivered, full = fill_budget(ranked, messages, budget, counter, role)
        if full or len(ranked) < depth or depth >= len(messages):
            return delivered
        depth *= 4
