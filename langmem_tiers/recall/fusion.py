"""Rank fusion and score shaping for recall: pure functions, no I/O.

A recall query ranks candidates twice (keyword and vector); :func:`rrf` fuses the
ranks, :func:`recency_weight` and :func:`retention` shape the fused score by age and
importance, and :func:`fuse` puts it together into :class:`ScoreParts` so a caller can
show why a memory ranked where it did. Query analysis may add rank lists (a keyword
search over the query's names and numbers, a second stage within the best sessions) and
per-record boosts (a time window the query names): see :mod:`langmem_tiers.recall.query`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from langmem_tiers.errors import ConfigError

_WORD = re.compile(r"\w+", re.UNICODE)


def rrf(
    rank_lists: Sequence[Sequence[str]], k: int = 60, weights: Sequence[float] | None = None
) -> dict[str, float]:
    """Reciprocal rank fusion: ``score(id) = sum_i weights[i] / (k + rank_i(id))``.

    Args:
        rank_lists: one list of ids per ranker, best first; ranks start at 1. An id
            repeated within one list counts at its best rank only.
        k: damping constant (60 in the original paper); larger flattens the curve.
        weights: one non-negative weight per list; ``None`` weighs every list 1.

    Returns:
        ids mapped to fused scores (higher is better), for every id in any list.

    Raises:
        ConfigError: ``k`` < 1, or weights of the wrong length or negative.

    Example:
        >>> s = rrf([["a", "b"], ["b", "c"]], k=1)
        >>> round(s["b"], 4), round(s["a"], 4), round(s["c"], 4)
        (0.8333, 0.5, 0.3333)
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ConfigError(f"rrf k ({k!r}) must be an integer >= 1: 60 is the usual value")
    if weights is None:
        weights = [1.0] * len(rank_lists)
    elif len(weights) != len(rank_lists):
        raise ConfigError(
            f"rrf weights has {len(weights)} entries for {len(rank_lists)} rank lists: give one per list"
        )
    for w in weights:
        if not math.isfinite(w) or w < 0:
            raise ConfigError(f"rrf weight ({w!r}) must be finite and >= 0")
    scores: dict[str, float] = {}
    for ranks, weight in zip(rank_lists, weights):
        seen: set[str] = set()
        for position, item in enumerate(ranks, start=1):
            if item in seen:
                continue
            seen.add(item)
            scores[item] = scores.get(item, 0.0) + weight / (k + position)
    return scores


def recency_weight(age_seconds: float, half_life_seconds: float) -> float:
    """Exponential decay by age: 1 now, 0.5 after one half-life, towards 0 after.

    Args:
        age_seconds: how old the memory is; negative ages (clock skew) count as 0.
        half_life_seconds: age at which the weight halves; ``math.inf`` disables decay.

    Returns:
        A weight in ``(0, 1]`` (exactly 0 only when the age is infinite).

    Raises:
        ConfigError: ``half_life_seconds`` is not > 0.
    """
    if not half_life_seconds > 0:
        raise ConfigError(f"half_life_seconds ({half_life_seconds!r}) must be > 0")
    return _recency(max(0.0, float(age_seconds)), half_life_seconds)


def _recency(age: float, half_life_seconds: float) -> float:
    """:func:`recency_weight`'s arithmetic, for an age >= 0 and a half-life already checked."""
    return 1.0 if math.isinf(half_life_seconds) else math.pow(0.5, age / half_life_seconds)


def retention(importance: float, age_seconds: float, stability_seconds: float, pinned: bool = False) -> float:
    """Ebbinghaus forgetting curve on importance: ``importance * exp(-age / S)``.

    The stability ``S`` grows with importance (``S * (1 + importance)``), so important
    memories fade slower. Only the ranking uses this; nothing is deleted.

    Args:
        importance: in ``[0, 1]``.
        age_seconds: time since the memory was made or last recalled; negative counts as 0.
        stability_seconds: base time constant of the curve, > 0.
        pinned: pinned memories never decay (returns ``importance``).

    Returns:
        The remembered importance, in ``[0, importance]``.

    Raises:
        ConfigError: importance outside ``[0, 1]`` or stability not > 0.
    """
    _check_importance(importance)
    if not stability_seconds > 0:
        raise ConfigError(f"stability_seconds ({stability_seconds!r}) must be > 0")
    return _retained(importance, max(0.0, float(age_seconds)), stability_seconds, pinned)


def _retained(importance: float, age: float, stability_seconds: float, pinned: bool) -> float:
    """:func:`retention`'s arithmetic, for an age >= 0 and values already checked."""
    if pinned:
        return float(importance)
    return float(importance) * math.exp(-age / (stability_seconds * (1.0 + importance)))


def _check_importance(importance: float) -> None:
    if not 0.0 <= importance <= 1.0:
        raise ConfigError(f"importance ({importance!r}) must be between 0 and 1")


def word_set(text: str) -> frozenset[str]:
    """The lower-cased words of ``text``, as :func:`jaccard` compares them."""
    return frozenset(_WORD.findall(text.lower()))


def set_jaccard(wa: frozenset[str], wb: frozenset[str]) -> float:
    """Jaccard similarity of two word sets (see :func:`word_set`); 1 for two empty sets."""
    if not wa and not wb:
        return 1.0
    shared = len(wa & wb)  # the union's size by arithmetic: no second set is built
    return shared / (len(wa) + len(wb) - shared)


def jaccard(a: str, b: str) -> float:
    """Jaccard similarity of the lower-cased word sets of two texts; 1 for two empty texts."""
    return set_jaccard(word_set(a), word_set(b))


class NearDuplicates:
    """Word sets (:func:`word_set`) kept so far, and whether another is a near-duplicate of one of
    them: Jaccard similarity >= ``threshold``.

    Comparing with every kept set costs a set operation per pair: ~1,800 per ``context()`` that keeps
    61 hits. Each pair is first tested by a 256-bit signature of each set (a word sets bit
    ``hash(word) % 256``): a bit set in one signature only comes from a word in one set only, so
    ``popcount(a ^ b) <= |A ^ B|``, and J(A, B) >= t needs ``|A ^ B| * (1 + t) <= (|A| + |B|) * (1 - t)``.
    A pair over that bound is not a near-duplicate; the few others get the exact Jaccard. (Any hash
    works: a collision only lowers the count.) Prefix filtering (Bayardo et al. 2007), used before,
    let most pairs through on conversation, whose sorted prefixes are common words and speaker names.
    """

    def __init__(self, threshold: float) -> None:
        self.threshold = threshold
        self._kept: list[tuple[frozenset[str], int]] = []  # each kept set and its signature
        self._empty = False  # two empty sets are identical (Jaccard 1)

    def keep(self, words: frozenset[str]) -> bool:
        """Keep ``words`` unless it is a near-duplicate of a set kept before; whether it was kept."""
        t = self.threshold
        signature = 0
        if not words:
            seen = (self._empty and t <= 1) or (t <= 0 and bool(self._kept))
        elif t <= 0:  # every pair qualifies
            seen = bool(self._kept)
        else:
            for w in words:
                signature |= 1 << (hash(w) & 255)
            n, slack, room = len(words), 1.0 + t, 1.0 - t
            # 1e-9: only a pair clearly over the bound is skipped (float rounding)
            seen = any((signature ^ bits).bit_count() * slack <= (n + len(kept)) * room + 1e-9
                       and set_jaccard(words, kept) >= t for kept, bits in self._kept)
        if seen:
            return False
        self._empty = self._empty or not words
        self._kept.append((words, signature))
        return True


@dataclass(frozen=True)
class FusionParams:
    """How :func:`fuse` weighs its parts. Validated at construction.

    Args:
        rrf_k: RRF damping constant, >= 1. 20, not the usual 60: chosen on half A of the dev data by
            the rule of BENCHMARKS.md's issue 19 section (LoCoMo context_recall 0.867 -> 0.880, answer_recall
            0.381 -> 0.385, R@10 0.751 -> 0.785; 120 lost 0.011) and held on half B (0.846 -> 0.851). A
            smaller constant lets the first few ranks of each list count for more.
        keyword_weight: weight of the keyword rank list in RRF, >= 0.
        vector_weight: weight of the vector rank list in RRF, >= 0.
        recency_coef: boost of a brand-new memory over a very old one (0 = ignore age).
        recency_half_life_seconds: age at which the recency boost halves.
        importance_coef: boost of an importance-1 memory over an importance-0 one.
        stability_seconds: base time constant of :func:`retention`.
    """

    rrf_k: int = 20
    keyword_weight: float = 1.0
    vector_weight: float = 1.0
    recency_coef: float = 0.5
    recency_half_life_seconds: float = 7 * 24 * 3600.0
    importance_coef: float = 0.5
    stability_seconds: float = 30 * 24 * 3600.0

    @classmethod
    def from_config(cls, config: Any) -> FusionParams:
        """The rank fusion a :class:`~langmem_tiers.config.MemoryConfig` sets (``recall_rrf_k``,
        ``recall_keyword_weight``, ``recall_vector_weight``); the rest stay at their defaults."""
        return cls(rrf_k=config.recall_rrf_k, keyword_weight=config.recall_keyword_weight,
                   vector_weight=config.recall_vector_weight)

    def __post_init__(self) -> None:
        if isinstance(self.rrf_k, bool) or not isinstance(self.rrf_k, int) or self.rrf_k < 1:
            raise ConfigError(f"rrf_k ({self.rrf_k!r}) must be an integer >= 1: 60 is the usual value")
        for name in ("keyword_weight", "vector_weight", "recency_coef", "importance_coef"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ConfigError(f"{name} ({value!r}) must be a finite number >= 0")
        if self.keyword_weight == 0 and self.vector_weight == 0:
            raise ConfigError(
                "keyword_weight and vector_weight are both 0: nothing would rank; raise one of them"
            )
        for name in ("recency_half_life_seconds", "stability_seconds"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not value > 0:
                raise ConfigError(f"{name} ({value!r}) must be > 0 (math.inf disables decay)")


class ScoreParts(NamedTuple):
    """Why a memory scored what it did. (A named tuple, not a frozen dataclass: :func:`fuse` makes
    one per candidate, ~550 a ``context()`` at 100k, and a tuple is built ten times faster.)

    Attributes:
        keyword_rank: 1-based rank in the keyword results, or ``None`` if absent.
        vector_rank: 1-based rank in the vector results, or ``None`` if absent.
        rrf: the fused rank score.
        recency: :func:`recency_weight` of the memory's age.
        importance: :func:`retention` of the memory's importance.
        total: ``rrf * (1 + recency_coef * recency) * (1 + importance_coef * importance) * boost``.
        boost: the query's multiplier for this memory (1: none; see :func:`fuse`).
    """

    keyword_rank: int | None
    vector_rank: int | None
    rrf: float
    recency: float
    importance: float
    total: float
    boost: float = 1.0


def fuse(
    keyword_ids: Sequence[str],
    vector_ids: Sequence[str],
    *,
    ages: Mapping[str, float] | None = None,
    importances: Mapping[str, float] | None = None,
    pinned: frozenset[str] | set[str] = frozenset(),
    params: FusionParams | None = None,
    extra: Sequence[tuple[Sequence[str], float]] = (),
    boosts: Mapping[str, float] | None = None,
) -> list[tuple[str, ScoreParts]]:
    """Fuse keyword and vector rankings, shaped by recency and importance.

    Args:
        keyword_ids: ids from the keyword index, best first.
        vector_ids: ids from the vector store, best first.
        ages: id -> age in seconds; a missing id counts as brand new.
        importances: id -> importance in ``[0, 1]``; a missing id counts as 0.
        pinned: ids whose importance never decays.
        params: weights; defaults to :class:`FusionParams()`.
        extra: more rank lists with their RRF weights (ids best first), fused with the two above.
        boosts: id -> multiplier of the total (a missing id: 1).

    Returns:
        ``(id, ScoreParts)`` pairs, best first; ties keep vector order, then keyword order.

    Example:
        >>> [i for i, _ in fuse(["a", "b"], ["b", "c"])]
        ['b', 'a', 'c']
    """
    return Fusion(keyword_ids, vector_ids, ages=ages, importances=importances, pinned=pinned, params=params,
                  extra=extra, boosts=boosts).ranked


class Fusion:
    """A :func:`fuse` that more rank lists can be added to: ``ranked`` is always what :func:`fuse` of
    every list so far returns, to the last bit. A search adds a list per round (the neighbors of its
    best, a second stage); :meth:`add` rescores only that list's ids, where fusing again scored every
    candidate again (~550 at 100k, half of a round's cost).

    Exact because each part is: a candidate's RRF score is a sum over the lists in their order, so
    the added lists' terms come last either way; its recency, retention and boost do not depend on the
    lists; ties keep the order of first appearance, and the added lists' new ids come after every
    earlier one. The caller must not add, by then, an id to an earlier list (fuse that anew).
    """

    def __init__(
        self,
        keyword_ids: Sequence[str],
        vector_ids: Sequence[str],
        *,
        ages: Mapping[str, float] | None = None,
        importances: Mapping[str, float] | None = None,
        pinned: frozenset[str] | set[str] = frozenset(),
        params: FusionParams | None = None,
        extra: Sequence[tuple[Sequence[str], float]] = (),
        boosts: Mapping[str, float] | None = None,
    ) -> None:
        self.params = p = params or FusionParams()
        base = rrf([keyword_ids, vector_ids, *(ids for ids, _ in extra)], k=p.rrf_k,
                   weights=[p.keyword_weight, p.vector_weight, *(w for _, w in extra)])
        self._kw_rank = _first_ranks(keyword_ids)
        self._vec_rank = _first_ranks(vector_ids)
        self._order = {cid: n for n, cid in enumerate(dict.fromkeys([*vector_ids, *keyword_ids,
                                                                     *(c for ids, _ in extra for c in ids)]))}
        self._parts: dict[str, ScoreParts] = {}
        self._score(base, ages or {}, importances or {}, pinned, boosts or {})

    def __contains__(self, cid: object) -> bool:
        """Whether ``cid`` is among the candidates fused so far."""
        return cid in self._parts

    def add(
        self,
        lists: Sequence[tuple[Sequence[str], float]],
        *,
        ages: Mapping[str, float] | None = None,
        importances: Mapping[str, float] | None = None,
        pinned: frozenset[str] | set[str] = frozenset(),
        boosts: Mapping[str, float] | None = None,
    ) -> None:
        """Fuse ``lists`` (ids best first, with their RRF weights) in too; ``ages``, ``importances``,
        ``pinned`` and ``boosts`` as for :func:`fuse` (read for the ids new to the fusion only)."""
        scores: dict[str, float] = {}
        for ids, weight in lists:  # one list at a time: the sums in fuse()'s order, so the same floats
            for cid, r in rrf([ids], k=self.params.rrf_k, weights=[weight]).items():
                before = scores.get(cid)
                if before is None:
                    before = self._parts[cid].rrf if cid in self._parts else 0.0
                scores[cid] = before + r
                self._order.setdefault(cid, len(self._order))
        self._score(scores, ages or {}, importances or {}, pinned, boosts or {},
                    {cid: self._parts[cid] for cid in scores if cid in self._parts})

    def _score(self, rrf_scores: Mapping[str, float], ages: Mapping[str, float], importances: Mapping[str, float],
               pinned: frozenset[str] | set[str], boosts: Mapping[str, float],
               known: Mapping[str, ScoreParts] | None = None) -> None:
        """Score parts for these candidates (``known``: those scored before keep their recency,
        retention and boost), then the ranking."""
        p = self.params
        # recency_weight()'s and retention()'s arithmetic without their checks of the parameters (made
        # once, by FusionParams), which cost more than the arithmetic, once per candidate.
        for cid, r in rrf_scores.items():
            before = known.get(cid) if known else None
            if before is not None:
                rec, imp, boost = before.recency, before.importance, before.boost
            else:
                age = max(0.0, float(ages.get(cid, 0.0)))
                importance = importances.get(cid, 0.0)
                _check_importance(importance)
                rec = _recency(age, p.recency_half_life_seconds)
                imp = _retained(importance, age, p.stability_seconds, cid in pinned)
                boost = boosts.get(cid, 1.0)
            total = r * (1.0 + p.recency_coef * rec) * (1.0 + p.importance_coef * imp) * boost
            self._parts[cid] = ScoreParts(self._kw_rank.get(cid), self._vec_rank.get(cid), r, rec, imp, total, boost)
        order = self._order
        self.ranked: list[tuple[str, ScoreParts]] = sorted(self._parts.items(),
                                                           key=lambda item: (-item[1].total, order[item[0]]))


def _first_ranks(ids: Sequence[str]) -> dict[str, int]:
    ranks: dict[str, int] = {}
    for position, cid in enumerate(ids, start=1):
        ranks.setdefault(cid, position)
    return ranks
