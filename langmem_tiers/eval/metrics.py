"""Retrieval metrics, pure functions over retrieved units and gold evidence.

A retriever returns ranked *units*; each unit covers one or more turn keys (a turn,
a round, a session chunk). ``k`` always counts units; a unit counts all the turns
it covers.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from langmem_tiers.eval.datasets import Turn

Unit = tuple[str, ...]


def covered_turns(units: Sequence[Unit], k: int) -> set[str]:
    """Turn keys covered by the first ``k`` units."""
    return {key for unit in units[:k] for key in unit}


def evidence_recall(units: Sequence[Unit], gold: Iterable[str], k: int) -> float:
    """LoCoMo: fraction of the gold turn keys among the turns of the top-``k`` units."""
    gold_set = set(gold)
    if not gold_set:
        raise ValueError("evidence_recall needs at least one gold turn: exclude such questions before scoring")
    return len(gold_set & covered_turns(units, k)) / len(gold_set)


def session_recall(
    units: Sequence[Unit], turns: Mapping[str, Turn], gold_sessions: Iterable[str], k: int
) -> tuple[float, float]:
    """LongMemEval session level: (recall_any, recall_all) over the sessions of the top-``k`` units."""
    gold = set(gold_sessions)
    if not gold:
        raise ValueError("session_recall needs at least one gold session")
    got = {turns[key].session_id for key in covered_turns(units, k) if key in turns}
    hit = gold & got
    return float(bool(hit)), float(hit == gold)


def turn_recall_any(units: Sequence[Unit], gold_turns: Iterable[str], k: int) -> float:
    """LongMemEval turn level: 1.0 when any ``has_answer`` turn is among the top-``k`` units."""
    gold = set(gold_turns)
    if not gold:
        raise ValueError("turn_recall_any needs at least one gold turn")
    return float(bool(gold & covered_turns(units, k)))


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (``q`` in 0..100), as numpy's default."""
    if not values:
        return math.nan
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan
