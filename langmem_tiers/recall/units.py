"""What gets indexed for recall: evicted turns, cut into embeddable chunks. Pure, no I/O.

The unit is the whole turn (a user message with the replies and tool results
that follow it): a question and its answer are recalled together, which is what
a later question needs. A turn longer than ``max_chunk_words`` is split into
overlapping chunks (all-MiniLM-L6-v2 reads at most 256 word pieces), each a
record with the same provenance.
"""

from __future__ import annotations

from collections.abc import Sequence

from langmem_tiers.journal.base import NewRecord
from langmem_tiers.messages import Message

MAX_CHUNK_WORDS = 150
CHUNK_OVERLAP_WORDS = 30


def message_line(m: Message) -> str:
    speaker = m.name or m.role
    if m.role == "tool":
        speaker = f"tool {m.name or m.tool_call_id}"
    return f"{speaker}: {m.text}"


def turn_records(turn: Sequence[Message], unit: str = "turn",
                 max_chunk_words: int = MAX_CHUNK_WORDS) -> list[NewRecord]:
    """Records for one evicted turn: one per chunk of the turn (or per message when ``unit='message'``)."""
    groups = [[m] for m in turn] if unit == "message" else [list(turn)]
    records = []
    for group in groups:
        text = "\n".join(message_line(m) for m in group if m.text.strip())
        if not text:
            continue
        ids = tuple(m.id for m in group if m.id is not None)
        created = min((m.created_at for m in group if m.created_at is not None), default=0.0)
        for chunk in chunk_words(text, max_chunk_words):
            records.append(NewRecord(kind="turn", text=chunk, message_ids=ids, created_at=created))
    return records


def chunk_words(text: str, max_words: int, overlap: int = CHUNK_OVERLAP_WORDS) -> list[str]:
    """Split text into chunks of at most ``max_words`` words with ``overlap`` words shared."""
    words = text.split(" ")
    if len(words) <= max_words:
        return [text]
    step = max(max_words - overlap, 1)
    return [" ".join(words[i:i + max_words]) for i in range(0, max(len(words) - overlap, 1), step)]
