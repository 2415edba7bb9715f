"""A sentence model exported by :mod:`.onnx_export`, run with onnxruntime on the CPU (no torch).

Tokenizes with the model's own ``tokenizer.json`` (the Rust ``tokenizers`` library that
sentence-transformers' fast tokenizers wrap), runs the transformer graph, then pools and normalizes
as sentence-transformers does: the same vectors to ~1e-7 (``tests/test_embedders_onnx.py``).

Why: on a 2-core CPU one query's embedding took 22-24 ms through torch and ~7.3 ms here (the
graph's operators run fused, without torch's per-operator dispatch), and batches ~10% less; the
process holds ~300 MB less without torch and sentence-transformers, and starts ~10 s sooner.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path

from langmem_tiers.embedders.onnx_export import FORMAT, MANIFEST
from langmem_tiers.errors import RecallError

# One loaded model per exported folder per process: several memories share it (as _MODELS does for torch).
_LOADED: dict[str, OnnxModel] = {}
_LOADED_LOCK = threading.Lock()


def load(folder: Path) -> OnnxModel:
    """The process's one :class:`OnnxModel` of ``folder``."""
    key = str(folder.resolve())
    with _LOADED_LOCK:
        model = _LOADED.get(key)
        if model is None:
            model = _LOADED[key] = OnnxModel(folder)
        return model


class OnnxModel:
    """An exported folder, loaded: ``forward`` embeds, ``offsets`` tokenizes one text for splitting.

    Raises:
        RecallError: the folder is not a whole export of this format, or onnxruntime cannot load it.
    """

    def __init__(self, folder: Path) -> None:
        import numpy as np
        import onnxruntime
        from tokenizers import Tokenizer

        try:
            manifest = json.loads((folder / MANIFEST).read_text())
        except (OSError, ValueError) as e:
            raise RecallError(f"{folder} holds no readable ONNX export manifest: {e}") from e
        if manifest.get("format") != FORMAT:
            raise RecallError(f"{folder} is an ONNX export of format {manifest.get('format')!r}, not {FORMAT}")
        self._np = np
        self.inputs: list[str] = list(manifest["inputs"])
        self.pooling: str = manifest["pooling"]
        self.lower: bool = bool(manifest["do_lower_case"])
        self.max_seq_length: int = int(manifest["max_seq_length"])
        self.dimension: int = int(manifest["dimension"])
        try:
            # Split texts are tokenized whole (no truncation, no special tokens) for their offsets.
            self._plain = Tokenizer.from_file(str(folder / "tokenizer.json"))
            self._plain.no_truncation()
            self._plain.no_padding()
            self._batch = Tokenizer.from_file(str(folder / "tokenizer.json"))
            self._batch.enable_truncation(max_length=self.max_seq_length)
            self._batch.enable_padding(pad_id=int(manifest["pad_id"]), pad_token=str(manifest["pad_token"]))
            self.special_tokens = self._batch.num_special_tokens_to_add(False)
            self._session = onnxruntime.InferenceSession(str(folder / "model.onnx"),
                                                         providers=["CPUExecutionProvider"])
        except Exception as e:
            raise RecallError(f"could not load the ONNX model in {folder}: {e}") from e

    def offsets(self, text: str) -> list[tuple[int, int]]:
        """Character spans of ``text``'s word pieces (no special tokens, nothing cut)."""
        # The original text, not a lower-cased copy: the spans index it (a BERT tokenizer lower-cases
        # inside, keeping offsets into what it was given).
        return list(self._plain.encode(text, add_special_tokens=False).offsets)

    def _prepare(self, text: str) -> str:
        return text.lower() if self.lower else text

    def forward(self, texts: Sequence[str], batch_size: int) -> list[list[float]]:
        """Normalized vectors of ``texts``: longest first in batches of ``batch_size``, each padded to
        its longest (sentence-transformers' order), returned in input order."""
        np = self._np
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out: list[list[float]] = [[] for _ in texts]
        for start in range(0, len(order), batch_size):
            batch = order[start:start + batch_size]
            encoded = self._batch.encode_batch([self._prepare(texts[i]) for i in batch])
            ids = np.array([e.ids for e in encoded], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
            types = np.array([e.type_ids for e in encoded], dtype=np.int64)
            feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
            hidden = self._session.run(None, {n: feeds[n] for n in self.inputs})[0]
            if self.pooling == "mean":
                weights = mask[..., None].astype(np.float32)
                pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
            else:
                pooled = hidden[:, 0]
            norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)  # F.normalize's eps
            for i, vector in zip(batch, (pooled / norms).tolist()):
                out[i] = vector
        return out
