"""The langmem-tiers command keeps data safe: atomic export and import, idempotent import,
and one clear line (never a traceback) for bad input."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from langmem_tiers.cli import transfer
from langmem_tiers.cli.main import main

SESSION = ["--session", "s1", "--user", "ada", "--no-vectors"]


def _lines(n: int = 6) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for i in range(n // 2):
        rows.append({"role": "user", "content": f"Question {i} about parcel {500 + i}?"})
        rows.append({"role": "assistant", "content": f"Parcel {500 + i} left on day {i}."})
    return rows


def _write(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _messages(folder: Path, *session: str) -> int:
    from langmem_tiers import TieredMemory

    args = dict(zip(("session_id", "user_id"), session or ("s1", "ada")))
    with TieredMemory.open(folder, embedder=False, **args) as memory:
        return memory.stats().messages


def _one_line_error(capsys: pytest.CaptureFixture[str], *needles: str) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    assert err.count("\n") == 0, err
    assert err.startswith("langmem-tiers: ")
    for needle in needles:
        assert needle in err, err
    return err


@pytest.fixture
def folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    path = tmp_path / "memory"
    assert main(["import", "--path", str(path), *SESSION, "--in", str(_write(tmp_path / "in.jsonl", _lines()))]) == 0
    capsys.readouterr()
    return path


# -- export ------------------------------------------------------------------------

def test_misspelled_session_never_overwrites_a_backup(folder: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    backup = tmp_path / "backup.jsonl"
    assert main(["export", "--path", str(folder), *SESSION, "--out", str(backup)]) == 0
    saved = backup.read_bytes()
    assert len(saved.splitlines()) == 6
    capsys.readouterr()
    assert main(["export", "--path", str(folder), "--session", "s1-typo", "--user", "ada",
                 "--out", str(backup)]) == 2
    _one_line_error(capsys, "holds no messages", "--allow-empty")
    assert backup.read_bytes() == saved
    assert sorted(p.name for p in tmp_path.iterdir()) == ["backup.jsonl", "in.jsonl", "memory"]  # no temp file
    assert main(["export", "--path", str(folder), "--session", "s1-typo", "--user", "ada", "--allow-empty",
                 "--out", str(backup)]) == 0
    assert backup.read_bytes() == b""


def test_a_failure_midway_leaves_the_old_file(folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    backup = tmp_path / "backup.jsonl"
    backup.write_text("precious\n")
    real = transfer.export_lines

    def disk_full(*args: Any) -> Iterator[str]:
        lines = real(*args)
        yield next(lines)
        yield next(lines)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(transfer, "export_lines", disk_full)
    assert main(["export", "--path", str(folder), *SESSION, "--out", str(backup)]) == 2
    _one_line_error(capsys, "No space left on device")
    assert backup.read_text() == "precious\n"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_export_keeps_the_mode_of_the_file_it_replaces(folder: Path, tmp_path: Path) -> None:
    shared = tmp_path / "shared.jsonl"
    shared.write_text("old\n")
    shared.chmod(0o644)
    assert main(["export", "--path", str(folder), *SESSION, "--out", str(shared)]) == 0
    assert stat.S_IMODE(shared.stat().st_mode) == 0o644
    fresh = tmp_path / "fresh.jsonl"
    assert main(["export", "--path", str(folder), *SESSION, "--out", str(fresh)]) == 0
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o600  # conversation data is private by default
    rows = [json.loads(line) for line in fresh.read_text().splitlines()]
    # The import stored each line's derived key; export writes it back.
    assert all(r["key"].startswith("import:") for r in rows)
    assert len({r["key"] for r in rows}) == 6


def test_out_naming_a_folder_or_a_missing_folder(folder: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", "--path", str(folder), *SESSION, "--out", str(tmp_path)]) == 2
    _one_line_error(capsys, "is a folder")
    assert main(["export", "--path", str(folder), *SESSION, "--out", str(tmp_path / "no" / "x.jsonl")]) == 2
    _one_line_error(capsys, "does not exist")


# -- import ------------------------------------------------------------------------

def test_import_twice_does_not_double(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "memory"
    source = _write(tmp_path / "in.jsonl", [*_lines(), _lines()[0]])  # the last line repeats the first
    for _ in range(2):
        assert main(["import", "--path", str(path), *SESSION, "--in", str(source)]) == 0
    assert "imported 0 messages; 7 were already" in capsys.readouterr().err
    assert _messages(path) == 7


def test_export_import_round_trip_is_idempotent(folder: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.jsonl"
    assert main(["export", "--path", str(folder), *SESSION, "--out", str(out)]) == 0
    # Back into its own session: every message is already there.
    assert main(["import", "--path", str(folder), *SESSION, "--in", str(out)]) == 0
    assert _messages(folder) == 6
    # Into another session, twice: stored once.
    other = ["--session", "s2", "--user", "ada", "--no-vectors"]
    for _ in range(2):
        assert main(["import", "--path", str(folder), *other, "--in", str(out)]) == 0
    assert _messages(folder, "s2", "ada") == 6
    assert "imported 0 messages; 6 were already" in capsys.readouterr().err


@pytest.mark.parametrize(("bad_line", "needle"), [
    ("[1, 2]", "in.jsonl is a list"),
    ("42", "is a number"),
    ("3.5", "is a number"),
    ('"hello"', "is a string"),
    ("null", "is null"),
    ("true", "is a boolean"),
    ("{not json", "is not JSON"),
    ('{"role": "robot", "content": "x"}', "in.jsonl: role must be one of"),
    ('{"role": "user", "content": "x", "created_at": NaN}', "created_at"),
    ('{"role": "user", "content": "x", "tool_calls": 5}', "line 4"),
    ('{"role": "user", "content": "x", "key": 7}', "key must be a string"),
    ("[" * 100_000 + "]" * 100_000, "nests deeper"),
    ('{"role": "user", "content": "x", "metadata": ' + '{"a": ' * 40 + "1" + "}" * 41, "nests deeper"),
])
def test_bad_lines_are_one_clear_line_and_store_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        bad_line: str, needle: str) -> None:
    path = tmp_path / "memory"
    source = tmp_path / "in.jsonl"
    rows = _lines()
    source.write_text("\n".join([json.dumps(r) for r in rows[:3]] + [bad_line] + [json.dumps(rows[3])]) + "\n")
    assert main(["import", "--path", str(path), *SESSION, "--in", str(source)]) == 2
    _one_line_error(capsys, "line 4 of ", needle)
    assert _messages(path) == 0


def test_non_utf8_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "in.jsonl"
    latin1 = '{"role": "user", "content": "café"}'.encode("latin-1")
    source.write_bytes(json.dumps(_lines()[0]).encode() + b"\n" + latin1)
    assert main(["import", "--path", str(tmp_path / "m"), *SESSION, "--in", str(source)]) == 2
    _one_line_error(capsys, "line 2 of", "is not UTF-8", "0xe9")
    assert _messages(tmp_path / "m") == 0


def test_utf8_bom_and_blank_lines_are_accepted(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_bytes(b"\xef\xbb\xbf" + json.dumps(_lines()[0]).encode() + b"\n\n  \n"
                       + json.dumps(_lines()[1]).encode() + b"\n")
    assert main(["import", "--path", str(tmp_path / "m"), *SESSION, "--in", str(source)]) == 0
    assert _messages(tmp_path / "m") == 2


def test_a_batch_the_journal_refuses_stores_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Every line is a valid message, but the tool result answers no call: the whole file is refused.
    rows = [*_lines(4), {"role": "tool", "content": "42", "tool_call_id": "call-missing"}]
    source = _write(tmp_path / "in.jsonl", rows)
    assert main(["import", "--path", str(tmp_path / "m"), *SESSION, "--in", str(source)]) == 2
    _one_line_error(capsys, "call-missing")
    assert _messages(tmp_path / "m") == 0


def test_missing_input_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import", "--path", str(tmp_path / "m"), *SESSION, "--in", str(tmp_path / "nope.jsonl")]) == 2
    _one_line_error(capsys, "nope.jsonl", "No such file")
    assert main(["import", "--path", str(tmp_path / "m"), *SESSION, "--in", str(tmp_path)]) == 2
    _one_line_error(capsys, "Is a directory")


# -- other commands ------------------------------------------------------------------

@pytest.mark.parametrize("command", [
    ["stats"], ["inspect"], ["export", "--out", "-"], ["search", "q"], ["forget", "--scope", "session"],
])
def test_path_naming_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]) -> None:
    file = tmp_path / "journal.txt"
    file.write_text("not a folder")
    assert main([command[0], "--path", str(file), *SESSION, *command[1:]]) == 2
    _one_line_error(capsys, "is a file")
    assert file.read_text() == "not a folder"


def test_demo_path_naming_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    file = tmp_path / "f"
    file.write_text("x")
    assert main(["demo", "--path", str(file), "--no-vectors"]) == 2
    _one_line_error(capsys, "is a file")


@pytest.mark.parametrize("record", ["abc", "-1", "0", "1.5", "", "١٢"])
def test_forget_record_must_be_an_id(folder: Path, capsys: pytest.CaptureFixture[str], record: str) -> None:
    assert main(["forget", "--path", str(folder), *SESSION, "--record", record]) == 2
    _one_line_error(capsys, "--record", "positive integer")
    assert _messages(folder) == 6


def test_the_installed_command_prints_no_traceback(tmp_path: Path) -> None:
    source = _write(tmp_path / "in.jsonl", [[1, 2]])
    done = subprocess.run([sys.executable, "-m", "langmem_tiers.cli.main", "import", "--path", str(tmp_path / "m"),
                           *SESSION, "--in", str(source)], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).parents[1], env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "langmem-tiers: InvalidMessageError: line 1 of " + str(source) + " is a list, not a message object: "
        'write one object per line, e.g. {"role": "user", "content": "hi"}'
    ]


def test_messages_stored_without_keys_export_stable_keys(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from langmem_tiers import TieredMemory

    path = tmp_path / "memory"
    with TieredMemory.open(path, session_id="s1", user_id="ada", embedder=False) as memory:
        memory.add_messages(_lines(4))  # an application's own adds: no idempotency keys
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    for out in (first, second):
        assert main(["export", "--path", str(path), *SESSION, "--out", str(out)]) == 0
    keys = [json.loads(line)["key"] for line in first.read_text().splitlines()]
    assert all(k.startswith("export:") for k in keys)
    assert len(set(keys)) == 4
    assert first.read_text() == second.read_text()  # stable across exports
    assert main(["import", "--path", str(path), *SESSION, "--in", str(first)]) == 0
    assert "imported 0 messages; 4 were already" in capsys.readouterr().err
    assert _messages(path) == 4
