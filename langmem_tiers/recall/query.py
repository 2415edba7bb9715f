"""Query analysis for recall: what of a question deserves more than its bag of words. Pure, no I/O.

Three things, all generic English rules (nothing here knows a dataset):

- **salient terms**: names (capitalized words that are not question or function words), numbers
  and the words of quoted phrases. Keyword search over the whole question dilutes them among
  common words; a second keyword search over just these ranks the records that name them.
- **a time window**: "yesterday", "last week", "in May 2023", "in 2022", "3 days ago", ... turned
  into ``[start, end)`` against the memory's clock, so records made then can be preferred.
- **asks when**: "when did ...", "what date ...", "how long ago ...": the records that carry a
  time expression ("last Friday", "in June", "two weeks ago") are the ones that answer it.

Dates are UTC calendar days (the journal stores epoch seconds; a record's ``created_at`` is the
message's time).
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from langmem_tiers.text import STOPWORDS

MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
WEEKDAYS = {name.lower() for name in calendar.day_name}
DAY = 86400.0

# Capitalized words that open questions and sentences or name calendar words, never a person or place.
_NOT_NAMES = STOPWORDS | WEEKDAYS | set(MONTHS) | {
    "tell", "remind", "give", "list", "name", "describe", "please", "did", "does", "do", "has", "have",
    "whats", "what's", "who's", "where's", "when's", "how's", "hmm", "so", "and", "but", "or", "also",
}
_NAME = re.compile(r"\b[A-Z][\w'’-]*\b")
_NUMBER = re.compile(r"\b\d+(?:[.,]\d+)?\b")
_QUOTED = re.compile(r"[\"“”]([^\"“”]{2,80})[\"“”]")
_WORD = re.compile(r"\w+")
_WHEN = re.compile(
    r"\b(?:when|what (?:date|day|year|month|time|week)|which (?:date|day|year|month|week)|how long ago|"
    r"since when|how many (?:days|weeks|months|years) (?:ago|before|after|since))\b", re.IGNORECASE)
_TIME_EXPRESSION = re.compile(
    r"\b(?:yesterday|today|tonight|tomorrow|ago|last (?:night|week|weekend|month|year|\w+day)|"
    r"next (?:week|weekend|month|year|\w+day)|this (?:morning|week|weekend|month|year)|"
    r"(?:19|20)\d\d|\d{1,2}/\d{1,2}(?:/\d{2,4})?|"
    r"(?:may|march) \d{1,4}|"  # alone, "may" and "march" are mostly the verb and the noun
    + "|".join(sorted(WEEKDAYS | {m for m in MONTHS if len(m) > 3 and m != "march"}, key=len, reverse=True))
    + r")\b", re.IGNORECASE)
# The same pattern without IGNORECASE, for ASCII text lower-cased first (the pattern is lower-case): on
# ASCII text a case-blind match is exactly a match of the lower-cased text.
_TIME_EXPRESSION_LOWER = re.compile(_TIME_EXPRESSION.pattern)
_UNITS = {"day": 1.0, "days": 1.0, "week": 7.0, "weeks": 7.0, "month": 30.0, "months": 30.0,
          "year": 365.0, "years": 365.0}
_NUMBER_WORDS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
                 "seven": 7, "eight": 8, "nine": 9, "ten": 10}
_AGO = re.compile(r"\b(\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten) "
                  r"(days?|weeks?|months?|years?) ago\b", re.IGNORECASE)
_MONTH_YEAR = re.compile(r"\b(" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?,? ((?:19|20)\d\d)\b",
                         re.IGNORECASE)
_IN_MONTH = re.compile(r"\b(?:in|during|since|last) (" + "|".join(m for m in MONTHS if len(m) > 3 or m == "may")
                       + r")\b", re.IGNORECASE)
_YEAR = re.compile(r"\b(?:in|during) ((?:19|20)\d\d)\b", re.IGNORECASE)
_RELATIVE = re.compile(r"\b(yesterday|today|last week|last weekend|last month|last year|this week|this month|"
                       r"this year)\b", re.IGNORECASE)


@dataclass(frozen=True)
class QueryAnalysis:
    """What :func:`analyze` found in a query.

    Attributes:
        salient: names, numbers and quoted words, lower-cased, in order of appearance.
        window: ``(start, end)`` epoch seconds of the time the query names, or ``None``.
        asks_when: the query asks for a time ("when", "what date", "how long ago").
    """

    salient: tuple[str, ...] = ()
    window: tuple[float, float] | None = None
    asks_when: bool = False


def analyze(query: str, now: float) -> QueryAnalysis:
    """Salient terms, time window and time intent of ``query``, relative to ``now`` (epoch seconds).

    Example:
        >>> a = analyze('When did Ana visit "Blue Lagoon" in 2021?', now=1_700_000_000.0)
        >>> a.salient, a.asks_when
        (('ana', 'blue', 'lagoon', '2021'), True)
        >>> [datetime.fromtimestamp(t, timezone.utc).year for t in a.window]
        [2021, 2022]
    """
    return QueryAnalysis(salient=salient_terms(query), window=time_window(query, now),
                         asks_when=bool(_WHEN.search(query)))


def salient_terms(query: str) -> tuple[str, ...]:
    """Names (capitalized non-function words, wherever they stand), numbers and quoted words, lower-cased."""
    terms: list[str] = []
    for phrase in _QUOTED.findall(query):
        terms += [w.lower() for w in _WORD.findall(phrase) if w.lower() not in STOPWORDS]
    for match in _NAME.finditer(query):
        word = match.group(0).strip("'’-")
        low = word.lower().removesuffix("'s").removesuffix("’s")
        if len(low) >= 2 and low not in _NOT_NAMES:
            terms.append(low)
    terms += _NUMBER.findall(query)
    return tuple(dict.fromkeys(terms))


def feedback_terms(query: str, texts: Sequence[str], limit: int = 8) -> tuple[str, ...]:
    """Words the best first-round hits carry that the query lacks: a second keyword round follows them.

    Pseudo-relevance feedback for questions whose answer sits one hop away (the first round finds
    "Ana's sister is Mia", the second finds what Mia did). Kept: names inside a sentence of any top
    hit (:func:`inner_names`: a capital that only opens a sentence proves nothing), and content words
    (not function words, at least four letters) that two or more top hits share; never a word of the
    query. Deterministic: names first, then by how many hits hold the word, then first appearance;
    at most ``limit``.
    """
    asked = {w.lower() for w in _WORD.findall(query)}
    names: dict[str, None] = {}
    held: dict[str, int] = {}
    for text in texts:
        names.update(dict.fromkeys(n for n in inner_names(text) if n not in asked))
        for w in {w for w in (m.lower() for m in _WORD.findall(text)) if len(w) >= 4 and w not in STOPWORDS}:
            held[w] = held.get(w, 0) + 1
    shared = sorted((w for w in held if w not in asked and w not in names and held[w] >= 2), key=lambda w: -held[w])
    return tuple([*names, *shared][:limit])


def inner_names(text: str) -> list[str]:
    """Capitalized non-function words that do not open a sentence or a line ("role: ..." lines too), lower-cased."""
    out: list[str] = []
    for match in _NAME.finditer(text):
        before = text[:match.start()].rstrip()
        if not before or before[-1] in ".!?:\n\"“" or text[:match.start()].endswith("\n"):
            continue
        low = match.group(0).strip("'’-").lower().removesuffix("'s").removesuffix("’s")
        if len(low) >= 2 and low not in _NOT_NAMES and low.removesuffix("s") not in WEEKDAYS:
            out.append(low)
    return list(dict.fromkeys(out))


def has_time_expression(text: str) -> bool:
    """True when ``text`` says when something happened: a date, a weekday, a month, "ago", "last week"..."""
    if text.isascii():  # the same matches, at twice the speed (a "when" question tests every candidate)
        return bool(_TIME_EXPRESSION_LOWER.search(text.lower()))
    return bool(_TIME_EXPRESSION.search(text))


def time_window(query: str, now: float) -> tuple[float, float] | None:
    """The ``[start, end)`` the query's first time expression names, or ``None``.

    Absolute: "May 2023", "in 2022". Relative to ``now``: "yesterday", "today", "N days / weeks /
    months / years ago" (that day, give or take half the unit and at least a day), "last week /
    month / year" (the previous calendar one), "this week / month / year", "in May" (the latest
    May not after now).
    """
    today = datetime.fromtimestamp(now, timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
    m = _MONTH_YEAR.search(query)
    if m:
        return _month(int(m.group(2)), MONTHS[m.group(1).lower()])
    m = _YEAR.search(query)
    if m:
        return _span(datetime(int(m.group(1)), 1, 1, tzinfo=timezone.utc),
                     datetime(int(m.group(1)) + 1, 1, 1, tzinfo=timezone.utc))
    m = _AGO.search(query)
    if m:
        count = int(m.group(1)) if m.group(1).isdigit() else _NUMBER_WORDS[m.group(1).lower()]
        width = _UNITS[m.group(2).lower()]
        day = today - timedelta(days=count * width)
        half = max(width / 2, 1.0)  # "3 days ago" is loose by a day, "2 weeks ago" by half a week
        return _span(day - timedelta(days=half), day + timedelta(days=half + 1.0))
    m = _RELATIVE.search(query)
    if m:
        return _relative(m.group(1).lower(), today)
    m = _IN_MONTH.search(query)
    if m:
        month = MONTHS[m.group(1).lower()]
        year = today.year if month <= today.month else today.year - 1
        return _month(year, month)
    return None


def _relative(phrase: str, today: datetime) -> tuple[float, float]:
    week_start = today - timedelta(days=today.weekday())
    month_start = today.replace(day=1)
    year_start = today.replace(month=1, day=1)
    if phrase == "yesterday":
        return _span(today - timedelta(days=1), today)
    if phrase == "today":
        return _span(today, today + timedelta(days=1))
    if phrase in ("last week", "last weekend"):
        return _span(week_start - timedelta(days=7), week_start)
    if phrase == "this week":
        return _span(week_start, week_start + timedelta(days=7))
    if phrase == "last month":
        prev = (month_start - timedelta(days=1)).replace(day=1)
        return _span(prev, month_start)
    if phrase == "this month":
        return _month(today.year, today.month)
    if phrase == "last year":
        return _span(year_start.replace(year=today.year - 1), year_start)
    return _span(year_start, year_start.replace(year=today.year + 1))  # this year


def _month(year: int, month: int) -> tuple[float, float]:
    start = datetime(year, month, 1, tzinfo=timezone.utc)
    end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=timezone.utc)
    return _span(start, end)


def _span(start: datetime, end: datetime) -> tuple[float, float]:
    return start.timestamp(), end.timestamp()
