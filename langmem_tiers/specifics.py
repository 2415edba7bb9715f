"""Which sentences carry what a person would want remembered.

One deterministic, offline detector (no model) shared by the extractive summarizer
and the offline fact extraction of the semantic tier. It looks for two families of
signals:

* **entities**: names, numbers, dates and times, places, codes (ids, e-mails, URLs,
  letter-digit mixes);
* **personal statements** (first person): preference, possession, relation,
  plan or decision, commitment, identity, change ("I moved to", "I no longer",
  "my new ...").

A first-person statement that also names a concrete value ("my locker code is
4471") is what later questions ask about most, so the two families reinforce
each other. Entities alone weigh less: chit-chat carries numbers and names of
its own ("Message 41: the train left from platform 12 again").

Context matters too: a sentence whose *shape* (digits and names masked, stopwords
dropped) recurs with different values across the conversation is a template, and
templates are filler however many numbers they carry. :func:`template_variants`
counts that, and :func:`salience` turns it into a discount.

Example:
    >>> s = score_sentence("By the way, my locker code is 4471.")
    >>> sorted(s.kinds), s.specific
    (['code', 'possession'], True)
    >>> score_sentence("Haha, that sounds fun!").specific
    False
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from langmem_tiers.text import STOPWORDS

ENTITY_KINDS = ("name", "number", "date", "place", "code")
PERSONAL_KINDS = ("preference", "possession", "relation", "plan", "commitment", "identity", "change")
KINDS = ENTITY_KINDS + PERSONAL_KINDS

# A sentence at or above this score is a specific statement. A bare third-person
# name or number ("bus 42 was late") stays below it; a first-person statement of one
# of the personal kinds, or first person with any concrete value ("I ran 9 marathons"),
# or a code, reaches it.
SPECIFIC_THRESHOLD = 1.0
# Shapes sharing this much (Jaccard over their masked words) are one template.
TEMPLATE_OVERLAP = 0.6

# Codes weigh most: a token mixing letters and digits is almost never small talk.
_ENTITY_WEIGHT = {"name": 1.0, "number": 0.6, "date": 1.0, "place": 1.0, "code": 1.5}
_ENTITY_CAP = 2.0
_PERSONAL_CAP = 3.0
_BOTH_BONUS = 0.5  # a personal statement with a concrete value in it
# First person with a concrete value but no recognised kind ("I spent a year in Tromsø"): still about the speaker.
_FIRST_PERSON_ENTITY_BONUS = 0.4
_THIRD_PERSON_FACTOR = 0.8
# However many names and numbers it holds, a statement about no one in the conversation stays
# below a first-person statement of preference, relation, plan, commitment, identity or change.
_THIRD_PERSON_CAP = 1.2
_QUESTION_FACTOR = 0.6

_SENTENCES = re.compile(r"(?<=[.!?…])\s+(?=[A-Z0-9\"'(\[])|\n+")
# Clause breaks; a comma or colon inside a number or a time ("1,000", "9:30") is not one.
_CLAUSES = re.compile(r"[,;:]\s+|\s*[()\u2014\u2013]\s*|\s+-\s+")
# Words that open a subordinate clause; split before one only after four words or more.
_SUBCLAUSE_OPENERS = {"that", "which", "who", "because", "but", "although"}
_CONNECTIVES = {"so", "and", "but", "which", "that", "because", "then", "or", "while", "since", "though"}
_EDGE_PUNCT = "\"'`“”‘’()[]{}<>.,;:!?…*_"

_MONTHS = {
    "january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
    "november", "december", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
}
_WEEKDAYS = {"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"}
_NUMBER_WORDS = {
    "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve", "fifteen",
    "twenty", "thirty", "forty", "fifty", "sixty", "hundred", "thousand", "million", "dozen", "half",
}
_PLACE_PREPOSITIONS = {"in", "to", "from", "at", "near", "around", "outside", "inside", "via", "through"}
# Nouns that make a bare 4-digit number an identifier rather than an amount or a year.
_CODE_NOUNS = {
    "code", "pin", "password", "passcode", "id", "number", "no", "locker", "room", "ticket", "order",
    "booking", "reference", "ref", "account", "flight", "gate", "seat", "extension", "ext", "plate", "serial",
}
_UNIT_SUFFIX = re.compile(
    r"^\d+(?:[.,]\d+)?(?:k|m|km|kg|g|mg|ml|l|cm|mm|c|f|h|hrs?|mins?|s|x|gb|mb|tb|%)$", re.IGNORECASE
)
_ORDINAL = re.compile(r"^\d{1,2}(?:st|nd|rd|th)$", re.IGNORECASE)
_TIME = re.compile(r"^\d{1,2}(?::\d{2})?(?:am|pm)$|^\d{1,2}:\d{2}$", re.IGNORECASE)
_NUMERIC_DATE = re.compile(r"^\d{1,4}[/.-]\d{1,2}(?:[/.-]\d{1,4})?$")
_YEAR = re.compile(r"^(?:19|20)\d{2}s?$")
_EMAIL_OR_URL = re.compile(r"^[\w.+-]+@[\w-]+\.[\w.]+$|^(?:https?://|www\.)\S+$", re.IGNORECASE)
_CURRENCY = re.compile(r"^[$€£¥]\d")
# Chat acronyms and interjections written in capitals that are not names.
_NOT_NAMES = {"ok", "okay", "lol", "omg", "btw", "fyi", "asap", "tbh", "imo", "imho", "idk", "thx", "ps", "hmm"}
_RELATIVE_DATE = re.compile(
    r"\b(?:tomorrow|tonight|the day after tomorrow|next (?:week|weekend|month|year|monday|tuesday|wednesday|"
    r"thursday|friday|saturday|sunday)|this (?:weekend|monday|tuesday|wednesday|thursday|friday|saturday|sunday)|"
    r"in (?:\d+|two|three|four|five|six|ten) (?:days|weeks|months|years))\b"
)
_NAMED = re.compile(r"\b(?:called|named|name is|name's|nicknamed)\s+([A-Za-z][\w'-]*)", re.IGNORECASE)

_FIRST_PERSON = re.compile(r"\b(?:i|i'm|i've|i'll|i'd|me|my|mine|myself|we|we're|we've|we'll|our|ours|us)\b")
_KIN = (
    r"(?:wife|husband|partner|spouse|sister|brother|sibling|siblings|mom|mum|mother|dad|father|parents?|son|"
    r"daughter|kids?|children|child|baby|aunt|uncle|cousin|niece|nephew|grand\w+|friend|best friend|boyfriend|"
    r"girlfriend|fianc[eé]e?|boss|manager|colleague|coworker|co-worker|neighbou?r|roommate|flatmate|landlord|"
    r"landlady|doctor|dentist|therapist|teacher|coach|mentor|in-laws?|stepmother|stepfather|godmother|godfather)"
)
# One optional adverb between the subject and its verb ("I finally bought", "we recently moved").
_ADV = r"(?:\w+ly |just |also |already |still |even )?"
_PERSONAL_PATTERNS: dict[str, tuple[tuple[re.Pattern[str], float], ...]] = {
    "preference": (
        # Explicit declarations of taste, and dislikes and constraints, are what people expect kept.
        (re.compile(r"\b(?:my|our) favou?rites?\b|\b(?:i|we) (?:\w+ )?(?:prefer|hate|dislike|despise|detest|"
                    r"can't stand|cannot stand|can't eat|don't eat|never eat|never drink|avoid)\b|"
                    r"\b(?:i'm|i am|we're|we are) (?:\w+ )?(?:allergic|intolerant|vegetarian|vegan|"
                    r"teetotal|not a fan)\b|\b(?:i'd|i would|we'd) (?:much )?rather\b|"
                    # a standing instruction is a preference too: "never book me ...", "don't recommend ..."
                    r"\b(?:never|don't|do not|please don't) (?:suggest|recommend|offer|book|order|serve|give me|"
                    r"send me|schedule|put me)\b"), 2.0),
        # Mild liking is common in chit-chat ("I love this weather"): it counts, but less.
        (re.compile(r"\b(?:i|we) (?:\w+ )?(?:like|love|adore|enjoy|fancy)\b|\b(?:i'm|i am) (?:a )?(?:big )?fan of\b|"
                    r"\b(?:i'm|i am) (?:really )?into\b"), 1.0),
    ),
    "relation": (
        (re.compile(rf"\b(?:my|our) {_KIN}\b|\b(?:is|'s) (?:my|our) {_KIN}\b|\b(?:i'm|i am) (?:married|engaged) to\b"),
         1.5),
    ),
    "possession": (
        (re.compile(r"\b(?:my|our) (?!god\b|goodness\b|bad\b|pleasure\b|word\b|gosh\b|lord\b)[a-z]|"
                    rf"\b(?:i|we) {_ADV}(?:own|have got|bought|drive|rent|got a|have an?|have \d+|have two|"
                    r"have three)\b|"
                    r"\b(?:i've|we've) got\b|\bmine\b"), 1.0),
    ),
    "plan": (
        (re.compile(r"\b(?:i|we)(?:'m| am|'re| are) (?:going to|gonna|planning|thinking of|about to|flying|"
                    r"driving|moving|starting|leaving|visiting|getting married|heading|meeting|taking|hosting|"
                    r"travel+ing|booked|scheduled)\b|\b(?:i|we) (?:plan|intend|hope|want|aim|expect) to\b|"
                    r"\b(?:i|we)(?:'ll| will) (?:be|go|fly|move|start|visit|take|try|travel|join|attend|host)\b|"
                    rf"\b(?:i|we)(?:'ve| have)? {_ADV}(?:decided|chosen|picked|settled on|booked|scheduled|reserved)\b|"
                    r"\b(?:my|our) (?:plan|trip|appointment|reservation|booking|flight|wedding|interview)\b"), 1.5),
    ),
    "commitment": (
        (re.compile(rf"\b(?:i|we)(?:'ve| have)? {_ADV}(?:promise|promised|swear|owe|committed|agreed to|must|"
                    r"have to|need to|signed up|volunteered)\b|"
                    r"\b(?:i|we)(?:'ll| will) (?:make sure|remember|send|call|pay|bring|finish|return|get back|"
                    r"deliver|submit)\b|\bremind me\b|\bdon't let me forget\b|"
                    r"\bdeadline\b|\bdue (?:on|by|at)\b"), 1.5),
    ),
    "identity": (
        (re.compile(r"\bmy name(?: is|'s)\b|\bcall me\b|\b(?:i'm|i am) an? (?!bit\b|little\b|lot\b|fan\b|big fan\b)"
                    r"[a-z]|\b(?:i|we) work (?:as|at|for|in)\b|\b(?:i|we) (?:study|studied|teach|taught)\b|"
                    r"\b(?:i|we) (?:was|were) born\b|\b(?:i|we) grew up\b|\b(?:i'm|i am|we're|we are) from\b|"
                    r"\b(?:i|we) come from\b|\b(?:i'm|i am) \d+\b|\byears old\b|\bmy pronouns\b|"
                    r"\b(?:i|we) live (?:in|at|near|on)\b|\bi'm based in\b|"
                    r"\b(?:i|we) (?:was|were) an? (?!bit\b|little\b|lot\b)[a-z]|\bwhen (?:i|we) (?:was|were)\b"), 1.5),
    ),
    "change": (
        (re.compile(rf"\b(?:i|we)(?:'ve| have)? {_ADV}(?:moved|switched|changed|quit|stopped|sold|gave up|got rid of|"
                    r"retired|graduated|got married|divorced|broke up|transferred|relocated|resigned|"
                    r"started|left|joined)\b|\bno longer\b|\bnot any ?more\b|\b(?:my|our) new\b|"
                    r"\b(?:i|we) used to\b|\b(?:i|we) now (?:live|work|go|use|have)\b"), 1.5),
    ),
}


@dataclass(frozen=True)
class Evidence:
    """One signal found in a sentence: its kind and the words that showed it."""

    kind: str
    text: str


@dataclass(frozen=True)
class Specificity:
    """How specific one sentence is, and why.

    ``score`` is context-free; :func:`salience` discounts it for templates that
    recur across a conversation. ``subject`` is the noun phrase after the first
    "my"/"our" ("locker code", "sister"), a hint for keying extracted facts.
    """

    text: str
    score: float
    kinds: frozenset[str]
    evidence: tuple[Evidence, ...]
    first_person: bool
    subject: str | None

    @property
    def specific(self) -> bool:
        return self.score >= SPECIFIC_THRESHOLD


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text`` (line breaks end a sentence too), whitespace collapsed."""
    return [" ".join(s.split()) for s in _SENTENCES.split(text) if s and s.strip()]


def split_clauses(sentence: str) -> list[str]:
    """Clauses of a sentence, split at commas, semicolons, colons, dashes, brackets and before
    a relative pronoun or a conjunction that opens a clause ("..., that nobody plays", "because ...")."""
    pieces = [c.strip() for c in _CLAUSES.split(sentence) if c and c.strip()]
    return [c for piece in pieces for c in _split_subclauses(piece)]


def _split_subclauses(clause: str) -> list[str]:
    words = clause.split()
    out: list[str] = []
    start = 0
    for i, word in enumerate(words):
        if i - start >= 4 and i < len(words) - 1 and word.lower() in _SUBCLAUSE_OPENERS:
            out.append(" ".join(words[start:i]))
            start = i
    out.append(" ".join(words[start:]))
    return out


@lru_cache(maxsize=8192)  # pure; a rolling summary re-reads its own lines on every fold
def score_sentence(text: str) -> Specificity:
    """Score one sentence for specific information, without context."""
    sentence = " ".join(text.split())
    lower = sentence.lower().replace("’", "'")
    entities = _entities(sentence)
    personal_found = _personal(lower)
    evidence = entities + [e for e, _ in personal_found]
    kinds = frozenset(e.kind for e in evidence)
    first_person = _FIRST_PERSON.search(lower) is not None
    entity = min(_ENTITY_CAP, sum(_kind_total(entities, k) for k in ENTITY_KINDS))
    personal = min(_PERSONAL_CAP, sum(w for _, w in personal_found))
    score = entity + personal
    if personal and entity:
        score += _BOTH_BONUS
    elif entity and first_person:
        score += _FIRST_PERSON_ENTITY_BONUS
    elif entity:
        score = min(score * _THIRD_PERSON_FACTOR, _THIRD_PERSON_CAP)
    if sentence.rstrip().endswith("?"):
        score *= _QUESTION_FACTOR  # questions ask for facts more often than they state them
    if len(sentence.split()) < 3:
        score *= 0.5
    return Specificity(sentence, round(score, 4), kinds, tuple(evidence), first_person, _subject(lower))


@lru_cache(maxsize=8192)  # pure; as score_sentence, re-read on every fold of a rolling summary
def sentence_shape(text: str) -> tuple[str, ...]:
    """The template of a sentence: digits masked as ``0``, names as ``N``, stopwords dropped.

    "Message 41: the train left from platform 12 again" and "Message 7: the train
    left from platform 3 again" share one shape.
    """
    shape: list[str] = []
    for i, raw in enumerate(text.split()):
        word = raw.strip(_EDGE_PUNCT)
        low = word.lower()
        if not word or low in STOPWORDS:
            continue
        if any(map(str.isdigit, word)):
            shape.append("0")
        elif word[0].isupper() and i > 0:
            shape.append("N")
        else:
            shape.append(low)
    return tuple(shape)


def template_variants(sentences: Sequence[str]) -> list[int]:
    """For each sentence, how many *distinct* sentences in ``sentences`` share its template.

    Two sentences share a template when their shapes (:func:`sentence_shape`) are
    equal, or overlap by ``TEMPLATE_OVERLAP`` (Jaccard) when both have at least three
    words, so an optional "again" or "today" does not hide a template. A fact said
    twice in the same words is one variant; a template filled with ever new numbers
    and names has many.
    """
    shapes = [sentence_shape(s) for s in sentences]
    texts: dict[tuple[str, ...], set[str]] = defaultdict(set)
    for sentence, shape in zip(sentences, shapes):
        texts[shape].add(" ".join(sentence.lower().split()))
    distinct = list(texts)
    sets = [frozenset(shape) for shape in distinct]
    counts: dict[tuple[str, ...], int] = {}
    for i, shape in enumerate(distinct):
        total = len(texts[shape])
        if len(sets[i]) >= 3:
            for j, other in enumerate(distinct):
                if j != i and len(sets[j]) >= 3 and _overlap(sets[i], sets[j]) >= TEMPLATE_OVERLAP:
                    total += len(texts[other])
        counts[shape] = total
    return [counts[shape] if shape else 1 for shape in shapes]


def _overlap(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b)


def salience(sentences: Sequence[str]) -> list[Specificity]:
    """Score sentences of one conversation: specificity, discounted for recurring templates."""
    variants = template_variants(sentences)
    out = []
    for sentence, count in zip(sentences, variants):
        s = score_sentence(sentence)
        if count > 1:
            s = Specificity(s.text, round(s.score / count**0.75, 4), s.kinds, s.evidence, s.first_person, s.subject)
        out.append(s)
    return out


def specific_statements(text: str | Iterable[str]) -> list[Specificity]:
    """The specific statements of a text (or of several texts, e.g. the messages of a conversation).

    Example:
        >>> [s.text for s in specific_statements("Nice weather. I moved to Lisbon in May.")]
        ['I moved to Lisbon in May.']
    """
    texts = [text] if isinstance(text, str) else list(text)
    sentences = [s for t in texts for s in split_sentences(t)]
    return [s for s in salience(sentences) if s.specific]


@lru_cache(maxsize=8192)
def core_of(sentence: str, max_words: int = 24) -> str:
    """The clauses of a sentence that carry its signals (discourse filler dropped), at most ``max_words``.

    "Oh, before I forget, my cat is called Miso" gives "my cat is called Miso".
    A sentence without any signal keeps its first words.
    """
    clauses = split_clauses(sentence)
    kept = clauses
    if len(clauses) > 1:
        # Keep the clauses that carry the sentence's weight; a passing "my" elsewhere is not enough.
        # A clause with a concrete value (a name, a date, a code...) always stays: values are what is asked.
        specs = [score_sentence(c) for c in clauses]
        best = max(s.score for s in specs)
        keep = [s.score > 0 and (s.score >= 0.5 * best or not s.kinds.isdisjoint(ENTITY_KINDS)) for s in specs]
        # "..., so remind me" leans on the clause before it: keep that one too.
        for i in range(len(clauses) - 1, 0, -1):
            if keep[i] and clauses[i].split()[0].lower() in _CONNECTIVES:
                keep[i - 1] = True
        kept = _rejoin(sentence, clauses, keep)
    words = (", ".join(kept) if kept else sentence).split()
    core = " ".join(words[:max_words])
    return core + " …" if len(words) > max_words else core.rstrip(",;: ")


def _rejoin(sentence: str, clauses: Sequence[str], keep: Sequence[bool]) -> list[str]:
    """Kept clauses, with neighbours that were kept together given back their original joint."""
    groups: list[str] = []
    pos, group_start, group_end = 0, -1, -1
    for clause, k in zip(clauses, keep):
        start = sentence.find(clause, pos)
        if start < 0:  # not found verbatim (odd spacing): keep the clause on its own
            if group_start >= 0:
                groups.append(sentence[group_start:group_end])
            group_start = -1
            if k:
                groups.append(clause)
            continue
        end = start + len(clause)
        pos = end
        if not k:
            if group_start >= 0:
                groups.append(sentence[group_start:group_end])
            group_start = -1
            continue
        if group_start < 0:
            group_start = start
        group_end = end
    if group_start >= 0:
        groups.append(sentence[group_start:group_end])
    return groups


def _personal(lower: str) -> list[tuple[Evidence, float]]:
    """The personal kinds a sentence states, each with the weight of the first pattern that matched."""
    found = []
    for kind, patterns in _PERSONAL_PATTERNS.items():
        for pattern, weight in patterns:
            match = pattern.search(lower)
            if match:
                found.append((Evidence(kind, match.group(0)), weight))
                break
    return found


def _kind_total(evidence: Sequence[Evidence], kind: str) -> float:
    n = sum(1 for e in evidence if e.kind == kind)
    if not n:
        return 0.0
    # More of the same kind adds a little: a line of ten numbers is not ten facts.
    return _ENTITY_WEIGHT[kind] * min(1.5, 1 + 0.25 * (n - 1))


def _entities(sentence: str) -> list[Evidence]:
    words = sentence.split()
    found: list[Evidence] = []
    sentence_start = True
    in_name = False
    lower_words = [w.strip(_EDGE_PUNCT).lower() for w in words]
    for i, raw in enumerate(words):
        word = raw.strip(_EDGE_PUNCT)
        low = lower_words[i]
        starts = sentence_start
        sentence_start = raw.endswith((".", "!", "?", "…"))
        if not word:
            in_name = False
            continue
        # "code is 4471", "room number 4471": an identifier noun a few words before makes a code.
        before = lower_words[max(0, i - 3):i]
        kind = _token_kind(word, low, before, lower_words[i + 1] if i + 1 < len(words) else "", starts)
        if kind == "name" and in_name:
            continue  # "New York City" is one name
        in_name = kind in ("name", "place")
        if kind:
            found.append(Evidence(kind, word))
    found.extend(Evidence("date", match.group(0)) for match in _RELATIVE_DATE.finditer(sentence.lower()))
    for match in _NAMED.finditer(sentence):
        if not any(e.text == match.group(1) for e in found):
            found.append(Evidence("name", match.group(1)))
    return found


def _token_kind(word: str, low: str, before: Sequence[str], nxt: str, starts: bool) -> str | None:
    prev = before[-1] if before else ""
    has_digit = any(ch.isdigit() for ch in word)
    if _EMAIL_OR_URL.match(word):
        return "code"
    if has_digit:
        return _numeric_kind(word, low, before)
    if low in _NUMBER_WORDS:
        return "number"
    if not word[0].isupper() or low in STOPWORDS or low in _NOT_NAMES or len(word) < 2:
        return None
    if low in _WEEKDAYS or (low in _MONTHS and (not starts or nxt[:1].isdigit())):
        return "date"
    if starts:
        return None  # a capital at the start of a sentence says nothing
    if prev in _PLACE_PREPOSITIONS:
        return "place"
    return "name"


def _numeric_kind(word: str, low: str, before: Sequence[str]) -> str:
    if _TIME.match(low) or _ORDINAL.match(low) or (_NUMERIC_DATE.match(low) and ("/" in low or low.count("-") == 2)):
        return "date"
    if _YEAR.match(low):
        return "date"
    if _CURRENCY.match(word) or _UNIT_SUFFIX.match(low):
        return "number"
    if any(ch.isalpha() for ch in word):
        return "code"  # letters and digits mixed: a flight, a plate, a product id
    digits = sum(ch.isdigit() for ch in word)
    if digits >= 5 or word.startswith("#") or (digits >= 3 and not _CODE_NOUNS.isdisjoint(before)):
        return "code"
    return "number"


_SUBJECT_STOP = {"is", "was", "are", "were", "has", "had", "have", "will", "would", "just", "lives", "said", "says",
                 "keeps", "works", "got", "gets", "turns", "moved", "can", "could", "does", "did"}


def _subject(lower: str) -> str | None:
    """The noun phrase after the first "my"/"our": up to two words, stopping at a verb or a stopword."""
    match = re.search(r"\b(?:my|our) ([a-z][a-z' -]*)", lower)
    if not match:
        return None
    words: list[str] = []
    for word in match.group(1).split():
        if word in _SUBJECT_STOP or word in STOPWORDS or len(words) == (3 if words[:1] in (["new"], ["old"]) else 2):
            break
        words.append(word)
    return " ".join(words) or None
