"""A PostgreSQL-backed TieredChatMemory serialises without its password and reopens with one from libpq's sources.

The server here asks TCP logins other than the superuser's for a password (scram-sha-256), so a URL whose
password was lost (or redacted to ``***``, as the journal shows it) cannot reopen: the test fails on the old
behaviour, where ``to_dict()`` carried ``postgresql://ada:***@...``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from langmem_tiers import TieredMemory, WordCounter
from langmem_tiers.errors import JournalError
from llama_index.core.base.llms.types import ChatMessage
from tests.support.postgres import ENV_URL, find_bindir, postgres_server

from llama_index.memory.langmem_tiers import TieredChatMemory, TieredMemoryBlock

PASSWORD = "s3cret-Pw"


@pytest.fixture(scope="module")
def password_url() -> Iterator[str]:
    """``postgresql://ada:PASSWORD@host/db`` on a throwaway server that checks passwords over TCP."""
    if os.environ.get(ENV_URL) or find_bindir() is None:
        pytest.skip("needs a throwaway server of its own (it rewrites pg_hba.conf)")
    psycopg = pytest.importorskip("psycopg")
    with postgres_server() as url:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"CREATE ROLE ada LOGIN SUPERUSER PASSWORD '{PASSWORD}'")
            hba = Path(conn.execute("SHOW hba_file").fetchone()[0])
            hba.write_text("local all all trust\nhost all postgres 127.0.0.1/32 trust\n"
                           "host all all 127.0.0.1/32 scram-sha-256\n")
            conn.execute("SELECT pg_reload_conf()")
        parts = urlsplit(url)
        yield urlunsplit(parts._replace(netloc=f"ada:{PASSWORD}@{parts.netloc.split('@', 1)[1]}"))


@pytest.fixture
def no_pgpassword(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setenv("PGPASSFILE", str(tmp_path / "no-pgpass"))


def _without_password(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=f"ada@{parts.netloc.split('@', 1)[1]}"))


def test_location_is_the_url_without_its_password(password_url: str, tmp_path: Path) -> None:
    with TieredMemory.open(password_url, session_id=f"s-{uuid.uuid4().hex[:8]}", embedder=False,
                           counter=WordCounter()) as memory:
        assert memory.location == _without_password(password_url)
        assert PASSWORD not in memory.location
        assert "***" not in memory.location
    with TieredMemory.open(tmp_path, session_id="s", embedder=False, counter=WordCounter()) as memory:
        assert memory.location == str(tmp_path)


@pytest.mark.usefixtures("no_pgpassword")
def test_a_serialised_memory_reopens_with_pgpassword(password_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    session = f"s-{uuid.uuid4().hex[:8]}"
    with TieredMemory.open(password_url, session_id=session, embedder=False, counter=WordCounter()) as core:
        core.add("user", "My name is Ada.")
        data = TieredChatMemory.from_memory(core).to_dict()
    assert data["path"] == _without_password(password_url)
    assert PASSWORD not in repr(data)

    monkeypatch.setenv("PGPASSWORD", PASSWORD)
    restored = TieredChatMemory.from_dict(data, embed_model=False)
    try:
        assert [m.content for m in restored.get_all()] == ["My name is Ada."]
    finally:
        restored.close()


@pytest.mark.usefixtures("no_pgpassword")
def test_from_defaults_keeps_the_password_out_of_the_dict_and_reopens_with_the_url_given_again(
        password_url: str) -> None:
    session = f"s-{uuid.uuid4().hex[:8]}"
    memory = TieredChatMemory.from_defaults(path=password_url, session_id=session, embed_model=False)
    try:
        memory.put(ChatMessage(role="user", content="I drink green tea."))  # opens with the full URL
        data = memory.to_dict()
    finally:
        memory.close()
    assert PASSWORD not in repr(data)
    assert PASSWORD not in memory.to_string()

    restored = TieredChatMemory.from_dict(data, path=password_url, embed_model=False)
    try:
        assert [m.content for m in restored.get_all()] == ["I drink green tea."]
        assert PASSWORD not in repr(restored.to_dict())
    finally:
        restored.close()


@pytest.mark.usefixtures("no_pgpassword")
def test_a_serialised_memory_without_a_password_source_raises_a_clear_error(password_url: str) -> None:
    data = TieredChatMemory(path=password_url, session_id="s-none", vectors=False).to_dict()
    restored = TieredChatMemory.from_dict(data, embed_model=False)
    with pytest.raises(JournalError, match="PGPASSWORD"):
        restored.get_all()


@pytest.mark.usefixtures("no_pgpassword")
def test_a_memory_block_keeps_the_password_out_of_its_dict(password_url: str) -> None:
    session = f"s-{uuid.uuid4().hex[:8]}"
    block = TieredMemoryBlock(path=password_url, vectors=False)
    try:
        block.memory_for(session).add("user", "Ada lives in Lisbon.")  # opened with the full URL
        data = block.model_dump()
    finally:
        block.close()
    assert data["path"] == _without_password(password_url)
    assert PASSWORD not in repr(data)

    restored = TieredMemoryBlock(**data)
    with pytest.raises(JournalError, match="PGPASSWORD"):
        restored.memory_for(session)
    again = TieredMemoryBlock(**{**data, "path": password_url})
    try:
        assert [m.text for m in again.memory_for(session).messages()] == ["Ada lives in Lisbon."]
    finally:
        again.close()
