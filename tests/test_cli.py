"""The langmem-tiers command, run in-process on real folders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from langmem_tiers.cli.main import main

SESSION = ["--session", "s1", "--user", "ada", "--no-vectors"]


@pytest.fixture
def folder(tmp_path: Path) -> str:
    path = tmp_path / "memory"
    jsonl = tmp_path / "in.jsonl"
    lines = []
    for i in range(30):
        lines.append({"role": "user", "content": f"Question {i}: what about the invoice number {1000 + i}?"})
        lines.append({"role": "assistant", "content": f"Invoice {1000 + i} was paid on day {i}."})
    jsonl.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    assert main(["import", "--path", str(path), *SESSION, "--in", str(jsonl)]) == 0
    return str(path)


def test_import_then_export_round_trips(folder: str, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    assert main(["export", "--path", folder, *SESSION, "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 60
    assert rows[0]["content"] == "Question 0: what about the invoice number 1000?"
    assert [r["role"] for r in rows[:2]] == ["user", "assistant"]


def test_stats_inspect_search(folder: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stats", "--path", folder, *SESSION]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["messages"] == 60
    assert main(["inspect", "--path", folder, *SESSION]) == 0
    assert "rolling summary" in capsys.readouterr().out
    assert main(["search", "--path", folder, *SESSION, "invoice 1003", "-k", "2"]) == 0
    assert "1003" in capsys.readouterr().out


def test_remember_forget_reindex(folder: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["remember", "--path", folder, *SESSION, "Ada prefers aisle seats", "--kind", "preference"]) == 0
    record = capsys.readouterr().out.strip()
    assert main(["search", "--path", folder, *SESSION, "aisle seats", "--kind", "preference"]) == 0
    assert "aisle" in capsys.readouterr().out
    assert main(["reindex", "--path", folder, *SESSION]) == 0
    assert "reindexed" in capsys.readouterr().out
    assert main(["forget", "--path", folder, *SESSION, "--record", record]) == 0
    assert "removed 1 records" in capsys.readouterr().out
    assert main(["forget", "--path", folder, *SESSION, "--scope", "session"]) == 0
    assert main(["stats", "--path", folder, *SESSION]) == 0
    out = capsys.readouterr().out
    assert json.loads(out[out.index("{"):])["messages"] == 0


def test_bad_input_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["search", "--path", str(tmp_path), "--session", "x" * 600, "--no-vectors", "q"]) == 2
    assert "InvalidNamespaceError" in capsys.readouterr().err


def test_demo_runs_offline(tmp_path: Path) -> None:
    from rich.console import Console

    from langmem_tiers.cli.demo import run_demo

    with open(tmp_path / "demo.txt", "w") as out:
        figures = run_demo(tmp_path / "demo", sessions=2, turns_per_session=40, no_vectors=True,
                           console=Console(file=out))
    assert figures["turns"] == 80
    assert figures["summarizer_calls"] > 0
    assert figures["final_context_tokens"] <= 2400
    text = (tmp_path / "demo.txt").read_text()
    assert "questions about turns that left the window" in text


def test_eval_subcommand_is_the_harness_parser(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """`langmem-tiers eval ...` takes exactly the harness's options (one parser) and fails with one line."""
    with pytest.raises(SystemExit) as done:
        main(["eval", "--help"])
    assert done.value.code == 0
    assert "--layout" in capsys.readouterr().out
    assert main(["eval", "locomo", "--data", str(tmp_path / "missing.json"), "--retriever", "bm25"]) == 2
    assert "does not exist" in capsys.readouterr().err
