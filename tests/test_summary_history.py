"""The rolling summary's version history (schema v7): kept, bounded, erased with what it folded.

Journal-level cases run on every backend (the contract suite's ``backend`` fixture: SQLite
and PostgreSQL); memory-level cases run on a real SQLite journal with the deterministic
recording summarizer (a fake LLM that counts its calls).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from langmem_tiers import MemoryConfig, TieredMemory, WordCounter
from langmem_tiers.errors import ConfigError
from langmem_tiers.journal.base import Journal
from langmem_tiers.messages import make_message
from tests import test_journal_contract as contract
from tests.conftest import SMALL_CONFIG, RecordingSummarizer
from tests.test_journal_contract import Backend, _append, _ns

# The contract suite's fixtures: every journal case below runs on SQLite and PostgreSQL.
pg_url, backend, journal = contract.pg_url, contract.backend, contract.journal


def _messages(journal: Journal, ns_id: int, count: int) -> list[int]:
    stored = _append(journal, ns_id, [make_message("user", f"message number {i}") for i in range(count)])
    return [m.id or 0 for m in stored]


def _save(journal: Journal, ns_id: int, text: str, cursor: int, history: int = 20) -> None:
    with journal.write(ns_id) as tx:
        tx.set_summary(text, len(text.split()), cursor, history=history)


# --- journal (SQLite and PostgreSQL) ----------------------------------------------


def test_history_keeps_the_newest_versions_newest_first(journal: Journal) -> None:
    ns_id = _ns(journal)
    ids = _messages(journal, ns_id, 6)
    for i, cursor in enumerate(ids[:5]):
        _save(journal, ns_id, f"summary {i}", cursor, history=3)
    versions = journal.summary_history(ns_id)
    assert [v.text for v in versions] == ["summary 4", "summary 3", "summary 2"]
    assert [v.cursor for v in versions] == [ids[4], ids[3], ids[2]]
    assert [v.tokens for v in versions] == [2, 2, 2]
    assert versions[0].version > versions[1].version > versions[2].version
    with journal.read() as rx:
        assert rx.state(ns_id).summary_version == versions[0].version
    assert all(v.created_at > 0 for v in versions)
    assert [v.text for v in journal.summary_history(ns_id, limit=1)] == ["summary 4"]
    _save(journal, ns_id, "summary 5", ids[5], history=0)  # 0 keeps none, and drops what was kept
    assert journal.summary_history(ns_id) == []
    with journal.read() as rx:
        assert rx.state(ns_id).summary == "summary 5"


def test_erasure_deletes_every_version_that_folded_the_messages_and_falls_back(journal: Journal) -> None:
    ns_id = _ns(journal)
    ids = _messages(journal, ns_id, 8)
    with journal.write(ns_id) as tx:
        tx.set_window_start(ids[7])
    _save(journal, ns_id, "A covers 0-1", ids[1])
    _save(journal, ns_id, "B covers 0-3", ids[3])
    _save(journal, ns_id, "C covers 0-5", ids[5])
    with journal.read() as rx:
        before = rx.state(ns_id)
    journal.erase_messages(ns_id, [ids[3]])
    assert [v.text for v in journal.summary_history(ns_id)] == ["A covers 0-1"]
    with journal.read() as rx:
        after = rx.state(ns_id)
    # The newest clean version is the summary again: only the turns after its cursor are pending.
    assert (after.summary, after.summary_cursor, after.summary_tokens) == ("A covers 0-1", ids[1], 3)
    assert after.summary_version > before.summary_version  # an in-flight summary is recognized as stale
    assert after.window_start == ids[7]
    # A message after the summary's cursor touches no version.
    journal.erase_messages(ns_id, [ids[6]])
    assert [v.text for v in journal.summary_history(ns_id)] == ["A covers 0-1"]
    journal.erase_messages(ns_id, [ids[0]])
    assert journal.summary_history(ns_id) == []
    with journal.read() as rx:
        assert (rx.state(ns_id).summary, rx.state(ns_id).summary_cursor) == ("", 0)


def test_clear_and_delete_remove_the_history(journal: Journal) -> None:
    kept, cleared, deleted = _ns(journal, "kept"), _ns(journal, "cleared"), _ns(journal, "deleted")
    for ns_id, word in ((kept, "keepsake"), (cleared, "zanzibar"), (deleted, "quokka")):
        ids = _messages(journal, ns_id, 2)
        _save(journal, ns_id, f"older {word}", ids[0])
        _save(journal, ns_id, f"newer {word}", ids[1])
    journal.clear_session(cleared)
    journal.delete_namespaces([deleted])
    assert journal.summary_history(cleared) == []
    assert journal.summary_history(deleted) == []
    assert [v.text for v in journal.summary_history(kept)] == ["newer keepsake", "older keepsake"]
    journal.compact()
    found = journal.residue(["zanzibar", "quokka", "keepsake"])
    assert found["zanzibar"] == 0
    assert found["quokka"] == 0
    assert found["keepsake"] > 0  # the scan does read the history table


def test_migration_to_v7_keeps_the_current_summary_as_the_first_version(backend: Backend) -> None:
    backend.create_at_version(6)  # namespace 1 ('u', '', 'old') with its state row and one message
    backend.execute("UPDATE state SET summary=?, summary_tokens=?, summary_cursor=?, summary_version=? WHERE ns=?",
                    ("written by version 6 about kayaks", 6, 1, 4, 1))
    journal = backend.journal()  # migrates 6 -> current
    [version] = journal.summary_history(1)
    assert (version.version, version.text, version.tokens, version.cursor) == (4, "written by version 6 about kayaks",
                                                                               6, 1)


def test_update_record_pins_bumps_and_queues_the_upsert(journal: Journal) -> None:
    from langmem_tiers.journal.base import NewRecord

    ns_id = _ns(journal, user="u")
    [rid] = journal.add_records(ns_id, [NewRecord(kind="fact", text="Ada likes tea")])
    journal.outbox_done(journal.outbox(10))
    with journal.read() as rx:
        before = rx.state(ns_id).version
    journal.update_record(rid, pinned=True)
    [record] = journal.records([rid])
    assert record.pinned
    assert record.text == "Ada likes tea"
    assert [r.id for r in journal.scoped_records([ns_id], pinned_only=True)] == [rid]
    assert [(i.record_id, i.op) for i in journal.outbox(10)] == [(rid, "upsert")]
    with journal.read() as rx:
        assert rx.state(ns_id).version > before
    journal.update_record(rid, pinned=False)
    assert journal.scoped_records([ns_id], pinned_only=True) == []


# --- TieredMemory (SQLite) --------------------------------------------------------


def _open(path: Path, summarizer: Any, **config: Any) -> TieredMemory:
    return TieredMemory.open(path, session_id="s", user_id="u", embedder=False, counter=WordCounter(),
                             summarizer=summarizer, config=MemoryConfig(**{**SMALL_CONFIG.__dict__, **config}))


def _talk(memory: TieredMemory, turns: int, start: int = 0) -> None:
    for i in range(start, start + turns):
        memory.add("user", f"turn {i} the user mentions topic{i} with some filler words to fill the window")
        memory.add("assistant", f"reply {i} noted topic{i} and a few more words of answer")


def test_memory_history_follows_the_summary_and_is_bounded(tmp_path: Path) -> None:
    with _open(tmp_path, RecordingSummarizer(), summary_history=3) as memory:
        _talk(memory, 12)
        memory.flush()
        versions = memory.summary_history()
        assert len(versions) == 3
        assert versions[0].text == memory.summary
        assert versions[0].cursor == memory.stats().summary_cursor
        assert versions[0].cursor > versions[1].cursor > versions[2].cursor
        assert [v.version for v in memory.summary_history(limit=2)] == [v.version for v in versions[:2]]
        with pytest.raises(ConfigError, match="limit"):
            memory.summary_history(limit=-1)


async def test_async_history_matches(tmp_path: Path) -> None:
    with _open(tmp_path, RecordingSummarizer()) as memory:
        _talk(memory, 8)
        memory.flush()
        assert await memory.asummary_history() == memory.summary_history()


def test_forget_turn_refolds_from_the_newest_clean_version(tmp_path: Path) -> None:
    summarizer = RecordingSummarizer()
    with _open(tmp_path, summarizer, summary_input_tokens=60) as memory:
        _talk(memory, 16)
        memory.flush()
        versions = memory.summary_history()
        assert len(versions) >= 4
        # The newest summarized turn: the versions saved before its first message stay valid.
        turn = next(r for r in memory.journal.scoped_records([memory._ns_id], ["turn"])
                    if min(r.message_ids) <= versions[0].cursor <= max(r.message_ids))
        clean = next(v for v in versions if v.cursor < min(turn.message_ids))
        assert clean != versions[-1]  # older versions exist: a full rebuild would re-fold them
        erased_words = [w for w in memory.journal.messages_by_id(list(turn.message_ids))[0].text.split()
                        if w.startswith("topic")]
        summarizer.requests.clear()
        memory.forget(turn.id)
        assert memory.summary_history()[0] == clean  # the fallback: no summarizer call yet
        assert memory.summary == clean.text
        memory.flush()
        refolded = [m.id for r in summarizer.requests for m in r.messages]
        # Only the turns after the clean version were folded again, never the whole conversation.
        assert refolded
        assert min(refolded) > clean.cursor
        assert not set(refolded) & set(turn.message_ids)
        for version in memory.summary_history():
            assert not any(w in version.text.split() for w in erased_words), version
        assert not any(w in memory.summary for w in erased_words)


def test_clear_and_forget_session_drop_the_history(tmp_path: Path) -> None:
    with _open(tmp_path, RecordingSummarizer()) as memory:
        _talk(memory, 8)
        memory.flush()
        assert memory.summary_history()
        memory.clear()
        assert memory.summary_history() == []
        _talk(memory, 8)
        memory.flush()
        other = memory.for_session("s2")
        _talk(other, 8)
        other.flush()
        memory.forget("user")
        assert other.journal.summary_history(other._ns_id) == []


def test_summary_history_config_is_validated() -> None:
    with pytest.raises(ConfigError, match="summary_history"):
        MemoryConfig(summary_history=-1)
    assert MemoryConfig().summary_history == 20


def test_an_encrypted_history_falls_back_and_opens(tmp_path: Path) -> None:
    pytest.importorskip("cryptography", reason="the encryption extra is not installed")
    config = MemoryConfig(**{**SMALL_CONFIG.__dict__, "summary_input_tokens": 60})
    with TieredMemory.open(tmp_path, session_id="s", user_id="u", embedder=False, counter=WordCounter(),
                           summarizer=RecordingSummarizer(), config=config, keyring=True) as memory:
        _talk(memory, 12)
        memory.flush()
        versions = memory.summary_history()
        turn = next(r for r in memory.journal.scoped_records([memory._ns_id], ["turn"])
                    if min(r.message_ids) <= versions[0].cursor <= max(r.message_ids))
        clean = next(v for v in versions if v.cursor < min(turn.message_ids))
        memory.forget(turn.id)
        # The clean version's sealed text became the summary as stored: it opens with the same key.
        assert memory.summary == clean.text
        assert memory.summary_history()[0] == clean
