"""Skills: procedures with trigger phrases and a track record, ranked for a situation.

``remember(text, kind="skill", triggers=[...])`` stores a skill; ``record_outcome(id,
success)`` counts its uses and successes (``metadata["uses"]``, ``["successes"]``);
``skills_for(situation, k)`` and ``context()`` rank the user's skills for a situation:

**Ranking** (every factor in ``RecallHit.parts``)::

    trigger    = max over the skill's triggers of (words of the trigger found in the situation
                 / words of the trigger); words match on a light stem (one suffix among
                 -ing, -ed, -es, -s off, then the first five letters), so "deploying fails"
                 finds "deploy failed". 1.0 when one trigger is wholly in the situation.
    relevance  = the skill's recall score / the best recall score among the skills found
                 for this situation (keyword + vector recall, as search()); 0 when recall
                 did not find it.
    success    = (successes + 1) / (uses + 2)    (0.5 for a skill never tried; 10 of 10 -> 0.92)
    total      = (0.6 * trigger + 0.4 * relevance) * (0.5 + success)

A skill is a candidate when its trigger or its relevance is above 0; ties go to the newer
skill. The track record scales a match, it never makes one: a skill that always worked
but does not apply is not returned.

In ``context()`` no extra recall query runs: relevance comes from the recall hits the
call already has, the triggers from the user's skills (read with the profile in one
query), and the best ``MemoryConfig.skills_k`` skills open the recalled section.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from langmem_tiers.flow import Blocking, Flow
from langmem_tiers.journal.base import Journal, Record, Scope
from langmem_tiers.memory_types.expiry import is_expired
from langmem_tiers.memory_types.fields import SKILL_KIND, SUCCESSES, TRIGGERS, USES
from langmem_tiers.recall.engine import RecallIndex, SearchFilters
from langmem_tiers.recall.hits import RecallHit
from langmem_tiers.text import WORD

TRIGGER_WEIGHT = 0.6
RELEVANCE_WEIGHT = 0.4
STEM = 5  # letters of a stem a word matches on ("deploying" ~ "deploy")


SUFFIXES = ("ing", "ed", "es", "s")


def _stem(word: str) -> str:
    """A light stem: one common suffix off (kept when 3 letters would not remain), then the first
    five letters, so "fails", "failed" and "failing" match, as do "deploy" and "deploying"."""
    w = word.lower()
    for suffix in SUFFIXES:
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            w = w[:-len(suffix)]
            break
    return w[:STEM]


def _stems(text: str) -> set[str]:
    return {_stem(w) for w in WORD.findall(text)}


def trigger_match(triggers: Iterable[str], situation: str) -> float:
    """The best share of a trigger's words found in ``situation`` (0.0 when none).

    Example:
        >>> trigger_match(["deploy fails", "rollback"], "the deploying failed again")
        1.0
        >>> trigger_match(["deploy fails"], "deploy went fine")
        0.5
    """
    have = _stems(situation)
    best = 0.0
    for t in triggers:
        words = _stems(t)
        if words:
            best = max(best, len(words & have) / len(words))
    return best


def success_rate(metadata: Mapping[str, Any]) -> float:
    """``(successes + 1) / (uses + 2)``: the mean of a Beta(1, 1) prior updated by the outcomes."""
    uses, successes = _count(metadata, USES), _count(metadata, SUCCESSES)
    return (min(successes, uses) + 1) / (uses + 2)


def rank_skills(skills: Sequence[Record], hits: Sequence[RecallHit], situation: str) -> list[RecallHit]:
    """The candidate skills for ``situation``, best first, as recall hits scored by the module's formula.

    ``skills`` are the user's current, live skills; ``hits`` are recall hits for the situation
    (any kinds: the skills among them give the relevance).
    """
    scores = {h.record_id: h.score for h in hits if h.kind == SKILL_KIND}
    top = max(scores.values(), default=0.0)
    ranked: list[tuple[float, int, RecallHit]] = []
    for r in skills:
        triggers = r.metadata.get(TRIGGERS)
        trigger = trigger_match(triggers, situation) if isinstance(triggers, list) else 0.0
        relevance = scores.get(r.id, 0.0) / top if top > 0 else 0.0
        if trigger <= 0 and relevance <= 0:
            continue
        success = success_rate(r.metadata)
        total = (TRIGGER_WEIGHT * trigger + RELEVANCE_WEIGHT * relevance) * (0.5 + success)
        parts = {"trigger": trigger, "relevance": relevance, "success": success, "total": total}
        hit = RecallHit(record_id=r.id, kind=r.kind, text=r.text, score=total, parts=parts, namespace=r.namespace,
                        message_ids=r.message_ids, created_at=r.created_at, importance=r.importance,
                        pinned=r.pinned, tags=r.tags, metadata=r.metadata)
        ranked.append((total, r.id, hit))
    ranked.sort(key=lambda t: (-t[0], -t[1]))
    return [h for _, _, h in ranked]


def lead_with_skills(hits: Sequence[RecallHit], records: Iterable[Record], query: str, k: int) -> list[RecallHit]:
    """``context()``'s recalled section with the ``k`` best skills for ``query`` first (no extra query).

    ``records`` are the user's live memories read with the profile: the current, unpinned
    skills among them are ranked against ``hits`` (the call's recall hits give the relevance);
    the other hits keep their order after the chosen skills.
    """
    skills = [r for r in records if r.kind == SKILL_KIND and r.valid_to is None and not r.pinned]
    best = rank_skills(skills, hits, query)[:k] if skills and k else []
    chosen = {h.record_id for h in best}
    return [*best, *(h for h in hits if h.record_id not in chosen)]


def skills_for_flow(recall: RecallIndex, journal: Journal, scope: Scope,
                    ns_ids: Callable[[Sequence[str]], Sequence[int]],
                    situation: str, k: int, now: float) -> Flow[list[RecallHit]]:
    """``skills_for()``: recall over the scope's skills, then every current, live skill of the
    user ranked against those hits (a skill found by its trigger alone still counts)."""
    if not k or not situation.strip():
        return []
    found = yield from recall.search_flow(situation, max(4 * k, 10), scope,
                                          SearchFilters(kinds=(SKILL_KIND,), now=now))
    records = yield Blocking(lambda: journal.scoped_records(ns_ids([SKILL_KIND]), [SKILL_KIND]))
    mine = [r for r in records if r.valid_to is None and not is_expired(r.metadata, now)]
    return rank_skills(mine, found, situation)[:k]


def count_outcome(journal: Journal, record_id: int, success: bool, lock: threading.Lock) -> None:
    """One more outcome on a skill's record. A read-modify-write: two handles counting outcomes of
    one skill at the same instant may count once (the journal has no atomic increment); ``lock``
    keeps every count of one handle."""
    with lock:
        fresh = journal.records([record_id])
        if fresh:
            journal.update_record(record_id, metadata=with_outcome(fresh[0].metadata, success))


def with_outcome(metadata: Mapping[str, Any], success: bool) -> dict[str, Any]:
    """A skill's metadata after one more recorded outcome.

    Example:
        >>> with_outcome({"uses": 2, "successes": 1}, True)
        {'uses': 3, 'successes': 2}
    """
    uses, successes = _count(metadata, USES), _count(metadata, SUCCESSES)
    return {**metadata, USES: uses + 1, SUCCESSES: successes + int(success)}


def track_record(metadata: Mapping[str, Any]) -> str:
    """How a skill did, for the line the model reads ("worked 3 of 4 times"); "" when never tried."""
    uses = _count(metadata, USES)
    return f"worked {min(_count(metadata, SUCCESSES), uses)} of {uses} times" if uses else ""


def _count(metadata: Mapping[str, Any], name: str) -> int:
    value = metadata.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
