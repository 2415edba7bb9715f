"""TieredMemory.for_namespace: a whole namespace on the parent's journal and collaborators; location."""

from __future__ import annotations

from pathlib import Path

import pytest

from langmem_tiers import ConfigError, Namespace, TieredMemory, WordCounter


def test_for_namespace_reaches_a_session_without_the_parents_user(tmp_path: Path) -> None:
    with TieredMemory.open(tmp_path, session_id="chat", user_id="ada", agent_id="bot", embedder=False,
                           counter=WordCounter()) as parent:
        parent.remember("Ada drinks green tea.")
        other = parent.for_namespace(Namespace.of("store"))
        assert other.namespace == Namespace("store")  # no user, no agent: for_session would give ada's
        assert parent.for_session("store").namespace == Namespace("store", "ada", "bot")
        assert other.journal is parent.journal
        assert other.recall is parent.recall
        assert other.config is parent.config
        assert other.counter is parent.counter
        assert other.summarizer is parent.summarizer
        assert other.stats().recall_mode == parent.stats().recall_mode

        other.remember("The store's own memory.")
        assert [f.text for f in other.facts()] == ["The store's own memory."]  # its own scope
        assert [f.text for f in parent.facts()] == ["Ada drinks green tea."]
        other.close()
        assert [m.role for m in parent.messages()] == []  # the parent's journal is still open


def test_for_namespace_follows_the_parents_clock(tmp_path: Path) -> None:
    with TieredMemory.open(tmp_path, session_id="chat", embedder=False, counter=WordCounter()) as parent:
        other = parent.for_namespace(Namespace.of("s2", "bob"))
        parent.clock = lambda: 1_000.0  # set after the handle was made: the handle sees it
        assert other.clock() == 1_000.0
        other.close()


def test_for_namespace_refuses_what_is_not_a_namespace(tmp_path: Path) -> None:
    with TieredMemory.open(tmp_path, session_id="chat", embedder=False, counter=WordCounter()) as parent, \
            pytest.raises(ConfigError, match="must be a Namespace"):
        parent.for_namespace("store")  # type: ignore[arg-type]


def test_location_of_the_embedded_default_is_its_folder(tmp_path: Path) -> None:
    with TieredMemory.open(tmp_path / "mem", session_id="chat", embedder=False, counter=WordCounter()) as memory:
        assert memory.location == str(tmp_path / "mem")
        with TieredMemory.open(memory.location, session_id="chat", embedder=False, counter=WordCounter()) as again:
            again.add("user", "hello")
        assert [m.text for m in memory.messages()] == ["hello"]
