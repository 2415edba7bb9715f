"""Loaders for the official LoCoMo and LongMemEval_S files.

Both benchmarks load into one shape: a :class:`Haystack` (the turns one fresh store
ingests, grouped by session) with the :class:`Question` s asked against it. LoCoMo
has one haystack per conversation and many questions; LongMemEval one haystack per
question. Turn keys are strings: LoCoMo's ``dia_id`` (``"D1:3"``) and
``"{session_id}#{turn_index}"`` for LongMemEval; scoring never parses them back, it
looks turns up in :attr:`Haystack.turns`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from langmem_tiers.errors import ConfigError

# Turns of one session share its date; each later turn is this many seconds newer so
# that the order of turns survives in their timestamps.
TURN_SPACING_S = 30.0

LOCOMO_EXCLUDED_CATEGORIES = frozenset({"5"})

_LOCOMO_DATE_FORMATS = ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y", "%I:%M %p on %B %d, %Y")
_LME_DATE_FORMATS = ("%Y/%m/%d (%a) %H:%M", "%Y/%m/%d %H:%M", "%Y/%m/%d")
_EVIDENCE_RE = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)", re.IGNORECASE)
_SESSION_KEY_RE = re.compile(r"^session_(\d+)$")


@dataclass(frozen=True)
class Turn:
    """One message as an application would add it."""

    key: str
    session_id: str
    index: int
    role: str
    name: str | None
    text: str
    created_at: float
    has_answer: bool = False


@dataclass(frozen=True)
class Question:
    """One question with its gold evidence.

    ``gold_turns`` are turn keys (LoCoMo evidence; LongMemEval ``has_answer`` turns),
    ``gold_sessions`` session ids (LongMemEval ``answer_session_ids``). ``excluded``
    says why a question is not scored (``None`` when it is).
    """

    qid: str
    text: str
    category: str
    gold_turns: frozenset[str]
    gold_sessions: frozenset[str] = frozenset()
    excluded: str | None = None


@dataclass(frozen=True)
class Haystack:
    """What one fresh store ingests, and the questions asked against it."""

    hid: str
    sessions: tuple[tuple[Turn, ...], ...]
    questions: tuple[Question, ...]
    turns: Mapping[str, Turn] = field(default_factory=dict)

    @property
    def n_turns(self) -> int:
        return sum(len(s) for s in self.sessions)


def _index(sessions: Sequence[tuple[Turn, ...]]) -> dict[str, Turn]:
    return {t.key: t for s in sessions for t in s}


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

    Returns canonical ``"D{session}:{turn}"`` ids in order, without duplicates; whether
    they resolve to a turn is checked by the caller.
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


def locomo_turn_text(turn: Mapping[str, Any]) -> str:
    """``"{speaker}: {text}"`` plus ``" [image: {blip_caption}]"`` for image turns."""
    text = f"{turn.get('speaker', '')}: {turn.get('text', '')}"
    caption = turn.get("blip_caption")
    if caption:
        text += f" [image: {caption}]"
    return text


def load_locomo(path: Path, limit: int | None = None) -> list[Haystack]:
    """Load the official ``locomo10.json`` format: one haystack per conversation.

    Category 5 (adversarial) questions and questions whose evidence resolves to no
    turn are kept but marked ``excluded``.
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
        sessions: list[tuple[Turn, ...]] = []
        for num in numbers:
            raw_turns = conv.get(f"session_{num}") or []
            if not raw_turns:
                continue  # conv-26 has dates for sessions without turns
            date = conv.get(f"session_{num}_date_time")
            start = parse_locomo_date(date) if date else 0.0
            turns = []
            for i, raw in enumerate(raw_turns):
                speaker = raw.get("speaker")
                turns.append(
                    Turn(
                        key=str(raw.get("dia_id") or f"D{num}:{i + 1}"),
                        session_id=f"session_{num}",
                        index=i,
                        role="user" if speaker == speaker_a else "assistant",
                        name=speaker,
                        text=locomo_turn_text(raw),
                        created_at=start + i * TURN_SPACING_S,
                    )
                )
            sessions.append(tuple(turns))
        index = _index(sessions)
        questions = []
        for qn, qa in enumerate(sample.get("qa") or []):
            category = str(qa.get("category"))
            evidence = frozenset(k for k in parse_evidence(qa.get("evidence")) if k in index)
            excluded = None
            if category in LOCOMO_EXCLUDED_CATEGORIES:
                excluded = "category 5 (adversarial)"
            elif not evidence:
                excluded = "no evidence id resolves to a turn"
            questions.append(
                Question(
                    qid=f"{sid}/q{qn}",
                    text=str(qa.get("question", "")),
                    category=category,
                    gold_turns=evidence,
                    excluded=excluded,
                )
            )
        out.append(Haystack(hid=sid, sessions=tuple(sessions), questions=tuple(questions), turns=index))
    return out


def load_longmemeval(path: Path, limit: int | None = None) -> list[Haystack]:
    """Load the official LongMemEval (``longmemeval_s``) format: one haystack per question.

    Abstention questions (ids ending in ``_abs``) are marked ``excluded``, as in the paper.
    """
    return list(iter_longmemeval(path, limit))


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
        sessions: list[tuple[Turn, ...]] = []
        for s, (sess_id, raw_turns) in enumerate(zip(ids, raw_sessions)):
            start = parse_lme_date(dates[s]) if s < len(dates) else 0.0
            sessions.append(
                tuple(
                    Turn(
                        key=f"{sess_id}#{i}",
                        session_id=sess_id,
                        index=i,
                        role=str(raw.get("role", "user")),
                        name=None,
                        text=str(raw.get("content", "")),
                        created_at=start + i * TURN_SPACING_S,
                        has_answer=bool(raw.get("has_answer", False)),
                    )
                    for i, raw in enumerate(raw_turns)
                )
            )
        index = _index(sessions)
        excluded = "abstention question" if qid.endswith("_abs") else None
        question = Question(
            qid=qid,
            text=str(item.get("question", "")),
            category=str(item.get("question_type", "unknown")),
            gold_turns=frozenset(t.key for t in index.values() if t.has_answer),
            gold_sessions=frozenset(str(s) for s in item.get("answer_session_ids") or []),
            excluded=excluded,
        )
        yield Haystack(hid=qid, sessions=tuple(sessions), questions=(question,), turns=index)
