"""Loaders for the official LoCoMo and LongMemEval_S files.

Both benchmarks load into one shape: a :class:`Haystack` (the messages one fresh store
ingests, grouped by dataset session) with the :class:`Question` s asked against it.
LoCoMo has one haystack per conversation and many questions; LongMemEval one haystack
per question.

Words, as in the core: a *message* is one utterance (LoCoMo's ``dia_id`` "turn",
LongMemEval's haystack "turn"); a *turn* is a user message with the replies after it
(:func:`turns_of`). Message keys are strings: LoCoMo's ``dia_id`` (``"D1:3"``) and
``"{session_id}#{index}"`` for LongMemEval; scoring never parses them back, it looks
messages up in :attr:`Haystack.messages`.

Real files hold odd entries (a message that is not an object, content that is not
text). A loader never dies on one: it skips it and counts it in
:attr:`Haystack.skipped`, by reason, so the run reports what it could not ingest.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from langmem_tiers.errors import ConfigError

# Messages of one session share its date; each later message is this many seconds newer so
# that their order survives in their timestamps.
MESSAGE_SPACING_S = 30.0

LOCOMO_EXCLUDED_CATEGORIES = frozenset({"5"})

_LOCOMO_DATE_FORMATS = ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y", "%I:%M %p on %B %d, %Y")
_LME_DATE_FORMATS = ("%Y/%m/%d (%a) %H:%M", "%Y/%m/%d %H:%M", "%Y/%m/%d")
_EVIDENCE_RE = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)", re.IGNORECASE)
_SESSION_KEY_RE = re.compile(r"^session_(\d+)$")


@dataclass(frozen=True)
class DatasetMessage:
    """One message (utterance) as an application would add it.

    ``text`` is the utterance alone (LoCoMo: plus ``" [image: caption]"`` for image
    messages); ``name`` is the speaker when the dataset has one.
    """

    key: str
    session_id: str
    index: int
    role: str
    name: str | None
    text: str
    created_at: float
    has_answer: bool = False

    @property
    def line(self) -> str:
        """``"{speaker}: {text}"``: what every retriever indexes and delivers.

        The same line the core builds for a recall record (``name`` or ``role``,
        then the text), so that our records and the baselines' units read alike.
        """
        return f"{self.name or self.role}: {self.text}"


@dataclass(frozen=True)
class Question:
    """One question with its gold evidence.

    ``gold_messages`` are message keys (LoCoMo evidence; LongMemEval ``has_answer``
    messages), ``gold_sessions`` session ids (LongMemEval ``answer_session_ids``).
    ``excluded`` says why a question is not scored (``None`` when it is). ``answer`` is
    the gold answer as text (``None`` when the dataset has none, e.g. LoCoMo category 5);
    ``date`` when the question is asked, as the dataset writes it (LongMemEval only).
    """

    qid: str
    text: str
    category: str
    gold_messages: frozenset[str]
    gold_sessions: frozenset[str] = frozenset()
    excluded: str | None = None
    answer: str | None = None
    date: str | None = None


def _answer_text(raw: Any) -> str | None:
    """The gold answer as text: LongMemEval and LoCoMo hold a few as integers."""
    if raw is None or isinstance(raw, (dict, list)):
        return None
    return str(raw)


@dataclass(frozen=True)
class Haystack:
    """What one fresh store ingests, and the questions asked against it.

    ``skipped`` counts the raw entries the loader could not turn into a message, by reason.
    """

    hid: str
    sessions: tuple[tuple[DatasetMessage, ...], ...]
    questions: tuple[Question, ...]
    messages: Mapping[str, DatasetMessage] = field(default_factory=dict)
    skipped: Mapping[str, int] = field(default_factory=dict)

    @property
    def n_messages(self) -> int:
        return sum(len(s) for s in self.sessions)


def turns_of(session: Sequence[DatasetMessage]) -> list[tuple[DatasetMessage, ...]]:
    """Whole turns of one session, as the core groups them: each user message opens a turn.

    Messages before the session's first user message form a turn of their own. Turns
    never cross sessions.
    """
    turns: list[list[DatasetMessage]] = []
    for m in session:
        if m.role == "user" or not turns:
            turns.append([m])
        else:
            turns[-1].append(m)
    return [tuple(t) for t in turns]


def merge_haystacks(haystacks: Sequence[Haystack], hid: str = "merged") -> Haystack:
    """Every haystack's sessions in one history, each session once, oldest first; every question asked of it.

    LongMemEval gives each question its own ~50-session haystack, drawn from one pool (session ids are
    global: a filler session shared by two haystacks is the same session). Merged, the 30 dev questions
    search ~1,500 sessions and ~15,000 messages, thirty times a haystack: recall where the history is
    long (what a keyword search ranks within its budget, how far the vectors reach). A session is
    ordered by its first message's date (the file's order breaks ties), so each question's own sessions
    keep their order; its question date stays its own, so newer sessions of other haystacks may sit
    after it, as a question of last month asked of today's history. A filler session two haystacks place
    at different dates (17 of the dev file's, none an answer session) keeps its first haystack's.
    Raises ``ConfigError`` when one session id holds different messages in two haystacks (LoCoMo's
    ``session_1`` is every conversation's first: its haystacks do not merge). The loaders' skip counts
    are summed over the haystacks (an odd entry of a shared session counts once per haystack holding it).
    """
    seen: dict[str, tuple[DatasetMessage, ...]] = {}
    for hay in haystacks:
        for session in hay.sessions:
            if not session:
                continue
            sid = session[0].session_id
            held = seen.setdefault(sid, session)
            if _said(held) != _said(session):
                raise ConfigError(f"session {sid!r} differs between haystacks: they do not share one pool of "
                                  f"sessions (LongMemEval's do; LoCoMo's conversations do not), so they cannot merge")
    sessions = sorted(seen.values(), key=lambda s: s[0].created_at)  # stable: the file's order breaks ties
    skipped: Counter[str] = Counter()
    for hay in haystacks:
        skipped.update(hay.skipped)
    return Haystack(hid=hid, sessions=tuple(sessions), questions=tuple(q for h in haystacks for q in h.questions),
                    messages=_index(sessions), skipped=dict(skipped))


def _said(session: Sequence[DatasetMessage]) -> list[tuple[str, str, str | None, str, bool]]:
    """What a session says, without its dates (which differ where two haystacks place one session)."""
    return [(m.key, m.role, m.name, m.text, m.has_answer) for m in session]


def _index(sessions: Sequence[tuple[DatasetMessage, ...]]) -> dict[str, DatasetMessage]:
    return {m.key: m for s in sessions for m in s}


def _load_json_list(path: Path, what: str) -> list[Any]:
    try:
        with Path(path).open(encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError as e:
        raise ConfigError(f"{what} file {str(path)!r} does not exist: pass --data PATH to the official file") from e
    except json.JSONDecodeError as e:
        raise ConfigError(f"{what} file {str(path)!r} is not JSON ({e}): pass the official release file") from e
    if not isinstance(data, list):
        raise ConfigError(f"{what} file {str(path)!r} must hold a JSON list of samples, got {type(data).__name__}")
    return data


def parse_locomo_date(text: str) -> float:
    """``"1:56 pm on 8 May, 2023"`` -> unix seconds (UTC)."""
    cleaned = " ".join(text.replace(".", "").split())
    for fmt in _LOCOMO_DATE_FORMATS:
        try:
            return datetime.strptime(cleaned, fmt).replace(tzinfo=timezone.utc).timestamp()
        except ValueError:
            continue
    raise ConfigError(f"LoCoMo date {text!r} does not parse: expected e.g. '1:56 pm on 8 May, 2023'")


def parse_lme_date(text: str) -> float:
    """``"2023/05/20 (Sat) 02:21"`` -> unix seconds (UTC)."""
    cleaned = " ".join(text.split())
    for fmt in _LME_DATE_FORMATS:
        try:
            return datetime.strptime(cleaned, fmt).replace(tzinfo=timezone.utc).timestamp()
        except ValueError:
            continue
    raise ConfigError(f"LongMemEval date {text!r} does not parse: expected e.g. '2023/05/20 (Sat) 02:21'")


def parse_evidence(items: Any) -> list[str]:
    """Lenient LoCoMo evidence parsing: ``"D8:6; D9:17"``, ``"D:11:26"``, ``"D30:05"``.

    Returns canonical ``"D{session}:{index}"`` ids in order, without duplicates; whether
    they resolve to a message is checked by the caller.
    """
    if isinstance(items, str):
        items = [items]
    out: list[str] = []
    for item in items or []:
        for m in _EVIDENCE_RE.finditer(str(item)):
            key = f"D{int(m.group(1))}:{int(m.group(2))}"
            if key not in out:
                out.append(key)
    return out


def locomo_message_text(raw: Mapping[str, Any]) -> str:
    """The utterance, plus ``" [image: {blip_caption}]"`` for image messages."""
    text = str(raw.get("text") or "")
    caption = raw.get("blip_caption")
    if caption:
        text = f"{text} [image: {caption}]" if text else f"[image: {caption}]"
    return text


def _odd_locomo(raw: Any) -> str | None:
    """Why a raw LoCoMo message cannot be loaded, or ``None`` when it can."""
    if not isinstance(raw, dict):
        return f"message is not an object ({type(raw).__name__})"
    if not isinstance(raw.get("text", ""), str):
        return f"text is not a string ({type(raw.get('text')).__name__})"
    return None


def load_locomo(path: Path, limit: int | None = None) -> list[Haystack]:
    """Load the official ``locomo10.json`` format: one haystack per conversation.

    Category 5 (adversarial) questions and questions whose evidence resolves to no
    message are kept but marked ``excluded``.
    """
    samples = _load_json_list(path, "LoCoMo")
    out: list[Haystack] = []
    for n, sample in enumerate(samples):
        if limit is not None and len(out) >= limit:
            break
        conv = sample.get("conversation") if isinstance(sample, dict) else None
        if not isinstance(conv, dict):
            raise ConfigError(f"LoCoMo sample {n} has no 'conversation' object: is this the official format?")
        sid = str(sample.get("sample_id", f"sample-{n}"))
        speaker_a = conv.get("speaker_a")
        numbers = sorted(int(m.group(1)) for k in conv if (m := _SESSION_KEY_RE.match(k)))
        sessions: list[tuple[DatasetMessage, ...]] = []
        skipped: Counter[str] = Counter()
        for num in numbers:
            raw_messages = conv.get(f"session_{num}") or []
            if not isinstance(raw_messages, list):
                skipped[f"session is not a list ({type(raw_messages).__name__})"] += 1
                continue
            if not raw_messages:
                continue  # conv-26 has dates for sessions without messages
            date = conv.get(f"session_{num}_date_time")
            start = parse_locomo_date(date) if date else 0.0
            messages = []
            for i, raw in enumerate(raw_messages):
                why = _odd_locomo(raw)
                if why is not None:
                    skipped[why] += 1
                    continue
                speaker = raw.get("speaker")
                messages.append(
                    DatasetMessage(
                        key=str(raw.get("dia_id") or f"D{num}:{i + 1}"),
                        session_id=f"session_{num}",
                        index=i,
                        role="user" if speaker == speaker_a else "assistant",
                        name=str(speaker) if speaker else None,
                        text=locomo_message_text(raw),
                        created_at=start + i * MESSAGE_SPACING_S,
                    )
                )
            if messages:
                sessions.append(tuple(messages))
        index = _index(sessions)
        questions = []
        for qn, qa in enumerate(sample.get("qa") or []):
            category = str(qa.get("category"))
            evidence = frozenset(k for k in parse_evidence(qa.get("evidence")) if k in index)
            excluded = None
            if category in LOCOMO_EXCLUDED_CATEGORIES:
                excluded = "category 5 (adversarial)"
            elif not evidence:
                excluded = "no evidence id resolves to a message"
            questions.append(
                Question(
                    qid=f"{sid}/q{qn}",
                    text=str(qa.get("question", "")),
                    category=category,
                    gold_messages=evidence,
                    excluded=excluded,
                    answer=_answer_text(qa.get("answer")),
                )
            )
        out.append(Haystack(hid=sid, sessions=tuple(sessions), questions=tuple(questions), messages=index,
                            skipped=dict(skipped)))
    return out


def load_longmemeval(path: Path, limit: int | None = None) -> list[Haystack]:
    """Load the official LongMemEval (``longmemeval_s``) format: one haystack per question.

    Abstention questions (ids ending in ``_abs``) are marked ``excluded``, as in the paper.
    """
    return list(iter_longmemeval(path, limit))


def _odd_lme(raw: Any) -> str | None:
    if not isinstance(raw, dict):
        return f"message is not an object ({type(raw).__name__})"
    content = raw.get("content")
    if not isinstance(content, str):
        return f"content is not a string ({type(content).__name__})"
    return None


def iter_longmemeval(path: Path, limit: int | None = None) -> Iterator[Haystack]:
    items = _load_json_list(path, "LongMemEval")
    for n, item in enumerate(items):
        if limit is not None and n >= limit:
            break
        if not isinstance(item, dict) or "haystack_sessions" not in item:
            raise ConfigError(f"LongMemEval item {n} has no 'haystack_sessions': is this the official format?")
        qid = str(item.get("question_id", f"q{n}"))
        ids = [str(s) for s in item.get("haystack_session_ids") or []]
        dates = list(item.get("haystack_dates") or [])
        raw_sessions = item["haystack_sessions"]
        if len(ids) != len(raw_sessions):
            raise ConfigError(
                f"LongMemEval question {qid}: {len(ids)} haystack_session_ids for {len(raw_sessions)} sessions"
            )
        sessions: list[tuple[DatasetMessage, ...]] = []
        skipped: Counter[str] = Counter()
        for s, (sess_id, raw_messages) in enumerate(zip(ids, raw_sessions)):
            start = parse_lme_date(dates[s]) if s < len(dates) else 0.0
            if not isinstance(raw_messages, list):
                skipped[f"session is not a list ({type(raw_messages).__name__})"] += 1
                continue
            messages = []
            for i, raw in enumerate(raw_messages):
                why = _odd_lme(raw)
                if why is not None:
                    skipped[why] += 1
                    continue
                messages.append(
                    DatasetMessage(
                        key=f"{sess_id}#{i}",
                        session_id=sess_id,
                        index=i,
                        role=str(raw.get("role", "user")),
                        name=None,
                        text=raw["content"],
                        created_at=start + i * MESSAGE_SPACING_S,
                        has_answer=bool(raw.get("has_answer", False)),
                    )
                )
            if messages:
                sessions.append(tuple(messages))
        index = _index(sessions)
        excluded = "abstention question" if qid.endswith("_abs") else None
        question = Question(
            qid=qid,
            text=str(item.get("question", "")),
            category=str(item.get("question_type", "unknown")),
            gold_messages=frozenset(m.key for m in index.values() if m.has_answer),
            gold_sessions=frozenset(str(s) for s in item.get("answer_session_ids") or []),
            excluded=excluded,
            answer=_answer_text(item.get("answer")),
            date=str(item["question_date"]) if item.get("question_date") else None,
        )
        yield Haystack(hid=qid, sessions=tuple(sessions), questions=(question,), messages=index,
                       skipped=dict(skipped))
