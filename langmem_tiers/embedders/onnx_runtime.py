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

# What one extra model run costs, in token slots (a padded token of a batch): the run's fixed cost over
# one token's. benchmarks/embed_batching.py --overhead on the 2-core host (all-MiniLM-L6-v2), three fits on
# synthetic shapes: 9.3, 13.4, 14.1 (a run ~1.4-2.1 ms, a slot ~0.15 ms); the median.
RUN_OVERHEAD_TOKENS = 13

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
            # Model inputs: cut to the model's length, padded by forward() per batch it plans.
            self._inputs = Tokenizer.from_file(str(folder / "tokenizer.json"))
            self._inputs.enable_truncation(max_length=self.max_seq_length)
            self._inputs.no_padding()
            self._pad_id = int(manifest["pad_id"])
            self.special_tokens = self._inputs.num_special_tokens_to_add(False)
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
        """Normalized vectors of ``texts``, in input order: tokenized once, then run in the batches
        :func:`plan_batches` picks (at most ``batch_size`` texts each, each padded to its longest)."""
        np = self._np
        encoded = self._inputs.encode_batch([self._prepare(t) for t in texts])
        out: list[list[float]] = [[] for _ in texts]
        for batch in plan_batches([len(e.ids) for e in encoded], batch_size):
            width = len(encoded[batch[0]].ids)  # the longest: batches run longest first
            ids = np.full((len(batch), width), self._pad_id, dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.int64)
            types = np.zeros((len(batch), width), dtype=np.int64)
            for row, i in enumerate(batch):
                length = len(encoded[i].ids)
                ids[row, :length] = encoded[i].ids
                mask[row, :length] = 1
                types[row, :length] = encoded[i].type_ids
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


def plan_batches(lengths: Sequence[int], cap: int, overhead: int = RUN_OVERHEAD_TOKENS) -> list[list[int]]:
    """Indices of texts of these token ``lengths`` in batches of at most ``cap``: longest first, each batch a
    run of neighbours in that order, chosen to minimize the token slots the model computes (each batch is
    ``len(batch) * its longest``, padding included) plus ``overhead`` slots per run.

    Sorting and cutting every ``cap`` texts (sentence-transformers' way) pads a call of mixed lengths to its
    longest: the background indexer's calls of about 8 LongMemEval turns padded 22% more token slots than the
    same texts sorted in one call (``benchmarks/embed_batching.py``). An exact dynamic programme over the
    sorted lengths, O(len * cap).
    """
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    cost = [0] * (len(order) + 1)  # cost[i]: the cheapest plan of the first i texts in that order
    start = [0] * (len(order) + 1)  # start[i]: where the last batch of that plan starts
    for i in range(1, len(order) + 1):
        # The last batch is order[j:i], padded to its longest, order[j]; the first j are planned already.
        cost[i], start[i] = min((cost[j] + (i - j) * lengths[order[j]] + overhead, j)
                                for j in range(max(0, i - cap), i))
    batches: list[list[int]] = []
    i = len(order)
    while i > 0:
        batches.append(order[start[i]:i])
        i = start[i]
    return batches[::-1]
