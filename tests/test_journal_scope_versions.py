"""Scope versions (schema v8): per-namespace counters that tell an in-process index whether it is current;
scope listings and their stamps.

Every case runs on SQLite and PostgreSQL (the contract suite's ``backend`` fixture), but for SQLite's
scope stamps kept by triggers (schema v11), which PostgreSQL does not have.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from langmem_tiers.errors import JournalError
from langmem_tiers.journal.base import (
    SCHEMA_VERSION,
    SKILL_KIND,
    Journal,
    Namespace,
    NewRecord,
    Record,
    Scope,
    ScopeListing,
)
from langmem_tiers.journal.sqlite import SqliteJournal
from langmem_tiers.messages import make_message
from langmem_tiers.recall.request import ids_to_probe
from tests import test_journal_contract as contract
from tests.test_journal_contract import Backend, _append, _ns

# The contract suite's fixtures: every case below runs on SQLite and PostgreSQL.
pg_url, backend, journal = contract.pg_url, contract.backend, contract.journal


def test_inserts_deletes_and_edits_move_their_own_counter(journal: Journal) -> None:
    a, b = _ns(journal, "a", "u"), _ns(journal, "b", "u")
    assert journal.scope_versions([a, b, 999_999]) == {a: (0, 0, 0), b: (0, 0, 0)}  # an unknown id is absent
    assert journal.scope_versions([]) == {}
    r1, r2, r3 = journal.add_records(a, [NewRecord("turn", f"turn number {i}") for i in range(3)])
    assert journal.scope_versions([a, b]) == {a: (r3, 0, 0), b: (0, 0, 0)}

    [other] = journal.add_records(b, [NewRecord("fact", "the other session")])
    assert journal.scope_versions([a]) == {a: (r3, 0, 0)}  # another session's insert is not ours
    assert journal.scope_versions([b]) == {b: (other, 0, 0)}

    journal.update_record(r1, text="turn number one, edited")
    assert journal.scope_versions([a])[a] == (r3, 0, 1)
    # What leaves the indexed text alone moves nothing: importance, pinning, metadata, the same text,
    # supersession, a memory said again.
    journal.update_record(r1, importance=0.9, pinned=True, metadata={"x": 1}, message_ids=(4,))
    journal.update_record(r1, text="turn number one, edited")
    with journal.write(a) as tx:
        tx.supersede([r2], 10.0)
        tx.merge_memory(r2, 0.8, (5,))
    assert journal.scope_versions([a])[a] == (r3, 0, 1)

    journal.delete_records([r3])  # the newest: the largest id ever inserted stays
    assert journal.scope_versions([a])[a] == (r3, 1, 1)
    journal.delete_records([r3])  # already gone: nothing deleted, nothing counted
    assert journal.scope_versions([a])[a] == (r3, 1, 1)
    journal.delete_records([r2, other])  # one statement over two sessions counts each its own
    assert journal.scope_versions([a, b]) == {a: (r3, 2, 1), b: (other, 1, 0)}

    [r4] = journal.add_records(a, [NewRecord("turn", "after the deletes")])
    assert r4 > r3
    assert journal.scope_versions([a])[a] == (r4, 2, 1)


def test_clear_and_erase_count_their_deletes_and_a_deleted_namespace_is_absent(journal: Journal) -> None:
    a, b = _ns(journal, "a", "u"), _ns(journal, "b", "u")
    m0, m1 = (m.id or 0 for m in _append(journal, a, [make_message("user", f"message {i}") for i in range(2)]))
    _, kept = journal.add_records(a, [NewRecord("turn", "message 0", (m0,)), NewRecord("fact", "message 1", (m1,))])
    journal.add_records(b, [NewRecord("turn", "b's turn")])
    journal.erase_messages(a, [m0])
    assert journal.scope_versions([a])[a] == (kept, 1, 0)
    journal.clear_session(a)
    assert journal.scope_versions([a])[a] == (kept, 2, 0)
    journal.delete_namespaces([a])
    assert a not in journal.scope_versions([a, b])
    assert journal.scope_versions([a, b])[b][1:] == (0, 0)
    assert journal.record_ids_many([a]) == {a: []}


def test_record_ids_many_reads_each_namespace_above_its_floor(journal: Journal) -> None:
    a, b, c = _ns(journal, "a", "u"), _ns(journal, "b", "u"), _ns(journal, "c", "u")
    ids_a = journal.add_records(a, [NewRecord("turn", f"a{i}") for i in range(4)])
    ids_b = journal.add_records(b, [NewRecord("turn", f"b{i}") for i in range(3)])
    more_a = journal.add_records(a, [NewRecord("turn", "a later")])
    assert journal.record_ids_many([a, b, c]) == {a: ids_a + more_a, b: ids_b, c: []}
    assert journal.record_ids_many([a, b, c], {a: ids_a[1], b: ids_b[-1]}) == {a: ids_a[2:] + more_a, b: [], c: []}
    assert journal.record_ids_many([b, b], {b: ids_b[0]}) == {b: ids_b[1:]}
    assert journal.record_ids_many([]) == {}
    for ns_id in (a, b):  # the same answer as one record_ids() per namespace
        assert journal.record_ids_many([ns_id], {ns_id: ids_a[0]})[ns_id] == journal.record_ids(ns_id, ids_a[0])


def test_counters_hold_no_text_after_forgetting_a_user(journal: Journal) -> None:
    before, after = "zanzibar-quokka-4417", "okapi-umbrella-9921"
    ns_id = _ns(journal, "secret", "erased-user")
    keep = _ns(journal, "kept", "other-user")
    [rid] = journal.add_records(ns_id, [NewRecord("fact", f"code word {before}")])
    journal.update_record(rid, text=f"code word {after}")
    journal.add_records(ns_id, [NewRecord("fact", f"another {after}")])
    assert journal.scope_versions([ns_id])[ns_id][2] == 1
    journal.delete_namespaces([ns_id])
    assert journal.compact() is True
    assert journal.residue([before, after, "erased-user"]) == {before: 0, after: 0, "erased-user": 0}
    assert journal.scope_versions([ns_id, keep]) == {keep: (0, 0, 0)}


def test_a_version_7_journal_migrates_with_counters_from_its_records(backend: Backend) -> None:
    backend.create_at_version(7)  # namespace 1 ('u', '', 'old') with one message
    scope = ", scope_terms" if backend.name == "sqlite" else ""
    for i, text in enumerate(["kayaks on the lake", "a second kayak", "a third"]):
        backend.execute(f"INSERT INTO records (ns, kind, text, created_at{scope}) "
                        f"VALUES (1, 'turn', ?, ?{', ?' if scope else ''})",
                        (text, float(i), *(("s1",) if scope else ())))
    backend.execute("DELETE FROM records WHERE text = 'a third'", ())  # the largest id is gone before the upgrade
    backend.execute("INSERT INTO namespaces (ns, user_id, agent_id, session_id, created_at) "
                    "VALUES (2, 'u', '', 'empty', 1.0)", ())
    backend.execute("INSERT INTO state (ns) VALUES (2)", ())
    journal = backend.journal()
    assert journal.integrity_check() == "ok"  # type: ignore[attr-defined]
    ns_id = journal.namespace_id(Namespace("old", "u"), create=False)
    assert ns_id == 1
    ids = journal.record_ids(1)
    assert len(ids) == 2
    # Backfilled from the records there: the largest remaining id (the deleted one was never seen).
    assert journal.scope_versions([1, 2]) == {1: (max(ids), 0, 0), 2: (0, 0, 0)}
    [new] = journal.add_records(1, [NewRecord("turn", "after the upgrade")])
    journal.update_record(ids[0], text="kayaks on the lake, edited")
    journal.delete_records([ids[1]])
    assert journal.scope_versions([1]) == {1: (new, 1, 1)}
    assert [h.record_id for h in journal.keyword_search("kayaks", [1], 5)] == [ids[0]]
    journal.close()
    backend.set_schema_version(SCHEMA_VERSION)  # reopening at the current version is a no-op
    assert backend.journal().scope_versions([1]) == {1: (new, 1, 1)}


@pytest.mark.parametrize("version", [1, 3, 8, 9])
def test_older_journals_reach_the_current_version(backend: Backend, version: int) -> None:
    backend.create_at_version(version)
    journal = backend.journal()
    assert journal.integrity_check() == "ok"  # type: ignore[attr-defined]
    [rid] = journal.add_records(1, [NewRecord("turn", "kayaks")])
    assert journal.scope_versions([1]) == {1: (rid, 0, 0)}
    # Version 9: the index of the memories among the turns, read by scoped_records by kind.
    [fact] = journal.add_records(1, [NewRecord("fact", "paddles on weekends")])
    assert [r.id for r in journal.scoped_records([1], ["fact", "preference"])] == [fact]
    assert [r.id for r in journal.scoped_records([1], ["turn", "fact"])] == [rid, fact]
    sql = ("SELECT name FROM sqlite_master WHERE type='index' AND name=?" if journal.url.startswith("sqlite") else
           "SELECT indexname FROM pg_indexes WHERE schemaname=current_schema() AND indexname=?")
    with journal._autocommit() as db:  # type: ignore[attr-defined]
        assert db.all(sql, ("records_memories",)) == [("records_memories",)]
    # Version 10: a pinned flag set moves the scope's stamp, so the listing's memories follow it.
    listing = journal.scope_listing(Scope("user", Namespace("old", "u")))
    assert listing.memories == (1,)
    journal.update_record(rid, pinned=True)
    assert journal.scope_listing(Scope("user", Namespace("old", "u"))) is not listing


def _listing_matches_the_journal(journal: Journal, scope: Scope) -> ScopeListing:
    listing = journal.scope_listing(scope)
    assert sorted((n, ns) for ns, n in listing.ids_by_name.items()) == journal.namespaces(scope)
    assert listing.ids == tuple(sorted(listing.ids_by_name.values()))
    assert dict(listing.versions) == journal.scope_versions(list(listing.ids))
    assert listing.key == frozenset(listing.ids)
    # The sessions holding each thing, in id order: what filtering every record of the scope finds.
    records = journal.scoped_records(listing.ids)

    def holding(test: Callable[[Record], bool]) -> tuple[int, ...]:
        return tuple(sorted({listing.ids_by_name[r.namespace] for r in records if test(r)}))

    assert listing.memories == holding(lambda r: r.kind != "turn" or r.pinned)
    assert listing.pinned == holding(lambda r: r.pinned)
    assert listing.keyed == holding(lambda r: r.key is not None)
    assert listing.skills == holding(lambda r: r.kind == SKILL_KIND)
    assert set(listing.holds) == set(listing.memories)  # nothing held that is not a memory or pinned
    return listing


def test_a_scope_listing_holds_its_namespaces_with_their_versions(journal: Journal) -> None:
    a, b = _ns(journal, "a", "u"), _ns(journal, "b", "u")
    _ns(journal, "c", "someone else")
    journal.add_records(a, [NewRecord("turn", "one"), NewRecord("turn", "two")])
    [r] = journal.add_records(b, [NewRecord("fact", "three")])
    journal.delete_records([r])
    listing = _listing_matches_the_journal(journal, Scope("user", Namespace("a", "u")))
    assert listing.ids == (a, b)
    assert _listing_matches_the_journal(journal, Scope("session", Namespace("b", "u"))).ids == (b,)


def test_an_unchanged_scope_gets_the_same_listing_and_a_grown_one_reads_only_what_grew(journal: Journal) -> None:
    a, b = _ns(journal, "a", "u"), _ns(journal, "b", "u")
    other = _ns(journal, "c", "someone else")
    journal.add_records(b, [NewRecord("turn", "older")])
    scope = Scope("user", Namespace("a", "u"))
    first = _listing_matches_the_journal(journal, scope)
    journal.add_records(other, [NewRecord("turn", "another user's turn")])
    assert journal.scope_listing(scope) is first  # nothing of this user changed: no new read
    journal.add_records(a, [NewRecord("turn", "new here")])
    grown = _listing_matches_the_journal(journal, scope)
    assert grown is not first
    assert (grown.base, grown.changed) == (first.generation, frozenset({a}))
    assert journal.scope_listing(scope) is grown


@pytest.mark.parametrize("change", ["delete", "edit", "pin", "unpin", "new session", "erase session", "out of order"])
def test_any_other_change_reads_the_whole_listing_again(journal: Journal, change: str) -> None:
    a, b = _ns(journal, "a", "u"), _ns(journal, "b", "u")
    [ra] = journal.add_records(a, [NewRecord("turn", "a turn", pinned=change == "unpin")])
    journal.add_records(b, [NewRecord("turn", "b turn"), NewRecord("turn", "b again")])
    scope = Scope("user", Namespace("a", "u"))
    first = _listing_matches_the_journal(journal, scope)
    if change == "delete":
        journal.delete_records([ra])
    elif change == "edit":
        journal.update_record(ra, text="a turn, edited")
    elif change in ("pin", "unpin"):
        journal.update_record(ra, pinned=change == "pin")
    elif change == "new session":
        _ns(journal, "d", "u")
    elif change == "erase session":
        journal.delete_namespaces([b])
    else:
        # A record id below the newest one the listing saw, committed after it (a PostgreSQL transaction
        # can): a's counter grows, but not past the largest, so reading only the rows above it misses it.
        with journal._txn() as db:  # type: ignore[attr-defined]
            db.execute("UPDATE namespaces SET last_record_id = last_record_id + 1 WHERE ns = ?", (a,))
    again = _listing_matches_the_journal(journal, scope)
    assert again is not first
    assert again.base == 0
    assert (b in again.ids) == (change != "erase session")


@pytest.mark.parametrize(("kinds", "pinned_only"), [
    (None, False), (None, True), (["fact", "preference"], False), (["fact"], True), (["turn"], False),
    (["turn", "fact"], True),
])
def test_scoped_records_filter_like_a_plain_scan(journal: Journal, kinds: list[str] | None, pinned_only: bool) -> None:
    """Each of scoped_records' three plans (every record; the few memories or pinned ones through their
    indexes; kinds with turns) returns what filtering every record of the scope would."""
    a, b = _ns(journal, "a", "u"), _ns(journal, "b", "u")
    outside = _ns(journal, "c", "someone else")
    for ns_id in (a, b, outside):
        journal.add_records(ns_id, [NewRecord("turn", "a turn"), NewRecord("fact", "a fact", pinned=True),
                                    NewRecord("preference", "a preference"),
                                    NewRecord("turn", "pinned turn", pinned=True)])
    every = journal.scoped_records([a, b])
    assert len(every) == 8
    expected = [r.id for r in every if (not kinds or r.kind in kinds) and (r.pinned or not pinned_only)]
    assert [r.id for r in journal.scoped_records([a, b], kinds, pinned_only)] == expected


def test_a_listing_names_the_sessions_holding_a_memory_or_a_pinned_record(journal: Journal) -> None:
    turns, fact, pinned_turn, pinned_fact, empty = (_ns(journal, n, "u") for n in ("t", "f", "pt", "pf", "e"))
    elsewhere = _ns(journal, "x", "someone else")
    journal.add_records(turns, [NewRecord("turn", "one"), NewRecord("turn", "two")])
    journal.add_records(fact, [NewRecord("turn", "one"), NewRecord("fact", "a fact")])
    journal.add_records(pinned_turn, [NewRecord("turn", "one"), NewRecord("turn", "pinned", pinned=True)])
    journal.add_records(pinned_fact, [NewRecord("preference", "pinned", pinned=True)])
    journal.add_records(elsewhere, [NewRecord("fact", "another user's fact", pinned=True)])
    listing = _listing_matches_the_journal(journal, Scope("user", Namespace("t", "u")))
    assert listing.ids == (turns, fact, pinned_turn, pinned_fact, empty)
    assert listing.memories == tuple(sorted({fact, pinned_turn, pinned_fact}))
    assert _listing_matches_the_journal(journal, Scope("session", Namespace("t", "u"))).memories == ()


def test_the_memory_probes_use_the_partial_indexes(backend: Backend, journal: Journal) -> None:
    """Each session's probes land in records_memories, records_pinned and records_key, never among its turns."""
    from langmem_tiers.journal.sql_journal import _holds

    ns_id = _ns(journal, "a", "u")
    journal.add_records(ns_id, [NewRecord("turn", f"turn {i}") for i in range(50)])
    if backend.name == "sqlite":
        sql = f"EXPLAIN QUERY PLAN SELECT ns, {_holds('1')} FROM namespaces WHERE user_id='u'"
        with journal._autocommit() as db:  # type: ignore[attr-defined]
            plan = " | ".join(str(r[-1]) for r in db.all(sql, ()))
    else:
        sql = f"EXPLAIN SELECT ns, {_holds('TRUE')} FROM namespaces WHERE user_id='u'"
        with journal._txn() as db:  # type: ignore[attr-defined]
            db.execute("ANALYZE records", ())  # as autovacuum would: the planner learns that few are pinned
            db.execute("SET LOCAL enable_seqscan = off", ())  # a tiny table: show that the indexes apply
            plan = " | ".join(str(r[0]) for r in db.all(sql, ()))
    assert "records_memories" in plan, plan
    assert "records_pinned" in plan, plan
    assert "records_key" in plan, plan
    assert "SCAN r " not in f"{plan} ", plan  # SQLite's walk of a table
    assert "Seq Scan on records" not in plan, plan


def test_a_memory_added_to_a_session_of_turns_enters_through_the_grown_path(journal: Journal) -> None:
    a, b, c = _ns(journal, "a", "u"), _ns(journal, "b", "u"), _ns(journal, "c", "u")
    journal.add_records(a, [NewRecord("turn", "a turn")])
    journal.add_records(b, [NewRecord("fact", "b's fact")])
    journal.add_records(c, [NewRecord("turn", "c turn")])
    scope = Scope("user", Namespace("a", "u"))
    first = _listing_matches_the_journal(journal, scope)
    assert first.memories == (b,)
    journal.add_records(a, [NewRecord("turn", "another turn")])
    more_turns = _listing_matches_the_journal(journal, scope)
    assert (more_turns.base, more_turns.changed, more_turns.memories) == (first.generation, {a}, (b,))
    journal.add_records(c, [NewRecord("fact", "c remembers")])
    grown = _listing_matches_the_journal(journal, scope)
    # Only c was read again (its row and its probes); b kept its place without a probe.
    assert (grown.base, grown.changed, grown.memories) == (more_turns.generation, {c}, (b, c))
    assert journal.scope_listing(scope) is grown


def test_a_keyed_memory_or_a_skill_enters_through_the_grown_path_and_leaves_when_deleted(journal: Journal) -> None:
    """The sessions a read of keyed memories or of skills probes: only those holding one, however many
    hold an unkeyed fact (a user's 10,000 sessions that each hold one cost a few probes, not 10,000)."""
    a, b, c = _ns(journal, "a", "u"), _ns(journal, "b", "u"), _ns(journal, "c", "u")
    for ns_id in (a, b, c):
        journal.add_records(ns_id, [NewRecord("turn", "a turn"), NewRecord("fact", "an unkeyed fact")])
    scope = Scope("user", Namespace("a", "u"))
    first = _listing_matches_the_journal(journal, scope)
    assert (first.memories, first.keyed, first.skills, first.pinned) == ((a, b, c), (), (), ())
    [keyed] = journal.add_records(b, [NewRecord("fact", "lives in Oslo", key="home_city")])
    [skill] = journal.add_records(c, [NewRecord(SKILL_KIND, "how to file a refund")])
    grown = _listing_matches_the_journal(journal, scope)
    assert (grown.base, grown.changed) == (first.generation, {b, c})
    assert (grown.memories, grown.keyed, grown.skills) == ((a, b, c), (b,), (c,))
    assert [r.id for r in journal.scoped_records(ids_to_probe(grown, keyed_only=True), unkeyed=())] == [keyed]
    assert [r.id for r in journal.scoped_records(ids_to_probe(grown, [SKILL_KIND]), [SKILL_KIND])] == [skill]
    journal.add_records(a, [NewRecord("turn", "another turn")])  # what a holds is unchanged
    again = _listing_matches_the_journal(journal, scope)
    assert (again.keyed, again.skills) == (grown.keyed, grown.skills)
    journal.delete_records([keyed, skill])
    gone = _listing_matches_the_journal(journal, scope)
    assert (gone.memories, gone.keyed, gone.skills) == ((a, b, c), (), ())


def test_pinning_and_unpinning_a_turn_moves_its_session_in_and_out(journal: Journal) -> None:
    a, b = _ns(journal, "a", "u"), _ns(journal, "b", "u")
    [turn, _] = journal.add_records(a, [NewRecord("turn", "pin me"), NewRecord("turn", "not me")])
    journal.add_records(b, [NewRecord("turn", "b turn")])
    scope = Scope("user", Namespace("a", "u"))
    assert _listing_matches_the_journal(journal, scope).memories == ()
    journal.update_record(turn, pinned=True)
    pinned = _listing_matches_the_journal(journal, scope)
    assert (pinned.memories, pinned.pinned, pinned.base) == ((a,), (a,), 0)
    assert [r.id for r in journal.scoped_records(pinned.pinned, pinned_only=True)] == [turn]
    journal.update_record(turn, pinned=True)  # already pinned: nothing changed, the same listing
    assert journal.scope_listing(scope) is pinned
    journal.update_record(turn, pinned=False)
    assert _listing_matches_the_journal(journal, scope).memories == ()


def test_deleting_a_sessions_last_memory_or_the_session_takes_it_out(journal: Journal) -> None:
    a, b, c = _ns(journal, "a", "u"), _ns(journal, "b", "u"), _ns(journal, "c", "u")
    f1, f2 = journal.add_records(a, [NewRecord("fact", "one"), NewRecord("preference", "two")])
    journal.add_records(b, [NewRecord("turn", "b turn"), NewRecord("fact", "b's fact")])
    journal.add_records(c, [NewRecord("skill", "c's skill")])
    scope = Scope("user", Namespace("a", "u"))
    assert _listing_matches_the_journal(journal, scope).memories == (a, b, c)
    journal.delete_records([f1])
    assert _listing_matches_the_journal(journal, scope).memories == (a, b, c)  # a holds another
    journal.delete_records([f2])
    assert _listing_matches_the_journal(journal, scope).memories == (b, c)
    journal.clear_session(b, keep_memories=True)  # its turns go, its memory stays
    assert _listing_matches_the_journal(journal, scope).memories == (b, c)
    journal.clear_session(b)
    assert _listing_matches_the_journal(journal, scope).memories == (c,)
    journal.delete_namespaces([c])
    erased = _listing_matches_the_journal(journal, scope)
    assert (erased.ids, erased.memories) == ((a, b), ())


def _stamps(journal: Journal, where: str, args: tuple[str, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """A scope's stamp as the trigger-kept rows give it and as the aggregate over its namespaces rows does."""
    from langmem_tiers.journal.sql_journal import _KEPT_STAMP, _STAMP

    with journal._autocommit() as db:  # type: ignore[attr-defined]
        kept = tuple(int(v) for v in db.one(f"{_KEPT_STAMP}{where}", args))
        summed = tuple(int(v) for v in db.one(f"{_STAMP}{where}", args))
    return kept, summed


def _groups(journal: Journal) -> list[tuple[str, str, int]]:
    with journal._autocommit() as db:  # type: ignore[attr-defined]
        return [tuple(r) for r in db.all("SELECT user_id, agent_id, namespaces FROM scope_stamps ORDER BY 1, 2", ())]


@pytest.fixture
def sqlite_journal(tmp_path: Path) -> Iterator[Journal]:
    """Schema v11's kept stamps are SQLite's alone (PostgreSQL sums the namespaces rows at each read)."""
    journal = SqliteJournal(tmp_path / "journal.sqlite3")
    yield journal
    journal.close()


def _same_stamp(kept: tuple[int, ...], summed: tuple[int, ...]) -> bool:
    """Equal but for the largest id: the kept one is the largest the group held while it had a namespace."""
    return kept[:2] == summed[:2] and kept[3:] == summed[3:] and kept[2] >= summed[2]


def test_sqlite_keeps_each_users_stamp_as_the_aggregate_would_read_it(sqlite_journal: Journal) -> None:
    """Schema v11: every change to a namespaces row moves its (user, agent) row's sums as the aggregate
    over the rows would read them."""
    journal = sqlite_journal
    a, b = _ns(journal, "a", "u"), _ns(journal, "b", "u", "helper")
    c = _ns(journal, "c", "u")
    other = _ns(journal, "x", "someone else")
    [ra, ra2] = journal.add_records(a, [NewRecord("turn", "a turn"), NewRecord("fact", "a fact")])
    [rb] = journal.add_records(b, [NewRecord("turn", "b turn")])
    journal.add_records(other, [NewRecord("turn", "not theirs")])
    scopes = [(" WHERE user_id=?", ("u",)), (" WHERE user_id=? AND agent_id=?", ("u", "helper")),
              (" WHERE user_id=? AND agent_id=?", ("u", "")), (" WHERE user_id=?", ("someone else",))]
    changes = [
        lambda: journal.update_record(ra, text="a turn, edited"),
        lambda: journal.update_record(rb, pinned=True),
        lambda: journal.update_record(rb, pinned=False),
        lambda: journal.delete_records([ra2]),
        lambda: journal.add_records(c, [NewRecord("turn", "c turn")]),
        lambda: journal.delete_namespaces([c]),  # the largest id of the "" agent group is erased
        lambda: journal.clear_session(a),
    ]
    for change in [lambda: None, *changes]:
        change()
        for where, args in scopes:
            assert _same_stamp(*_stamps(journal, where, args)), (where, args)
    assert _stamps(journal, " WHERE user_id=? AND agent_id=?", ("u", ""))[0][2] == c  # held while the group lived
    # A namespace never moves to another user or agent (schema v4's NFC fold did, before the stamps).
    with pytest.raises(JournalError, match="keeps its user and agent"), journal._txn() as db:  # type: ignore[attr-defined]
        db.execute("UPDATE namespaces SET agent_id='helper' WHERE ns=?", (a,))
    assert _groups(journal) == [("someone else", "", 1), ("u", "", 1), ("u", "helper", 1)]
    # The group's row goes with its last namespace: erasing a user leaves no row naming them.
    journal.delete_namespaces([other])
    assert _groups(journal) == [("u", "", 1), ("u", "helper", 1)]


def test_sqlite_reads_a_users_stamp_from_its_kept_row_and_what_grew_through_an_index(sqlite_journal: Journal) -> None:
    journal = sqlite_journal
    ids = [_ns(journal, f"s{i}", "u") for i in range(30)]
    for ns_id in ids:
        journal.add_records(ns_id, [NewRecord("turn", "a turn")])
    scope = Scope("user", Namespace("s0", "u"))
    first = journal.scope_listing(scope)
    journal.add_records(ids[7], [NewRecord("turn", "grew")])
    statements: list[str] = []
    journal._db.set_trace_callback(statements.append)  # type: ignore[attr-defined]
    try:
        grown = _listing_matches_the_journal(journal, scope)
    finally:
        journal._db.set_trace_callback(None)  # type: ignore[attr-defined]
    assert (grown.base, grown.changed) == (first.generation, frozenset({ids[7]}))
    reads = [" ".join(s.split()) for s in statements[:3]]  # as run, with their values
    assert reads[1].endswith("FROM scope_stamps WHERE user_id='u'"), reads  # after BEGIN: the kept row
    assert f"FROM namespaces WHERE user_id='u' AND last_record_id > {first.newest}" in reads[2], reads
    with journal._autocommit() as db:  # type: ignore[attr-defined]
        plan = " | ".join(str(r[-1]) for r in db.all(
            "EXPLAIN QUERY PLAN SELECT ns FROM namespaces WHERE user_id='u' AND last_record_id > 5", ()))
    assert "namespaces_growth (user_id=? AND last_record_id>?)" in plan, plan


def test_a_version_10_sqlite_journal_gains_kept_stamps_summed_from_its_namespaces(tmp_path: Path) -> None:
    backend = contract._sqlite_backend(tmp_path)
    backend.create_at_version(10)  # namespace 1 ('u', '', 'old')
    for ns, user, agent in [(2, "u", ""), (3, "u", "helper"), (4, "v", "")]:
        backend.execute("INSERT INTO namespaces (ns, user_id, agent_id, session_id, created_at, last_record_id, "
                        "records_deleted, records_edited, records_repinned) VALUES (?, ?, ?, ?, 1.0, ?, ?, ?, ?)",
                        (ns, user, agent, f"s{ns}", 10 * ns, ns, 2 * ns, 3 * ns))
    journal = backend.journal()
    with journal._autocommit() as db:  # type: ignore[attr-defined]
        assert db.all("SELECT user_id, agent_id, namespaces, ns_sum, ns_max, last_record_sum, deleted_sum, "
                      "edited_sum, repinned_sum FROM scope_stamps ORDER BY 1, 2", ()) == [
            ("u", "", 2, 3, 2, 20, 2, 4, 6), ("u", "helper", 1, 3, 3, 30, 3, 6, 9), ("v", "", 1, 4, 4, 40, 4, 8, 12)]
    for where, args in [(" WHERE user_id=?", ("u",)), (" WHERE user_id=? AND agent_id=?", ("u", "helper"))]:
        kept, summed = _stamps(journal, where, args)
        assert kept == summed  # nothing erased yet: the largest ids agree too
