"""SQLite's keyword index of the memories alone (schema v13): what it holds, and the searches that use it.

A search of memory kinds over the keyword budget counts, windows and ranks the memories' own
index, so the turns around them cost nothing and never crowd them out; within the budget it
ranks as before. PostgreSQL has no such index (postgres._v13_changes_nothing_here).
"""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from langmem_tiers.journal.base import Namespace, NewRecord
from langmem_tiers.journal.keyword_budget import KEYWORD_BUDGET
from langmem_tiers.journal.sqlite import MEMORY_INDEX, SqliteJournal
from langmem_tiers.journal.sqlite import fts_query as sqlite_fts_query
from langmem_tiers.keyring import FolderKeyRing
from tests.test_journal_contract import _sqlite_backend

WORDS = ["kayak", "tea", "lisbon", "violin", "garden", "chess"]


def _memory_matches(journal: SqliteJournal, word: str) -> set[int]:
    match = sqlite_fts_query(word)
    return {int(r[0]) for r in journal._sql.all(f"SELECT rowid FROM {MEMORY_INDEX} WHERE {MEMORY_INDEX} MATCH ?",
                                                (match,))}


def _expected_memories(journal: SqliteJournal, word: str) -> set[int]:
    """The memories whose indexed text holds ``word``, read from the records themselves."""
    rows = journal._sql.all("SELECT id, coalesce(terms, text) FROM records WHERE kind <> 'turn'")
    return {int(r[0]) for r in rows if word in str(r[1]).split()}


def _check_indexes(journal: SqliteJournal) -> None:
    for index in ("records_fts", MEMORY_INDEX):  # each index agrees with its content (raises if not)
        journal._sql.execute(f"INSERT INTO {index} ({index}) VALUES ('integrity-check')")


def test_the_memory_index_holds_exactly_the_memories_through_inserts_edits_and_deletes(tmp_path: Path) -> None:
    journal = SqliteJournal(tmp_path / "journal.sqlite3")
    rng = random.Random(13)
    sessions = [journal.namespace_id(Namespace(f"s{i}", "u")) or 0 for i in range(3)]
    ids: list[int] = []
    try:
        for step in range(120):
            ns_id = rng.choice(sessions)
            kind = rng.choice(["turn", "turn", "fact", "preference"])
            ids += journal.add_records(ns_id, [NewRecord(kind, " ".join(rng.sample(WORDS, 2)))])
            if step % 7 == 3:
                journal.update_record(rng.choice(ids), text=" ".join(rng.sample(WORDS, 3)))
            if step % 11 == 5:
                gone = rng.choice(ids)
                journal.delete_records([gone])
                ids.remove(gone)
        journal.delete_namespaces([sessions[0]])
        _check_indexes(journal)
        for word in WORDS:
            assert _memory_matches(journal, word) == _expected_memories(journal, word)
        assert _expected_memories(journal, "kayak")  # the check above compared something
    finally:
        journal.close()


def test_an_encrypted_journal_indexes_its_memories_blind_tokens(tmp_path: Path) -> None:
    journal = SqliteJournal(tmp_path / "journal.sqlite3", keyring=FolderKeyRing(tmp_path / "keys"))
    try:
        ns_id = journal.namespace_id(Namespace("s", "u")) or 0
        turn, fact, other = journal.add_records(ns_id, [
            NewRecord("turn", "kayak trip"), NewRecord("fact", "kayak owner"), NewRecord("fact", "a kayak of wood")])
        journal.update_record(fact, text="kayak and violin owner")
        _check_indexes(journal)
        assert _memory_matches(journal, "kayak") == set()  # plaintext words never reach the index
        tokens = journal._query_tokens("violin", [ns_id]) or []
        assert tokens
        assert _memory_matches(journal, tokens[0]) == {fact}
        journal.keyword_budget = 1  # two facts > 1: over the budget, the search goes through the memories' index
        assert [h.record_id for h in journal.keyword_search("violin kayak", [ns_id], 5, ["fact"])] == [fact]
        kayaks = {h.record_id for h in journal.keyword_search("kayak", [ns_id], 5, ["fact"])}
        assert turn not in kayaks
        assert kayaks == {other}  # 'kayak' over the budget of 1: its newest match among the memories
        assert len(journal._term_counts[MEMORY_INDEX]) > 0  # counted in the memories' index (tokens, not words)
    finally:
        journal.close()


def test_a_version_12_journal_migrates_with_its_memories_indexed(tmp_path: Path) -> None:
    backend = _sqlite_backend(tmp_path)
    backend.create_at_version(12)
    db = sqlite3.connect(tmp_path / "journal.sqlite3")
    with db:  # records written by version 12: a turn and a fact
        db.execute("INSERT INTO records (ns, kind, text, created_at, scope_terms) VALUES "
                   "(1, 'turn', 'kayak trip', 1.0, 's1'), (1, 'fact', 'owns a kayak', 1.0, 's1')")
    db.close()
    journal = backend.journal()
    assert isinstance(journal, SqliteJournal)
    try:
        _check_indexes(journal)
        [fact] = _expected_memories(journal, "kayak")
        assert _memory_matches(journal, "kayak") == {fact}
    finally:
        journal.close()


def test_over_the_budget_a_memory_search_finds_memories_behind_newer_turns(tmp_path: Path) -> None:
    """Every record's index held the turns' matches first: the newest 20 'weather' matches were all turns,
    and a search of facts over a budget of 20 found none of the facts said before them. (PostgreSQL plans
    again on the scope's own facts instead: test_journal_keyword_budget.py.)"""
    journal = SqliteJournal(tmp_path / "journal.sqlite3")
    try:
        ns_id = journal.namespace_id(Namespace("s", "u")) or 0
        facts = journal.add_records(ns_id, [NewRecord("fact", f"weather fact {i}") for i in range(30)])
        turns = journal.add_records(ns_id, [NewRecord("turn", f"weather turn {i}") for i in range(60)])
        journal.keyword_budget = 20  # 30 facts > 20: 'weather' is over it, ranked in recency windows
        found = [h.record_id for h in journal.keyword_search("weather", [ns_id], 5, ["fact"])]
        assert len(found) == 5
        assert set(found) <= set(facts[-20:])  # among the newest facts' window
        # As ranking that window of the memories' index directly: bm25's best over its newest 5 matches.
        match = sqlite_fts_query("weather")
        newest = [r[0] for r in journal._sql.all(
            f"SELECT rowid FROM {MEMORY_INDEX} WHERE {MEMORY_INDEX} MATCH ? ORDER BY rowid DESC LIMIT 5", (match,))]
        expected = [r[0] for r in journal._sql.all(
            f"SELECT rowid FROM {MEMORY_INDEX} WHERE {MEMORY_INDEX} MATCH ? AND rowid >= ? "
            f"ORDER BY bm25({MEMORY_INDEX}, 1.0, 0.0), rowid DESC LIMIT 5", (match, newest[-1]))]
        assert found == expected
        # A search of turns goes through every record's index.
        assert {h.record_id for h in journal.keyword_search("weather", [ns_id], 5, ["turn"])} <= set(turns)
    finally:
        journal.close()


@pytest.mark.parametrize("kinds", [["fact"], ["fact", "preference"]])
def test_within_the_budget_a_memory_search_ranks_as_before(tmp_path: Path, kinds: list[str]) -> None:
    """Within the budget the search ranks every record's index, scored over the whole journal (bm25's weights
    count the turns too), exactly as before schema v13 (the evaluation's haystacks all stay here)."""
    journal = SqliteJournal(tmp_path / "journal.sqlite3")
    rng = random.Random(3)
    try:
        ns_id = journal.namespace_id(Namespace("s", "u")) or 0
        journal.add_records(ns_id, [NewRecord(rng.choice(["turn", "fact", "preference"]),
                                              " ".join(rng.sample(WORDS, 3))) for _ in range(60)])
        assert journal.keyword_budget == KEYWORD_BUDGET
        found = [(h.record_id, round(h.score, 9)) for h in journal.keyword_search("kayak tea", [ns_id], 8, kinds)]
        members = ",".join("?" * len(kinds))
        expected = [(r[0], round(-r[1], 9)) for r in journal._sql.all(
            "SELECT r.id, bm25(records_fts, 1.0, 0.0) AS score FROM records_fts JOIN records r "
            f"ON r.id = records_fts.rowid WHERE records_fts MATCH ? AND r.kind IN ({members}) "
            "ORDER BY score, r.id DESC LIMIT 8", (sqlite_fts_query("kayak tea"), *kinds))]
        assert found == expected
        assert len(found) == 8
    finally:
        journal.close()


def test_an_erased_memory_leaves_no_term_in_the_memory_index_after_compact(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    journal = SqliteJournal(path)
    try:
        keep = journal.namespace_id(Namespace("keep", "bob")) or 0
        journal.add_records(keep, [NewRecord("fact", f"bob likes garden number {i}") for i in range(50)])
        gone = journal.namespace_id(Namespace("gone", "ann")) or 0
        journal.add_records(gone, [NewRecord("fact", "ann keeps a zanzibar")])
        journal.delete_namespaces([gone])
        assert journal.residue(["zanzibar"])["zanzibar"] > 0  # the deleted row's copies (index segments)
        assert journal.compact() is True
        assert journal.residue(["zanzibar"]) == {"zanzibar": 0}
        journal.keyword_budget = 10
        assert journal.keyword_search("garden", [keep], 3, ["fact"])  # the rest is intact
    finally:
        journal.close()


def test_reindex_rebuilds_the_memory_index_too(tmp_path: Path) -> None:
    journal = SqliteJournal(tmp_path / "journal.sqlite3")
    try:
        ns_id = journal.namespace_id(Namespace("s", "u")) or 0
        [fact] = journal.add_records(ns_id, [NewRecord("fact", "owns a kayak")])
        journal._sql.execute(f"INSERT INTO {MEMORY_INDEX} ({MEMORY_INDEX}) VALUES ('delete-all')")  # a lost index
        assert _memory_matches(journal, "kayak") == set()
        journal.requeue_all()  # what reindex() asks of the journal
        assert _memory_matches(journal, "kayak") == {fact}
        _check_indexes(journal)
    finally:
        journal.close()


def test_an_encrypted_version_12_journal_migrates_with_blind_tokens_indexed(tmp_path: Path) -> None:
    """The migration's rebuild reads the indexed text through the view (``coalesce(terms, text)``): an
    encrypted journal's memories are indexed by their blind tokens, never by plaintext or ciphertext."""
    keyring = FolderKeyRing(tmp_path / "keys")
    path = tmp_path / "journal.sqlite3"
    journal = SqliteJournal(path, keyring=keyring)
    ns_id = journal.namespace_id(Namespace("s", "u")) or 0
    [fact] = journal.add_records(ns_id, [NewRecord("fact", "plays the violin")])
    journal.close()
    db = sqlite3.connect(path)
    with db:  # back to version 12: no memory index
        for trigger in ("records_memory_ai", "records_memory_ad", "records_memory_au"):
            db.execute(f"DROP TRIGGER {trigger}")
        db.execute(f"DROP TABLE {MEMORY_INDEX}")
        db.execute("DROP VIEW records_memory_fts_content")
        db.execute("UPDATE meta SET value = '12' WHERE key = 'schema_version'")
    db.close()
    journal = SqliteJournal(path, keyring=keyring)
    try:
        _check_indexes(journal)
        assert _memory_matches(journal, "violin") == set()
        tokens = journal._query_tokens("violin", [ns_id]) or []
        assert tokens
        assert _memory_matches(journal, tokens[0]) == {fact}
    finally:
        journal.close()
