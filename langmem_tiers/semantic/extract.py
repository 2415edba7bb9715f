"""Offline extraction of the user's facts and preferences, without a model.

It reads the user's own messages (an assistant's "I" is the assistant) with the same
detector of specific statements as the offline summarizer
(:func:`langmem_tiers.specifics.score_sentence`): a sentence is a candidate when it is a
first-person statement of one of the personal kinds (identity, preference, possession,
relation, plan, change, commitment) and not a question. Then a small table of patterns
names its key, so that "I moved to Lisbon" supersedes "I live in Porto" (both
``location``). A statement no pattern keys is still kept, without a key (never superseded).

Measured on the hand-made cases of ``tests/test_semantic_extract.py`` (see the report there).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from langmem_tiers.messages import Message
from langmem_tiers.semantic.keys import normalize_key
from langmem_tiers.semantic.types import ExtractedMemory, Triple
from langmem_tiers.specifics import (
    PERSONAL_KINDS,
    Specificity,
    core_of,
    salience,
    score_sentence,
    split_sentences,
)

# Below this score a first-person sentence is small talk ("I love this weather" scores 1.0+,
# so the personal evidence must be more than mild liking, or carry a value).
MIN_SCORE = 1.4
# Statements about the past that say nothing of the present: kept out of the current facts.
_PAST_ONLY = re.compile(r"\bused to\b|\bwhen (?:i|we) was\b|\bwhen (?:i|we) were\b|\bas a (?:kid|child)\b")
_HYPOTHETICAL = re.compile(r"^(?:if|maybe|perhaps|i wonder|what if)\b|\b(?:would|might|could) (?:i|we)\b")
_VALUE = r"([a-z0-9][\w'&.-]*(?: [a-z0-9][\w'&.-]*){0,3})"
_ART = r"(?:an? |the |my |our )?"


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str]
    kind: str
    key: str  # may use {1}: the first group, normalized
    relation: str


def _rule(pattern: str, kind: str, key: str, relation: str = "") -> _Rule:
    return _Rule(re.compile(pattern), kind, key, relation or key)


# First match wins: the specific patterns come before the general ones.
_RULES: tuple[_Rule, ...] = (
    _rule(r"\bmy name(?: is|'s) " + _VALUE, "fact", "name"),
    _rule(r"\bcall me " + _VALUE, "fact", "name"),
    _rule(r"\b(?:i|we) (?:\w+ly |just |also )?(?:moved|relocated) (?:back )?to " + _VALUE, "fact", "location",
          "lives_in"),
    _rule(r"\b(?:i|we) (?:now )?live (?:in|at|near|on) " + _VALUE, "fact", "location", "lives_in"),
    _rule(r"\b(?:i'm|i am|we're|we are) (?:now )?based in " + _VALUE, "fact", "location", "lives_in"),
    _rule(r"\b(?:i'm|i am|we're|we are) (?:originally )?from " + _VALUE, "fact", "hometown", "from"),
    _rule(r"\b(?:i|we) grew up in " + _VALUE, "fact", "hometown", "from"),
    _rule(r"\b(?:i|we) (?:was|were) born (?:in|on) " + _VALUE, "fact", "birth", "born"),
    _rule(r"\b(?:i'm|i am) (\d{1,3})(?: years old)?\b", "fact", "age"),
    _rule(r"\b(?:i|we) (?:now )?work (?:as|as an?) " + _VALUE, "fact", "occupation", "works_as"),
    _rule(r"\b(?:i|we) (?:now )?work (?:at|for) " + _VALUE, "fact", "employer", "works_at"),
    _rule(r"\b(?:i|we) (?:\w+ly |just )?(?:joined|started (?:at|working at)) " + _VALUE, "fact", "employer",
          "works_at"),
    _rule(r"\bmy (?:new )?(?:job|position|role) is (?:as )?" + _ART + _VALUE, "fact", "occupation", "works_as"),
    _rule(r"\b(?:i'm|i am) an? (?!bit\b|little\b|lot\b|fan\b|big\b)" + _VALUE, "fact", "occupation", "is_a"),
    _rule(r"\b(?:i|we) (?:study|studied) " + _VALUE, "fact", "studies", "studies"),
    _rule(r"\b(?:i'm|i am|we're|we are) (?:now |still )?(vegetarian|vegan|pescatarian|teetotal|gluten-free)\b",
          "preference", "diet"),
    _rule(r"\b(?:i'm|i am) allergic to " + _VALUE, "preference", "allergy_{1}", "allergic_to"),
    _rule(r"\b(?:my|our) favou?rite " + r"([a-z]+(?: [a-z]+)?) (?:is|are|has been|was)\b", "preference",
          "favorite_{1}", "favorite"),
    _rule(r"\b(?:i|we) (?:\w+ )?prefer " + _VALUE, "preference", "", "prefers"),
    _rule(r"\b(?:my|our) (?:new |current )?([a-z]+(?: [a-z]+)?) (?:is|are|'s) (?:called|named) " + _VALUE,
          "fact", "{1}_name", "named"),
    _rule(r"\b(?:i|we) (?:have|own|got|adopted|bought) an? (?:new )?([a-z]+) (?:called|named) " + _VALUE,
          "fact", "{1}_name", "named"),
    _rule(r"\b(?:my|our) (?:new )?(phone number|email|e-mail|address|car|phone|laptop|bike|locker code|"
          r"locker|password|pin|doctor|dentist|gym|team|school|university|salary|budget|goal|deadline)"
          r"(?: is|'s| will be)\b", "fact", "{1}"),
    _rule(r"\b(?:i|we) (?:\w+ly |just )?(?:bought|got|drive|own) (?:an? |the )?(?:new )?" + _VALUE, "fact", "",
          "owns"),
    _rule(r"\b(?:i'm|i am) (?:married|engaged) to " + _VALUE, "relation", "partner", "partner"),
)
_KIN_SUBJECT = re.compile(r"\b(?:my|our) (wife|husband|partner|spouse|sister|brother|mom|mum|mother|dad|father|"
                          r"son|daughter|boyfriend|girlfriend|fianc[eé]e?|boss|manager|best friend)\b")
# Words that end a value: what follows is not the value any more.
_VALUE_STOP = {"and", "but", "because", "since", "so", "for", "with", "last", "this", "next", "which", "who", "where",
               "when", "now", "then", "after", "before", "in", "on", "at", "from", "to", "of", "a", "an", "the",
               "anymore", "again", "yesterday", "today", "ago", "too", "as", "though", "near", "by", "around",
               "until", "during", "while", "if", "or", "right", "soon", "tomorrow"}


def extract_memories(messages: Sequence[Message]) -> list[ExtractedMemory]:
    """Facts and preferences the user states about themself in ``messages`` (pure, deterministic).

    Example:
        >>> m = extract_memories([Message("user", "Big news: I moved to Lisbon last week!", id=7)])
        >>> [(x.kind, x.key, x.triple.object if x.triple else None, x.message_ids) for x in m]
        [('fact', 'location', 'lisbon', (7,))]
    """
    said = [(message.id, sentence) for message in messages if message.role == "user" and message.text.strip()
            for sentence in split_sentences(message.text)]
    # Scored in context: a sentence whose template recurs with other values ("Turn 5: today I spent
    # time on my piano project ...") is filler, as the offline summarizer judges it too.
    specs = salience([sentence for _, sentence in said])
    out: list[ExtractedMemory] = []
    seen: set[str] = set()
    for (message_id, _), spec in zip(said, specs):
        memory = _extract(spec, message_id)
        if memory is not None and memory.text.lower() not in seen:
            seen.add(memory.text.lower())
            out.append(memory)
    return out


def extract_sentence(sentence: str, message_id: int | None = None) -> ExtractedMemory | None:
    """The memory one sentence of the user states, or None (questions, small talk, the past only)."""
    return _extract(score_sentence(sentence), message_id)


def _extract(spec: Specificity, message_id: int | None) -> ExtractedMemory | None:
    lower = spec.text.lower().replace("’", "'")
    if spec.text.rstrip().endswith("?") or not spec.first_person or _HYPOTHETICAL.search(lower):
        return None
    personal = spec.kinds & set(PERSONAL_KINDS)
    if not personal or spec.score < MIN_SCORE:
        return None
    if _PAST_ONLY.search(lower) and not re.search(r"\bnow\b|\bthese days\b", lower):
        return None
    ids = (message_id,) if message_id is not None else ()
    text = core_of(spec.text, max_words=30)
    confidence = round(min(1.0, spec.score / 3.0), 2)
    kind, key, triple = _classify(lower, spec.text, personal)
    return ExtractedMemory(text=text, kind=kind, key=key, triple=triple, confidence=confidence, message_ids=ids)


def _classify(lower: str, original: str, personal: frozenset[str]) -> tuple[str, str | None, Triple | None]:
    # Patterns match the lowercased text; values are cut from the original (same length: only
    # ASCII case and one apostrophe differ), so "Lisbon" keeps its capital.
    same = len(original) == len(lower)
    for rule in _RULES:
        match = rule.pattern.search(lower)
        if not match:
            continue
        spans = [match.span(i) for i in range(1, (match.lastindex or 0) + 1) if match.group(i)]
        first = _trim_value(lower[spans[0][0]:spans[0][1]]) if spans else ""
        if "{1}" in rule.key and len(spans) == 1:
            # "my favourite colour is green": the key names the thing, the value follows the match.
            start, end = match.end(), len(lower)
        elif spans:
            start, end = spans[-1]
        else:
            start = end = 0
        value = _trim_value((original if same else lower)[start:end])
        key = normalize_key(rule.key.replace("{1}", first)) if rule.key else None
        if "{1}" in rule.key and not first:
            key = None
        triple = Triple("user", normalize_key(rule.relation.replace("{1}", first)) or "is", value) if value else None
        if "no longer" in lower or "not any more" in lower or "not anymore" in lower or "don't" in lower:
            triple = None  # a negation: the value is what is *not* true any more
        return rule.kind, key, triple
    kin = _KIN_SUBJECT.search(lower)
    if kin:
        return "relation", None, None
    if "plan" in personal or "commitment" in personal:
        return "event", None, None
    if "preference" in personal:
        return "preference", None, None
    return "fact", None, None


def _trim_value(raw: str) -> str:
    words: list[str] = []
    for word in raw.split():
        low = word.lower().strip(".,;:!?'\"")
        if not words and low in ("a", "an", "the", "my", "our"):
            continue
        if words and low in _VALUE_STOP:
            break
        words.append(word.strip(".,;:!?'\""))
        if word.endswith((",", ".", ";", "!", "?")):
            break
    return " ".join(w for w in words if w)
