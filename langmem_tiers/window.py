"""The window planner: which whole turns stay, which are evicted. Pure, no I/O.

A turn is a user message and everything after it up to the next user message:
the assistant's replies, its tool calls and all their results. Turns are the
unit of eviction, so a tool call never loses its result and the current user
turn (the last one) is never evicted. Eviction has hysteresis: nothing moves
until the window crosses ``high`` tokens, then the oldest turns go until it is
at or below ``low``, so the summarizer sees batches, not single messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from langmem_tiers.journal.base import WindowEntry


@dataclass(frozen=True)
class WindowPlan:
    """What to do with the window after an append.

    Attributes:
        window_start: id of the first message that stays (unchanged if nothing is evicted).
        evicted_turns: ids of the evicted messages, one tuple per turn, oldest first.
        tokens: tokens the window holds after the plan.
        over_budget: true only when the current turn alone exceeds ``high`` (kept whole).
    """

    window_start: int
    evicted_turns: tuple[tuple[int, ...], ...]
    tokens: int
    over_budget: bool

    @property
    def evicts(self) -> bool:
        return bool(self.evicted_turns)


def split_turns(entries: Sequence[WindowEntry]) -> list[list[WindowEntry]]:
    """Group consecutive messages into turns; each user message opens a new one."""
    turns: list[list[WindowEntry]] = []
    for entry in entries:
        if entry.role == "user" or not turns:
            turns.append([entry])
        else:
            turns[-1].append(entry)
    return turns


def plan_window(entries: Sequence[WindowEntry], high: int, low: int) -> WindowPlan:
    """Plan eviction for the window ``entries`` (oldest first, all ids >= the window start).

    Example:
        >>> e = [WindowEntry(1, "user", 50), WindowEntry(2, "assistant", 60), WindowEntry(3, "user", 10)]
        >>> plan_window(e, high=100, low=60).evicted_turns
        ((1, 2),)
    """
    if not entries:
        return WindowPlan(0, (), 0, False)
    turns = split_turns(entries)
    sizes = [sum(e.tokens for e in t) for t in turns]
    total = sum(sizes)
    if total <= high:
        return WindowPlan(entries[0].id, (), total, False)
    evicted = 0
    while total > low and evicted < len(turns) - 1:
        total -= sizes[evicted]
        evicted += 1
    kept_start = turns[evicted][0].id
    return WindowPlan(
        window_start=kept_start,
        evicted_turns=tuple(tuple(e.id for e in t) for t in turns[:evicted]),
        tokens=total,
        over_budget=total > high,
    )
