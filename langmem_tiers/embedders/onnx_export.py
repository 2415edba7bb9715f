"""Export a local sentence-transformers model to ONNX, once, for :mod:`.onnx_runtime`.

Run in a child process (``python -m langmem_tiers.embedders.onnx_export MODEL_DIR OUT_DIR``) by
:func:`export`: tracing the model changes state inside the exporting process's copy of it (a
model traced in-process gave vectors 0.05 away afterwards), and torch, transformers and onnx stay
out of the serving process, which then loads only onnxruntime (44 MB and 0.2 s to import here,
against 413 MB and 10 s for sentence-transformers with torch).

Only the plain shape of a sentence-transformers model is exported: a transformer, then mean or
CLS pooling, then optionally normalization (all-MiniLM-L6-v2 and most sentence models). Anything
else is :class:`UnsupportedModelError` and the torch runtime serves it. The export checks itself
before it is kept: the ONNX graph's vectors must match torch's on a few texts of mixed lengths.

The folder written holds ``model.onnx``, ``tokenizer.json`` and ``manifest.json`` (what the runtime
needs to tokenize and pool exactly as sentence-transformers does).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from langmem_tiers.errors import RecallError

MANIFEST = "manifest.json"
FORMAT = 2  # bump when what the exported folder holds, or how it is made, changes
EXPORT_TIMEOUT_S = 900.0  # a first export on a slow 2-core machine took ~30 s
MAX_DIFF = 1e-4  # largest vector difference between the ONNX graph and torch that is accepted
UNSUPPORTED_EXIT = 3  # the child's exit code for a model of another shape
# Transformers whose traced graph onnxruntime's optimizer fuses (attention, layer norms, GELU); others run unfused.
FUSED_TYPES = ("bert",)
# Texts the export checks itself on: mixed lengths, so that padding is part of the check.
CHECK_TEXTS = ["tea", "What did we say about the trip to Lisbon in May?", "ñandú 東京 🚀", "",
               "user: the invoice for the quarterly audit is in cabinet four " * 6]


class UnsupportedModelError(RecallError):
    """The model is not a transformer + mean/CLS pooling sentence model: the torch runtime serves it."""


def export(model_dir: Path, out_dir: Path) -> None:
    """Export ``model_dir`` into ``out_dir`` (created; must not exist) in a child process.

    Raises:
        UnsupportedModelError: the model has another shape.
        RecallError: the export failed (torch, transformers or onnx missing, or the check failed).
    """
    plan(model_dir)  # a folder of another shape is refused here, without starting a child
    tmp = Path(tempfile.mkdtemp(prefix=".export-", dir=out_dir.parent))
    try:
        try:
            done = subprocess.run([sys.executable, "-m", __name__, str(model_dir), str(tmp)], capture_output=True,
                                  text=True, timeout=EXPORT_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired as e:
            raise RecallError(f"exporting {model_dir} to ONNX took over {EXPORT_TIMEOUT_S:.0f} s") from e
        tail = (done.stderr or "").strip().splitlines()[-1:] or [f"exit code {done.returncode}"]
        if done.returncode == UNSUPPORTED_EXIT:
            raise UnsupportedModelError(tail[0])
        if done.returncode != 0:
            # Recorded, so that every later process does not pay a failing export (seconds of torch
            # imports and tracing) before it falls back to torch; deleting the file tries again.
            marker = failure_marker(out_dir)
            marker.write_text(tail[0] + "\n")
            raise RecallError(f"exporting {model_dir} to ONNX failed: {tail[0]} (recorded in {marker}: "
                              f"delete it to try again)")
        try:
            os.replace(tmp, out_dir)  # atomic: a reader sees no folder or a whole one
        except OSError:
            if not (out_dir / MANIFEST).is_file():  # else another process finished the same export first
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def failure_marker(out_dir: Path) -> Path:
    """The file that records why the export into ``out_dir`` failed (absent: not tried, or it worked)."""
    return out_dir.with_name(out_dir.name + ".failed")


def earlier_failure(out_dir: Path) -> str | None:
    """Why an earlier export into ``out_dir`` failed, or ``None``."""
    marker = failure_marker(out_dir)
    try:
        return f"{marker.read_text().strip()} (recorded in {marker}: delete it to try again)"
    except OSError:
        return None


def plan(model_dir: Path) -> dict[str, Any]:
    """The manifest's fields read from the model's sentence-transformers files (no heavy import).

    Raises:
        UnsupportedModelError: the modules are not transformer, pooling (mean or CLS), normalize.
    """
    modules_file = model_dir / "modules.json"
    if not modules_file.is_file():
        raise UnsupportedModelError(f"{model_dir} has no modules.json: not a sentence-transformers folder")
    modules = json.loads(modules_file.read_text())
    kinds = [str(m.get("type", "")).rsplit(".", 1)[-1] for m in modules]
    if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        raise UnsupportedModelError(f"modules {kinds} are not Transformer, Pooling[, Normalize]")
    if modules[0].get("path", ""):
        raise UnsupportedModelError("the transformer module is not at the folder's root")
    pooling = json.loads((model_dir / modules[1]["path"] / "config.json").read_text())
    modes = [k for k, v in pooling.items() if k.startswith("pooling_mode_") and v]
    if modes not in (["pooling_mode_mean_tokens"], ["pooling_mode_cls_token"]):
        raise UnsupportedModelError(f"pooling {modes} is not mean or CLS alone")
    st_config_file = model_dir / "sentence_bert_config.json"
    st_config = json.loads(st_config_file.read_text()) if st_config_file.is_file() else {}
    return {"format": FORMAT, "pooling": "mean" if modes == ["pooling_mode_mean_tokens"] else "cls",
            "max_seq_length": int(st_config.get("max_seq_length") or 0),
            "do_lower_case": bool(st_config.get("do_lower_case", False)),
            "dimension": int(pooling.get("word_embedding_dimension") or 0)}


def _export_here(model_dir: Path, out_dir: Path) -> None:
    """The child's work: trace, save, and check against torch."""
    import numpy as np
    import torch
    from transformers import AutoModel, AutoTokenizer

    manifest = plan(model_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    if not getattr(tokenizer, "is_fast", False):
        raise UnsupportedModelError("the model has no fast (Rust) tokenizer to save as tokenizer.json")
    # Eager attention traces to the plain MatMul / Softmax pattern that onnxruntime's transformer optimizer
    # fuses into its Attention operator; the SDPA trace is not fused. On the 64 longest LongMemEval pieces
    # (2-core CPU, throwaway script): SDPA trace 8.11 s, eager 7.48, eager fused 7.03, torch 7.25; one query
    # 7.82 / 9.96 / 7.31 ms.
    model = AutoModel.from_pretrained(model_dir, local_files_only=True, attn_implementation="eager").eval()
    if not manifest["max_seq_length"]:
        manifest["max_seq_length"] = min(int(tokenizer.model_max_length), 512)
    inputs = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in tokenizer.model_input_names]
    manifest["inputs"] = inputs
    manifest["pad_id"] = int(tokenizer.pad_token_id or 0)
    manifest["pad_token"] = str(tokenizer.pad_token)

    class Hidden(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *tensors: Any) -> Any:
            return self.model(**dict(zip(inputs, tensors))).last_hidden_state

    sample = tokenizer(["hello world", "a longer second sentence"], padding=True, return_tensors="pt")
    axes = {name: {0: "batch", 1: "tokens"} for name in [*inputs, "last_hidden_state"]}
    with torch.inference_mode():
        torch.onnx.export(Hidden(), tuple(sample[n] for n in inputs), str(out_dir / "model.onnx"),
                          input_names=inputs, output_names=["last_hidden_state"], dynamic_axes=axes,
                          opset_version=17, dynamo=False)
    if model.config.model_type in FUSED_TYPES:
        from onnxruntime.transformers import optimizer

        fused = optimizer.optimize_model(str(out_dir / "model.onnx"), model_type=model.config.model_type,
                                         num_heads=int(model.config.num_attention_heads),
                                         hidden_size=int(model.config.hidden_size))
        fused.save_model_to_file(str(out_dir / "model.onnx"))
        manifest["fused"] = {k: v for k, v in fused.get_fused_operator_statistics().items() if v}
    tokenizer.backend_tokenizer.save(str(out_dir / "tokenizer.json"))
    (out_dir / MANIFEST).write_text(json.dumps(manifest, indent=2))

    # The check: the runtime's vectors against torch's on texts of mixed lengths (padding included).
    from langmem_tiers.embedders.onnx_runtime import OnnxModel

    got = np.asarray(OnnxModel(out_dir).forward(CHECK_TEXTS, len(CHECK_TEXTS)))
    model = AutoModel.from_pretrained(model_dir, local_files_only=True).eval()  # untouched by the trace, SDPA
    texts = [t.lower() for t in CHECK_TEXTS] if manifest["do_lower_case"] else CHECK_TEXTS
    features = tokenizer(texts, padding=True, truncation=True, max_length=manifest["max_seq_length"],
                         return_tensors="pt")
    with torch.inference_mode():
        hidden = model(**{n: features[n] for n in inputs}).last_hidden_state
    mask = features["attention_mask"].unsqueeze(-1).float()
    pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9) if manifest["pooling"] == "mean" else hidden[:, 0]
    want = torch.nn.functional.normalize(pooled, p=2, dim=1).numpy()
    diff = float(np.abs(got - want).max())
    if diff > MAX_DIFF:
        raise RecallError(f"the ONNX graph's vectors differ from torch's by {diff:.2e} (at most {MAX_DIFF})")


def main(argv: list[str]) -> int:
    """``python -m langmem_tiers.embedders.onnx_export MODEL_DIR OUT_DIR``: the child :func:`export` runs."""
    model_dir, out_dir = Path(argv[0]), Path(argv[1])
    try:
        _export_here(model_dir, out_dir)
    except UnsupportedModelError as e:
        sys.stderr.write(f"unsupported: {e}\n")
        return UNSUPPORTED_EXIT
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
