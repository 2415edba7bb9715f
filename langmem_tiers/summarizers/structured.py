"""Summary-with-memories for framework adapters whose models return structured output.

LangChain's ``with_structured_output`` and LlamaIndex's ``structured_predict`` hand back a
dict or a pydantic object; :func:`summary_result` reads either (or raw text) with the same
robust rules as the OpenAI summarizer (:mod:`langmem_tiers.semantic.parse`), and
:class:`StructuredSummarizer` is the shared shell: one structured call when the request
wants memories; if the model cannot answer in that shape, one plain summary call instead,
so extraction never blocks the summary (the memory then extracts offline).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from langmem_tiers.errors import SummarizerError
from langmem_tiers.semantic.parse import JSON_SCHEMA, parse_memories, parse_reply
from langmem_tiers.summarizers.base import (
    DEFAULT_COMPRESS_PROMPT,
    DEFAULT_EXTRACT_INSTRUCTIONS,
    DEFAULT_SUMMARY_PROMPT,
    SummaryRequest,
    SummaryResult,
    render_prompt,
)
from langmem_tiers.summarizers.callable import CallableSummarizer

log = logging.getLogger(__name__)

# After this many structured replies in a row that could not be read, the model is taken as
# unable to answer in shape: summaries go plain (one call each, the memory extracts offline)
# instead of paying a failed call and a plain one every time. Any success resets the count.
MAX_STRUCTURED_FAILURES = 3

# The JSON schema of the reply, with the title and description tool-calling APIs want.
REPLY_SCHEMA: dict[str, Any] = {
    "title": JSON_SCHEMA["name"],
    "description": "The updated conversation summary and the memories extracted from the new turns.",
    **JSON_SCHEMA["schema"],
}


def summary_result(payload: Any, request: SummaryRequest) -> SummaryResult:
    """Read a structured reply (dict, pydantic object or JSON text) into a :class:`SummaryResult`.

    Raises:
        SummarizerError: the reply holds no usable summary (the turns stay pending).
    """
    ids = [m.id for m in request.messages if m.id is not None]
    if hasattr(payload, "model_dump"):
        payload = payload.model_dump()
    if isinstance(payload, str):
        parsed = parse_reply(payload, ids)
        summary, memories, problems = parsed.summary, list(parsed.memories), list(parsed.problems)
    elif isinstance(payload, dict):
        raw = payload.get("summary")
        summary = raw.strip() if isinstance(raw, str) and raw.strip() else None
        memories, problems = parse_memories(payload.get("memories"), ids)
    else:
        raise SummarizerError(f"structured summary reply is a {type(payload).__name__}, not an object")
    if summary is None:
        raise SummarizerError(f"structured summary reply has no usable summary: {payload!r:.120}")
    if problems:
        log.info("structured extraction: %s", "; ".join(problems))
    error = "; ".join(problems) if problems and not memories else None
    return SummaryResult(summary, tuple(memories), error)


class StructuredSummarizer(CallableSummarizer):
    """A :class:`CallableSummarizer` whose model can also answer in the summary-with-memories shape.

    ``structured(prompt)`` / ``astructured(prompt)`` return the structured reply; ``fn`` /
    ``afn`` return plain text (summaries without extraction, compression, and the fallback).
    """

    def __init__(self, fn: Callable[[str], str], afn: Callable[[str], Awaitable[str]] | None,
                 structured: Callable[[str], Any], astructured: Callable[[str], Awaitable[Any]], *,
                 prompt: str = DEFAULT_SUMMARY_PROMPT, compress_prompt: str = DEFAULT_COMPRESS_PROMPT,
                 extract_instructions: str = DEFAULT_EXTRACT_INSTRUCTIONS) -> None:
        super().__init__(fn, afn, prompt=prompt, compress_prompt=compress_prompt)
        self.structured = structured
        self.astructured = astructured
        self.extract_instructions = extract_instructions
        self.structured_failures = 0

    def _structured_prompt(self, request: SummaryRequest) -> str:
        return render_prompt(request, self.prompt, self.compress_prompt, extract=True,
                             extract_instructions=self.extract_instructions)

    def _use_structured(self, request: SummaryRequest) -> bool:
        return request.wants_memories and self.structured_failures < MAX_STRUCTURED_FAILURES

    def _failed(self, e: Exception) -> str:
        self.structured_failures += 1
        log.warning("structured summary failed (%d in a row), summarizing without extraction: %s: %s",
                    self.structured_failures, type(e).__name__, e)
        return f"{type(e).__name__}: {e}"

    def summarize(self, request: SummaryRequest) -> str | SummaryResult:  # type: ignore[override]
        """Summary and memories in one structured call when memories are wanted.

        When the model cannot answer in that shape, one plain summary call instead (the error kept on the result).
        """
        if not self._use_structured(request):
            return super().summarize(request)
        try:
            result = summary_result(self.structured(self._structured_prompt(request)), request)
        except Exception as e:  # the model cannot answer in shape: one plain summary call instead
            return SummaryResult(super().summarize(request), (), self._failed(e))
        self.structured_failures = 0
        return result

    async def asummarize(self, request: SummaryRequest) -> str | SummaryResult:  # type: ignore[override]
        """Async :meth:`summarize`."""
        if not self._use_structured(request):
            return await super().asummarize(request)
        try:
            result = summary_result(await self.astructured(self._structured_prompt(request)), request)
        except Exception as e:
            return SummaryResult(await super().asummarize(request), (), self._failed(e))
        self.structured_failures = 0
        return result
