"""Reading an LLM's summary-with-memories reply robustly.

The summary call asks for ``{"summary": str, "memories": [{text, kind, key, subject,
relation, object, confidence, message_ids}]}`` (``JSON_SCHEMA``). Models and proxies answer
with fences, prose around the object, missing fields, wrong types or cut-off JSON. The
rules: the summary is what matters (a reply without a usable summary is a failure, and the
turns stay pending); each memory is checked on its own and a bad one is dropped with a
reason, never failing the others or the summary.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langmem_tiers.semantic.keys import normalize_key
from langmem_tiers.semantic.types import EXTRACTED_KINDS, ExtractedMemory, Triple

MAX_MEMORY_CHARS = 1000
MAX_MEMORIES = 50

MEMORY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "text": {"type": "string"},
        "kind": {"type": "string", "enum": list(EXTRACTED_KINDS)},
        "key": {"type": ["string", "null"]},
        "subject": {"type": ["string", "null"]},
        "relation": {"type": ["string", "null"]},
        "object": {"type": ["string", "null"]},
        "confidence": {"type": "number"},
        "message_ids": {"type": "array", "items": {"type": "integer"}},
    },
    "required": ["text", "kind", "key", "subject", "relation", "object", "confidence", "message_ids"],
    "additionalProperties": False,
}
JSON_SCHEMA: dict[str, Any] = {
    "name": "summary_with_memories",
    "strict": True,
    "schema": {
        "type": "object",
        "properties": {"summary": {"type": "string"}, "memories": {"type": "array", "items": MEMORY_SCHEMA}},
        "required": ["summary", "memories"],
        "additionalProperties": False,
    },
}


@dataclass(frozen=True)
class ParsedReply:
    """The summary text (None when the reply had none) and the memories that passed the checks."""

    summary: str | None
    memories: tuple[ExtractedMemory, ...]
    problems: tuple[str, ...] = ()


_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.IGNORECASE)
_SUMMARY_FIELD = re.compile(r'"summary"\s*:\s*"((?:[^"\\]|\\.)*)"', re.DOTALL)


def parse_reply(content: str, message_ids: Sequence[int]) -> ParsedReply:
    """Read a reply that should be the JSON object; tolerate fences, prose and cut-off memories.

    ``message_ids`` are the ids of the turns the call summarized: a memory citing none of
    them is attributed to all of them (erasing any of those turns erases it: the safe side).

    Example:
        >>> r = parse_reply('```json\\n{"summary": "Ada moved.", "memories": [{"text": "Ada lives in Lisbon", '
        ...                 '"kind": "fact", "key": "Home City"}]}\\n```', [3, 4])
        >>> r.summary, r.memories[0].key, r.memories[0].message_ids
        ('Ada moved.', 'home_city', (3, 4))
    """
    text = _FENCE.sub("", content.strip())
    data = _load_object(text)
    if data is None:
        if not text.startswith("{"):
            # Plain prose: a model that ignored the format still wrote a summary.
            return ParsedReply(text or None, (), ("the reply was not JSON: no memories",))
        match = _SUMMARY_FIELD.search(text)  # cut-off JSON: the summary field may be whole
        summary = json.loads(f'"{match.group(1)}"') if match else None
        return ParsedReply(summary, (), ("the reply was cut-off or invalid JSON: no memories",))
    summary = data.get("summary")
    problems: list[str] = []
    if not isinstance(summary, str) or not summary.strip():
        problems.append(f"no summary text in the reply: {summary!r:.60}")
        summary = None
    if "memories" not in data:
        problems.append("the reply has no memories field")
    memories, dropped = parse_memories(data.get("memories"), message_ids)
    return ParsedReply(summary, tuple(memories), tuple(problems + dropped))


def parse_memories(raw: Any, message_ids: Sequence[int]) -> tuple[list[ExtractedMemory], list[str]]:
    """Check each memory of a structured reply on its own; returns the good ones and why others were dropped."""
    if raw is None:
        return [], []
    if not isinstance(raw, list):
        return [], [f"memories must be a list, got {type(raw).__name__}"]
    allowed = set(message_ids)
    out: list[ExtractedMemory] = []
    problems: list[str] = []
    for i, item in enumerate(raw[:MAX_MEMORIES]):
        try:
            out.append(_memory(item, allowed, tuple(message_ids)))
        except ValueError as e:
            problems.append(f"memory {i} dropped: {e}")
    if len(raw) > MAX_MEMORIES:
        problems.append(f"{len(raw) - MAX_MEMORIES} memories over the limit of {MAX_MEMORIES} dropped")
    return out, problems


def _memory(item: Any, allowed: set[int], fallback: tuple[int, ...]) -> ExtractedMemory:
    if isinstance(item, str):
        item = {"text": item}
    if not isinstance(item, Mapping):
        raise ValueError(f"not an object: {item!r:.60}")
    text = item.get("text")
    if not isinstance(text, str) or not text.strip():
        raise ValueError("no text")
    text = " ".join(text.split())[:MAX_MEMORY_CHARS]
    if "\x00" in text:
        raise ValueError("text holds a NUL byte")
    raw_kind = item.get("kind")
    kind = raw_kind.strip().lower() if isinstance(raw_kind, str) else "fact"
    if kind not in EXTRACTED_KINDS:
        raise ValueError(f"kind {kind!r:.40} is not one of {', '.join(EXTRACTED_KINDS)}")
    key = normalize_key(item["key"]) if isinstance(item.get("key"), str) else None
    confidence = item.get("confidence", 1.0)
    if isinstance(confidence, bool) or not isinstance(confidence, int | float) or confidence != confidence:
        confidence = 1.0
    cited = item.get("message_ids")
    ids = tuple(sorted({m for m in cited if isinstance(m, int) and not isinstance(m, bool) and m in allowed})) \
        if isinstance(cited, list) else ()
    parts = [p for p in (item.get(f) for f in ("subject", "relation", "object")) if isinstance(p, str) and p.strip()]
    triple = Triple(*(" ".join(p.split())[:200] for p in parts)) if len(parts) == 3 else None
    return ExtractedMemory(text=text, kind=kind, key=key, triple=triple,
                           confidence=float(min(1.0, max(0.0, confidence))), message_ids=ids or fallback)


def _load_object(text: str) -> dict[str, Any] | None:
    for candidate in (text, text[text.find("{"): text.rfind("}") + 1] if "{" in text else ""):
        if not candidate:
            continue
        try:
            data = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(data, dict):
            return data
    return None
