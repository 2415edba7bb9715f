"""A deterministic, offline, extractive rolling summarizer.

Each call folds the newly evicted turns into the previous summary and returns a
summary within the token cap, built from sentences said in the conversation:

* **What is kept** is decided by :mod:`langmem_tiers.specifics`: specific statements
  (names, numbers, dates, places, codes; first-person preferences, possessions,
  relations, plans, commitments, identity, changes) outrank chit-chat, and a sentence
  template that recurs with ever new numbers ("Message 41: the train left from
  platform 12 again") is discounted as filler.
* **Rolling**: the best line of the newest turns is always kept, so recent content is
  represented; chit-chat from older folds gives way to newer chit-chat; older
  specific lines are compressed to the clauses that carry their facts before any
  is dropped, newest lines keep their full wording longest.
* **No near-duplicates**: a sentence said again (or the same template with new
  numbers) keeps only its newest instance.
* **Always an answer**: any non-empty input yields a non-empty summary within the
  cap (a sentence too long for it is cut), so no evicted turn stays pending forever.

The summary is plain text the next call parses back: a ``[YYYY-MM-DD]`` line starts
each day, then ``- speaker: sentence; sentence`` lines in conversation order.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from langmem_tiers.errors import ConfigError
from langmem_tiers.messages import Message
from langmem_tiers.semantic.extract import extract_memories
from langmem_tiers.specifics import SPECIFIC_THRESHOLD, core_of, salience, sentence_shape, split_sentences
from langmem_tiers.summarizers.base import SummaryRequest, SummaryResult
from langmem_tiers.text import STOPWORDS, WORD

MIN_SENTENCE_WORDS = 3
# Near-duplicates: this share of shared words (Jaccard), or this share of the shorter
# sentence's words contained in the longer one (a compressed line said again in full).
DUPLICATE_JACCARD = 0.75
DUPLICATE_CONTAINMENT = 0.9
# Same template with different values ("Message 41 ..." / "Message 7 ..."): this much word overlap.
TEMPLATE_JACCARD = 0.5
SHORT_CHARS = 160  # the longest a compressed line may be

_HEADER = re.compile(r"^\[(\d{4}-\d{2}-\d{2})\]$")
_LINE = re.compile(r"^-\s+(?:\[(\d{4}-\d{2}-\d{2})\]\s+)?([^:\n]{1,60}?):\s+(.*)$")
_PIECES = re.compile(r";\s+")
_END = (".", "!", "?", "…")


@dataclass
class _Entry:
    """One sentence of the summary in the making."""

    date: str | None
    speaker: str | None
    body: str
    order: int  # conversation order: previous summary first, then the new turns
    fresh: bool  # from the newly evicted turns
    weight: float = 1.0
    score: float = 0.0
    info: int = 0  # content words, to rank chit-chat among itself
    words: frozenset[str] = frozenset()
    short: str = ""
    compressed: bool = True  # rendered as ``short``

    @property
    def text(self) -> str:
        return self.short if self.compressed else self.body


class ExtractiveSummarizer:
    """Rolling, fact-preferring extractive summaries without an LLM.

    Args:
        tool_weight: factor on the salience of tool results (they are often long and
            repeat what the assistant then says).
        max_sentence_chars: longer sentences are cut at a word boundary.

    Example:
        >>> from langmem_tiers.summarizers.base import SummaryRequest
        >>> from langmem_tiers.messages import Message
        >>> req = SummaryRequest("", (Message("user", "My dog Rex turns 5 on 3 June."),), 50, lambda t: len(t.split()))
        >>> ExtractiveSummarizer().summarize(req)
        '- user: My dog Rex turns 5 on 3 June.'
    """

    def __init__(self, *, tool_weight: float = 0.5, max_sentence_chars: int = 300) -> None:
        if isinstance(tool_weight, bool) or not isinstance(tool_weight, (int, float)) \
                or not math.isfinite(tool_weight) or tool_weight < 0:
            raise ConfigError(f"tool_weight ({tool_weight!r}) must be a finite number >= 0: 0.5 halves "
                              "the salience of tool results")
        if isinstance(max_sentence_chars, bool) or not isinstance(max_sentence_chars, int) \
                or max_sentence_chars < 20:
            raise ConfigError(f"max_sentence_chars ({max_sentence_chars!r}) must be an integer >= 20")
        self.tool_weight = float(tool_weight)
        self.max_sentence_chars = max_sentence_chars

    def summarize(self, request: SummaryRequest) -> str | SummaryResult:
        """The summary; with ``request.extract``, a :class:`SummaryResult` with the offline extraction too."""
        text = self._summary(request)
        if request.wants_memories:
            return SummaryResult(text, tuple(extract_memories(request.messages)))
        return text

    def _summary(self, request: SummaryRequest) -> str:
        old = _parse_summary(request.previous_summary)
        for entry in old:
            if entry.speaker is not None and entry.speaker.startswith("tool"):
                entry.weight = self.tool_weight
        new = [] if request.compress else self._candidates(request.messages, start=len(old))
        entries = _without_near_duplicates(_scored(old + new))
        return _Selection(entries, request).render()

    async def asummarize(self, request: SummaryRequest) -> str | SummaryResult:
        """Async :meth:`summarize`."""
        return self.summarize(request)

    def _candidates(self, messages: Sequence[Message], start: int) -> list[_Entry]:
        entries: list[_Entry] = []
        seen: set[str] = set()
        for m in messages:
            text = m.text.strip()
            if not text:
                continue
            sentences = split_sentences(text)
            # Short sentences ("ok", "thanks") carry little; keep them only when nothing longer is said.
            longer = [s for s in sentences if len(s.split()) >= MIN_SENTENCE_WORDS]
            for sentence in longer or sentences[:1]:
                key = sentence.lower()
                if key in seen:
                    continue
                seen.add(key)
                entries.append(_Entry(_day(m), _speaker(m), _cut(sentence, self.max_sentence_chars),
                                      start + len(entries), fresh=True,
                                      weight=self.tool_weight if m.role == "tool" else 1.0))
        return entries


def _speaker(m: Message) -> str:
    if m.role == "tool":
        return f"tool {m.name or ''}".strip()
    return m.name or m.role


def _day(m: Message) -> str | None:
    if m.created_at is None:
        return None
    return dt.datetime.fromtimestamp(m.created_at, dt.timezone.utc).strftime("%Y-%m-%d")


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = text[:limit].rsplit(" ", 1)[0] if " " in text[:limit] else text[:limit]
    return head + " …"


def _parse_summary(summary: str) -> list[_Entry]:
    """Entries of a previous summary: ours, the legacy ``- [date] speaker: text`` lines, or free text."""
    entries: list[_Entry] = []
    day: str | None = None
    for raw in summary.splitlines():
        line = raw.strip()
        if not line:
            continue
        header = _HEADER.match(line)
        if header:
            day = header.group(1)
            continue
        match = _LINE.match(line)
        speaker: str | None
        if match:
            day = match.group(1) or day
            speaker, body = match.group(2).strip(), match.group(3)
        else:
            speaker, body = None, line.removeprefix("- ")
        for sentence in split_sentences(body):
            for piece in _PIECES.split(sentence):
                if piece.strip():
                    entries.append(_Entry(day, speaker, piece.strip(), len(entries), fresh=False))
    return entries


def _scored(entries: list[_Entry]) -> list[_Entry]:
    for entry, spec in zip(entries, salience([e.body for e in entries])):
        entry.score = spec.score * entry.weight
        words = [w.lower() for w in WORD.findall(entry.body)]
        entry.words = frozenset(words)
        entry.info = min(8, sum(1 for w in words if w not in STOPWORDS))
        entry.short = _cut(core_of(entry.body), SHORT_CHARS)
    return entries


def _without_near_duplicates(entries: list[_Entry]) -> list[_Entry]:
    """Keep the newest of each group of near-duplicates (a restatement, or a template with new values)."""
    kept: list[_Entry] = []
    shapes: list[tuple[str, ...]] = []
    for entry in reversed(entries):  # newest first: the newest instance wins
        shape = sentence_shape(entry.body)
        if not any(_near(entry, other, shape == other_shape) for other, other_shape in zip(kept, shapes)):
            kept.append(entry)
            shapes.append(shape)
    kept.reverse()
    return kept


def _near(a: _Entry, b: _Entry, same_shape: bool) -> bool:
    if not a.words or not b.words:
        return a.body.lower() == b.body.lower()
    shared = len(a.words & b.words)
    jaccard = shared / len(a.words | b.words)
    small = min(len(a.words), len(b.words))
    return (jaccard >= DUPLICATE_JACCARD or (small >= 3 and shared / small >= DUPLICATE_CONTAINMENT)
            or (same_shape and jaccard >= TEMPLATE_JACCARD))


class _Selection:
    """Chooses and renders the entries that fit the cap (see the module docstring for the order).

    Per-sentence counts decide the trials that surely fit or surely cannot; only the
    others count the rendered summary, and the result is counted once more at the end.
    """

    def __init__(self, entries: list[_Entry], request: SummaryRequest) -> None:
        self.entries = entries
        self.cap = request.max_tokens
        self.count = request.count_tokens
        self.kept: list[_Entry] = []
        self.used = 0  # tokens of the rendered ``kept``: exact, or an upper bound
        self.exact = True
        self._counts: dict[str, int] = {}

    def render(self) -> str:
        if not self.entries:
            return ""
        fresh = [e for e in self.entries if e.fresh] or self.entries
        recent = max(fresh, key=lambda e: (e.score, e.order))
        specific = sorted((e for e in self.entries if e.score >= SPECIFIC_THRESHOLD and e is not recent),
                          key=lambda e: (-e.score, -e.order))
        # Below the threshold, weak signals (a lone place, a number) still go before pure chit-chat;
        # among equals the newest turns go first, so chit-chat rolls instead of freezing.
        rest = sorted((e for e in self.entries if e.score < SPECIFIC_THRESHOLD and e is not recent),
                      key=lambda e: (-round(e.score, 1), -e.fresh, -e.info, -e.order))
        # 1. As many specific lines as fit, compressed; 2. full wording back, newest first;
        # 3. what room is left goes to the rest.
        for entry in [recent, *specific]:
            self._try_add(entry, compressed=True)
        for entry in sorted(self.kept, key=lambda e: -e.order):
            if entry.short != entry.body:
                self._try_expand(entry)
        for entry in rest:
            if not self._try_add(entry, compressed=False):
                self._try_add(entry, compressed=True)
        if not self.kept:
            return self._last_resort(recent)
        text = _render(self.kept)
        # ``used`` is exact or an upper bound; a tokenizer that merges across lines could still surprise it.
        while self.count(text) > self.cap and len(self.kept) > 1:
            self.kept.pop()
            text = _render(self.kept)
        return text if self.count(text) <= self.cap else self._last_resort(recent)

    def _tokens(self, text: str) -> int:
        if text not in self._counts:
            self._counts[text] = self.count(text)
        return self._counts[text]

    def _try_add(self, entry: _Entry, *, compressed: bool) -> bool:
        entry.compressed = compressed
        need = self._tokens(entry.text)
        if self.used + need > self.cap and not self.exact:
            self._recount()
        if self.used + need > self.cap:
            return False  # joining costs at least the sentence's own tokens
        # A line of its own (and a new day's header) costs at most this much more; merging into a line costs less.
        label = self._tokens(f"- {entry.speaker}: ") + 1
        if entry.date is not None and all(e.date != entry.date for e in self.kept):
            label += self._tokens(f"[{entry.date}]") + 1
        trial = [*self.kept, entry]
        if self.used + need + label <= self.cap:
            self.kept, self.used, self.exact = trial, self.used + need + label, False  # an upper bound
            return True
        used = self.count(_render(trial))
        if used > self.cap:
            return False
        self.kept, self.used, self.exact = trial, used, True
        return True

    def _try_expand(self, entry: _Entry) -> None:
        grow = self._tokens(entry.body) - self._tokens(entry.short)
        if self.used + grow > self.cap and not self.exact:
            self._recount()
        if self.used + grow > self.cap:
            return
        entry.compressed = False
        self.used += grow
        self.exact = False

    def _recount(self) -> None:
        self.used, self.exact = self.count(_render(self.kept)), True

    def _fits(self, entries: list[_Entry]) -> bool:
        return self.count(_render(entries)) <= self.cap

    def _last_resort(self, entry: _Entry) -> str:
        """Not even one compressed line fits: cut the best recent one to the cap, words first, then characters."""
        entry.compressed = True
        for body in (entry.short, entry.body):
            words = body.split()
            lo, hi = 0, len(words)
            while lo < hi:  # binary search on the number of words that fit
                mid = (lo + hi + 1) // 2
                entry.short = " ".join(words[:mid])
                if self._fits([entry]):
                    lo = mid
                else:
                    hi = mid - 1
            if lo:
                entry.short = " ".join(words[:lo])
                return _render([entry])
        text = entry.body
        lo, hi = 0, len(text)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.count(text[:mid]) <= self.cap:
                lo = mid
            else:
                hi = mid - 1
        return text[: max(lo, 1)]


def _render(entries: list[_Entry]) -> str:
    """Lines in conversation order; a day header when the day changes; one line per run of one speaker."""
    lines: list[str] = []
    day: str | None = None
    speaker: str | None = None
    last = ""
    for entry in sorted(entries, key=lambda e: e.order):
        if entry.date is not None and entry.date != day:
            day = entry.date
            lines.append(f"[{day}]")
            speaker = None
        text = entry.text
        if lines and speaker is not None and entry.speaker == speaker:
            lines[-1] += (" " if last.endswith(_END) else "; ") + text
        else:
            lines.append(f"- {entry.speaker}: {text}" if entry.speaker else f"- {text}")
            speaker = entry.speaker
        last = text
    return "\n".join(lines)
