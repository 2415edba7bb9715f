"""Which of the user's facts ``context()`` delivers as the profile, and when history is shown.

**Selection.** Current memories (nothing superseded them) of the kinds in ``PROFILE_KINDS``,
not pinned (pinned memories have their own section), ranked by relevance to the query
(query words found in the memory's text or key, a word matching on its first five letters,
or on a shorter word's three or four, so "lived" finds "live"), then importance, then the
newest first. The context assembler keeps them in this order within
``MemoryConfig.profile_tokens``; with ``MemoryConfig.profile_related_only`` (default) and a
query, only the memories that match at least one of its words. ``context()`` hands in the user's
keyed memories and, of the unkeyed ones, the question's keyword matches and the newest
(``memory/context_flow.py::typed_records``), so the selection does not read a long history's every fact.

**History rule** (:func:`wants_history`). A superseded value is delivered, as a dated
"previously" line under the current one, only when the query asks about the past or a
change. The query does when it holds:

* a change word: change(d), moved, switch(ed), used to, no longer, anymore, any more,
  previous(ly), former(ly), originally, ex-, history, update(d);
* "before" or "earlier" anywhere but as the query's first word ("Before we start, ..."
  opens a request, it does not ask about the past);
* "old" or "first" before a noun about the user ("my old address", "my first job");
* a past question: "where/what/who/which/how ... did/was/were" *with* a time anchor
  ("ago", "last year", "in 2019", "back then", "at the time", "when I").

A plain past tense alone ("What did I say about my cat?") is not enough: most questions
about the conversation are in the past tense and want the current value.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from dataclasses import dataclass

from langmem_tiers.journal.base import Record
from langmem_tiers.text import WORD, query_words

PROFILE_KINDS = ("fact", "preference", "relation")
MAX_HISTORY_LINES = 2

_CHANGE = re.compile(r"\b(?:chang(?:e|ed|es|ing)|moved?|moving|switch(?:ed|es)?|used to|no longer|any ?more|"
                     r"previous(?:ly)?|former(?:ly)?|originally|ex-\w+|history|updated?)\b")
_BEFORE = re.compile(r"\b(?:before|earlier)\b")
_OLD_OR_FIRST = re.compile(r"\b(?:my|our|the) (?:old|first|original|last|previous) \w+")
_PAST_QUESTION = re.compile(r"\b(?:where|what|who|which|how|when)\b.*\b(?:did|was|were|had)\b")
_TIME_ANCHOR = re.compile(r"\b(?:ago|last (?:year|month|week|time)|back then|at the time|when (?:i|we)|"
                          r"in (?:19|20)\d{2}|years? back)\b")


def wants_history(query: str | None) -> bool:
    """True when ``query`` asks about a past value or a change (the rule in the module docstring).

    Example:
        >>> wants_history("Where did I live before Lisbon?"), wants_history("Where do I live?")
        (True, False)
        >>> wants_history("Before we start, what is my name?")
        False
    """
    if not query:
        return False
    lower = " ".join(query.lower().replace("’", "'").split())
    if _CHANGE.search(lower) or _OLD_OR_FIRST.search(lower):
        return True
    before = _BEFORE.search(lower)
    if before and before.start() > 0:
        return True
    return bool(_PAST_QUESTION.search(lower) and _TIME_ANCHOR.search(lower))


@dataclass(frozen=True)
class ProfileLine:
    """One current memory as delivered (with its dated "previously" lines when history is asked)."""

    record_id: int
    text: str


def profile_lines(records: Sequence[Record], query: str | None, related_only: bool = False) -> list[ProfileLine]:
    """The profile, best first: current memories ranked as the module docstring says, dated.

    ``records`` are the user's memories of ``PROFILE_KINDS`` (current and superseded).
    ``related_only`` (``MemoryConfig.profile_related_only``): with a query that has words, only the
    memories that share one with it.
    """
    current = [r for r in records if r.valid_to is None and not r.pinned and r.kind in PROFILE_KINDS]
    history = wants_history(query)
    past: dict[str, list[Record]] = {}
    for r in records:
        if r.valid_to is not None and r.key:
            past.setdefault(r.key, []).append(r)
    stems = {w[:5] for w in query_words(query)} if query else set()
    relevance = {r.id: _relevance(r, stems) for r in current}  # once per memory: filter and order
    if related_only and stems:
        current = [r for r in current if relevance[r.id] > 0]
    ranked = sorted(current, key=lambda r: (-relevance[r.id], -r.importance, -r.created_at, -r.id))
    out = []
    for r in ranked:
        lines = [f"- [since {_day(r.created_at)}] ({r.kind}) {r.text}"]
        if history and r.key:
            older = sorted(past.get(r.key, []), key=lambda p: -(p.valid_to or 0.0))
            lines += [f"  previously ({_day(p.created_at)} to {_day(p.valid_to or 0.0)}): {p.text}"
                      for p in older if p.text.strip().lower() != r.text.strip().lower()][:MAX_HISTORY_LINES]
        out.append(ProfileLine(r.id, "\n".join(lines)))
    return out


# Words a question uses for the keys the offline extractor gives ("Where do I live?" asks for
# ``location`` even when the memory says "I moved to Lisbon").
KEY_WORDS = {
    "location": "live lives living city town country home where moved address based",
    "hometown": "from grew up born hometown origin",
    "employer": "work works working job company employer office",
    "occupation": "work job profession career occupation do",
    "name": "name called call",
    "age": "old age years",
    "diet": "eat food meat vegetarian vegan diet",
    "partner": "married wife husband partner spouse",
}


def _relevance(record: Record, stems: set[str]) -> int:
    """How many of the query's stems the memory (its text, key and key's question words) holds."""
    if not stems:
        return 0
    extra = KEY_WORDS.get(record.key or "", "")
    words = {w.lower()[:5] for w in WORD.findall(f"{record.text} {(record.key or '').replace('_', ' ')} {extra}")}
    heads = {w[:n] for w in words for n in (3, 4)}  # each word's first three and first four letters
    return sum(1 for s in stems if _stem_in(s, words, heads))


def _stem_in(stem: str, words: set[str], heads: set[str]) -> bool:
    """A stem (a word's first five letters) found among ``words``: the same, or one a prefix of the other
    when it is shorter than five letters and at least three ("live" finds "lives", "seats" finds "seat").

    Set lookups, not a walk of the words per stem: ``heads`` holds each word's first three and four letters,
    so a short stem begins a word when it is among them, and a word of three or four letters begins a
    five-letter stem when it is the stem's first three or four (a user's hundred keyed memories made the
    walk ~5,000 steps a ``context()``)."""
    if stem in words:
        return True
    if len(stem) < 5:
        return len(stem) >= 3 and stem in heads
    return stem[:3] in words or stem[:4] in words


def _day(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%d")
