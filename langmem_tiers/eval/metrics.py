"""Retrieval and delivery metrics, pure functions over retrieved units, delivered context and gold evidence.

A retriever returns ranked *units*; each unit covers one or more message keys (a message,
a whole turn, a recall record). ``k`` always counts units; a unit counts all the messages
it covers.

``context_recall`` scores what reaches the model instead: the messages whose content is
in the context a system delivers for a question (see :func:`present_messages` for the
matching rule).
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from langmem_tiers.eval.datasets import DatasetMessage

Unit = tuple[str, ...]


def covered_messages(units: Sequence[Unit], k: int) -> set[str]:
    """Message keys covered by the first ``k`` units."""
    return {key for unit in units[:k] for key in unit}


def evidence_recall(units: Sequence[Unit], gold: Iterable[str], k: int) -> float:
    """LoCoMo: fraction of the gold message keys among the messages of the top-``k`` units."""
    gold_set = set(gold)
    if not gold_set:
        raise ValueError("evidence_recall needs at least one gold message: exclude such questions before scoring")
    return len(gold_set & covered_messages(units, k)) / len(gold_set)


def sessions_hit(found: Iterable[str], messages: Mapping[str, DatasetMessage],
                 gold_sessions: Iterable[str]) -> tuple[float, float]:
    """(recall_any, recall_all) of the gold sessions among the sessions of the ``found`` messages."""
    gold = set(gold_sessions)
    if not gold:
        raise ValueError("session recall needs at least one gold session")
    got = {messages[key].session_id for key in found if key in messages}
    hit = gold & got
    return float(bool(hit)), float(hit == gold)


def messages_hit(found: Iterable[str], gold_messages: Iterable[str]) -> tuple[float, float]:
    """(recall_any, recall_all) of the gold messages (LongMemEval ``has_answer``) among ``found``."""
    gold = set(gold_messages)
    if not gold:
        raise ValueError("message recall needs at least one gold message")
    hit = gold & set(found)
    return float(bool(hit)), float(hit == gold)


def session_recall(
    units: Sequence[Unit], messages: Mapping[str, DatasetMessage], gold_sessions: Iterable[str], k: int
) -> tuple[float, float]:
    """LongMemEval session level: (recall_any, recall_all) over the sessions of the top-``k`` units."""
    return sessions_hit(covered_messages(units, k), messages, gold_sessions)


def message_recall(units: Sequence[Unit], gold_messages: Iterable[str], k: int) -> tuple[float, float]:
    """LongMemEval turn level (the paper's "turn" is one message): (recall_any, recall_all) at ``k``."""
    return messages_hit(covered_messages(units, k), gold_messages)


# --- what reaches the model ---------------------------------------------------------------------


@dataclass(frozen=True)
class Delivered:
    """The context a system hands the model for one question.

    ``text``: every message's text, joined; ``keys``: the dataset messages the system
    says it delivered (provenance: a baseline's units, our window messages and the
    ``message_ids`` of our recall hits); ``tokens``: the context's total tokens, framing
    and reply priming included, as ``Context.tokens.total`` counts them.
    """

    text: str
    keys: frozenset[str]
    tokens: int
    units: int


def normalize(text: str) -> str:
    """Case-folded, whitespace-collapsed text: formatting (line breaks, chunk joins) never decides a match."""
    return " ".join(text.casefold().split())


class TextIndex:
    """Normalized message texts of one haystack, and which of them are ambiguous.

    A text is *ambiguous* when it is empty or occurs inside another message of the same
    haystack ("Thanks!", "Yes."): finding it in a context then proves nothing about
    which message was delivered.
    """

    def __init__(self, messages: Mapping[str, DatasetMessage]) -> None:
        self._norm = {key: normalize(m.text) for key, m in messages.items()}
        self._ambiguous: dict[str, bool] = {}

    def text(self, key: str) -> str:
        return self._norm.get(key, "")

    def ambiguous(self, key: str) -> bool:
        if key not in self._ambiguous:
            mine = self._norm.get(key, "")
            self._ambiguous[key] = not mine or any(
                mine in other for k, other in self._norm.items() if k != key
            )
        return self._ambiguous[key]


def present_messages(delivered: Delivered, index: TextIndex, candidates: Collection[str]) -> set[str]:
    """The ``candidates`` whose content reached the model, by one rule for every system.

    A message is present when its whole text (normalized) occurs in the delivered text
    AND either the text is unambiguous in the haystack or the system's provenance names
    the message. So text proves delivery whatever part carried it (a window message, a
    recall hit, a baseline's unit, a summary that kept the sentence whole), while a
    short common text ("Thanks!") counts only when the system says it is that message.
    A message delivered only in part (one chunk of a long message, a truncated text)
    is not present: see :func:`named_messages` for the lenient count.
    """
    context = normalize(delivered.text)
    out = set()
    for key in candidates:
        text = index.text(key)
        if text and text in context and (key in delivered.keys or not index.ambiguous(key)):
            out.add(key)
    return out


def named_messages(delivered: Delivered, index: TextIndex, candidates: Collection[str]) -> set[str]:
    """Lenient count: present, or named by the provenance of a delivered part (e.g. one chunk of it)."""
    return present_messages(delivered, index, candidates) | (set(candidates) & delivered.keys)


# --- the gold answer in what reaches the model ------------------------------------------------------

_ISO_DATE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")
_DATE_WORDS = re.compile(r"\b(?:" + "|".join(m[:3] for m in _MONTHS) + r")[a-z]*\b|\b(?:19|20)\d{2}\b",
                         re.IGNORECASE)


def answer_view(delivered: str, gold: str) -> str:
    """The delivered text as the answer is matched against: its ISO dates read as dates, not numbers.

    Every system dates what it delivers (``[2023-05-08]``, ``Mon 2023-05-08``); split into
    numbers, a date would let any small count match ("5" from May, "8" from the 8th). So a
    date answer (one naming a month or a year) meets the dates written out ("8 May 2023", the
    form LoCoMo's answers use), and any other answer meets the text without them.

    Example:
        >>> answer_view("- [2023-05-08] Ann: we have 3 cats", "5")
        '- [] Ann: we have 3 cats'
        >>> answer_view("- [2023-05-08] Ann: hi", "May 2023")
        '- [8 May 2023] Ann: hi'
    """
    if _DATE_WORDS.search(gold):
        return _ISO_DATE.sub(lambda m: _written_date(m) or m.group(0), delivered)
    return _ISO_DATE.sub("", delivered)


def _written_date(m: re.Match[str]) -> str | None:
    year, month, day = int(m.group(1)), int(m.group(2)), int(m.group(3))
    if not 1 <= month <= 12 or not 1 <= day <= 31:
        return None
    return f"{day} {_MONTHS[month - 1]} {year}"


# --- aggregation helpers ------------------------------------------------------------------------


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
