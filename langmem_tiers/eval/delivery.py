"""What a baseline delivers at equal tokens: its top units, in rank order, within a total budget.

A baseline has no window or summary: all it can give the model is its retrieved units.
It gets the same *total* budget as our whole ``context()`` (``MemoryConfig.context_tokens``),
counted with the same tokenizer and in the same framing: one memory message (our memory
message's headers, a ``"- [date] speaker: text"`` line per unit, units of one session and day
under one label in the order they were said, as our recall lines read) plus the reply priming.
Units go in rank order until the next one does not fit; that one and everything after it stay
out (no skipping ahead to smaller units: a retriever's ranking is what is measured).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from itertools import pairwise

from langmem_tiers.context import MEMORY_HEADER, RECALL_HEADER, group_line
from langmem_tiers.eval.datasets import DatasetMessage
from langmem_tiers.eval.metrics import Delivered, Unit
from langmem_tiers.messages import Message
from langmem_tiers.tokens import REPLY_PRIMING, TokenCounter

# First fill query depth; deepened (x4) while the budget still has room and the ranking goes on.
FILL_DEPTH = 64


def unit_line(unit: Unit, messages: Mapping[str, DatasetMessage]) -> str | None:
    """One unit as a recall line: ``"- [YYYY-MM-DD] speaker: text"`` (one line per message after the first)."""
    found = _found(unit, messages)
    return _line(_label(found), found) if found else None


def _line(label: str, found: Sequence[DatasetMessage]) -> str:
    return "- " + (f"[{label}] " if label else "") + "\n".join(m.line for m in found)


def _found(unit: Unit, messages: Mapping[str, DatasetMessage]) -> list[DatasetMessage]:
    return [messages[key] for key in unit if key in messages]


def _label(found: Sequence[DatasetMessage]) -> str:
    created = min(m.created_at for m in found)
    return dt.datetime.fromtimestamp(created, dt.timezone.utc).strftime("%Y-%m-%d") if created else ""


def recall_lines(units: Sequence[Unit], messages: Mapping[str, DatasetMessage]) -> list[str]:
    """The units' recall lines: a unit's line also holds the later-delivered units of its session and
    day, in the order they were said ("..." where messages between them are not shown), as our recall
    section groups turns (``langmem_tiers.context``); groups stay in rank order."""
    groups: dict[tuple[str, str], list[list[DatasetMessage]]] = {}
    for unit in units:
        found = _found(unit, messages)
        if found:
            groups.setdefault((found[0].session_id, _label(found)), []).append(found)
    lines = []
    for (_, label), members in groups.items():
        members.sort(key=lambda found: (found[0].created_at, found[0].index))
        lines.append(group_line(_line(label, members[0]), [
            ("\n".join(m.line for m in found), found[0].index == before[-1].index + 1)
            for before, found in pairwise(members)]))
    return lines


def _memory_message(lines: Sequence[str], role: str) -> Message:
    return Message(role, MEMORY_HEADER + "\n\n" + RECALL_HEADER + "\n" + "\n".join(lines),
                   metadata={"langmem_tiers": "memory"})


def _total(units: Sequence[Unit], messages: Mapping[str, DatasetMessage], role: str, counter: TokenCounter) -> int:
    if not units:
        return REPLY_PRIMING
    return counter.count_message(_memory_message(recall_lines(units, messages), role)) + REPLY_PRIMING


def fill_budget(ranked: Sequence[Unit], messages: Mapping[str, DatasetMessage], budget: int,
                counter: TokenCounter, role: str = "system") -> tuple[Delivered, bool]:
    """Deliver ``ranked`` units within ``budget`` total tokens.

    Returns the delivery and whether the budget stopped it (``False``: the ranking ran out
    first). Units are counted one by one (a unit under a label already written: its text
    alone); a unit the running sum says does not fit is checked against an exact count, and
    the result is recounted whole at the end, dropping the last units if it counts more.
    """
    units: list[Unit] = []
    labelled: set[tuple[str, str]] = set()  # the sessions and days whose label is written already
    used = counter.count_message(_memory_message(["x"], role)) + REPLY_PRIMING - counter.count_text("x")
    full = False
    for unit in ranked:
        found = _found(unit, messages)
        if not found:
            continue
        label = _label(found)
        group = (found[0].session_id, label)
        # A unit under a written label costs its text (and at most a "..." line): an estimate.
        cost = (counter.count_text("\n".join(m.line for m in found)) + 3 if group in labelled
                else counter.count_text(_line(label, found)) + 1)
        if used + cost > budget:
            # The running sum is an estimate (tokens may merge across the joins): decide exactly.
            exact = _total([*units, unit], messages, role, counter)
            if exact > budget:
                full = True
                break
            cost = exact - used
        units.append(unit)
        labelled.add(group)
        used += cost
    total = _total(units, messages, role, counter)
    while units and total > budget:
        units.pop()
        full = True
        total = _total(units, messages, role, counter)
    lines = recall_lines(units, messages)
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
