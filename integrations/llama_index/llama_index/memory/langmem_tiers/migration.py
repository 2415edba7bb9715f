"""The arguments of LlamaIndex's own memories, mapped onto langmem-tiers or refused by name.

``ChatMemoryBuffer.from_defaults`` / ``ChatSummaryMemoryBuffer.from_defaults`` /
``Memory.from_defaults`` calls move to ``TieredChatMemory.from_defaults`` with
their budget arguments kept:

- ``token_limit``: the whole context budget (``MemoryConfig.context_tokens``); the
  window, summary and recall shares keep the config's proportions.
- ``llm`` without ``token_limit`` or ``config``: the budget is 3/4 of the LLM's
  context window, ChatMemoryBuffer's rule (the LLM also writes the summaries, as in
  ChatSummaryMemoryBuffer).
- ``chat_history_token_ratio`` (Memory): the window's share of ``token_limit``.
- ``token_flush_size`` (Memory): how much is evicted at once when the window
  overflows (``window_low_ratio = 1 - token_flush_size / window_tokens``).
- ``chat_store_key`` (ChatMemoryBuffer): the conversation's key, i.e. ``session_id``.

The rest name a storage, tokenizer or template this memory does not use; they are
refused with the reason and what to use instead, never silently ignored.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional

from langmem_tiers import MemoryConfig
from langmem_tiers.errors import ConfigError

# ChatMemoryBuffer / ChatSummaryMemoryBuffer size their budget to this share of the LLM's context window.
LLM_CONTEXT_SHARE = 0.75

_STORAGE = ("the conversation lives in the journal at path= (a folder, or a postgresql:// URL for a shared "
            "server)")
_REFUSED: Dict[str, str] = {
    "chat_store": _STORAGE,
    "table_name": _STORAGE,
    "async_database_uri": _STORAGE,
    "async_engine": _STORAGE,
    "db_schema": _STORAGE,
    "tokenizer_fn": "tokens are counted exactly with tiktoken: pick the encoding with "
                    "MemoryConfig(model=...) or MemoryConfig(encoding=...)",
    "memory_blocks": "TieredChatMemory is the long-term memory itself; to combine it with other blocks, "
                     "put TieredMemoryBlock in LlamaIndex's Memory",
    "memory_blocks_template": "the memory text is placed by insert_method= ('user' or 'system')",
    "image_token_size_estimate": "images are counted by the tiktoken counter's own rules",
    "audio_token_size_estimate": "media parts are counted by the tiktoken counter's own rules",
    "video_token_size_estimate": "media parts are counted by the tiktoken counter's own rules",
    "summarize_prompt": "give the LLM with llm=; its prompt is langmem-tiers' rolling-summary prompt",
    "count_initial_tokens": "the budget always counts every message it returns",
}


def refuse_unknown(kwargs: Dict[str, Any]) -> None:
    """Raise a ConfigError naming every argument ``from_defaults`` does not take, with the reason."""
    if not kwargs:
        return
    reasons = [f"{name}: {_REFUSED.get(name, 'not an argument of TieredChatMemory.from_defaults')}"
               for name in sorted(kwargs)]
    raise ConfigError("TieredChatMemory.from_defaults does not take " + "; ".join(reasons))


def session_key(session_id: Optional[str], chat_store_key: Optional[str]) -> Optional[str]:
    """``session_id``, or ChatMemoryBuffer's ``chat_store_key`` naming the same thing."""
    if chat_store_key is None:
        return session_id
    if session_id is not None and session_id != chat_store_key:
        raise ConfigError(f"session_id ({session_id!r}) and chat_store_key ({chat_store_key!r}) both name the "
                          "conversation: give one of them")
    return chat_store_key


def budget_config(config: Optional[MemoryConfig], *, token_limit: Optional[int] = None, llm: Any = None,
                  chat_history_token_ratio: Optional[float] = None,
                  token_flush_size: Optional[int] = None) -> Optional[MemoryConfig]:
    """``config`` with the LlamaIndex budget arguments applied (``None`` when there are none)."""
    given: Dict[str, Any] = {name: value for name, value in (("token_limit", token_limit),
                                             ("chat_history_token_ratio", chat_history_token_ratio),
                                             ("token_flush_size", token_flush_size)) if value is not None}
    if token_limit is None and config is None and llm is not None:
        window = getattr(getattr(llm, "metadata", None), "context_window", None)
        if isinstance(window, int) and window > 0:
            token_limit = int(window * LLM_CONTEXT_SHARE)
            given["token_limit"] = f"{token_limit} (3/4 of the llm's context window {window})"
    if not given:
        return config
    base = config or MemoryConfig()
    changes: Dict[str, Any] = {}
    if token_limit is not None:
        _whole("token_limit", token_limit)
        scale = token_limit / base.context_tokens
        changes.update(context_tokens=token_limit, window_tokens=max(int(base.window_tokens * scale), 1),
                       summary_tokens=max(int(base.summary_tokens * scale), 1),
                       recall_tokens=int(base.recall_tokens * scale))
    limit = changes.get("context_tokens", base.context_tokens)
    if chat_history_token_ratio is not None:
        ratio = chat_history_token_ratio
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 < ratio <= 1:
            raise ConfigError(f"chat_history_token_ratio ({ratio!r}) must be a number in (0, 1]: the window's "
                              "share of token_limit, e.g. 0.7")
        window = max(int(limit * ratio), 1)
        # What the window leaves goes to the summary and recall, in the config's proportions.
        summary = changes.get("summary_tokens", base.summary_tokens)
        recall = changes.get("recall_tokens", base.recall_tokens)
        rest = limit - window
        changes.update(window_tokens=window,
                       summary_tokens=max(int(rest * summary / max(summary + recall, 1)), 1),
                       recall_tokens=max(rest - int(rest * summary / max(summary + recall, 1)), 0))
    if token_flush_size is not None:
        _whole("token_flush_size", token_flush_size)
        window = changes.get("window_tokens", base.window_tokens)
        if token_flush_size >= window:
            raise ConfigError(f"token_flush_size ({token_flush_size}) must be smaller than the window "
                              f"({window} tokens): it is how much of the window is evicted at once")
        changes["window_low_ratio"] = 1 - token_flush_size / window
    try:
        return dataclasses.replace(base, **changes)
    except ConfigError as e:
        args = ", ".join(f"{k}={v}" for k, v in given.items())
        raise ConfigError(f"the budget derived from {args} is not valid: {e}") from e


def status_of(status: Any) -> Optional[str]:
    """``None``, ``"active"`` or ``"archived"`` for LlamaIndex's ``MessageStatus`` (or its value)."""
    if status is None:
        return None
    value = getattr(status, "value", status)
    if value not in ("active", "archived"):
        raise ConfigError(f"status ({status!r}) must be None, MessageStatus.ACTIVE or MessageStatus.ARCHIVED")
    return str(value)


def _whole(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name} ({value!r}) must be a positive whole number of tokens")


__all__: List[str] = ["LLM_CONTEXT_SHARE", "budget_config", "refuse_unknown", "session_key", "status_of"]
