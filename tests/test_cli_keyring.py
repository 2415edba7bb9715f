"""``--keyring FOLDER``: the CLI commands and ``langmem-tiers serve`` open an encrypted journal
(real SQLite journal, real AES-GCM keys in a key folder)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("cryptography", reason="the encryption extra is not installed")

from langmem_tiers import TieredMemory
from langmem_tiers.cli.main import main
from langmem_tiers.errors import ConfigError, KeyUnavailableError

SECRET = "my locker code is 8812"
SESSION = ["--session", "s1", "--user", "ada", "--no-vectors"]
TOKEN = "test-token-0123456789abcdef"


@pytest.fixture
def encrypted(tmp_path: Path) -> Path:
    path = tmp_path / "memory"
    with TieredMemory.open(path, session_id="s1", user_id="ada", embedder=False, keyring=True) as memory:
        memory.add("user", f"Please note: {SECRET}.")
        memory.add("assistant", "Noted.")
        memory.remember("Ada prefers aisle seats")
    assert SECRET.encode() not in (path / "journal.sqlite3").read_bytes()  # sealed on disk
    return path


def test_cli_commands_open_an_encrypted_journal_with_keyring(encrypted: Path, capsys: pytest.CaptureFixture[str]
                                                             ) -> None:
    keys = str(encrypted / "keys")
    assert main(["export", "--path", str(encrypted), *SESSION]) == 2
    assert "keyring" in capsys.readouterr().err  # without the keys: one clear line, no traceback
    assert main(["export", "--path", str(encrypted), *SESSION, "--keyring", keys]) == 0
    assert SECRET in capsys.readouterr().out
    assert main(["search", "--path", str(encrypted), *SESSION, "--keyring", keys, "aisle seats",
                 "--scope", "user"]) == 0
    assert "Ada prefers aisle seats" in capsys.readouterr().out
    assert main(["remember", "--path", str(encrypted), *SESSION, "--keyring", keys, "Ada's desk is 4B"]) == 0
    capsys.readouterr()
    assert main(["search", "--path", str(encrypted), *SESSION, "--keyring", keys, "desk", "--scope", "user"]) == 0
    assert "Ada's desk is 4B" in capsys.readouterr().out  # sealed by the CLI, opened again
    assert main(["stats", "--path", str(encrypted), *SESSION, "--keyring", keys]) == 0
    assert json.loads(capsys.readouterr().out)["messages"] == 2


def test_a_missing_keyring_folder_is_refused(encrypted: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = str(encrypted / "no-such-keys")
    assert main(["stats", "--path", str(encrypted), *SESSION, "--keyring", missing]) == 2
    assert "--keyring" in capsys.readouterr().err
    assert not Path(missing).exists()  # never created: a typo must not become an empty keyring
    assert main(["serve", "--path", str(encrypted), "--no-vectors", "--keyring", missing]) == 2
    assert "--keyring" in capsys.readouterr().err


def test_the_inspector_opens_an_encrypted_journal_with_keyring(encrypted: Path) -> None:
    pytest.importorskip("starlette", reason="the inspector extra is not installed")
    from starlette.testclient import TestClient

    from langmem_tiers.inspector.app import create_app
    from langmem_tiers.inspector.deployment import Deployment
    from langmem_tiers.inspector.settings import InspectorSettings

    with pytest.raises(KeyUnavailableError, match="keyring"):
        Deployment.open(InspectorSettings.resolve(str(encrypted), token=TOKEN, vectors=False))
    with pytest.raises(ConfigError, match="--keyring"):
        InspectorSettings.resolve(str(encrypted), token=TOKEN, vectors=False, keyring=str(encrypted / "typo"))
    settings = InspectorSettings.resolve(str(encrypted), token=TOKEN, vectors=False, keyring=str(encrypted / "keys"))
    deployment = Deployment.open(settings)
    try:
        client = TestClient(create_app(settings, deployment), base_url="http://127.0.0.1:8765")
        auth = {"Authorization": f"Bearer {TOKEN}"}
        page = client.get("/session?session=s1&user=ada", headers=auth)
        assert page.status_code == 200
        assert SECRET in page.text
        assert "Ada prefers aisle seats" in page.text
    finally:
        deployment.close()
