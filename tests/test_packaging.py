"""The three distributions as a user gets them: wheels built with ``python -m build``, installed into a
fresh virtualenv with only their declared dependencies (no editable installs, no dev tools), then the
README quickstart, a LangChain and a LlamaIndex example run there.

Slow by nature (a venv, torch's CPU wheel from local disk, the local extra's dependencies from pip's
cache: about 4 to 10 minutes on this shared 2-core machine); one module-scoped install serves every check.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

# The install alone takes minutes on a shared 2-core machine; the suite's 600 s per test is too short.
pytestmark = pytest.mark.timeout(1800)

ROOT = Path(__file__).resolve().parents[1]
DISTRIBUTIONS = {
    "langmem-tiers": ROOT,
    "langchain-langmem-tiers": ROOT / "integrations" / "langchain",
    "llama-index-memory-langmem-tiers": ROOT / "integrations" / "llama_index",
}
TORCH = "torch==2.13.0"  # the CPU build on local disk (see the Makefile); unpinned, pip pulls a CUDA build


def _run(*command: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    result = subprocess.run([str(c) for c in command], capture_output=True, text=True, cwd=cwd, env=env,
                            timeout=900)
    assert result.returncode == 0, f"{' '.join(map(str, command))}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout


def readme_block(readme: Path, heading: str) -> str:
    """The first python block of the README section under ``heading``."""
    text = readme.read_text(encoding="utf-8")
    section = text.split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)[0]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv holding the three wheels (core with ``local``, LangChain with ``agents``)."""
    base = tmp_path_factory.mktemp("packaging")
    wheels = base / "wheels"
    for folder in DISTRIBUTIONS.values():
        _run(sys.executable, "-m", "build", "--wheel", "--outdir", wheels, folder)
    found = {w.name.split("-")[0]: w for w in wheels.glob("*.whl")}
    assert set(found) == {"langmem_tiers", "langchain_langmem_tiers", "llama_index_memory_langmem_tiers"}
    env_dir = base / "venv"
    _run(sys.executable, "-m", "venv", env_dir)
    python = env_dir / "bin" / "python"
    # One resolution for everything; no .pyc compilation of torch & co. (minutes of CPU on 2 cores).
    # The wheel files by path, so `langmem-tiers>=0.1,<0.2` is met by ours and never by a registry's.
    _run(python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile", TORCH,
         f"{found['langmem_tiers']}[local]", f"{found['langchain_langmem_tiers']}[agents]",
         found["llama_index_memory_langmem_tiers"])
    _run(python, "-m", "pip", "check")
    return python


def _run_example(python: Path, code: str, tmp_path: Path) -> str:
    # Outside the repository, so that nothing but the installed wheels can be imported.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["HF_HUB_OFFLINE"] = "1"
    script = tmp_path / "example.py"
    script.write_text(code, encoding="utf-8")
    return _run(python, script, cwd=tmp_path, env=env)


def test_wheels_carry_license_and_one_version(installed: Path, tmp_path: Path) -> None:
    probe = """
import json, importlib, importlib.metadata as md
out = {}
for dist, module in [("langmem-tiers", "langmem_tiers"), ("langchain-langmem-tiers", "langchain_langmem_tiers"),
                     ("llama-index-memory-langmem-tiers", "llama_index.memory.langmem_tiers")]:
    meta = md.metadata(dist)
    out[dist] = {
        "version": md.version(dist),
        "module_version": importlib.import_module(module).__version__,
        "license": meta["License-Expression"],
        "license_files": [str(f) for f in md.files(dist) if f.name == "LICENSE"],
        "requires": md.requires(dist) or [],
        "where": importlib.import_module(module).__file__,
    }
print(json.dumps(out))
"""
    found = json.loads(_run_example(installed, probe, tmp_path))
    for dist, info in found.items():
        assert info["version"] == info["module_version"], dist
        assert info["license"] == "MIT", dist
        assert len(info["license_files"]) == 1, dist
        assert "site-packages" in info["where"], dist  # the wheel, not the working tree
    for integration in ("langchain-langmem-tiers", "llama-index-memory-langmem-tiers"):
        assert "langmem-tiers<0.2,>=0.1" in found[integration]["requires"]
    core = found["langmem-tiers"]["requires"]
    assert not any(r.startswith("numpy") and "extra" not in r for r in core)  # numpy only in extras
    assert not any("rank-bm25" in r for r in core)


def test_readme_quickstart_runs_from_the_wheels(installed: Path, tmp_path: Path) -> None:
    out = _run_example(installed, readme_block(ROOT / "README.md", "## Quickstart (offline)"), tmp_path)
    assert "recall" in out


def test_langchain_example_runs_from_the_wheels(installed: Path, tmp_path: Path) -> None:
    readme = DISTRIBUTIONS["langchain-langmem-tiers"] / "README.md"
    code = readme_block(readme, "## Memory tools for agents: `create_memory_tools`")
    _run_example(installed, code + "\nprint('ok')\n", tmp_path)


def test_llama_index_example_runs_from_the_wheels(installed: Path, tmp_path: Path) -> None:
    readme = DISTRIBUTIONS["llama-index-memory-langmem-tiers"] / "README.md"
    _run_example(installed, readme_block(readme, "## Quickstart (offline)") + "\nprint('ok')\n", tmp_path)
