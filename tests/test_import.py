"""Importing the core must not load any heavy or framework dependency."""

from __future__ import annotations

import subprocess
import sys

HEAVY = {
    "langchain",
    "langchain_core",
    "llama_index",
    "chromadb",
    "sentence_transformers",
    "torch",
    "transformers",
    "openai",
    "numpy",
}


def test_import_loads_no_heavy_dependency() -> None:
    # The public API: the package and its documented collaborator packages (tests/test_public_api.py).
    code = (
        "import langmem_tiers, langmem_tiers.errors, langmem_tiers.summarizers, langmem_tiers.embedders, sys; "
        f"print(sorted({{m.split('.')[0] for m in sys.modules if m.split('.')[0] in {sorted(HEAVY)!r}}}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_import_has_no_global_side_effects() -> None:
    code = (
        "import logging, warnings, threading; "
        "before = (list(warnings.filters), logging.getLogger().handlers[:], threading.active_count()); "
        "import langmem_tiers; "
        "after = (list(warnings.filters), logging.getLogger().handlers[:], threading.active_count()); "
        "print(before == after)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "True", out.stdout + out.stderr


def test_public_names_exist() -> None:
    import langmem_tiers

    for name in langmem_tiers.__all__:
        assert hasattr(langmem_tiers, name), name
