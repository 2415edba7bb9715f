"""A sentence-transformers model run with torch: any model, on any device torch knows.

The default runtime on an accelerator, and on the CPU for a model :mod:`.onnx_export` cannot export
(see :class:`~langmem_tiers.embedders.local.LocalEmbedder`'s ``runtime``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

from langmem_tiers.errors import MissingDependencyError, RecallError

logger = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'langmem-tiers[local]'"

# One loaded model per (model path or name, device) per process: loading costs seconds
# and ~500 MB, and several memories in one process should share it.
_MODELS: dict[tuple[str, str], TorchModel] = {}
_MODELS_LOCK = threading.Lock()


def load(model: str, device: str) -> TorchModel:
    """The process's one :class:`TorchModel` of ``model`` on ``device``."""
    with _MODELS_LOCK:
        loaded = _MODELS.get((model, device))
        if loaded is None:
            loaded = _MODELS[(model, device)] = TorchModel(model, device)
        return loaded


class TorchModel:
    """A loaded sentence-transformers model: ``forward`` embeds, ``offsets`` tokenizes one text.

    Raises:
        MissingDependencyError: sentence-transformers is not installed.
        RecallError: the model could not be loaded (offline, local files only).
    """

    def __init__(self, model: str, device: str) -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as e:
            raise MissingDependencyError(f"sentence_transformers is needed for local embeddings: {INSTALL_HINT}") from e
        logger.debug("loading sentence-transformers model %s on %s", model, device)
        try:
            # local_files_only keeps the load offline without touching HF_HUB_OFFLINE in
            # os.environ, which would change every other library in the process.
            self.st: Any = SentenceTransformer(model, device=device, local_files_only=True)
        except Exception as e:
            raise RecallError(f"could not load the sentence-transformers model {model!r} on {device!r} "
                              f"(offline, local files only): {e}") from e
        getter = getattr(self.st, "get_embedding_dimension", None) or self.st.get_sentence_embedding_dimension
        dimension = getter()
        if not isinstance(dimension, int) or dimension < 1:
            raise RecallError(f"model {model!r} does not report an embedding dimension")
        self.dimension: int = dimension
        self.max_seq_length = int(getattr(self.st, "max_seq_length", 0) or 0)
        tokenizer = getattr(self.st, "tokenizer", None)
        try:
            self.special_tokens = int(tokenizer.num_special_tokens_to_add(pair=False)) if tokenizer is not None else 2
        except Exception:
            self.special_tokens = 2  # [CLS] and [SEP]

    def offsets(self, text: str) -> list[tuple[int, int]]:
        """Character spans of ``text``'s word pieces (no special tokens, nothing cut)."""
        encoded = self.st.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, truncation=False,
                                    verbose=False)
        return [(int(a), int(b)) for a, b in encoded["offset_mapping"]]

    def forward(self, texts: Sequence[str], batch_size: int) -> list[list[float]]:
        """Normalized vectors of ``texts``, as ``st.encode(texts, batch_size=batch_size,
        normalize_embeddings=True)`` computes them: longest first, each batch padded to its longest
        text, then back in input order.

        Not ``encode`` itself: it switches every module of the model to eval mode on each call, a walk
        of the model's ~120 modules (a cProfile of 50 query embeddings put it near 1.4 ms a call; timed
        plainly, this path saved 0.7-3.1 ms of a 9-16 ms query embedding on a shared 2-core CPU). The
        model here was loaded in eval mode and is never trained. Same inputs, same modules, same order
        of operations: the vectors are the ones ``encode`` gives (to float rounding;
        ``tests/test_embedders.py`` compares them).
        """
        import torch

        st = self.st
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
