"""The summarizer protocol and the prompts shared by LLM summarizers."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from langmem_tiers.messages import Message
from langmem_tiers.semantic.types import EXTRACTED_KINDS, ExtractedMemory

DEFAULT_SUMMARY_PROMPT = """You maintain the running summary of a long conversation between a user and an \
assistant. Older turns have scrolled out of the assistant's context window; your summary is all it will \
remember of them.

Current summary (may be empty):
<summary>
{previous_summary}
</summary>

Turns that just scrolled out, oldest first:
<turns>
{turns}
</turns>

Write the updated summary: keep every fact, decision, preference, name, number and date that could matter \
later, with who said it and when; drop small talk; do not invent anything. Use at most {max_tokens} tokens. \
Reply with the summary text only."""

DEFAULT_COMPRESS_PROMPT = """Shorten this conversation summary to at most {max_tokens} tokens. Keep facts, \
decisions, preferences, names, numbers and dates; drop the least important details first. Reply with the \
summary text only.

<summary>
{previous_summary}
</summary>"""


# Appended to the summary prompt when the memory asks for extraction (``SummaryRequest.extract``):
# the same call returns the summary and the user's memories, so extraction costs no extra call.
DEFAULT_EXTRACT_INSTRUCTIONS = """Also extract memories worth keeping about the user from the turns above (not \
from the previous summary): stable facts (identity, home, work, possessions, people in their life), \
preferences, events and plans with their dates, skills. For each: "text" (one self-contained sentence), \
"kind" (one of {kinds}), "key" (a short snake_case name of what it is the value of, e.g. "home_city", \
"favorite_food", "employer", the same name each time the same thing comes up, so a new value replaces the \
old; null for events and one-off facts), "subject", "relation" and "object" (a triple, or null each), \
"confidence" (0 to 1) and "message_ids" (the [#id] numbers of the turns it comes from). Only what the user \
stated; nothing invented; an empty list when there is nothing.

Reply with a JSON object only: {{"summary": "<the updated summary>", "memories": [...]}}"""


@dataclass(frozen=True)
class SummaryResult:
    """A summary with the memories extracted in the same call.

    A summarizer may return this instead of the text when ``request.extract`` is set.
    ``extraction_error`` says why extraction failed while the summary stands (the memory
    then falls back to the offline extractor: a failed extraction loses nothing).
    """

    text: str
    memories: tuple[ExtractedMemory, ...] = ()
    extraction_error: str | None = None

    def __str__(self) -> str:
        # A wrapper written for text-only summarizers (``str(inner.summarize(r))``) keeps a
        # correct summary; only the memories are lost, and the memory extracts offline then.
        return self.text


@dataclass(frozen=True)
class SummaryRequest:
    """What one summarizer call receives.

    ``messages`` are the newly evicted turns only: the previous summary already
    covers everything before them. When ``compress`` is true there are no new
    messages and the summarizer must shorten ``previous_summary`` to ``max_tokens``.
    ``count_tokens`` measures text with the memory's own tokenizer. When ``extract`` is
    true the memory also wants the user's facts and preferences found in ``messages``: a
    summarizer that can, returns a :class:`SummaryResult`; one that returns text is fine
    too (the memory extracts offline then).
    """

    previous_summary: str
    messages: tuple[Message, ...]
    max_tokens: int
    count_tokens: Callable[[str], int]
    compress: bool = False
    extract: bool = False

    @property
    def wants_memories(self) -> bool:
        """Extraction applies to new turns only, never to a compression request."""
        return self.extract and not self.compress and bool(self.messages)


@runtime_checkable
class Summarizer(Protocol):
    """Folds evicted turns into the running summary. Raise on failure; never return partial text.

    Return the text, or a :class:`SummaryResult` (the text and extracted memories) when
    ``request.extract`` is set.
    """

    def summarize(self, request: SummaryRequest) -> str | SummaryResult:
        """The new summary of ``request.previous_summary`` and ``request.messages``."""
        ...

    async def asummarize(self, request: SummaryRequest) -> str | SummaryResult:
        """Async :meth:`summarize`."""
        ...


def format_turns(messages: Sequence[Message], with_ids: bool = False) -> str:
    """Render messages as dated, speaker-labelled lines for a prompt (``[#id]`` first with ``with_ids``)."""
    import datetime as dt

    lines = []
    for m in messages:
        when = ""
        if m.created_at is not None:
            when = dt.datetime.fromtimestamp(m.created_at, dt.timezone.utc).strftime("[%Y-%m-%d %H:%M] ")
        speaker = m.name or m.role
        if m.role == "tool":
            speaker = f"tool result ({m.name or m.tool_call_id})"
        ref = f"[#{m.id}] " if with_ids and m.id is not None else ""
        lines.append(f"{ref}{when}{speaker}: {m.text}")
    return "\n".join(lines)


def render_prompt(request: SummaryRequest, prompt: str = DEFAULT_SUMMARY_PROMPT,
                  compress_prompt: str = DEFAULT_COMPRESS_PROMPT, *, extract: bool = False,
                  extract_instructions: str = DEFAULT_EXTRACT_INSTRUCTIONS) -> str:
    """The user prompt an LLM summarizer sends for ``request``.

    With ``extract`` (a summarizer that can return memories) and a request that wants them,
    the turns carry their ``[#id]`` and the extraction instructions follow the summary prompt.
    """
    template = compress_prompt if request.compress else prompt
    memories = extract and request.wants_memories
    text = template.format(
        previous_summary=request.previous_summary,
        turns=format_turns(request.messages, with_ids=memories),
        max_tokens=request.max_tokens,
    )
    if memories:
        text = text.replace("Reply with the summary text only.", "").rstrip()
        text += "\n\n" + extract_instructions.format(kinds=", ".join(EXTRACTED_KINDS))
    return text
