"""Every notebook runs offline from a fresh kernel; committed notebooks carry no outputs and match build.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

from jupyter_client.kernelspec import KernelSpecManager  # noqa: E402
from jupyter_client.manager import KernelManager  # noqa: E402

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
NAMES = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))
CELL_TIMEOUT_S = 300


@pytest.fixture(scope="module")
def kernel_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ``python3`` kernelspec that runs this interpreter (the venv), whatever else is installed."""
    root = tmp_path_factory.mktemp("kernels")
    spec = root / "python3"
    spec.mkdir()
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": "Python 3 (tests)", "language": "python"}), encoding="utf-8"
    )
    return root


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}  # the offline path, always
    env["MPLBACKEND"] = "Agg"
    env["HF_HUB_OFFLINE"] = "1"
    env["TRANSFORMERS_OFFLINE"] = "1"
    env["PYTHONWARNINGS"] = "ignore::DeprecationWarning"
    return env


def test_notebooks_exist() -> None:
    assert NAMES == ["01_quickstart.ipynb", "02_langchain.ipynb", "03_llamaindex.ipynb", "04_evaluation.ipynb"]


def test_committed_notebooks_have_no_outputs() -> None:
    for name in NAMES:
        nb = nbformat.read(NOTEBOOKS / name, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [], f"{name}: cell {cell.id} has outputs: run notebooks/build.py"
                assert cell.execution_count is None, f"{name}: cell {cell.id} has an execution count"


def test_notebooks_match_build_script() -> None:
    result = subprocess.run([sys.executable, str(NOTEBOOKS / "build.py"), "--check"], capture_output=True,
                            text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("name", NAMES)
def test_notebook_runs(name: str, kernel_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for key in [k for k in os.environ if k.startswith("OPENAI_")]:
        monkeypatch.delenv(key)
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    km = KernelManager(kernel_name="python3", kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernel_dir)]))
    client = nbclient.NotebookClient(
        nb,
        km=km,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOKS)}},
    )
    try:
        client.execute(env=_env(), cwd=str(NOTEBOOKS))
    finally:
        out = os.environ.get("LANGMEM_NOTEBOOKS_OUT")  # keep the executed notebooks, e.g. to look at the plots
        if out:
            Path(out).mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, Path(out) / name)
    assert km.kernel_spec is not None
    assert km.kernel_spec.argv[0] == sys.executable  # the venv's interpreter ran it
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]  # execute() raises first; guards allow_errors
    if any("plt." in c.source for c in nb.cells):
        assert any("image/png" in o.get("data", {}) for o in outputs), f"{name}: a plot was not displayed"
