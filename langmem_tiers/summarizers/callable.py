"""A summarizer around any prompt -> text function (a framework LLM, a local model, a test double)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from langmem_tiers.errors import ConfigError, SummarizerError
from langmem_tiers.summarizers.base import (
    DEFAULT_COMPRESS_PROMPT,
    DEFAULT_SUMMARY_PROMPT,
    SummaryRequest,
    render_prompt,
)


class CallableSummarizer:
    """Renders the summary prompt and hands it to ``fn`` (and ``afn`` for async).

    Without ``afn``, :meth:`asummarize` runs ``fn`` in a worker thread so a blocking
    call does not stall the event loop.

    Example:
        >>> from langmem_tiers.messages import Message
        >>> s = CallableSummarizer(lambda prompt: "  User likes tea.  ")
        >>> s.summarize(SummaryRequest("", (Message("user", "I like tea"),), 100, len))
        'User likes tea.'

    With LangChain: ``CallableSummarizer(lambda p: llm.invoke(p).content,
    afn=lambda p: ...)`` (``invoke`` returns a message, not text).
    """

    def __init__(
        self,
        fn: Callable[[str], str],
        afn: Callable[[str], Awaitable[str]] | None = None,
        *,
        prompt: str = DEFAULT_SUMMARY_PROMPT,
        compress_prompt: str = DEFAULT_COMPRESS_PROMPT,
    ) -> None:
        if not callable(fn):
            raise ConfigError(f"fn must be a callable taking the prompt text and returning text, got {fn!r}")
        if afn is not None and not callable(afn):
            raise ConfigError(f"afn must be an async callable taking the prompt text or None, got {afn!r}")
        for name, template in (("prompt", prompt), ("compress_prompt", compress_prompt)):
            try:
                template.format(previous_summary="", turns="", max_tokens=0)
            except (KeyError, IndexError, ValueError) as e:
                raise ConfigError(
                    f"{name} must be a str.format template using only {{previous_summary}}, {{turns}} "
                    f"and {{max_tokens}} (double other braces), got an error: {type(e).__name__}: {e}"
                ) from e
        self.fn = fn
        self.afn = afn
        self.prompt = prompt
        self.compress_prompt = compress_prompt

    def __repr__(self) -> str:
        return f"CallableSummarizer({self.fn!r})"

    def summarize(self, request: SummaryRequest) -> str:
        """Return the new summary; raise :class:`SummarizerError` if ``fn`` fails or returns no text."""
        prompt = render_prompt(request, self.prompt, self.compress_prompt)
        try:
            result: Any = self.fn(prompt)
        except SummarizerError:
            raise
        except Exception as e:
            raise SummarizerError(f"summarizer function {self.fn!r} failed: {type(e).__name__}: {e}") from e
        return _check(result, self.fn)

    async def asummarize(self, request: SummaryRequest) -> str:
        """Async :meth:`summarize`: awaits ``afn``, or runs ``fn`` in a thread."""
        prompt = render_prompt(request, self.prompt, self.compress_prompt)
        target: Any = self.afn if self.afn is not None else self.fn
        try:
            if self.afn is not None:
                result: Any = await self.afn(prompt)
            else:
                result = await asyncio.to_thread(self.fn, prompt)
        except SummarizerError:
            raise
        except Exception as e:
            raise SummarizerError(f"summarizer function {target!r} failed: {type(e).__name__}: {e}") from e
        return _check(result, target)


def _check(result: Any, fn: Any) -> str:
    if not isinstance(result, str):
        raise SummarizerError(
            f"summarizer function {fn!r} returned {type(result).__name__}, not str: "
            "return the text (for a LangChain chat model: lambda p: llm.invoke(p).content)"
        )
    text = result.strip()
    if not text:
        raise SummarizerError(f"summarizer function {fn!r} returned empty text")
    return text
