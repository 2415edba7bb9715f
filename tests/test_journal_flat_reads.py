"""The journal reads every context() and write makes do work that does not grow with the session's history.

Measured as SQLite virtual-machine steps (a progress handler), not time: a read that walks every
record of the scope takes ~20x the steps at 20x the records, one that seeks through an index
the same. Each case here was once a walk (found by the 100k and 1M scale runs, issue 15).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from langmem_tiers.journal.base import SKILL_KIND, Namespace, NewRecord, Scope, ScopeListing
from langmem_tiers.journal.sqlite import SqliteJournal
from langmem_tiers.messages import make_message
from langmem_tiers.recall.request import ids_to_probe

SMALL, LARGE = 200, 4_000


def _journal(tmp_path: Path, turns: int) -> tuple[SqliteJournal, int]:
    """A session of ``turns`` indexed turn records, three memories, and two records still queued."""
    journal = SqliteJournal(tmp_path / f"j{turns}" / "journal.sqlite3")
    ns_id = journal.namespace_id(Namespace("s", user_id="u"))
    assert ns_id is not None
    with journal.write(ns_id) as tx:
        stored = tx.insert_messages([make_message("user", f"line {i} about kayaks") for i in range(turns)],
                                    [4] * turns, "words")
        tx.insert_records([NewRecord("turn", m.text, (m.id or 0,)) for m in stored])
        tx.insert_records([NewRecord(kind, f"a {kind} memory") for kind in ("fact", "preference", "episode")])
    journal.outbox_done(journal.outbox(turns + 10))
    with journal.write(ns_id) as tx:
        tx.insert_records([NewRecord("turn", "queued one"), NewRecord("turn", "queued two")])
    return journal, ns_id


def _steps(journal: SqliteJournal, read: Callable[[], Any]) -> int:
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0  # 0: go on

    journal._db.set_progress_handler(count, 50)
    try:
        read()
    finally:
        journal._db.set_progress_handler(None, 50)
    return steps * 50


READS: dict[str, Callable[[SqliteJournal, int], Any]] = {
    "pending_records": lambda j, ns: j.pending_records([ns], 64),
    "current_memories": lambda j, ns: _in_write(j, ns, lambda tx: tx.current_memories([ns])),
    "scoped_records of memory kinds": lambda j, ns: j.scoped_records([ns], kinds=["fact", "preference"]),
    "pinned scoped_records": lambda j, ns: j.scoped_records([ns], pinned_only=True),
    "scope_versions": lambda j, ns: j.scope_versions([ns]),
}


def _in_write(journal: SqliteJournal, ns_id: int, read: Callable[[Any], Any]) -> Any:
    with journal.write(ns_id) as tx:
        return read(tx)


@pytest.mark.parametrize("name", sorted(READS))
def test_read_work_does_not_grow_with_the_history(tmp_path: Path, name: str) -> None:
    read = READS[name]
    small, small_ns = _journal(tmp_path, SMALL)
    large, large_ns = _journal(tmp_path, LARGE)
    try:
        small_steps = _steps(small, lambda: read(small, small_ns))
        large_steps = _steps(large, lambda: read(large, large_ns))
    finally:
        small.close()
        large.close()
    # 20x the records: a walk would take ~20x the steps; an index seek the same (B-tree depth aside).
    assert large_steps <= 2 * small_steps + 500, (name, small_steps, large_steps)


def test_pending_records_are_the_queued_ones(tmp_path: Path) -> None:
    journal, ns_id = _journal(tmp_path, SMALL)
    try:
        assert [r.text for r in journal.pending_records([ns_id], 64)] == ["queued one", "queued two"]
        assert [r.text for r in journal.pending_records([ns_id], 1)] == ["queued two"]
    finally:
        journal.close()


def _memories_journal(tmp_path: Path, memories: int) -> tuple[SqliteJournal, int, int]:
    """A user's session of ``memories`` unkeyed memories and two keyed ones; the id of one unkeyed one."""
    journal = SqliteJournal(tmp_path / f"m{memories}" / "journal.sqlite3")
    ns_id = journal.namespace_id(Namespace("s", user_id="u"))
    assert ns_id is not None
    with journal.write(ns_id) as tx:
        ids = tx.insert_records([NewRecord("fact", f"fact {i} about kayaks") for i in range(memories)])
        tx.insert_records([NewRecord("fact", "I live in Porto", key="home_city"),
                           NewRecord("preference", "green tea", key="drink")])
    return journal, ns_id, ids[memories // 2]


def test_planning_memories_reads_the_keyed_ones_and_the_matches_not_every_memory(tmp_path: Path) -> None:
    """A summary fold plans its memories against the keyed ones and its keyword matches
    (``current_memories(..., unkeyed=ids)``): a user's other memories grow with the history."""
    counts = []
    for size in (SMALL, LARGE):
        journal, ns_id, match = _memories_journal(tmp_path, size)
        try:
            read = lambda tx: tx.current_memories([ns_id], unkeyed=[match])  # noqa: E731
            assert [r.text for r in _in_write(journal, ns_id, read)] == [
                f"fact {size // 2} about kayaks", "I live in Porto", "green tea"]
            counts.append(_steps(journal, lambda: _in_write(journal, ns_id, read)))
            whole = _steps(journal, lambda: _in_write(journal, ns_id, lambda tx: tx.current_memories([ns_id])))
        finally:
            journal.close()
    assert whole > 10 * counts[1]  # the whole read of LARGE memories does walk them: the measure sees it
    assert counts[1] <= 2 * counts[0] + 500, counts


def test_the_profile_reads_the_keyed_memories_and_the_matches_not_every_memory(tmp_path: Path) -> None:
    """context() reads the profile's unkeyed memories by id (the question's keyword matches, the newest
    sessions' ones): ``scoped_records(..., unkeyed=ids)`` stays flat as a user's memories grow."""
    kinds = ["fact", "preference", "relation"]
    counts = []
    for size in (SMALL, LARGE):
        journal, ns_id, match = _memories_journal(tmp_path, size)
        try:
            read = lambda: journal.scoped_records([ns_id], kinds, unkeyed=[match])  # noqa: E731
            assert [r.text for r in read()] == [f"fact {size // 2} about kayaks", "I live in Porto", "green tea"]
            counts.append(_steps(journal, read))
            whole = _steps(journal, lambda: journal.scoped_records([ns_id], kinds))
        finally:
            journal.close()
    assert whole > 10 * counts[1]  # reading every memory of LARGE does walk them: the measure sees it
    assert counts[1] <= 2 * counts[0] + 500, counts


def _sessions_journal(tmp_path: Path, sessions: int) -> SqliteJournal:
    """A user of ``sessions`` sessions that each hold a turn and an unkeyed fact (as the offline extractor
    leaves them); the first also holds a keyed fact, a skill and a pinned turn."""
    journal = SqliteJournal(tmp_path / f"u{sessions}" / "journal.sqlite3")
    for i in range(sessions):
        ns_id = journal.namespace_id(Namespace(f"s{i}", user_id="u"))
        assert ns_id is not None
        journal.add_records(ns_id, [NewRecord("turn", f"turn of session {i}"), NewRecord("fact", f"fact {i}")])
        if i == 0:
            journal.add_records(ns_id, [NewRecord("fact", "I live in Porto", key="home_city"),
                                        NewRecord(SKILL_KIND, "how to file a refund"),
                                        NewRecord("turn", "remember this", pinned=True)])
    return journal


def test_skills_keyed_and_pinned_reads_probe_only_the_sessions_holding_one(tmp_path: Path) -> None:
    """context() reads the user's skills, keyed memories and pinned records on every call. Each session
    holding an extracted fact made each of those reads probe every session (a user of 10,000: 7 ms of a
    30 ms context() at 1M); the listing's bits (``ScopeListing.holds``) narrow each to the sessions
    holding one."""
    profile = ["fact", "preference", "relation"]
    reads: dict[str, Callable[[SqliteJournal, ScopeListing], list[str]]] = {
        "skills": lambda j, listing: [r.text for r in j.scoped_records(ids_to_probe(listing, [SKILL_KIND]),
                                                                         [SKILL_KIND])],
        "pinned": lambda j, listing: [r.text for r in j.scoped_records(ids_to_probe(listing, pinned_only=True),
                                                                         pinned_only=True)],
        "keyed": lambda j, listing: [r.text for r in j.scoped_records(ids_to_probe(listing, keyed_only=True),
                                                                        profile, unkeyed=())],
    }
    expected = {"skills": ["how to file a refund"], "pinned": ["remember this"], "keyed": ["I live in Porto"]}
    steps: dict[str, list[int]] = {name: [] for name in reads}
    for sessions in (20, 400):
        journal = _sessions_journal(tmp_path, sessions)
        try:
            listing = journal.scope_listing(Scope("user", Namespace("s0", "u")))
            assert len(listing.memories) == sessions
            for name, read in reads.items():
                assert read(journal, listing) == expected[name]
                steps[name].append(_steps(journal, lambda: read(journal, listing)))
            every = _steps(journal, lambda: journal.scoped_records(listing.memories, [SKILL_KIND]))
        finally:
            journal.close()
    for name, (few, many) in steps.items():
        assert many <= 2 * few + 500, (name, few, many)
    assert every > 10 * steps["skills"][1]  # probing every session holding a memory grows: the measure sees it
