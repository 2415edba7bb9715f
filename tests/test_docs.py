"""The API reference builds with ``mkdocs build --strict``: a broken cross-reference, a docstring griffe
cannot read or a page naming an object that no longer exists fails the test suite (``make docs`` builds the
same site into build/docs)."""

from __future__ import annotations

import doctest
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_api_reference_builds_strict(tmp_path: Path) -> None:
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                            cwd=ROOT, capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    pages = {
        "core/memory/index.html": ["TieredMemory", "remember", "forget"],
        "core/tokens/index.html": ["load_encoding", "TIKTOKEN_CACHE_DIR"],
        "core/errors/index.html": ["TokenizerUnavailableError"],
        "langchain/index.html": ["TieredMemoryMiddleware", "create_memory_tools"],
        "llama_index/index.html": ["TieredChatMemory", "create_memory_tools"],
        "langgraph_store/index.html": ["TieredStore", "for_user"],
    }
    for page, names in pages.items():
        html = (site / page).read_text(encoding="utf-8")
        for name in names:
            assert name in html, f"{name} missing from {page}"


@pytest.mark.parametrize("module", ["langmem_tiers.tokens", "langchain_langmem_tiers.tools",
                                    "llama_index.memory.langmem_tiers.tools"])
def test_docstring_examples_run(module: str) -> None:
    """The examples the reference shows for these modules run as written."""
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
