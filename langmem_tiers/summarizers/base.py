"""The summarizer protocol and the prompts shared by LLM summarizers."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from langmem_tiers.messages import Message

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


@dataclass(frozen=True)
class SummaryRequest:
    """What one summarizer call receives.

    ``messages`` are the newly evicted turns only: the previous summary already
    covers everything before them. When ``compress`` is true there are no new
    messages and the summarizer must shorten ``previous_summary`` to ``max_tokens``.
    ``count_tokens`` measures text with the memory's own tokenizer.
    """

    previous_summary: str
    messages: tuple[Message, ...]
    max_tokens: int
    count_tokens: Callable[[str], int]
    compress: bool = False


@runtime_checkable
class Summarizer(Protocol):
    """Folds evicted turns into the running summary. Raise on failure; never return partial text."""

    def summarize(self, request: SummaryRequest) -> str: ...

    async def asummarize(self, request: SummaryRequest) -> str: ...


def format_turns(messages: Sequence[Message]) -> str:
    """Render messages as dated, speaker-labelled lines for a prompt."""
    import datetime as dt

    lines = []
    for m in messages:
        when = ""
        if m.created_at is not None:
            when = dt.datetime.fromtimestamp(m.created_at, dt.timezone.utc).strftime("[%Y-%m-%d %H:%M] ")
        speaker = m.name or m.role
        if m.role == "tool":
            speaker = f"tool result ({m.name or m.tool_call_id})"
        lines.append(f"{when}{speaker}: {m.text}")
    return "\n".join(lines)


def render_prompt(request: SummaryRequest, prompt: str = DEFAULT_SUMMARY_PROMPT,
                  compress_prompt: str = DEFAULT_COMPRESS_PROMPT) -> str:
    """The user prompt an LLM summarizer sends for ``request``."""
    template = compress_prompt if request.compress else prompt
    return template.format(
        previous_summary=request.previous_summary,
        turns=format_turns(request.messages),
        max_tokens=request.max_tokens,
    )
