"""Summary retention: do planted facts survive in the offline rolling summary?

    .venv/bin/python benchmarks/summary_retention.py [--seeds 5] [--caps 150 400] [--json PATH]

Each run is one 320-turn conversation (a turn: one user message and the assistant's
reply) with ten planted facts of different kinds (name, number, date, place, code,
preference, possession, relation, plan, commitment), each in one user message placed
at random among the first 280 turns, phrased in one of several natural ways. The rest
of the conversation is one kind of filler:

* ``chit-chat``: varied small talk, first-person remarks included;
* ``status``: highly repetitive status talk;
* ``numbers``: small talk that carries numbers and names of its own
  ("Message 41: the train left from platform 12 again"), from a few templates.

The conversation is driven exactly as an application does: every message goes through
``TieredMemory.add`` (real SQLite journal, tiktoken cl100k_base counts, window of
``--window`` tokens evicting to 60%, summary cap 150 or 400 tokens, the summarizer under
test; summaries run synchronously after each eviction). The score is the fraction of planted facts whose key value
appears (case-insensitive, whole words) in the final rolling summary; every planted
fact is checked to have been evicted from the window first. Cost is the mean wall time
of one summarizer call (one fold of an eviction batch, or a compression pass).

Summarizers compared at the same cap:

* ``ours``: ``langmem_tiers.ExtractiveSummarizer`` (detector of specific statements);
* ``legacy``: the extractive summarizer of commit 465bc7a, vendored below as
  ``LegacyExtractive`` (Luhn-style salience plus number/name bonuses);
* ``lexrank`` / ``textrank``: sumy's LexRank and TextRank, given the previous summary's
  lines and the new turns' sentences (``speaker: sentence``) as one document and keeping
  their top-rated sentences that fit the cap. sumy's own tokenizer needs NLTK punkt data,
  which downloads at run time; they get ``OfflineTokenizer`` (our sentence splitter and a
  word regex) instead. Stemming (NLTK's Snowball) and sumy's bundled English stop words
  need no download.

The generator's fact phrasings were written after the detector's rules, in other words
than the rules' examples; filler and facts are seeded per run (seed, filler kind).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import random
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langmem_tiers import ExtractiveSummarizer, MemoryConfig, TieredMemory, TiktokenCounter
from langmem_tiers.messages import Message
from langmem_tiers.specifics import split_sentences
from langmem_tiers.summarizers.base import Summarizer, SummaryRequest
from langmem_tiers.text import STOPWORDS

TURNS = 320
PLANT_BEFORE = 280  # planted facts go in the first 280 turns, so all are evicted by the end
FILLERS = ("chit-chat", "status", "numbers")
COUNTER = TiktokenCounter.for_model(None)


# --- scoring ---------------------------------------------------------------------------


def contains_value(summary: str, value: str) -> bool:
    """Whether ``value`` appears in ``summary`` as whole words, case and spacing ignored."""
    words = [re.escape(w) for w in value.lower().split()]
    pattern = r"(?<![\w])" + r"\s+".join(words) + r"(?![\w])"
    return re.search(pattern, summary.lower()) is not None


def retention(summary: str, values: Sequence[str]) -> float:
    """The fraction of ``values`` found in ``summary``."""
    if not values:
        raise ValueError("retention needs at least one key value")
    return sum(contains_value(summary, v) for v in values) / len(values)


# --- the conversation generator -----------------------------------------------------------


@dataclass(frozen=True)
class Fact:
    kind: str
    text: str
    value: str


# Several phrasings per kind, each with the values that make sense in it; {v} is the key value.
# Written after the detector's rules, in other words than the rules' examples.
FACTS: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {
    "name": (
        ("We finally agreed on a name for the puppy: {v}.", ("Biscuit", "Pepperoni", "Juniper")),
        ("The kitten we adopted last week answers to {v} now, after a lot of debate.", ("Waffles", "Noodle")),
        ("Everyone at home calls our tortoise {v}, don't ask why.", ("Clementine", "Sherbet", "Bramble")),
    ),
    "number": (
        ("Fun fact, I have run {v} marathons so far.", ("14", "23", "9")),
        ("Our flat is on floor {v}, so the lift matters a lot to me.", ("17", "31", "26")),
        ("There are {v} kids in the class I teach this term.", ("28", "33", "19")),
    ),
    "date": (
        ("My daughter's piano recital is on {v}, please keep that evening free in my calendar.",
         ("October 18", "June 2", "May 27")),
        ("Heads up: my passport expires on {v}.", ("March 14", "November 30", "August 9")),
        ("The kitchen renovation should be finished by {v}, fingers crossed.", ("April 21", "September 5")),
    ),
    "place": (
        ("My parents retired to {v} a couple of years ago.", ("Valencia", "Galway", "Oaxaca")),
        ("The cottage I inherited from my aunt is just outside {v}.", ("Ljubljana", "Inverness", "Bergen")),
        ("Back when I was a student I spent a year in {v}, best year ever.", ("Tromsø", "Kyoto", "Salamanca")),
    ),
    "code": (
        ("For the record, the wifi password at the cabin is {v}.", ("PINE-4471", "QX7R2B", "otter-2291")),
        ("Write this down for me: the booking reference for the hotel is {v}.", ("TZ-5590", "K9L3M", "HB83QF")),
        ("If anyone asks, my badge id at work is {v}.", ("88213", "60417", "A-3392")),
    ),
    "preference": (
        ("Please never suggest anything with {v} in it, I find the taste revolting.",
         ("coriander", "liquorice", "anchovies")),
        ("When it comes to tea, {v} is the only kind I will drink.", ("oolong", "rooibos", "sencha")),
        ("Honestly nothing beats {v} for me, it's what I pick every single time.",
         ("marzipan", "pistachio", "stracciatella")),
    ),
    "possession": (
        ("I still drive my old {v}, it has never let me down.", ("Saab", "Volvo", "Peugeot")),
        ("There's a {v} piano in my living room that nobody plays anymore.", ("Steinway", "Bechstein", "Yamaha")),
        ("I finally bought myself a {v} camera with the bonus.", ("Leica", "Fujifilm", "Hasselblad")),
    ),
    "relation": (
        ("{v} is my brother-in-law, he's the one who works in shipping.", ("Tomasz", "Rafael", "Dmitri")),
        ("My flatmate {v} keeps stealing my yoghurt from the fridge.", ("Ingrid", "Siobhan", "Yusuf")),
        ("I should mention that my godson is {v}, he turns nine soon.", ("Mateo", "Callum", "Felix")),
    ),
    "plan": (
        ("This summer we're hiking across {v} for two weeks.", ("Patagonia", "Hokkaido", "Tasmania")),
        ("Next spring I intend to take a language course in {v}.", ("Lisbon", "Bologna", "Seville")),
        ("The plan is to spend our anniversary in {v} this year.", ("Sicily", "Marrakesh", "Santorini")),
    ),
    "commitment": (
        ("I told my landlord the rent will be with him by the {v}, so I can't miss that.", ("25th", "28th")),
        ("I promised my sister I'd ring her every {v} without fail.", ("Sunday", "Thursday", "Tuesday")),
        ("I've signed up to bring the {v} to the office party, so remind me nearer the time.",
         ("pavlova", "lasagne", "trifle")),
    ),
}
FACT_ACKS = ("Noted, thanks for telling me.", "Got it.", "That's good to know!", "Okay, I'll keep that in mind.",
             "Thanks, understood.", "Sounds lovely.")

CHIT_CHAT_USER = (
    "The weather has been so {adj} lately.", "I could really go for some {food} right now.",
    "Did you ever try {food} with extra cheese?", "Haha, that is {adj} honestly.",
    "I am so tired today, long night.", "I love lazy mornings with a good book.",
    "What do you think about {topic}?", "My neighbour's dog barked all night again.",
    "I watched a documentary about {topic} yesterday.", "Do you ever get bored of questions like mine?",
    "Sometimes I wonder whether {topic} is overrated.", "I might take a walk later if it stays {adj}.",
    "Coffee or tea in the afternoon, what would you pick?", "That reminds me of a silly joke about {topic}.",
    "I really enjoy chatting like this.", "It has been a {adj} week at work.",
)
CHIT_CHAT_ASSISTANT = (
    "Ha, I know what you mean.", "That sounds {adj}!", "Tell me more about it.", "I hope the rest of the day is {adj}.",
    "Interesting thought about {topic}.", "Fair enough!", "A bit of rest might help.", "Totally understandable.",
)
CHIT_CHAT_WORDS = {
    "adj": ("nice", "gloomy", "weird", "lovely", "hectic", "calm", "odd", "sunny", "grey", "busy"),
    "food": ("pizza", "noodles", "pancakes", "curry", "soup", "tacos", "dumplings", "ice cream"),
    "topic": ("space travel", "gardening", "old films", "board games", "jazz", "modern art", "running", "baking"),
}
# A few dozen distinct status lines, each coming back again and again: too many to all fit the
# summary, so the cap puts them in competition with the facts.
STATUS_SUBJECTS = ("The build", "The deploy", "The test suite", "The migration", "The backup", "The nightly job")
STATUS_STATES = ("is still running.", "is still queued.", "is almost done.", "has not moved yet.", "is stuck again.",
                 "looks fine so far.")
STATUS_USER = ("Still working on it.", "Any update?", "Checking the logs now.", "Nothing new yet.",
               "Still waiting.", "Let me look again in a minute.")
STATUS_ASSISTANT = ("Okay, let me know when it finishes.", "No update yet.", "Still running on my side too.",
                    "Okay.")
NUMBERS_USER = (
    "Message {n}: the train left from platform {p} again.",
    "Ticket {t} got closed by {person} this morning.",
    "The {h}:{m} bus to {city} was late again, about {p} minutes.",
    "Room {r} is booked by {person} for the standup at {h}.",
    "{person} says the score was {a} to {b} last night.",
)
NUMBERS_ASSISTANT = ("Thanks for the update on {n}.", "Noted, {person} will be glad.", "Another delay, typical.",
                     "Okay, room {r} it is.")
NUMBERS_WORDS = {
    "person": ("Priya", "Tom", "Hannah", "Marco", "Aisha", "Pete", "Lena", "Omar"),
    "city": ("Leeds", "Bristol", "Utrecht", "Graz", "Turin", "Malmo"),
}


def _fill(template: str, rng: random.Random) -> str:
    values = {key: rng.choice(options) for key, options in {**CHIT_CHAT_WORDS, **NUMBERS_WORDS}.items()}
    values.update(n=str(rng.randint(1, 999)), p=str(rng.randint(1, 20)), t=str(rng.randint(1000, 9999)),
                  h=str(rng.randint(6, 22)), m=f"{rng.choice((0, 15, 30, 45)):02d}", r=str(rng.randint(100, 450)),
                  a=str(rng.randint(0, 5)), b=str(rng.randint(0, 5)))
    return template.format(**values)


def filler_turn(kind: str, rng: random.Random) -> tuple[str, str]:
    if kind == "chit-chat":
        return _fill(rng.choice(CHIT_CHAT_USER), rng), _fill(rng.choice(CHIT_CHAT_ASSISTANT), rng)
    if kind == "status":
        user = rng.choice(STATUS_USER) if rng.random() < 0.3 else \
            f"{rng.choice(STATUS_SUBJECTS)} {rng.choice(STATUS_STATES)}"
        return user, rng.choice(STATUS_ASSISTANT)
    if kind == "numbers":
        return _fill(rng.choice(NUMBERS_USER), rng), _fill(rng.choice(NUMBERS_ASSISTANT), rng)
    raise ValueError(f"unknown filler kind {kind!r}: use one of {', '.join(FILLERS)}")


def conversation(filler: str, seed: int) -> tuple[list[tuple[str, str]], list[Fact]]:
    """320 (user, assistant) turns with ten planted facts; the same (filler, seed) gives the same conversation."""
    rng = random.Random(f"{filler}:{seed}")
    facts = []
    for kind, phrasings in FACTS.items():
        phrasing, values = rng.choice(phrasings)
        value = rng.choice(values)
        facts.append(Fact(kind, phrasing.format(v=value), value))
    rng.shuffle(facts)
    slots = sorted(rng.sample(range(2, PLANT_BEFORE), len(facts)))
    planted = dict(zip(slots, facts))
    turns = []
    for i in range(TURNS):
        fact = planted.get(i)
        turns.append((fact.text, rng.choice(FACT_ACKS)) if fact else filler_turn(filler, rng))
    return turns, facts


# --- the summarizers under test -------------------------------------------------------------


class Timed:
    """Wraps a summarizer; counts calls and their wall time."""

    def __init__(self, inner: Summarizer) -> None:
        self.inner = inner
        self.calls = 0
        self.seconds = 0.0

    def summarize(self, request: SummaryRequest) -> str:
        start = time.perf_counter()
        try:
            return self.inner.summarize(request)
        finally:
            self.calls += 1
            self.seconds += time.perf_counter() - start

    async def asummarize(self, request: SummaryRequest) -> str:
        return self.summarize(request)


class OfflineTokenizer:
    """sumy's tokenizer interface without NLTK data: our sentence splitter and a word regex."""

    language = "english"
    _WORDS = re.compile(r"[\w'-]+")

    def to_sentences(self, paragraph: str) -> tuple[str, ...]:
        return tuple(split_sentences(paragraph))

    def to_words(self, sentence: str) -> tuple[str, ...]:
        return tuple(self._WORDS.findall(sentence))


class SumyRolling:
    """A sumy summarizer used as a rolling summarizer: previous lines + new sentences, top-rated within the cap."""

    def __init__(self, algorithm: str) -> None:
        try:
            from sumy.nlp.stemmers import Stemmer
            from sumy.summarizers.lex_rank import LexRankSummarizer
            from sumy.summarizers.text_rank import TextRankSummarizer
            from sumy.utils import get_stop_words
        except ImportError as e:
            raise SystemExit("the library baselines need sumy: pip install 'sumy[lexrank]'") from e
        cls = {"lexrank": LexRankSummarizer, "textrank": TextRankSummarizer}[algorithm]
        self.summarizer = cls(Stemmer("english"))
        self.summarizer.stop_words = get_stop_words("english")
        self.tokenizer = OfflineTokenizer()

    def summarize(self, request: SummaryRequest) -> str:
        from sumy.models.dom import ObjectDocumentModel, Paragraph, Sentence

        units = [line.removeprefix("- ")
                 for line in request.previous_summary.splitlines() if line.strip()]
        for m in request.messages:
            units += [f"{m.name or m.role}: {s}" for s in split_sentences(m.text)]
        units = list(dict.fromkeys(units))  # exact repeats removed: a help to the baselines, kept for fairness
        if not units:
            return ""
        document = ObjectDocumentModel([Paragraph([Sentence(u, self.tokenizer) for u in units])])

        def within_cap(infos: Sequence[Any]) -> list[Any]:
            kept: list[Any] = []
            for info in infos:  # best rated first
                if request.count_tokens("\n".join(f"- {i.sentence}" for i in [*kept, info])) <= request.max_tokens:
                    kept.append(info)
            return kept

        chosen = self.summarizer(document, within_cap)
        text = "\n".join(f"- {s}" for s in chosen)
        if not text:  # nothing fits whole: the best sentence, cut by words
            words = f"- {units[-1]}".split()
            while len(words) > 1 and request.count_tokens(" ".join(words)) > request.max_tokens:
                words.pop()
            text = " ".join(words)
        return text

    async def asummarize(self, request: SummaryRequest) -> str:
        return self.summarize(request)


_LEGACY_SENTENCES = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])|\n+")
_LEGACY_WORDS = re.compile(r"[A-Za-z][A-Za-z'-]+|\d[\d,.:/-]*")
_LEGACY_NUMBER = re.compile(r"\d")
LEGACY_MIN_SENTENCE_WORDS = 3


class LegacyExtractive:
    """The extractive summarizer as of commit 465bc7a, copied verbatim in behaviour (names prefixed)."""

    def __init__(self, *, tool_weight: float = 0.5, max_sentence_chars: int = 300) -> None:
        self.tool_weight = tool_weight
        self.max_sentence_chars = max_sentence_chars

    def summarize(self, request: SummaryRequest) -> str:
        old_lines = [line for line in request.previous_summary.splitlines() if line.strip()]
        new_lines = [] if request.compress else self._candidate_lines(request.messages)
        # A sentence already in the summary (said again on another day) adds nothing new.
        known = {_legacy_body(line) for line in old_lines}
        new_lines = [(line, w) for line, w in new_lines if _legacy_body(line) not in known]
        stats = Counter(w for line in old_lines + [t for t, _ in new_lines] for w in _legacy_content_words(line))
        scored: list[tuple[float, int, str]] = []
        for order, line in enumerate(old_lines):
            # Older lines already survived earlier rounds; they decay a little so new facts get room.
            scored.append((0.9 * _legacy_salience(line, stats), order, line))
        offset = len(old_lines)
        for order, (line, weight) in enumerate(new_lines):
            scored.append((weight * _legacy_salience(line, stats), offset + order, line))
        return _legacy_select(scored, request)

    async def asummarize(self, request: SummaryRequest) -> str:
        return self.summarize(request)

    def _candidate_lines(self, messages: Sequence[Message]) -> list[tuple[str, float]]:
        lines: list[tuple[str, float]] = []
        seen: set[str] = set()
        for m in messages:
            text = m.text.strip()
            if not text:
                continue
            label = _legacy_label(m)
            weight = self.tool_weight if m.role == "tool" else 1.0
            sentences = [" ".join(s.split()) for s in _LEGACY_SENTENCES.split(text) if s.strip()]
            # Short sentences ("ok", "thanks") carry little; keep them only when nothing longer is said.
            longer = [s for s in sentences if len(s.split()) >= LEGACY_MIN_SENTENCE_WORDS]
            for sentence in longer or sentences[:1]:
                if sentence.lower() in seen:
                    continue
                seen.add(sentence.lower())
                if len(sentence) > self.max_sentence_chars:
                    sentence = sentence[: self.max_sentence_chars].rsplit(" ", 1)[0] + " …"
                lines.append((f"- {label}: {sentence}", weight))
        return lines


def _legacy_label(m: Message) -> str:
    speaker = m.name or m.role
    if m.role == "tool":
        speaker = f"tool {m.name or ''}".strip()
    if m.created_at is None:
        return speaker
    day = dt.datetime.fromtimestamp(m.created_at, dt.timezone.utc).strftime("%Y-%m-%d")
    return f"[{day}] {speaker}"


def _legacy_body(line: str) -> str:
    return " ".join(line.split(": ", 1)[-1].lower().split())


def _legacy_content_words(text: str) -> list[str]:
    body = text.split(": ", 1)[-1]
    return [w.lower() for w in _LEGACY_WORDS.findall(body) if w.lower() not in STOPWORDS]


def _legacy_salience(line: str, stats: Counter[str]) -> float:
    words = _legacy_content_words(line)
    if not words:
        return 0.0
    body = line.split(": ", 1)[-1]
    weight = sum(math.log1p(stats[w]) for w in set(words))
    numbers = len(_LEGACY_NUMBER.findall(body)) > 0
    names = sum(1 for w in body.split()[1:] if w[:1].isupper() and w.lower() not in STOPWORDS)
    return weight / math.sqrt(len(words)) + 0.5 * numbers + 0.3 * min(names, 3)


def _legacy_select(scored: list[tuple[float, int, str]], request: SummaryRequest) -> str:
    kept: list[tuple[int, str]] = []
    for _, order, line in sorted(scored, key=lambda s: (-s[0], s[1])):
        trial = sorted([*kept, (order, line)])
        if request.count_tokens("\n".join(text for _, text in trial)) <= request.max_tokens:
            kept = trial
    return "\n".join(text for _, text in kept)


SUMMARIZERS: dict[str, Callable[[], Summarizer]] = {
    "ours": ExtractiveSummarizer,
    "legacy": LegacyExtractive,
    "lexrank": lambda: SumyRolling("lexrank"),
    "textrank": lambda: SumyRolling("textrank"),
}


# --- one run ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunResult:
    summarizer: str
    filler: str
    cap: int
    seed: int
    retention: float
    kept: tuple[str, ...]
    lost: tuple[str, ...]
    calls: int
    ms_per_call: float
    summary_tokens: int
    summary: str


def run_one(name: str, filler: str, cap: int, seed: int, window: int) -> RunResult:
    turns, facts = conversation(filler, seed)
    timed = Timed(SUMMARIZERS[name]())
    config = MemoryConfig(context_tokens=window + cap + 100, window_tokens=window, summary_tokens=cap,
                          recall_tokens=0)
    fact_ids: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as folder, TieredMemory.open(
        folder, session_id=f"{name}-{filler}-{cap}-{seed}", config=config, summarizer=timed, embedder=False,
        counter=COUNTER,
    ) as memory:
        texts = {f.text: f for f in facts}
        for user, assistant in turns:
            stored = memory.add("user", user)
            if user in texts:
                fact_ids[texts[user].value] = stored.id or 0
            memory.add("assistant", assistant)
        # Summaries run synchronously after each eviction (background_summary is off), as in an app;
        # a turn left pending would mean the summarizer failed, which the run reports as invalid.
        stats = memory.stats()
        window_start = memory.window()[0].id or 0
        summary = memory.summary
    if stats.pending_summary_messages:
        raise RuntimeError(f"{name}: {stats.pending_summary_messages} evicted messages left unsummarized")
    not_evicted = [v for v, i in fact_ids.items() if i >= window_start]
    if not_evicted:
        raise RuntimeError(f"planted facts still in the window, the run is invalid: {not_evicted}")
    values = [f.value for f in facts]
    kept = tuple(v for v in values if contains_value(summary, v))
    return RunResult(name, filler, cap, seed, retention(summary, values), kept,
                     tuple(v for v in values if v not in kept), timed.calls,
                     1000 * timed.seconds / max(timed.calls, 1), COUNTER.count_text(summary), summary)


# --- the report ---------------------------------------------------------------------------------


def aggregate(results: list[RunResult]) -> dict[str, Any]:
    table: dict[str, Any] = {}
    for name in dict.fromkeys(r.summarizer for r in results):
        rows: dict[str, Any] = {}
        for filler in dict.fromkeys(r.filler for r in results):
            for cap in sorted({r.cap for r in results}):
                runs = [r for r in results if (r.summarizer, r.filler, r.cap) == (name, filler, cap)]
                rows[f"{filler}@{cap}"] = {
                    "retention": round(statistics.mean(r.retention for r in runs), 3),
                    "min": round(min(r.retention for r in runs), 3),
                    "ms_per_call": round(statistics.mean(r.ms_per_call for r in runs), 2),
                    "calls": round(statistics.mean(r.calls for r in runs), 1),
                }
        mine = [r for r in results if r.summarizer == name]
        rows["ms_per_call"] = round(sum(r.ms_per_call * r.calls for r in mine) / max(sum(r.calls for r in mine), 1), 2)
        table[name] = rows
    return table


def markdown(table: dict[str, Any], fillers: Sequence[str], caps: Sequence[int], seeds: int) -> str:
    columns = [f"{f}@{c}" for c in caps for f in fillers]
    head = "| summarizer | " + " | ".join(f"{f} @ {c}" for c in caps for f in fillers) + " | ms per fold call |"
    lines = [f"Planted-fact retention in the final rolling summary (mean of {seeds} seeds; min in brackets)", "",
             head, "|" + "---|" * (len(columns) + 2)]
    for name, rows in table.items():
        cells = [f"{rows[c]['retention']:.2f} ({rows[c]['min']:.1f})" for c in columns]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {rows['ms_per_call']:.2f} |")
    return "\n".join(lines)


def targets(table: dict[str, Any], fillers: Sequence[str], caps: Sequence[int]) -> list[str]:
    """Lines saying, per filler kind and cap, whether ours meets its target and beats every baseline."""
    out = []
    goal = {150: 0.8, 400: 0.9}
    for cap in caps:
        for filler in fillers:
            key = f"{filler}@{cap}"
            ours = table["ours"][key]["retention"]
            best_other = max((rows[key]["retention"], n) for n, rows in table.items() if n != "ours")
            met = ours >= goal.get(cap, 0.0) and ours > best_other[0]
            out.append(f"- {key}: ours {ours:.2f} (target >= {goal.get(cap, 0.0)}), best other {best_other[1]} "
                       f"{best_other[0]:.2f}: {'met' if met else 'MISSED'}")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--caps", type=int, nargs="+", default=[150, 400])
    parser.add_argument("--fillers", nargs="+", default=list(FILLERS), choices=FILLERS)
    parser.add_argument("--summarizers", nargs="+", default=list(SUMMARIZERS), choices=list(SUMMARIZERS))
    parser.add_argument("--window", type=int, default=800, help="window_tokens of the memory (evicts to 60%%)")
    parser.add_argument("--json", type=Path, help="write the per-run results and the table here")
    parser.add_argument("--show", action="store_true", help="print the final summary of the first seed")
    args = parser.parse_args(argv)
    results = []
    for name in args.summarizers:
        for filler in args.fillers:
            for cap in args.caps:
                for seed in range(args.seeds):
                    result = run_one(name, filler, cap, seed, args.window)
                    results.append(result)
                    print(f"{name:9s} {filler:10s} cap {cap:4d} seed {seed}: {result.retention:.2f} "
                          f"lost {list(result.lost)} {result.ms_per_call:.2f} ms/call", file=sys.stderr)
                    if args.show and seed == 0:
                        print(result.summary, file=sys.stderr)
    table = aggregate(results)
    print(markdown(table, args.fillers, args.caps, args.seeds))
    if "ours" in table and len(table) > 1:
        print()
        print("\n".join(targets(table, args.fillers, args.caps)))
    if args.json:
        args.json.write_text(json.dumps({
            "command": "benchmarks/summary_retention.py " + " ".join(argv if argv is not None else sys.argv[1:]),
            "turns": TURNS, "window_tokens": args.window, "seeds": args.seeds, "table": table,
            "runs": [r.__dict__ for r in results],
        }, indent=2, default=list))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
