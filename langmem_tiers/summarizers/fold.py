"""Folding evicted turns into the rolling summary, as a generator of summarizer requests.

The flow is written once; a sync driver answers each :class:`SummaryRequest` with
``summarizer.summarize`` and an async driver with ``await summarizer.asummarize``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass

from langmem_tiers.errors import SummarizerError
from langmem_tiers.messages import Message
from langmem_tiers.semantic.types import ExtractedMemory
from langmem_tiers.summarizers.base import SummaryRequest, SummaryResult

log = logging.getLogger(__name__)

COMPRESS_ATTEMPTS = 2


def chunk_pending(messages: Sequence[Message], tokens: Sequence[int], max_tokens: int) -> list[list[Message]]:
    """Split pending messages into summarizer inputs of at most ``max_tokens`` (a message is never split)."""
    chunks: list[list[Message]] = []
    size = 0
    for message, count in zip(messages, tokens):
        if chunks and size + count <= max_tokens:
            chunks[-1].append(message)
            size += count
        else:
            chunks.append([message])
            size = count
    return chunks


@dataclass(frozen=True)
class Folded:
    """A chunk folded into the summary, with what the summarizer extracted from it.

    ``extracted`` is None when the summarizer returned text only or its extraction failed
    (``extraction_error`` says why): the memory then extracts offline.
    """

    text: str
    extracted: tuple[ExtractedMemory, ...] | None = None
    extraction_error: str | None = None


def fold_chunk(
    previous: str, chunk: Sequence[Message], cap: int, count: Callable[[str], int], extract: bool = False,
) -> Generator[SummaryRequest, object, Folded]:
    """Fold one chunk of evicted messages into ``previous``; returns the new summary within ``cap``.

    With ``extract`` the first request asks for memories too (same call: no extra LLM call);
    compression requests never do.
    """
    reply = yield SummaryRequest(previous, tuple(chunk), cap, count, extract=extract)
    extracted: tuple[ExtractedMemory, ...] | None = None
    error: str | None = None
    if isinstance(reply, SummaryResult):
        extracted, error = (reply.memories, None) if reply.extraction_error is None else (None, reply.extraction_error)
        if not isinstance(extracted, tuple | type(None)) or \
                (extracted is not None and not all(isinstance(m, ExtractedMemory) for m in extracted)):
            extracted, error = None, "summarizer returned memories that are not ExtractedMemory"
    text = _usable(reply)
    for _ in range(COMPRESS_ATTEMPTS):
        if count(text) <= cap:
            return Folded(text, extracted, error)
        log.info("summary has %d tokens, over the cap of %d: asking to compress", count(text), cap)
        text = _usable((yield SummaryRequest(text, (), cap, count, compress=True)))
    if count(text) <= cap:
        return Folded(text, extracted, error)
    log.warning("summarizer kept overshooting the cap of %d tokens; trimming at a sentence boundary", cap)
    return Folded(trim_to_tokens(text, cap, count), extracted, error)


def _usable(reply: object) -> str:
    text = reply.text if isinstance(reply, SummaryResult) else reply
    if not isinstance(text, str) or not text.strip():
        raise SummarizerError(f"summarizer returned no usable text: {text!r:.80}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise SummarizerError(f"summarizer returned text that is not valid unicode: {e}") from e
    if "\x00" in text:
        raise SummarizerError("summarizer returned text with a NUL byte")
    return text.strip()


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def trim_to_tokens(text: str, cap: int, count: Callable[[str], int]) -> str:
    """The longest prefix of whole sentences (or words, for one long sentence) within ``cap`` tokens."""
    pieces = [p for p in _SENTENCE_END.split(text) if p.strip()]
    kept: list[str] = []
    for piece in pieces:
        if count("\n".join([*kept, piece])) > cap:
            break
        kept.append(piece)
    if kept:
        return "\n".join(kept)
    words = text.split()
    lo, hi = 0, len(words)
    while lo < hi:  # binary search on the word count that fits
        mid = (lo + hi + 1) // 2
        if count(" ".join(words[:mid])) <= cap:
            lo = mid
        else:
            hi = mid - 1
    return " ".join(words[:lo])
