"""Summarizers: the :class:`Summarizer` protocol, its implementations and the prompts LLM summarizers share.

* :class:`ExtractiveSummarizer`: deterministic and offline, the default.
* :class:`CallableSummarizer`: any ``prompt -> text`` function (a framework's LLM, a local model).
* :class:`StructuredSummarizer`: a callable summarizer whose model can also answer in the
  summary-with-memories shape (:data:`REPLY_SCHEMA`), so extraction costs no extra call; the LangChain
  and LlamaIndex adapters build on it.
* ``OpenAISummarizer``: an OpenAI-compatible chat-completions endpoint (the ``openai`` extra; imported
  on first use, so importing this package stays cheap).

The prompts are ``str.format`` templates, overridable by each summarizer's parameters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from langmem_tiers.summarizers import base as _base
from langmem_tiers.summarizers import structured as _structured
from langmem_tiers.summarizers.base import Summarizer, SummaryRequest, SummaryResult
from langmem_tiers.summarizers.callable import CallableSummarizer
from langmem_tiers.summarizers.extractive import ExtractiveSummarizer
from langmem_tiers.summarizers.structured import StructuredSummarizer

if TYPE_CHECKING:
    from langmem_tiers.summarizers.openai import OpenAISummarizer

__all__ = ["DEFAULT_COMPRESS_PROMPT", "DEFAULT_EXTRACT_INSTRUCTIONS", "DEFAULT_SUMMARY_PROMPT", "REPLY_SCHEMA",
           "CallableSummarizer", "ExtractiveSummarizer", "OpenAISummarizer", "StructuredSummarizer", "Summarizer",
           "SummaryRequest", "SummaryResult"]

DEFAULT_SUMMARY_PROMPT: Final[str] = _base.DEFAULT_SUMMARY_PROMPT
"""The rolling-summary prompt; fields ``{previous_summary}``, ``{turns}`` and ``{max_tokens}``."""

DEFAULT_COMPRESS_PROMPT: Final[str] = _base.DEFAULT_COMPRESS_PROMPT
"""The prompt that shortens a summary over its cap; fields ``{previous_summary}`` and ``{max_tokens}``."""

DEFAULT_EXTRACT_INSTRUCTIONS: Final[str] = _base.DEFAULT_EXTRACT_INSTRUCTIONS
"""Appended to the summary prompt when the memory asks for extraction (field ``{kinds}``): the same call
returns the summary and the user's memories as JSON."""

REPLY_SCHEMA: Final[dict[str, Any]] = _structured.REPLY_SCHEMA
"""The JSON schema of a summary-with-memories reply (``{"summary": ..., "memories": [...]}``), with the title
and description tool-calling APIs want (e.g. LangChain's ``with_structured_output``)."""


def __getattr__(name: str) -> Any:
    # Lazy so that importing the package never needs the openai extra.
    if name == "OpenAISummarizer":
        from langmem_tiers.summarizers.openai import OpenAISummarizer

        return OpenAISummarizer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
