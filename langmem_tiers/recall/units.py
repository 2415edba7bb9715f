"""What gets indexed for recall: every completed turn, cut into embeddable chunks. Pure, no I/O.

A turn becomes a record as soon as it is answered (its last message is an assistant
reply without tool calls) or closed by the next user message, not when it is evicted:
a short conversation that never overflowed its window is recallable from the user's
next session. A record never repeats what the window holds, because recall excludes
the window's message ids.

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
    records: list[NewRecord] = []
    for group in groups:
        text = "\n".join(message_line(m) for m in group if m.text.strip())
        if not text:
            continue
        ids = tuple(m.id for m in group if m.id is not None)
        created = min((m.created_at for m in group if m.created_at is not None), default=0.0)
        records.extend(NewRecord(kind="turn", text=chunk, message_ids=ids, created_at=created)
                       for chunk in chunk_words(text, max_chunk_words))
    return records


def answers(m: Message) -> bool:
    """An assistant reply that ends a turn (no tool call is waiting for a result)."""
    return m.role == "assistant" and not m.tool_calls


def completed_turn_records(open_turn: Sequence[Message], batch: Sequence[Message],
                           unit: str = "turn") -> list[NewRecord]:
    """Records for the turns that ``batch`` answers or closes.

    Args:
        open_turn: the session's current turn before ``batch`` (its user message and the
            replies so far), already stored.
        batch: the messages just stored, in order.

    A turn gets its record when it is answered or when the next user message closes it,
    once: a turn answered in an earlier batch and closed now is not indexed again. When a
    turn grows after it was answered (a second reply), the grown turn gets a record too;
    recall keeps one hit per turn (overlapping provenance), so the earlier one never
    crowds it out.

    Example:
        >>> u, a = Message("user", "hi", id=1), Message("assistant", "hello", id=2)
        >>> [r.message_ids for r in completed_turn_records([], [u, a])]
        [(1, 2)]
    """
    if unit == "message":
        return [r for m in batch for r in turn_records([m], unit="message")]
    new = {id(m) for m in batch}
    turns: list[list[Message]] = []
    for m in [*open_turn, *batch]:
        if m.role == "user" or not turns:
            turns.append([m])
        else:
            turns[-1].append(m)
    records: list[NewRecord] = []
    for index, turn in enumerate(turns):
        closed = index < len(turns) - 1
        if not any(id(m) in new for m in turn):
            if closed and not answers(turn[-1]):
                records += turn_records(turn)  # closed now, never answered: index it whole
            continue  # answered in an earlier batch: its record already covers it whole
        if closed or answers(turn[-1]):
            records += turn_records(turn)
    return records


def chunk_words(text: str, max_words: int, overlap: int = CHUNK_OVERLAP_WORDS) -> list[str]:
    """Split text into chunks of at most ``max_words`` words with ``overlap`` words shared."""
    words = text.split(" ")
    if len(words) <= max_words:
        return [text]
    step = max(max_words - overlap, 1)
    return [" ".join(words[i:i + max_words]) for i in range(0, max(len(words) - overlap, 1), step)]
