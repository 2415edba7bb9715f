"""A deterministic, offline, extractive summarizer.

It keeps the most salient sentences of the evicted turns, each labelled with its
date and speaker, under the token cap. Salience of a sentence is the summed
weight of its content words (frequent-in-this-conversation words weigh more, as
in Luhn's method), normalised by length, plus bonuses for numbers and names,
which carry most of what a user asks about later. When the summary is over the
cap, the least salient lines go first, older lines slightly before newer ones.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections import Counter
from collections.abc import Sequence

from langmem_tiers.messages import Message
from langmem_tiers.summarizers.base import SummaryRequest
from langmem_tiers.text import STOPWORDS as _STOPWORDS

_SENTENCES = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])|\n+")
_WORDS = re.compile(r"[A-Za-z][A-Za-z'-]+|\d[\d,.:/-]*")
_NUMBER = re.compile(r"\d")
MIN_SENTENCE_WORDS = 3


class ExtractiveSummarizer:
    """Salient-sentence summaries without an LLM.

    Example:
        >>> from langmem_tiers.summarizers.base import SummaryRequest
from langmem_tiers.text import STOPWORDS as _STOPWORDS
        >>> from langmem_tiers.messages import Message
        >>> req = SummaryRequest("", (Message("user", "My dog Rex turns 5 on 3 June."),), 50, lambda t: len(t.split()))
        >>> ExtractiveSummarizer().summarize(req)
        '- user: My dog Rex turns 5 on 3 June.'
    """

    def __init__(self, *, tool_weight: float = 0.5, max_sentence_chars: int = 300) -> None:
        self.tool_weight = tool_weight
        self.max_sentence_chars = max_sentence_chars

    def summarize(self, request: SummaryRequest) -> str:
        old_lines = [line for line in request.previous_summary.splitlines() if line.strip()]
        new_lines = [] if request.compress else self._candidate_lines(request.messages)
        # A sentence already in the summary (said again on another day) adds nothing new.
        known = {_body(line) for line in old_lines}
        new_lines = [(line, w) for line, w in new_lines if _body(line) not in known]
        stats = Counter(w for line in old_lines + [t for t, _ in new_lines] for w in _content_words(line))
        scored: list[tuple[float, int, str]] = []
        for order, line in enumerate(old_lines):
            # Older lines already survived earlier rounds; they decay a little so new facts get room.
            scored.append((0.9 * _salience(line, stats), order, line))
        offset = len(old_lines)
        for order, (line, weight) in enumerate(new_lines):
            scored.append((weight * _salience(line, stats), offset + order, line))
        return _select(scored, request)

    async def asummarize(self, request: SummaryRequest) -> str:
        return self.summarize(request)

    def _candidate_lines(self, messages: Sequence[Message]) -> list[tuple[str, float]]:
        lines: list[tuple[str, float]] = []
        seen: set[str] = set()
        for m in messages:
            text = m.text.strip()
            if not text:
                continue
            label = _label(m)
            weight = self.tool_weight if m.role == "tool" else 1.0
            sentences = [" ".join(s.split()) for s in _SENTENCES.split(text) if s.strip()]
            # Short sentences ("ok", "thanks") carry little; keep them only when nothing longer is said.
            longer = [s for s in sentences if len(s.split()) >= MIN_SENTENCE_WORDS]
            for sentence in longer or sentences[:1]:
                if sentence.lower() in seen:
                    continue
                seen.add(sentence.lower())
                if len(sentence) > self.max_sentence_chars:
                    sentence = sentence[: self.max_sentence_chars].rsplit(" ", 1)[0] + " …"
                lines.append((f"- {label}: {sentence}", weight))
        return lines


def _label(m: Message) -> str:
    speaker = m.name or m.role
    if m.role == "tool":
        speaker = f"tool {m.name or ''}".strip()
    if m.created_at is None:
        return speaker
    day = dt.datetime.fromtimestamp(m.created_at, dt.timezone.utc).strftime("%Y-%m-%d")
    return f"[{day}] {speaker}"


def _body(line: str) -> str:
    """A summary line without its date and speaker label, for duplicate checks."""
    return " ".join(line.split(": ", 1)[-1].lower().split())


def _content_words(text: str) -> list[str]:
    body = text.split(": ", 1)[-1]
    return [w.lower() for w in _WORDS.findall(body) if w.lower() not in _STOPWORDS]


def _salience(line: str, stats: Counter[str]) -> float:
    words = _content_words(line)
    if not words:
        return 0.0
    body = line.split(": ", 1)[-1]
    weight = sum(math.log1p(stats[w]) for w in set(words))
    numbers = len(_NUMBER.findall(body)) > 0
    names = sum(1 for w in body.split()[1:] if w[:1].isupper() and w.lower() not in _STOPWORDS)
    return weight / math.sqrt(len(words)) + 0.5 * numbers + 0.3 * min(names, 3)


def _select(scored: list[tuple[float, int, str]], request: SummaryRequest) -> str:
    """Keep the most salient lines that fit the cap, in their original order."""
    kept: list[tuple[int, str]] = []
    for _, order, line in sorted(scored, key=lambda s: (-s[0], s[1])):
        trial = sorted([*kept, (order, line)])
        if request.count_tokens("\n".join(text for _, text in trial)) <= request.max_tokens:
            kept = trial
    return "\n".join(text for _, text in kept)
