"""Query-time recall switches (issue 19): each one on or off by its weight, validated when built.

They act only when a query runs, so one ingest can be queried under several of them (the
evaluation's ablations, :mod:`langmem_tiers.eval.ablate`). :class:`~langmem_tiers.config.MemoryConfig`
carries the same fields with a ``recall_`` prefix; :meth:`RecallOptions.from_config` reads them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from langmem_tiers.errors import ConfigError


@dataclass(frozen=True)
class RecallOptions:
    """How a query is analysed and fused beyond plain keyword + vector RRF. ``0`` turns a switch off.

    ``RecallOptions()`` is everything off (plain fusion); a :class:`~langmem_tiers.recall.engine.RecallIndex`
    built without options takes :class:`~langmem_tiers.config.MemoryConfig`'s defaults instead.

    Args:
        salient_weight: RRF weight of a third rank list, a keyword search over just the query's
            names, numbers and quoted words (:func:`langmem_tiers.recall.query.salient_terms`).
        time_boost: a record made inside the time window the query names ("last week", "in May
            2023") has its score multiplied by ``1 + time_boost``.
        when_boost: for a question asking when, a record whose text says when (a date, a weekday,
            "two weeks ago") has its score multiplied by ``1 + when_boost``.
        session_weight: two-stage retrieval: the sessions of the best first-stage candidates
            are searched again (keyword and vector, deeper), and those rank lists are fused
            with this RRF weight each. Only for user and agent scope.
        session_top: how many sessions the second stage searches.
        feedback_weight: pseudo-relevance feedback: RRF weight of a keyword search over the query plus
            the words its ``feedback_docs`` best first-round hits share
            (:func:`langmem_tiers.recall.query.feedback_terms`).
        feedback_docs: how many first-round hits feed that search.
        neighbor_weight: the turns around the best first-round turns (the one before and the one
            after each, in its session) form one more rank list, fused with this RRF weight: in a
            chat the answer is often the reply next to the turn that matched the words.
        neighbor_docs: how many first-round hits have their neighbors ranked; they keep their places
            at the top (:func:`~langmem_tiers.recall.engine.leads_first`).
        diversity: maximal marginal relevance over the best ``2 * k`` candidates: each place goes to
            the candidate whose fused score (as a share of the best) less ``diversity`` times its
            cosine similarity to the nearest candidate placed before it is highest, so a turn that
            repeats a better one gives way to one about something else (a question whose answer is a
            list). Only where the scope's in-process index answered (it holds the vectors); the
            neighbor list's leads keep their places.
        depth: how deep each rank list reaches, per hit asked for (at least the engine's
            ``candidates``): every candidate is read and fused, so this is most of a deep search's
            cost (``context()`` asks for up to 64 hits to fill a large share).
    """

    salient_weight: float = 0.0
    time_boost: float = 0.0
    when_boost: float = 0.0
    session_weight: float = 0.0
    session_top: int = 3
    feedback_weight: float = 0.0
    feedback_docs: int = 3
    neighbor_weight: float = 0.0
    neighbor_docs: int = 5
    diversity: float = 0.0
    depth: int = 4

    def __post_init__(self) -> None:
        for name in ("salient_weight", "time_boost", "when_boost", "session_weight", "feedback_weight",
                     "neighbor_weight", "diversity"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value < 0:
                raise ConfigError(f"recall_{name} ({value!r}) must be a finite number >= 0 (0 turns it off)")
        if isinstance(self.session_top, bool) or not isinstance(self.session_top, int) or self.session_top < 1:
            raise ConfigError(f"recall_session_top ({self.session_top!r}) must be an integer >= 1")
        for name in ("feedback_docs", "neighbor_docs", "depth"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"recall_{name} ({value!r}) must be an integer >= 1")

    @classmethod
    def from_config(cls, config: Any) -> RecallOptions:
        """The options a :class:`~langmem_tiers.config.MemoryConfig` sets (its ``recall_*`` fields)."""
        return cls(salient_weight=config.recall_salient_weight, time_boost=config.recall_time_boost,
                   when_boost=config.recall_when_boost, session_weight=config.recall_session_weight,
                   session_top=config.recall_session_top, feedback_weight=config.recall_feedback_weight,
                   feedback_docs=config.recall_feedback_docs, neighbor_weight=config.recall_neighbor_weight,
                   neighbor_docs=config.recall_neighbor_docs, diversity=config.recall_diversity,
                   depth=config.recall_depth)
