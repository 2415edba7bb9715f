"""A summarizer that calls an OpenAI-compatible chat-completions endpoint.

Needs the ``openai`` extra: ``pip install 'langmem-tiers[openai]'``. Works with any
server speaking the OpenAI protocol (vLLM, Ollama, LiteLLM, Azure via ``client=``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any, Literal

from langmem_tiers.errors import ConfigError, SummarizerError, require
from langmem_tiers.openai_clients import OpenAIClients
from langmem_tiers.semantic.parse import JSON_SCHEMA, parse_reply
from langmem_tiers.summarizers.base import (
    DEFAULT_COMPRESS_PROMPT,
    DEFAULT_EXTRACT_INSTRUCTIONS,
    DEFAULT_SUMMARY_PROMPT,
    SummaryRequest,
    SummaryResult,
    render_prompt,
)

log = logging.getLogger(__name__)

DEFAULT_SYSTEM_PROMPT = "You write faithful, compact summaries of conversations."

DEFAULT_MODEL = "gpt-4o-mini"

# The memory counts tokens with its own tokenizer, which may not be the model's: the
# completion cap gets this much headroom so a summary that fits is never cut off.
_MAX_TOKENS_SLACK = 1.25
_MAX_TOKENS_EXTRA = 32
# Room for the extracted memories beside the summary in one structured reply.
EXTRACTION_TOKENS = 800

StructuredOutput = Literal["json_schema", "json_object"]


class OpenAISummarizer:
    """Summarizes with one chat-completions call per request.

    When the memory asks for extraction (``request.extract``), the same single call returns
    the summary and the memories as JSON: ``structured_output="json_schema"`` (default;
    OpenAI and servers with structured outputs) constrains the reply to
    :data:`~langmem_tiers.semantic.parse.JSON_SCHEMA`, ``"json_object"`` only asks for JSON
    (older servers). Either way the reply is parsed robustly: a reply without usable
    memories still gives the summary (the memory then extracts offline).

    ``client`` / ``async_client`` are used as given (their own timeout and retries
    apply); otherwise clients are built on first use from ``base_url``, ``api_key``,
    ``timeout`` and ``max_retries``. Retries default to 0 because a failed summary is
    harmless: the turns stay pending and the memory tries again later.

    Example:
        >>> s = OpenAISummarizer("gpt-4o-mini", api_key="sk-test", base_url="http://127.0.0.1:9/v1")
        >>> s.model
        'gpt-4o-mini'
    """

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        client: Any | None = None,
        async_client: Any | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 30.0,
        max_retries: int = 0,
        temperature: float = 0.0,
        prompt: str = DEFAULT_SUMMARY_PROMPT,
        compress_prompt: str = DEFAULT_COMPRESS_PROMPT,
        system_prompt: str = DEFAULT_SYSTEM_PROMPT,
        structured_output: StructuredOutput = "json_schema",
        extract_instructions: str = DEFAULT_EXTRACT_INSTRUCTIONS,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigError(f"model must be a non-empty model name, got {model!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise ConfigError(f"timeout must be a positive number of seconds, got {timeout!r}")
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ConfigError(f"max_retries must be an integer >= 0, got {max_retries!r}")
        if not isinstance(temperature, int | float) or not 0.0 <= temperature <= 2.0:
            raise ConfigError(f"temperature must be between 0 and 2, got {temperature!r}")
        _check_template("prompt", prompt)
        _check_template("compress_prompt", compress_prompt)
        if structured_output not in ("json_schema", "json_object"):
            raise ConfigError(f"structured_output ({structured_output!r}) must be 'json_schema' or 'json_object'")
        if client is None or async_client is None:
            # Fail at construction, not at the first summary, when the extra is missing.
            require("openai", "openai")
            if api_key is None and not os.environ.get("OPENAI_API_KEY"):
                raise ConfigError(
                    "OpenAISummarizer needs an API key: pass api_key=..., set OPENAI_API_KEY, "
                    "or pass client= and async_client="
                )
        self.model = model
        self.temperature = float(temperature)
        self.prompt = prompt
        self.compress_prompt = compress_prompt
        self.system_prompt = system_prompt
        self.structured_output = structured_output
        self.extract_instructions = extract_instructions
        self._clients = OpenAIClients(client=client, async_client=async_client, base_url=base_url,
                                      api_key=api_key, timeout=timeout, max_retries=max_retries)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **kwargs: Any) -> OpenAISummarizer | None:
        """Build from ``OPENAI_API_KEY``, ``OPENAI_BASE_URL`` and ``OPENAI_MODEL``; None without a key.

        ``environ`` defaults to ``os.environ``; ``kwargs`` go to the constructor.
        """
        env = os.environ if environ is None else environ
        api_key = env.get("OPENAI_API_KEY")
        if not api_key:
            return None
        kwargs.setdefault("base_url", env.get("OPENAI_BASE_URL") or None)
        return cls(env.get("OPENAI_MODEL") or DEFAULT_MODEL, api_key=api_key, **kwargs)

    def __repr__(self) -> str:
        return f"OpenAISummarizer(model={self.model!r})"

    # -- no I/O: what to send and how to read the answer

    def _params(self, request: SummaryRequest) -> dict[str, Any]:
        user = render_prompt(request, self.prompt, self.compress_prompt, extract=True,
                             extract_instructions=self.extract_instructions)
        params: dict[str, Any] = {
            "model": self.model,
            "messages": [
                {"role": "system", "content": self.system_prompt},
                {"role": "user", "content": user},
            ],
            "temperature": self.temperature,
            "max_tokens": int(request.max_tokens * _MAX_TOKENS_SLACK) + _MAX_TOKENS_EXTRA,
        }
        if request.wants_memories:
            params["max_tokens"] += EXTRACTION_TOKENS
            params["response_format"] = {"type": "json_schema", "json_schema": JSON_SCHEMA} \
                if self.structured_output == "json_schema" else {"type": "json_object"}
        return params

    def _result(self, response: Any, request: SummaryRequest) -> str | SummaryResult:
        if not request.wants_memories:
            return self._text(response)
        cut = _finish_reason(response) == "length"
        text = self._text(response, allow_cut=True)
        parsed = parse_reply(text, [m.id for m in request.messages if m.id is not None])
        if parsed.summary is None:
            raise SummarizerError(
                f"OpenAI summarizer ({self.model}) reply has no usable summary"
                f"{' (cut at max_tokens)' if cut else ''}: {'; '.join(parsed.problems)}"
            )
        if cut and not text.rstrip().endswith("}"):
            # The summary field was whole; the memories after it were cut off.
            return SummaryResult(parsed.summary, (), "reply cut at max_tokens: memories lost, summary kept")
        if parsed.problems:
            log.info("OpenAI summarizer (%s) extraction: %s", self.model, "; ".join(parsed.problems))
        error = "; ".join(parsed.problems) if parsed.problems and not parsed.memories else None
        return SummaryResult(parsed.summary, parsed.memories, error)

    def _text(self, response: Any, allow_cut: bool = False) -> str:
        try:
            choice = response.choices[0]
            finish_reason = choice.finish_reason
            content = choice.message.content
            refusal = getattr(choice.message, "refusal", None)
        except (AttributeError, IndexError, TypeError, KeyError) as e:
            raise SummarizerError(
                f"OpenAI summarizer ({self.model}) got a malformed response: {type(e).__name__}: {e}"
            ) from e
        if refusal:
            raise SummarizerError(f"OpenAI summarizer ({self.model}) refused: {refusal}")
        if not isinstance(content, str):
            raise SummarizerError(
                f"OpenAI summarizer ({self.model}) got a non-text reply "
                f"(content={content!r}, finish_reason={finish_reason!r})"
            )
        if finish_reason == "length" and not allow_cut:
            # A summary cut at max_tokens loses its tail silently: refuse it.
            raise SummarizerError(
                f"OpenAI summarizer ({self.model}) reply was cut at max_tokens (finish_reason='length')"
            )
        text = content.strip()
        if not text:
            raise SummarizerError(f"OpenAI summarizer ({self.model}) got an empty reply")
        return text

    def _failure(self, e: Exception) -> SummarizerError:
        return SummarizerError(f"OpenAI summarizer ({self.model}) failed: {type(e).__name__}: {e}")

    # -- the I/O shells

    def summarize(self, request: SummaryRequest) -> str | SummaryResult:
        """Return the new summary text (with memories when asked); raise :class:`SummarizerError` on any failure."""
        params = self._params(request)
        try:
            response = self._clients.sync().chat.completions.create(**params)
        except Exception as e:  # openai errors, and JSON errors from a broken proxy
            raise self._failure(e) from e
        return self._result(response, request)

    async def asummarize(self, request: SummaryRequest) -> str | SummaryResult:
        """Async :meth:`summarize`."""
        params = self._params(request)
        try:
            response = await self._clients.async_().chat.completions.create(**params)
        except Exception as e:
            raise self._failure(e) from e
        return self._result(response, request)

    def close(self) -> None:
        """Close the sync HTTP client built here (injected clients are left open)."""
        self._clients.close()

    async def aclose(self) -> None:
        """Close both HTTP clients built here; call from the event loop that used the async one."""
        await self._clients.aclose()


def _finish_reason(response: Any) -> Any:
    try:
        return response.choices[0].finish_reason
    except (AttributeError, IndexError, TypeError, KeyError):
        return None


def _check_template(name: str, template: str) -> None:
    try:
        template.format(previous_summary="", turns="", max_tokens=0)
    except (KeyError, IndexError, ValueError) as e:
        raise ConfigError(
            f"{name} must be a str.format template using only {{previous_summary}}, {{turns}} and "
            f"{{max_tokens}} (double other braces), got an error: {type(e).__name__}: {e}"
        ) from e
