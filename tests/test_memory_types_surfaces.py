"""Where an operator sees the memory types and metrics: the CLI's ``stats`` and the inspector
(session page and ``/api/stats``), on a real SQLite journal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from langmem_tiers import TieredMemory
from langmem_tiers.cli.main import main

SESSION = ["--session", "s1", "--user", "ada", "--no-vectors"]


def fill(path: Path) -> None:
    with TieredMemory.open(path, session_id="s1", user_id="ada", embedder=False) as memory:
        memory.working.set("plan_step", 3)
        memory.remember("Lives in Lisbon", key="home_city")
        memory.add("user", "Where do I live?")


def test_cli_stats_shows_working_state_index_lag_and_metrics(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    fill(tmp_path)
    assert main(["stats", "--path", str(tmp_path), *SESSION]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["working"] == {"plan_step": 3}
    assert stats["index_lag_s"] is None
    assert stats["metrics"]["context_calls"] == 0  # this process has served no context() yet
    assert set(stats["metrics"]["tokens"]) == {"pinned", "working", "profile", "summary", "recall", "window",
                                               "total"}


def test_inspector_shows_metrics_and_the_working_state(tmp_path: Path) -> None:
    pytest.importorskip("starlette", reason="the inspector extra is not installed")
    from starlette.testclient import TestClient

    from langmem_tiers.inspector.app import create_app
    from langmem_tiers.inspector.deployment import Deployment
    from langmem_tiers.inspector.settings import InspectorSettings

    fill(tmp_path)
    token = "test-token-0123456789abcdef"
    settings = InspectorSettings.resolve(str(tmp_path), vectors=False, token=token)
    deployment = Deployment.open(settings)
    try:
        client = TestClient(create_app(settings, deployment), base_url="http://127.0.0.1:8765",
                            follow_redirects=False)
        client.cookies.set("langmem_tiers_token", token)
        auth = {"Authorization": f"Bearer {token}"}
        page = client.get("/session?session=s1&user=ada&q=Where do I live?", headers=auth).text
        assert "working: - plan_step = 3" in page  # explain() of the query just run
        assert "metrics (this server process" in page
        assert "<th>context() calls</th><td>1</td>" in page
        stats = client.get("/api/stats", params={"session_id": "s1", "user_id": "ada"}, headers=auth).json()
        assert stats["metrics"]["context_calls"] == 1
        assert stats["metrics"]["tokens"]["working"]["mean"] > 0
    finally:
        deployment.close()


@pytest.mark.parametrize("module", ["langmem_tiers.memory_types.fields", "langmem_tiers.memory_types.expiry",
                                    "langmem_tiers.memory_types.skills", "langmem_tiers.memory_types.events",
                                    "langmem_tiers.memory_types.working"])
def test_docstring_examples_run(module: str) -> None:
    """The examples the memory types page shows run as written."""
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
