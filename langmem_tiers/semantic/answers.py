"""Answer-level recall: does what ``context()`` delivered contain the gold answer? Pure.

For the evaluation harness (LongMemEval, LoCoMo). Only short-span answers are scored:
an answer is matched as normalized whole words (lowercase, accents folded, punctuation
dropped), as a contiguous run of words in the delivered text, with numbers compared as
numbers: "5" does not match "15", "5.0" matches "5", "1,000" matches "1000", and the
number words up to twenty ("five") match their digits. Answers that are descriptions
(a question type listed in ``description_types``, by default LongMemEval's
``single-session-preference``, or more than ``max_words`` words) are excluded and counted.

Example:
    >>> r = answer_recall([("knowledge-update", "Lisbon", "- I moved to Lisbon"),
    ...                    ("multi-session", "5", "we met 15 times"),
    ...                    ("single-session-preference", "The user prefers ...", "anything")])
    >>> r.found, r.scored, r.excluded, r.per_type["multi-session"]
    (1, 2, {'single-session-preference': 1}, (0, 1))
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field

DESCRIPTION_TYPES = ("single-session-preference",)
MAX_ANSWER_WORDS = 8

_NUMBER_WORDS = {w: str(i) for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split())}
_TOKEN = re.compile(r"\d+(?:[.,]\d+)*|[^\W\d_]+", re.UNICODE)


def normalize_words(text: str) -> list[str]:
    """Lowercase words, accents folded, numbers in one canonical form ("1,000" -> "1000", "5.0" -> "5").

    Example:
        >>> normalize_words("Café #5.0, 1,000 and Five!")
        ['cafe', '5', '1000', 'and', '5']
    """
    folded = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c)).lower()
    out = []
    for token in _TOKEN.findall(folded):
        if token[0].isdigit():
            out.append(_number(token))
        else:
            out.append(_NUMBER_WORDS.get(token, token))
    return out


def _number(token: str) -> str:
    plain = token.replace(",", "") if re.fullmatch(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?", token) else token
    try:
        value = float(plain)
    except ValueError:
        return token
    return str(int(value)) if value.is_integer() else repr(value)


def answer_in(answer: str, delivered: str) -> bool:
    """True when the answer's normalized words appear, in order and adjacent, in ``delivered``."""
    needle = normalize_words(answer)
    hay = normalize_words(delivered)
    if not needle:
        return False
    n = len(needle)
    return any(hay[i:i + n] == needle for i in range(len(hay) - n + 1))


def is_description(answer: str, question_type: str, *, description_types: Iterable[str] = DESCRIPTION_TYPES,
                   max_words: int = MAX_ANSWER_WORDS) -> bool:
    """Answers that cannot be matched as a span: a description type, too many words, or no words at all."""
    words = normalize_words(answer)
    return question_type in set(description_types) or not words or len(words) > max_words


@dataclass(frozen=True)
class AnswerRecall:
    """``found / scored`` overall and per question type; ``excluded`` counts description answers per type."""

    found: int
    scored: int
    per_type: dict[str, tuple[int, int]] = field(default_factory=dict)
    excluded: dict[str, int] = field(default_factory=dict)

    @property
    def value(self) -> float | None:
        return self.found / self.scored if self.scored else None


def answer_recall(items: Iterable[tuple[str, object, str]], *, description_types: Iterable[str] = DESCRIPTION_TYPES,
                  max_words: int = MAX_ANSWER_WORDS) -> AnswerRecall:
    """Score ``(question type, gold answer, delivered text)`` triples (see the module docstring).

    A gold answer that is not a string (LongMemEval has integers) is compared as its text.
    """
    types = tuple(description_types)
    per: dict[str, list[int]] = {}
    excluded: dict[str, int] = {}
    for qtype, gold, delivered in items:
        answer = str(gold)
        if is_description(answer, qtype, description_types=types, max_words=max_words):
            excluded[qtype] = excluded.get(qtype, 0) + 1
            continue
        counts = per.setdefault(qtype, [0, 0])
        counts[0] += answer_in(answer, delivered)
        counts[1] += 1
    per_type = {t: (c[0], c[1]) for t, c in sorted(per.items())}
    return AnswerRecall(sum(c[0] for c in per.values()), sum(c[1] for c in per.values()), per_type, excluded)
