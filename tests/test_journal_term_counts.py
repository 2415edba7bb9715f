"""The SQLite journal's term counts kept between keyword searches: exact across appends, dropped by any
delete or edit of indexed text, whichever process makes it (``keyword_budget.TermCounts``).

A tiny budget makes a few records exceed it. "Exact" is checked against a journal opened afresh on the
same file (no counts held), which counts every term from the index.
"""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from langmem_tiers.journal.base import Namespace, NewRecord
from langmem_tiers.journal.keyword_budget import TermCount, TermCounts
from langmem_tiers.journal.sqlite import MEMORY_INDEX, SqliteJournal
from tests.test_journal_contract import _sqlite_backend
from tests.test_journal_keyword_budget import _ids

BUDGET = 4
QUERY = "apple banana"


def _search(journal: SqliteJournal, ns_id: int) -> list[int]:
    return _ids(journal, QUERY, [ns_id], budget=BUDGET)


def _fresh(path: Path, ns_id: int) -> list[int]:
    """The same search by a journal that holds no counts."""
    journal = SqliteJournal(path)
    try:
        return _search(journal, ns_id)
    finally:
        journal.close()


@pytest.fixture
def filled(tmp_path: Path) -> Iterator[tuple[SqliteJournal, int, list[int]]]:
    """Six records of 'apple' (over the budget of 4) and two of 'banana' in one session; the apples' ids.
    Four more records match neither: the session stays over the budget when four apples go."""
    journal = SqliteJournal(tmp_path / "journal.sqlite3")
    ns_id = journal.namespace_id(Namespace("s", "u")) or 0
    journal.add_records(ns_id, [NewRecord("turn", f"cherries, bowl {i}") for i in range(4)])
    apples = journal.add_records(ns_id, [NewRecord("turn", f"an apple a day, number {i}") for i in range(6)])
    journal.add_records(ns_id, [NewRecord("turn", "a banana split"), NewRecord("turn", "banana bread")])
    yield journal, ns_id, apples
    journal.close()


@pytest.fixture
def count_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Every term count the SQLite journal reads from its index: (term, the id its count starts above)."""
    calls: list[tuple[str, int]] = []
    original = SqliteJournal._count_matches

    def spy(db: Any, term: str, cap: int, above: int = 0, upto: int | None = None,
            index: str = "records_fts") -> TermCount:
        calls.append((term, above))
        return original(db, term, cap, above, upto, index)

    monkeypatch.setattr(SqliteJournal, "_count_matches", staticmethod(spy))
    return calls


def test_held_counts_are_read_again_only_above_their_id_and_stay_exact(
        filled: tuple[SqliteJournal, int, list[int]], count_calls: list[tuple[str, int]]) -> None:
    journal, ns_id, _ = filled
    first = _search(journal, ns_id)
    assert {term for term, above in count_calls} == {"apple", "banana"}
    assert all(above == 0 for _, above in count_calls)  # nothing held yet: whole counts
    count_calls.clear()
    assert _search(journal, ns_id) == first
    assert count_calls == []  # nothing appended since: the held counts answer
    [late] = journal.add_records(ns_id, [NewRecord("turn", "banana pancakes")])
    found, calls = _search(journal, ns_id), list(count_calls)
    assert found == _fresh(journal.path, ns_id)
    # 'banana' (2 matches, under the cap) grows by the one new match: a seek above the id it saw.
    # 'apple' had reached the cap (its newest 5 of 6): counted above the id too, no new match, held.
    assert sorted(calls) == [("apple", late - 1), ("banana", late - 1)]
    count_calls.clear()
    [pie] = journal.add_records(ns_id, [NewRecord("turn", "apple pie")])
    found, calls = _search(journal, ns_id), list(count_calls)
    assert found == _fresh(journal.path, ns_id)
    # A new match of a capped count moves its window of newest matches: its new oldest is found by a
    # seek from the old one, not by counting the term again.
    assert sorted(calls) == [("apple", pie - 1), ("banana", pie - 1)]


def test_held_counts_equal_fresh_counts_through_random_appends(tmp_path: Path) -> None:
    """Every way a held count grows (under the cap, onto it, past it, its window moving), checked after
    each append against counting afresh: the matches and the oldest id of the newest ``cap``."""
    rng = random.Random(5)
    journal = SqliteJournal(tmp_path / "journal.sqlite3")
    ns_id = journal.namespace_id(Namespace("s", "u")) or 0
    words, cap = ["apple", "banana", "cherry", "damson"], 5
    try:
        for _ in range(80):
            batch = [NewRecord("turn", " ".join(rng.sample(words, rng.randint(1, 3))))
                     for _ in range(rng.choice([1, 1, 2, 7]))]
            journal.add_records(ns_id, batch)
            asked = rng.sample(words, 2)
            held = journal._counts(journal._sql, asked, cap)
            assert held == [journal._count_matches(journal._sql, t, cap) for t in asked]
        assert len(journal._term_counts["records_fts"]) == len(words)
    finally:
        journal.close()


@pytest.mark.parametrize("change", ["delete", "edit"])
def test_a_delete_or_edit_by_another_connection_drops_the_held_counts(
        filled: tuple[SqliteJournal, int, list[int]], change: str) -> None:
    journal, ns_id, apples = filled
    before = _search(journal, ns_id)  # 'apple' over the budget: only the bananas rank
    other = SqliteJournal(journal.path)
    if change == "delete":
        other.delete_records(apples[:4])
    else:
        for rid in apples[:4]:
            other.update_record(rid, text="a pear instead")
    other.close()
    after = _search(journal, ns_id)
    # Two apples left: both terms fit the budget now and the apples rank too. Counts held from
    # before the change would still say 'apple' is over the budget and find the bananas alone.
    assert after == _fresh(journal.path, ns_id)
    assert after != before
    assert set(apples[4:]) <= set(after)


def test_erasing_a_session_drops_the_held_counts_at_once(filled: tuple[SqliteJournal, int, list[int]]) -> None:
    journal, ns_id, _ = filled
    _search(journal, ns_id)
    journal._counts(journal._sql, ["apple"], BUDGET + 1, MEMORY_INDEX)  # as a memory search over the budget
    assert len(journal._term_counts["records_fts"]) == 2
    assert len(journal._term_counts[MEMORY_INDEX]) == 1
    journal.delete_namespaces([ns_id])
    assert [len(counts) for counts in journal._term_counts.values()] == [0, 0]


def test_a_version_11_journal_migrates_with_its_churn_counted_from_zero(tmp_path: Path) -> None:
    backend = _sqlite_backend(tmp_path)
    backend.create_at_version(11)
    journal = backend.journal()
    assert isinstance(journal, SqliteJournal)
    [a, b] = journal.add_records(1, [NewRecord("turn", "kayaks"), NewRecord("turn", "canoes")])

    def churn() -> str:
        db = sqlite3.connect(journal.path)
        try:
            return str(db.execute("SELECT value FROM meta WHERE key = 'records_churn'").fetchone()[0])
        finally:
            db.close()

    assert churn() == "0"  # appends do not move it
    journal.update_record(a, text="kayaks")  # the same text: the index is unchanged
    assert churn() == "0"
    journal.update_record(a, text="kayaks at dawn")
    journal.delete_records([b])
    assert churn() == "2"


def test_term_counts_drop_everything_on_a_new_stamp_and_the_least_recent_when_full() -> None:
    counts = TermCounts(capacity=2)
    counts.restamp(0)
    counts.put(TermCount("a", 3, 1), 5, 10)
    counts.put(TermCount("b", 5, 2), 5, 10)
    assert counts.get("a", 5) == (TermCount("a", 3, 1), 10)  # 'a' is now the most recent
    counts.put(TermCount("c", 1, 9), 5, 10)
    assert counts.get("b", 5) is None
    assert len(counts) == 2
    assert counts.get("a", 6) is None  # held for another cap only
    counts.restamp(0)
    assert len(counts) == 2
    counts.restamp(1)
    assert len(counts) == 0
