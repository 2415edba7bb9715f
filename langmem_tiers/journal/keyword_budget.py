"""How much of a keyword query a journal ranks: the query's selective terms within a budget of matches (pure).

Ranking a match costs far more than finding it (FTS5's bm25 reads the match's positions and
the record's length, and the namespace filter joins the record: a few microseconds per match
on a quiet 2-core machine, against ~0.1 us to step over a posting), so the work of a keyword
search is the number of matches it ranks: a word shared by a third of a million-record history
made every query containing it rank hundreds of thousands of records. The SQLite journal:

- a scope of at most ``budget`` records (every evaluation haystack, any small session even in a
  huge journal) is searched exactly as without a budget;
- otherwise each query term's matches are counted, journal-wide and newest first, up to
  ``budget + 1`` (an upper bound of the scope's matches; no ranking, so cheap; held between
  searches and brought up to date by the matches appended since, :class:`TermCounts`), and
  :func:`plan_terms` decides: every term when their matches together fit the budget (the
  same hits as without it); else, among the terms that match at all, the rarest while their
  matches fit (always at least the rarest), which bm25 weighs most; and when even the rarest term has more matches than
  the budget, that term among its newest matches only, a record id range that FTS5 seeks to
  (:func:`recency_windows`: the window grows until ``k`` records pass the filters or the
  budget is spent). Recent history is the likelier subject of a question whose every word is
  everywhere.
- the records ranked are those holding a kept term, scored by bm25 over the kept terms and the
  dropped ones whose matches were all counted (at most the budget each), so those still order
  what the rare ones found. A term over the budget never scores: FTS5's bm25 counts every match
  of each phrase of the query for its weight, so it would cost O(its matches) again. For the
  same reason a recency window still pays that count for its one term (~0.3 us per match).

Counting journal-wide keeps the count cheap (counting in the scope makes FTS5 walk the scope's
own term, one posting per record of the scope), at a price in a journal shared by many users:
a large session in a much larger journal may drop terms its own matches would have afforded,
and the newest matches of a word may all be other users' (or, for a search of some kinds, records
of other kinds). Where that left the search with fewer than ``k`` records (:func:`crowded_out`),
it plans again on the scope's own counts and newest matches: slower walks (SQLite narrows them by the
scope's terms up to ``MAX_SCOPE_TERMS`` sessions, past that it looks each of the journal's matches up;
PostgreSQL filters its statements by the scope), paid only then. A journal of one user searching all
of its sessions never pays it.
A search of memories only (no turns among its kinds) does all of the above in SQLite's index of
the memories alone (schema v13): counts, windows and ranking never see a turn, so a fact said
before a thousand turns holding the same word is still found.

The PostgreSQL journal plans with the same functions; its dialect differs where its index does
(``postgres._bounded_bm25``). A term is a lexeme (``to_tsquery``'s text, so two words of one stem count
once; an encrypted journal's blind tokens are lexemes of the ``simple`` configuration). The counts read
the GIN index in no order, which stops at ``budget + 1`` matches, except for words the planner's
statistics hold among the commonest lexemes, which are estimated from them (:mod:`.postgres_stats`; with
them each count is scaled to the matches expected in the scope, its share of the records, and the plan is
the scope's: ``postgres._expected_in_scope``); the newest matches, in id order, are read only when every term is
over the budget (a statement per term, which the planner answers by a backward walk of the primary key,
O(budget / the term's frequency), or by sorting a rarer term's matches), and the recency windows are
lists of those ids. Its bm25 counts document frequencies among the ranked records, so a dropped word
costs nothing more than a lookup per ranked record and every query word scores; a word whose matches
were not all ranked weighs as if its counted matches were among them.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

# Matches a keyword query may rank. 2,000: above every evaluation haystack (a LoCoMo conversation
# holds ~660 messages, a LongMemEval haystack ~250 turns; the largest sum of query-term document
# frequencies there is ~500), so those rank exactly as without a budget, while a query of common
# words at 100k-1M records ranks at most 2,000 matches instead of hundreds of thousands
# (figures: ``benchmarks/sql_layer_cost.py --keyword-scale``). Where it binds, on LongMemEval's 30 dev haystacks
# merged into one history (15,000 messages; 23 of 28 questions bounded), it lost no evidence against ranking
# every match, where 1,000 lost a gold answer and 250 three questions' evidence
# (``benchmarks/keyword_budget_recall.py``, BENCHMARKS.md issue 15 session 59).
KEYWORD_BUDGET = 2_000
# The first recency window holds this fraction of the budget; each next one doubles, up to the budget.
FIRST_WINDOW_SHARE = 4
# Term counts a journal keeps between searches (:class:`TermCounts`: ~200 bytes each).
COUNTS_KEPT = 4_096


@dataclass(frozen=True, slots=True)
class TermCount:
    """One query term's matches in the searched scope, counted up to ``budget + 1``.

    ``oldest`` is the smallest record id among the counted (newest) matches: the further back
    the newest ``budget + 1`` matches reach, the rarer the term is in recent history.
    """

    term: str
    matches: int
    oldest: int


@dataclass(frozen=True, slots=True)
class KeywordPlan:
    """What to rank: these terms, among all their matches (``recent`` False) or only their newest ones."""

    terms: tuple[str, ...]
    recent: bool = False


def plan_terms(counts: Sequence[TermCount], budget: int | None) -> KeywordPlan:
    """The terms to rank within ``budget`` matches (``None``: every term, no bound).

    Example:
        >>> plan_terms([TermCount("trip", 900, 5), TermCount("lisbon", 40, 70), TermCount("we", 3001, 9)], 2000)
        KeywordPlan(terms=('trip', 'lisbon'), recent=False)
        >>> plan_terms([TermCount("trip", 2001, 500), TermCount("we", 2001, 900)], 2000)
        KeywordPlan(terms=('trip',), recent=True)
        >>> plan_terms([TermCount("zanzibar", 0, 0), TermCount("trip", 2001, 500)], 2000)
        KeywordPlan(terms=('trip',), recent=True)
    """
    terms = tuple(c.term for c in counts)
    if budget is None or sum(c.matches for c in counts) <= budget:
        return KeywordPlan(terms)
    # A term with no match finds nothing: kept as "the rarest", it would crowd out the terms that do
    # match (a word the history never held beside two common ones found no record at all).
    counts = [c for c in counts if c.matches > 0]
    # Rarest first; among terms over the budget (their counts capped alike) the one whose
    # newest matches reach furthest back; then the query's own order.
    ranked = sorted(range(len(counts)), key=lambda i: (counts[i].matches, counts[i].oldest, i))
    rarest = counts[ranked[0]]
    if rarest.matches > budget:
        return KeywordPlan((rarest.term,), recent=True)
    kept, total = [], 0
    for i in ranked:
        if total + counts[i].matches > budget:
            break
        kept.append(i)
        total += counts[i].matches
    return KeywordPlan(tuple(counts[i].term for i in sorted(kept)))


def crowded_out(plan: KeywordPlan, counts: Sequence[TermCount], walked: int, found: int, k: int) -> bool:
    """Whether a search planned on journal-wide ``counts`` found fewer than ``k`` records (``found``) because
    other scopes' matches, or other kinds', took the place of the scope's own: then it plans again on the
    scope's own counts, which may keep terms (or reach matches) the journal's could not afford.

    By recency (``walked``: how many of the kept term's newest matches the windows read), when the windows
    read matches the scope's filter left out. Otherwise, when a term was dropped and a kept term has more
    matches than were found (some of them lie outside the scope). Where every match was ranked, or the
    scope's filter left none of them out, fewer than ``k`` is all there is.

    Example:
        >>> trip, lisbon = TermCount("trip", 21, 3), TermCount("lisbon", 4, 9)
        >>> crowded_out(KeywordPlan(("trip",), recent=True), [trip], walked=20, found=0, k=5)
        True
        >>> crowded_out(KeywordPlan(("lisbon",)), [trip, lisbon], walked=0, found=1, k=5)
        True
        >>> crowded_out(KeywordPlan(("lisbon",)), [trip, lisbon], walked=0, found=4, k=5)
        False
        >>> crowded_out(KeywordPlan(("trip", "lisbon")), [trip, lisbon], walked=0, found=1, k=5)
        False
    """
    if found >= k:
        return False
    if plan.recent:
        return walked > found
    kept = [c.matches for c in counts if c.term in plan.terms]
    return len(kept) < len(counts) and found < max(kept)


def recency_windows(budget: int) -> list[int]:
    """How many of a term's newest matches each recency window ranks: a quarter of the budget, doubling.

    Example:
        >>> recency_windows(2000)
        [500, 1000, 2000]
    """
    size = max(budget // FIRST_WINDOW_SHARE, 1)
    windows = []
    while size < budget:
        windows.append(size)
        size *= 2
    return [*windows, budget]


def counted_since(held: TermCount, new: TermCount, cap: int) -> TermCount | int:
    """``held`` (a count up to ``cap``) grown by ``new`` (the term's matches appended since, counted up
    to ``cap``); or, when the window of the newest ``cap`` matches moved inside the held matches, how
    many of them left it: the new oldest is the held matches' that many places above ``held.oldest``
    (the journal reads it: one seek).

    Example:
        >>> counted_since(TermCount("trip", 40, 7), TermCount("trip", 2, 900), 2001)
        TermCount(term='trip', matches=42, oldest=7)
        >>> counted_since(TermCount("trip", 0, 0), TermCount("trip", 2, 900), 2001)
        TermCount(term='trip', matches=2, oldest=900)
        >>> counted_since(TermCount("we", 2001, 5), TermCount("we", 3, 900), 2001)
        3
        >>> counted_since(TermCount("we", 2001, 5), TermCount("we", 2001, 800), 2001)
        TermCount(term='we', matches=2001, oldest=800)
    """
    if not new.matches:
        return held
    if held.matches + new.matches <= cap:
        return TermCount(held.term, held.matches + new.matches, held.oldest if held.matches else new.oldest)
    if new.matches >= cap:  # the new matches alone fill the window
        return new
    return held.matches + new.matches - cap


class TermCounts:
    """A journal's term counts kept between searches, each with the largest record id it saw.

    At 1M records many words of a question have more matches than the budget, and counting one
    walks ``budget + 1`` postings (~0.4 ms on a quiet 2-core machine) at every search. Records only
    ever get larger ids (AUTOINCREMENT), so a held count stays exact after appends once the matches
    above its id are counted (:func:`counted_since`: a seek to that id, O(new matches); a term over
    the budget whose newest matches moved takes one more seek for its new oldest). A delete or
    an edit of indexed text can lower any count: the journal passes its count of those
    (``stamp``), and a new stamp drops every count. Bounded to ``capacity`` terms, least recently
    used out first. Holds terms (query words, or an encrypted journal's blind tokens) and numbers,
    never a record's text; a journal that erases sessions drops them at once, before any next search.
    Not thread-safe: the journal calls it under its connection's lock.
    """

    def __init__(self, capacity: int = COUNTS_KEPT) -> None:
        self.capacity = capacity
        self._stamp: object = None
        self._held: OrderedDict[tuple[str, int], tuple[TermCount, int]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._held)

    def restamp(self, stamp: object) -> None:
        """Drop every count unless ``stamp`` (the journal's deletes and edits) is the one they were counted under."""
        if stamp != self._stamp:
            self.clear()
            self._stamp = stamp

    def clear(self) -> None:
        self._held.clear()

    def get(self, term: str, cap: int) -> tuple[TermCount, int] | None:
        """``term``'s count up to ``cap`` and the largest record id it saw, if held."""
        held = self._held.get((term, cap))
        if held is not None:
            self._held.move_to_end((term, cap))
        return held

    def put(self, count: TermCount, cap: int, upto: int) -> None:
        self._held[(count.term, cap)] = (count, upto)
        self._held.move_to_end((count.term, cap))
        while len(self._held) > self.capacity:
            self._held.popitem(last=False)
