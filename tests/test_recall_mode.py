"""``open(embedder=None)`` picks vectors or keywords by what is installed, and says which: a log line
at open, ``stats().recall_mode`` and the CLI's ``stats``."""

from __future__ import annotations

import importlib.util
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from langmem_tiers import TieredMemory, WordCounter
from langmem_tiers.cli.main import main
from langmem_tiers.embedders import CallableEmbedder

OPENING_LOGGER = "langmem_tiers.memory.opening"


def _open(path: Path, **kwargs: Any) -> TieredMemory:
    return TieredMemory.open(path, session_id="s1", user_id="ada", counter=WordCounter(), **kwargs)


def test_keyword_only_by_request_is_reported_and_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger=OPENING_LOGGER), _open(tmp_path, embedder=False) as memory:
        assert memory.stats().recall_mode == "keywords only (embedder=False)"
        assert memory.for_session("s2").stats().recall_mode == "keywords only (embedder=False)"
    opened = [r for r in caplog.records if r.name == OPENING_LOGGER and r.levelno == logging.INFO]
    assert [r.getMessage() for r in opened] == ["recall: keywords only (embedder=False)"]


def test_default_without_sentence_transformers_is_keyword_only_and_says_why(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    real_find_spec = importlib.util.find_spec

    def find_spec(name: str, *args: Any, **kwargs: Any) -> Any:  # this environment without the [local] extra
        return None if name == "sentence_transformers" else real_find_spec(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    with caplog.at_level(logging.INFO, logger=OPENING_LOGGER), _open(tmp_path) as memory:
        mode = memory.stats().recall_mode
        assert memory.recall is not None
        assert not memory.recall.vectors
    assert mode == ("keywords only (sentence-transformers not installed: "
                    "pip install 'langmem-tiers[local]' for vectors)")
    assert f"recall: {mode}" in [r.getMessage() for r in caplog.records if r.name == OPENING_LOGGER]


def test_default_with_the_local_model_is_vectors(tmp_path: Path, local_embedder: Any) -> None:
    with _open(tmp_path) as memory:
        assert memory.recall is not None
        assert memory.recall.vectors
        assert memory.stats().recall_mode == f"vectors (local model {local_embedder.key} on cpu, the default)"


def test_a_given_embedder_is_named(tmp_path: Path) -> None:
    embedder = CallableEmbedder(lambda texts: [[float(len(t)), 1.0] for t in texts], dimension=2, key="fake:len")
    with _open(tmp_path, embedder=embedder) as memory:
        assert memory.stats().recall_mode == "vectors (fake:len)"


def test_a_memory_built_by_hand_describes_its_recall(tmp_path: Path) -> None:
    with _open(tmp_path, embedder=False) as opened:
        bare = TieredMemory(opened.journal, opened.namespace, counter=WordCounter(), owns_journal=False)
        assert bare.stats().recall_mode == "off (built without recall)"


def test_cli_stats_prints_the_recall_mode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = str(tmp_path / "memory")
    with _open(Path(folder), embedder=False) as memory:
        memory.add("user", "hello")
    assert main(["stats", "--path", folder, "--session", "s1", "--user", "ada", "--no-vectors"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["recall_mode"] == "keywords only (embedder=False)"
    assert stats["messages"] == 1
