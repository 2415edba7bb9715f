"""The keyword budget: what a large scope's keyword search ranks (SQLite and PostgreSQL; the planner is pure).

Budgets here are tiny so that a few dozen records exceed them; the default (2,000) is far
above any test corpus, whose searches therefore rank exactly as without a budget. Each
journal test runs on both backends (PostgreSQL: a throwaway server, one schema per test).
"""

from __future__ import annotations

import pickle
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from langmem_tiers.journal import sqlite as sqlite_journal
from langmem_tiers.journal.base import Namespace, NewRecord, search_terms
from langmem_tiers.journal.keyword_budget import KEYWORD_BUDGET, KeywordPlan, TermCount, plan_terms, recency_windows
from langmem_tiers.journal.sqlite import SqliteJournal
from langmem_tiers.journal.sqlite import fts_query as sqlite_fts_query
from langmem_tiers.keyring import FolderKeyRing
from tests.support.postgres import postgres_url
from tests.test_journal_contract import RANKING_CASES, RANKING_CORPUS

PLAN_CASES: list[tuple[str, list[tuple[str, int, int]], int | None, KeywordPlan]] = [
    ("no budget: every term", [("a", 10**6, 1), ("b", 10**6, 1)], None, KeywordPlan(("a", "b"))),
    ("all fit: every term", [("a", 5, 1), ("b", 15, 1)], 20, KeywordPlan(("a", "b"))),
    ("the rarest while they fit, in query order", [("common", 21, 3), ("rare", 2, 9), ("mid", 15, 4)], 20,
     KeywordPlan(("rare", "mid"))),
    ("a term that does not fit ends the list", [("x", 12, 1), ("y", 9, 1), ("z", 10, 1)], 20, KeywordPlan(("y", "z"))),
    ("the rarest is always kept", [("a", 20, 1), ("b", 21, 1)], 20, KeywordPlan(("a",))),
    ("all over: the one reaching furthest back, by recency", [("we", 21, 90), ("trip", 21, 40), ("go", 21, 70)], 20,
     KeywordPlan(("trip",), recent=True)),
    ("ties keep the query's order", [("p", 21, 5), ("q", 21, 5)], 20, KeywordPlan(("p",), recent=True)),
    ("a term with no match is not the rarest", [("never", 0, 0), ("rare", 3, 9), ("common", 21, 4)], 20,
     KeywordPlan(("rare",))),
    ("no match beside terms over the budget: by recency", [("we", 21, 90), ("never", 0, 0), ("trip", 21, 40)], 20,
     KeywordPlan(("trip",), recent=True)),
]


@pytest.mark.parametrize(("label", "counts", "budget", "plan"), PLAN_CASES, ids=[c[0] for c in PLAN_CASES])
def test_plan_terms(label: str, counts: list[tuple[str, int, int]], budget: int | None, plan: KeywordPlan) -> None:
    assert plan_terms([TermCount(*c) for c in counts], budget) == plan


def test_recency_windows_double_up_to_the_budget() -> None:
    assert recency_windows(20) == [5, 10, 20]
    assert recency_windows(3) == [1, 2, 3]
    assert recency_windows(1) == [1]
    assert recency_windows(KEYWORD_BUDGET)[-1] == KEYWORD_BUDGET


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    with postgres_url() as url:
        yield url


def _open(backend: str, tmp_path: Path, request: pytest.FixtureRequest, keyring: FolderKeyRing | None = None) -> Any:
    if backend == "sqlite":
        return SqliteJournal(tmp_path / "journal.sqlite3", keyring=keyring)
    from langmem_tiers.journal.postgres import PostgresJournal

    # The statement's planning is what these tests check: no scope's postings held in the process (and no
    # background count of a scope over the budget, test_journal_postgres_postings.py covers those).
    return PostgresJournal(request.getfixturevalue("pg_url"), schema=f"kwb_{uuid.uuid4().hex[:16]}", keyring=keyring,
                           keyword_postings_bytes=0)


@pytest.fixture(params=["sqlite", "postgres"])
def journal(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    j = _open(request.param, tmp_path, request)
    yield j
    j.close()


def _ids(journal: Any, query: str, ns_ids: list[int], k: int = 10, kinds: list[str] | None = None,
         budget: int | None = None) -> list[int]:
    journal.keyword_budget = budget
    try:
        return [h.record_id for h in journal.keyword_search(query, ns_ids, k, kinds)]
    finally:
        journal.keyword_budget = KEYWORD_BUDGET


def _matches(journal: Any, query: str, ns_ids: list[int], cap: int) -> int:
    """The sum of the query terms' counted matches, as the journal's planner counts them."""
    if isinstance(journal, SqliteJournal):
        return sum(journal._count_matches(journal._sql, t, cap).matches for t in search_terms(query))
    from langmem_tiers.journal.postgres import _count_matches

    with journal._autocommit() as db:
        counts, _ = _count_matches(db, journal._query_terms(query, ns_ids), cap)
    return sum(c.matches for c in counts)


def test_under_the_budget_the_hits_are_those_of_an_unbounded_search(journal: Any) -> None:
    """A scope larger than the budget whose query terms fit it ranks every term, as without a budget."""
    ns_id = journal.namespace_id(Namespace("s", "u")) or 0
    journal.add_records(ns_id, [NewRecord("turn", t, created_at=1000.0 + i) for i, t in enumerate(RANKING_CORPUS)])
    budget = 12  # < 40 records: the terms are counted; each ranking query below has <= 12 matches
    checked = 0
    for _, query, _ in RANKING_CASES:
        if _matches(journal, query, [ns_id], budget + 1) > budget:
            continue
        checked += 1
        for k in (1, 3, 10):
            assert _ids(journal, query, [ns_id], k, budget=budget) == _ids(journal, query, [ns_id], k), query
    assert checked >= 5
    # The default budget is far above this corpus: every ranking case ranks as without one.
    for _, query, _ in RANKING_CASES:
        assert _ids(journal, query, [ns_id], budget=KEYWORD_BUDGET) == _ids(journal, query, [ns_id])


def test_over_the_budget_the_rare_terms_find_and_the_counted_words_order(journal: Any) -> None:
    ns_id = journal.namespace_id(Namespace("s", "u")) or 0
    weather = journal.add_records(ns_id, [NewRecord("turn", f"weather number {i}") for i in range(18)])
    report = journal.add_records(ns_id, [NewRecord("turn", f"report number {i}") for i in range(25)])
    plain, both = journal.add_records(ns_id, [NewRecord("turn", "kayak trip"),
                                              NewRecord("turn", "kayak lessons in stormy weather")])
    unbounded = _ids(journal, "kayak weather report", [ns_id], 5)
    assert len(unbounded) == 5
    assert {plain, both} <= set(unbounded) <= {plain, both, *weather, *report}
    # Budget 20: kayak (2 matches) fits, weather (19) does not (2 + 19 > 20): only the kayak records
    # are ranked (weather, counted whole, still scores them; report, over the budget, does not).
    bounded = _ids(journal, "kayak weather report", [ns_id], 5, budget=20)
    assert sorted(bounded) == [plain, both]
    assert bounded == [r for r in unbounded if r in (plain, both)]  # in the unbounded order here


def test_when_every_term_is_over_the_budget_the_newest_matches_are_ranked(journal: Any) -> None:
    ns_id = journal.namespace_id(Namespace("s", "u")) or 0
    other = journal.namespace_id(Namespace("t", "u")) or 0
    ids = []
    for i in range(30):  # the two sessions interleave; in "s", every third record is a fact
        ids += journal.add_records(ns_id, [NewRecord("fact" if i % 3 == 0 else "turn", f"the weather on day {i}")])
        journal.add_records(other, [NewRecord("turn", f"other weather {i}")])
    # Windows of the newest 5, 10, 20 journal-wide matches (half of them the other session's).
    assert set(_ids(journal, "weather", [ns_id], 2, budget=20)) <= set(ids[-3:])
    found = _ids(journal, "weather", [ns_id], 4, budget=20)
    assert len(found) == 4
    assert set(found) <= set(ids[-5:])
    # The journal's newest 20 matches hold 10 of the scope's, fewer than k: planned again on the
    # scope's own matches (counted past 20 there too), its newest 20 are ranked.
    assert sorted(_ids(journal, "weather", [ns_id], 30, budget=20)) == ids[-20:]
    facts = _ids(journal, "weather", [ns_id], 30, kinds=["fact"], budget=20)
    # Ten facts in the session: a scope within the budget, searched whole.
    assert sorted(facts) == [r for i, r in enumerate(ids) if i % 3 == 0]
    assert len(_ids(journal, "weather", [ns_id], 30)) == 30  # unbounded: every match


def test_a_word_the_journal_never_held_leaves_the_others_to_find(journal: Any) -> None:
    """Over the budget, a query word with no match used to be kept as the rarest term, alone: a
    question naming something never said beside common words found no record at all."""
    ns_id = journal.namespace_id(Namespace("s", "u")) or 0
    storm = journal.add_records(ns_id, [NewRecord("turn", f"storm and weather, day {i}") for i in range(30)])
    sunny = journal.add_records(ns_id, [NewRecord("turn", f"sunny weather, day {i}") for i in range(30)])
    # zanzibar: no match; storm (30) fits 40, weather (60) does not: storm's records are ranked.
    found = _ids(journal, "zanzibar storm weather", [ns_id], 5, budget=40)
    assert len(found) == 5
    assert set(found) <= set(storm)
    # Every word that matches over the budget: the newest matches of the one reaching furthest back.
    recent = _ids(journal, "zanzibar weather sunny", [ns_id], 3, budget=20)
    assert len(recent) == 3
    assert set(recent) <= set(sunny[-5:])
    assert _ids(journal, "zanzibar", [ns_id], 3, budget=20) == []


def test_a_scope_of_more_sessions_than_many_ids_reads_exactly_its_own(journal: Any) -> None:
    """Past ``MANY_IDS`` namespaces PostgreSQL binds the ids as one unnested text array: the same
    records are found, ranked and read, and none of another user's."""
    from langmem_tiers.journal.postgres import MANY_IDS

    sessions = [journal.namespace_id(Namespace(f"s{i}", "u")) or 0 for i in range(MANY_IDS + 5)]
    other = journal.namespace_id(Namespace("x", "v")) or 0
    kayak = [journal.add_records(sessions[i], [NewRecord("turn", f"kayak trip {i}")])[0]
             for i in (0, MANY_IDS // 2, MANY_IDS + 4)]
    fact = journal.add_records(sessions[7], [NewRecord("fact", "likes canoes")])[0]
    journal.add_records(other, [NewRecord("turn", "kayak trip of another user")])
    assert set(_ids(journal, "kayak trip", sessions, 10)) == set(kayak)
    # Bounded (four matches journal-wide over a budget of 2): the newest two, one of them the other user's,
    # hold one of the scope's; planned again on the scope's own three matches, its newest two.
    assert sorted(_ids(journal, "kayak trip", sessions, 10, budget=2)) == kayak[1:]
    mixed = _ids(journal, "kayak trip", [*sessions[:3], other], 10)  # under MANY_IDS: ns = ANY(...)
    assert set(mixed) == {kayak[0], *_ids(journal, "kayak trip", [other], 10)}
    assert [r.id for r in journal.scoped_records(sessions, ["fact"])] == [fact]
    assert {r.id for r in journal.scoped_records(sessions)} == {*kayak, fact}


def test_a_users_matches_older_than_another_users_are_still_found(journal: Any) -> None:
    """The counts and recency windows are the journal's: in a journal shared by two users, the newest 20
    'trip' matches were all Bob's, and Alice's search over the budget found none of her own. Fewer than k
    found where the journal's matches left hers out: planned again on her scope's own matches."""
    alice = journal.namespace_id(Namespace("s", "alice")) or 0
    bob = journal.namespace_id(Namespace("s", "bob")) or 0
    trips = journal.add_records(alice, [NewRecord("turn", f"my trip number {i}") for i in range(30)])
    bobs = journal.add_records(bob, [NewRecord("turn", f"the trip again, {i}, to lisbon") for i in range(60)])
    # Every term over the budget: her own newest matches, ranked in windows.
    found = _ids(journal, "trip", [alice], 5, budget=20)
    assert len(found) == 5
    assert set(found) <= set(trips[-20:])
    assert set(_ids(journal, "trip", [bob], 5, budget=20)) <= set(bobs)
    # lisbon, Bob's word, fits the budget and is the rarest journal-wide; in Alice's scope it matches
    # nothing, and her trip matches (counted past 20 there) are ranked by recency.
    found = _ids(journal, "trip lisbon", [alice], 5, budget=20)
    assert len(found) == 5
    assert set(found) <= set(trips[-20:])
    # A scope that holds fewer than k matches gets all of them, and nothing of Bob's.
    few = journal.add_records(alice, [NewRecord("fact", f"a kayak fact {i}") for i in range(3)])
    journal.add_records(bob, [NewRecord("turn", f"kayak talk {i}") for i in range(60)])
    assert sorted(_ids(journal, "kayak", [alice], 10, budget=20)) == few
    assert sorted(_ids(journal, "kayak", [alice], 10, kinds=["fact"], budget=2)) == few[1:]  # her newest two


def test_a_memory_search_finds_memories_behind_newer_turns(journal: Any) -> None:
    """The newest 20 'weather' matches were all turns, and a search of facts over a budget of 20 found none
    of the 30 facts said before them (SQLite searches its memories' own index; PostgreSQL plans again on
    the scope's own facts)."""
    ns_id = journal.namespace_id(Namespace("s", "u")) or 0
    facts = journal.add_records(ns_id, [NewRecord("fact", f"weather fact {i}") for i in range(30)])
    turns = journal.add_records(ns_id, [NewRecord("turn", f"weather turn {i}") for i in range(60)])
    found = _ids(journal, "weather", [ns_id], 5, kinds=["fact"], budget=20)
    assert len(found) == 5
    assert set(found) <= set(facts[-20:])
    assert set(_ids(journal, "weather", [ns_id], 5, kinds=["turn"], budget=20)) <= set(turns)
    # Behind newer memories of another kind too (SQLite's memories' index holds both kinds).
    preferences = journal.add_records(ns_id, [NewRecord("preference", f"weather liked {i}") for i in range(60)])
    found = _ids(journal, "weather", [ns_id], 5, kinds=["fact"], budget=20)
    assert len(found) == 5
    assert set(found) <= set(facts[-20:])
    assert set(_ids(journal, "weather", [ns_id], 5, kinds=["preference"], budget=20)) <= set(preferences)


def test_a_small_scope_in_a_large_journal_ranks_as_without_a_budget(journal: Any) -> None:
    small = journal.namespace_id(Namespace("small", "u")) or 0
    big = journal.namespace_id(Namespace("big", "v")) or 0
    journal.add_records(big, [NewRecord("turn", f"weather and kayak talk {i}") for i in range(50)])
    mine = journal.add_records(small, [NewRecord("turn", "kayak"), NewRecord("turn", "weather"),
                                       NewRecord("turn", "kayak weather")])
    assert _ids(journal, "kayak weather", [small], budget=5) == _ids(journal, "kayak weather", [small])
    assert set(_ids(journal, "kayak weather", [small], budget=5)) == set(mine)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_an_encrypted_journal_bounds_its_blind_tokens_alike(backend: str, tmp_path: Path,
                                                            request: pytest.FixtureRequest) -> None:
    journal = _open(backend, tmp_path, request, FolderKeyRing(tmp_path / "keys"))
    try:
        ns_id = journal.namespace_id(Namespace("s", "u")) or 0
        journal.add_records(ns_id, [NewRecord("turn", f"the weather report number {i}") for i in range(30)])
        plain, both = journal.add_records(ns_id, [NewRecord("turn", "we took the kayak out on the lake"),
                                                  NewRecord("turn", "kayak lessons in stormy weather")])
        # Only the records holding the rare word's token (the order is bm25's over the blind tokens).
        assert sorted(_ids(journal, "kayak weather", [ns_id], 5, budget=20)) == [plain, both]
        assert len(_ids(journal, "kayak weather", [ns_id], 5)) == 5  # unbounded: the weather records too
    finally:
        journal.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_plaintext_records_from_before_encryption_are_bounded_beside_the_blind_tokens(
        backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """A journal encrypted after it held plaintext records searches both (PostgreSQL: blind tokens in
    its 'simple' configuration, plaintext words in 'english'); each is a term of the budget."""
    journal = _open(backend, tmp_path, request)
    ns_id = journal.namespace_id(Namespace("s", "u")) or 0
    journal.add_records(ns_id, [NewRecord("turn", f"the weather report number {i}") for i in range(30)])
    (old_kayak,) = journal.add_records(ns_id, [NewRecord("turn", "we took the kayak out on the lake")])
    reopen = getattr(journal, "schema", None)
    journal.close()
    keyring = FolderKeyRing(tmp_path / "keys")
    if reopen is None:
        journal = SqliteJournal(tmp_path / "journal.sqlite3", keyring=keyring)
    else:
        from langmem_tiers.journal.postgres import PostgresJournal

        journal = PostgresJournal(request.getfixturevalue("pg_url"), schema=reopen, keyring=keyring)
    try:
        assert journal._plain_records
        journal.add_records(ns_id, [NewRecord("turn", f"the weather report number {i}") for i in range(30)])
        (new_kayak,) = journal.add_records(ns_id, [NewRecord("turn", "kayak lessons in stormy weather")])
        # kayak: one plaintext match and one blind token's; weather: over the budget in both forms.
        assert sorted(_ids(journal, "kayak weather", [ns_id], 5, budget=20)) == [old_kayak, new_kayak]
        unbounded = _ids(journal, "kayak weather", [ns_id], 5)
        assert len(unbounded) == 5
        assert {old_kayak, new_kayak} <= set(unbounded)
    finally:
        journal.close()


def _few_hundred(journal: Any, ns_id: int) -> dict[str, list[int]]:
    """300+ records: two common words, a mid-frequency place, and a rare word in two records."""
    return {"weather": journal.add_records(ns_id, [NewRecord("turn", f"weather report day {i}") for i in range(200)]),
            "garden": journal.add_records(ns_id, [NewRecord("turn", f"garden notes day {i}") for i in range(80)]),
            "lisbon": journal.add_records(ns_id, [NewRecord("turn", f"lisbon photos day {i}") for i in range(30)]),
            "kayak": journal.add_records(ns_id, [NewRecord("turn", "kayak lessons in lisbon and stormy weather"),
                                                 NewRecord("turn", "we sold the old kayak")])}


def test_a_budget_of_50_over_hundreds_of_records_ranks_the_rare_terms_rarest_first(journal: Any) -> None:
    ns_id = journal.namespace_id(Namespace("s", "u")) or 0
    ids = _few_hundred(journal, ns_id)
    both, sold = ids["kayak"]
    query = "kayak lisbon garden weather"
    # kayak (2) + lisbon (31) fit 50; garden and weather (counted to 51) do not: only records
    # holding kayak or lisbon are ranked, and the record with the rare word and more comes first.
    bounded = _ids(journal, query, [ns_id], 5, budget=50)
    assert bounded[:2] == [both, sold]
    assert set(bounded) <= {both, sold, *ids["lisbon"]}
    unbounded = _ids(journal, query, [ns_id], 5)
    assert unbounded[0] == both
    # A query of the rare word and the common ones ranks the rare word's two records only, in the
    # order of the search without a budget, which ranks them first too.
    bounded = _ids(journal, "kayak garden weather", [ns_id], 10, budget=50)
    unbounded = _ids(journal, "kayak garden weather", [ns_id], 10)
    assert sorted(bounded) == [both, sold]
    assert bounded == unbounded[:2]
    assert len(unbounded) == 10
    # Every term over the budget: weather's newest 51 matches reach further back than garden's
    # (the garden records came after the weather ones), so weather is ranked among its newest matches.
    recent = _ids(journal, "weather garden", [ns_id], 5, budget=50)
    assert len(recent) == 5
    assert set(recent) <= {both, *ids["weather"][-11:]}  # the first window: the newest 12 matches


def test_every_term_over_the_budget_ranks_the_one_rarest_in_recent_history(journal: Any) -> None:
    ns_id = journal.namespace_id(Namespace("s", "u")) or 0
    storm = journal.add_records(ns_id, [NewRecord("turn", f"storm and weather, old day {i}") for i in range(60)])
    sunny = journal.add_records(ns_id, [NewRecord("turn", f"sunny weather, new day {i}") for i in range(60)])
    # Both words counted past 20; storm's newest 21 matches reach back before weather's.
    found = _ids(journal, "storm weather", [ns_id], 3, budget=20)
    assert len(found) == 3
    assert set(found) <= set(storm[-5:])  # the first window: storm's 5 newest matches
    assert set(_ids(journal, "storm weather", [ns_id], 3)) <= set(storm)  # unbounded: storm scores too
    assert set(_ids(journal, "sunny weather", [ns_id], 3, budget=20)) <= set(sunny[-5:])


@pytest.mark.parametrize(("sessions_in_scope", "k", "reads"), [
    (2, 3, [5]),  # found in the first window: its 5 newest matches are all that is read
    (1, 6, [5, 5, 10]),  # half the matches are the other session's: every window, each reading only its new part
])
def test_sqlite_reads_the_newest_matches_only_as_far_as_the_windows_reach(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sessions_in_scope: int, k: int, reads: list[int]) -> None:
    """Every term over the budget: each recency window reads the kept term's matches past the previous
    window's, not the budget's worth up front, and the hits are those of floors read all at once."""
    journal = SqliteJournal(tmp_path / "journal.sqlite3")
    ns_id = journal.namespace_id(Namespace("s", "u")) or 0
    other = journal.namespace_id(Namespace("t", "u")) or 0
    for i in range(40):
        journal.add_records(ns_id, [NewRecord("turn", f"the weather on day {i}")])
        journal.add_records(other, [NewRecord("turn", f"other weather {i}")])
    scope = [ns_id, other][:sessions_in_scope]
    real = SqliteJournal._newest_matches
    read: list[int] = []

    def newest_matches(db: Any, match: str, below: int | None, limit: int, index: str = "records_fts",
                       scope: Any = None) -> list[int]:
        assert scope is None  # found within the journal's newest matches: never planned again on the scope's
        found = real(db, match, below, limit, index, scope)
        read.append(len(found))
        return found

    monkeypatch.setattr(SqliteJournal, "_newest_matches", staticmethod(newest_matches))
    found = _ids(journal, "weather", scope, k, budget=20)
    monkeypatch.undo()
    match = sqlite_fts_query("", (), ["weather"])
    all_newest = [r[0] for r in journal._sql.all("SELECT rowid FROM records_fts WHERE records_fts MATCH ? "
                                                 "ORDER BY rowid DESC LIMIT 20", (match,))]
    floor = all_newest[sum(reads) - 1]  # where the last window reached, read all at once
    members = ",".join("?" * len(scope))
    expected = [r[0] for r in journal._sql.all(
        "SELECT records.id FROM records_fts JOIN records ON records.id = records_fts.rowid WHERE records_fts "
        f"MATCH ? AND records_fts.rowid >= ? AND records.ns IN ({members}) "
        "ORDER BY bm25(records_fts, 1.0, 0.0), records.id DESC LIMIT ?", (match, floor, *scope, k))]
    journal.close()
    assert read == reads
    assert found == expected


def test_a_kinds_filter_holds_over_the_budget(journal: Any) -> None:
    ns_id = journal.namespace_id(Namespace("s", "u")) or 0
    journal.add_records(ns_id, [NewRecord("turn", f"weather turn {i}") for i in range(60)])
    journal.add_records(ns_id, [NewRecord("fact", f"weather fact {i}") for i in range(60)])
    _, kayak_fact = journal.add_records(ns_id, [NewRecord("turn", "kayak turn"),
                                                NewRecord("fact", "kayak fact about the weather")])
    # 61 facts > 20: counted; kayak (2) kept, weather (counted to 21) dropped; only the kayak fact is of the kind.
    assert _ids(journal, "kayak weather", [ns_id], 10, kinds=["fact"], budget=20) == [kayak_fact]
    unbounded = _ids(journal, "kayak weather", [ns_id], 10, kinds=["fact"])
    assert unbounded[0] == kayak_fact
    assert len(unbounded) == 10
    newest = _ids(journal, "weather", [ns_id], 5, kinds=["fact"], budget=20)
    assert newest[0] == kayak_fact or len(newest) == 5  # the newest matches, facts only
    assert set(newest) <= {kayak_fact, *range(kayak_fact - 20, kayak_fact)}


def test_postgres_stop_words_only_find_nothing_bounded_or_not(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    journal = _open("postgres", tmp_path, request)
    try:
        ns_id = journal.namespace_id(Namespace("s", "u")) or 0
        journal.add_records(ns_id, [NewRecord("turn", f"the weather of the day {i}") for i in range(30)])
        # "the of": only stop words, searched as they are; PostgreSQL's english configuration drops them.
        assert _ids(journal, "the of", [ns_id], 5, budget=20) == _ids(journal, "the of", [ns_id], 5) == []
        assert len(_ids(journal, "the weather", [ns_id], 5, budget=20)) == 5
    finally:
        journal.close()


def test_postgres_reads_each_words_newest_matches_in_a_statement_of_its_own(
        request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The newest matches of several words, one very common and two rare ones: each word's newest ``cap``
    matches, as a walk of that word alone finds them, from one statement per word (planned for that word)."""
    from langmem_tiers.journal.postgres import _newest_matches

    journal = _open("postgres", tmp_path, request)
    try:
        ns_id = journal.namespace_id(Namespace("s", "u")) or 0
        journal.add_records(ns_id, [NewRecord("turn", "kayak trip" if i % 40 == 0 else
                                              "canoe trip" if i % 25 == 7 else "a trip") for i in range(600)])
        lexemes = ["'trip'", "'kayak'", "'cano'"]
        with journal._autocommit() as db:
            statements: list[tuple[str, list[Any]]] = []
            real_all = type(db).all
            with monkeypatch.context() as spy:
                spy.setattr(type(db), "all", lambda self, sql, args=(): statements.append((sql, list(args))) or
                            real_all(self, sql, args))
                found = _newest_matches(db, lexemes, 12)
            for x in lexemes:
                alone = [r[0] for r in db.all(
                    "SELECT id FROM records r WHERE r.tsv @@ ?::tsquery ORDER BY r.id DESC LIMIT 12", [x])]
                assert found[x] == alone, x
        assert [args[0] for _, args in statements] == lexemes  # one statement a word, in the words' order
        assert all(sql.count("?::tsquery") == 1 for sql, _ in statements)
    finally:
        journal.close()


def test_docstring_examples_run() -> None:
    import doctest

    from langmem_tiers.journal import keyword_budget, postgres_stats

    for module in (keyword_budget, postgres_stats):
        result = doctest.testmod(module)
        assert result.attempted > 0
        assert result.failed == 0


def test_postgres_connections_plan_each_run_for_its_arguments(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """psycopg prepares a statement after five runs; a generic plan then ignored how many namespaces and
    which kinds a read names (the typed-memory read of 1,000 sessions: 4 ms custom, ~25 ms generic)."""
    journal = _open("postgres", tmp_path, request)
    try:
        assert journal._pool is not None
        with journal._pool.connection() as conn:
            assert conn.execute("SHOW plan_cache_mode").fetchone() == ("force_custom_plan",)
    finally:
        journal.close()


def test_sqlite_joins_memories_searched_among_every_record(tmp_path: Path) -> None:
    """A scope of most sessions streams FTS5's ranking, unless its kinds leave the turns out: in every
    record's index, memories are a small part of the matches, and streaming would rank the turns only to
    drop them (the profile's search of LongMemEval's haystacks merged: 7.2 ms streamed, 2.2 joined). In
    the memories' own index every match is a memory, so it streams as the scope says."""
    journal = SqliteJournal(tmp_path / "journal.sqlite3")
    try:
        namespaces = [journal.namespace_id(Namespace(f"s{i}", "u")) or 0 for i in range(4)]
        db = journal._sql

        def way(ns_ids: list[int], kinds: list[str] | None, index: str = sqlite_journal.RECORDS_INDEX) -> str:
            return str(SqliteJournal._ranking(db, ns_ids, kinds, index).func.__name__)

        assert way(namespaces, None) == "_ranked_streamed"
        assert way(namespaces, []) == "_ranked_streamed"  # no kinds named: every kind
        assert way(namespaces, ["turn", "fact"]) == "_ranked_streamed"
        assert way(namespaces, ["fact", "preference"]) == "_ranked_joined"
        assert way(namespaces, ["fact"], sqlite_journal.MEMORY_INDEX) == "_ranked_streamed"
        assert way(namespaces[:1], None) == "_ranked_joined"  # a quarter of the sessions
    finally:
        journal.close()


def test_sqlite_ranks_a_scope_the_same_streamed_or_joined(tmp_path: Path) -> None:
    """SQLite ranks a scope holding most of the journal by streaming FTS5's own ranking through a
    scope test, and a small scope by joining every match first: both give the same rows, scores and
    order, whatever the scope's share, kinds, floor and k (a scope of few matches reads several chunks)."""
    import random

    journal = SqliteJournal(tmp_path / "journal.sqlite3")
    try:
        rng = random.Random(5)
        words = ["kayak", "weather", "trip", "canoe", "lisbon", "storm", "river", "tent"]
        namespaces = [journal.namespace_id(Namespace(f"s{i}", f"u{i % 3}")) or 0 for i in range(9)]
        for ns_id in namespaces:
            journal.add_records(ns_id, [NewRecord("fact" if rng.random() < 0.2 else "turn",
                                                  " ".join(rng.choices(words, k=6)), created_at=float(i))
                                        for i in range(60)])
        scopes = [namespaces, namespaces[::3], namespaces[:1], namespaces[1:]]
        db = journal._sql
        checked_floor = False
        for scope in scopes:
            for query in ("kayak", "weather storm", "lisbon tent river"):
                match = sqlite_fts_query("", (), search_terms(query))
                assert match is not None
                for k in (1, 5, 50, 200):
                    for kinds in (None, ["fact"]):
                        floors = [0, int(db.one("SELECT max(rowid) FROM records_fts")[0]) // 2]
                        for floor in floors:
                            joined = SqliteJournal._ranked_joined(db, match, scope, k, kinds, floor)
                            streamed = SqliteJournal._ranked_streamed(db, match, scope, k, kinds, floor)
                            assert [tuple(r) for r in streamed] == [tuple(r) for r in joined], (scope, query, k)
                            checked_floor = checked_floor or (floor > 0 and len(joined) > 0)
        assert checked_floor
        # One session of nine: its best matches lie past the first chunk (64 rows) of the journal's
        # ranking, so the streamed way reads on, and still gives the joined way's rows.
        kayak = sqlite_fts_query("", (), ["kayak"]) or ""
        streamed = SqliteJournal._ranked_streamed(db, kayak, namespaces[:1], 25, None, 0)
        journal_order = [r[0] for r in db.all("SELECT rowid FROM records_fts WHERE records_fts MATCH ? "
                                              "ORDER BY bm25(records_fts, 1.0, 0.0), rowid DESC", [kayak])]
        assert len(streamed) == 25
        assert journal_order.index(streamed[-1][0]) >= 64
        assert streamed == SqliteJournal._ranked_joined(db, kayak, namespaces[:1], 25, None, 0)
    finally:
        journal.close()


def test_sqlite_searches_alike_narrowed_by_scope_terms_or_looked_up(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A search narrows its matches by FTS5's scope terms (up to ``MAX_SCOPE_TERMS`` sessions) or looks each
    match up in records: the same rows either way, within the budget (200: every user's 120 records) and
    planned again on the scope's own matches over it (15, 40), for users who wrote before others, several
    kinds and k; and searches were planned again (else this compares nothing new)."""
    import random

    from langmem_tiers.journal import sqlite as sqlite_journal

    journal = SqliteJournal(tmp_path / "journal.sqlite3")
    try:
        rng = random.Random(11)
        words = ["kayak", "weather", "trip", "canoe", "lisbon"]
        users: dict[str, list[int]] = {}
        for s in range(24):  # four users, one after another, six sessions each
            user = f"u{s // 6}"
            ns_id = journal.namespace_id(Namespace(f"s{s}", user)) or 0
            users.setdefault(user, []).append(ns_id)
            journal.add_records(ns_id, [NewRecord("fact" if rng.random() < 0.25 else "turn",
                                                  " ".join(rng.choices(words, k=4))) for _ in range(20)])
        replans = []
        real = sqlite_journal.crowded_out
        monkeypatch.setattr(sqlite_journal, "crowded_out", lambda *a: replans.append(real(*a)) or replans[-1])
        narrowing = sqlite_journal.MAX_SCOPE_TERMS
        found = {}
        for bound in (narrowing, 0):
            monkeypatch.setattr(sqlite_journal, "MAX_SCOPE_TERMS", bound)
            found[bound] = [_ids(journal, query, ns_ids, k, kinds, budget)
                            for ids in users.values() for ns_ids in (ids, ids[::-1])
                            for query in ("kayak", "weather trip", "lisbon canoe kayak")
                            for k in (3, 12, 200) for kinds in (None, ["fact"], ["turn", "fact"])
                            for budget in (15, 40, 200)]
        assert found[0] == found[narrowing]
        assert sum(replans) >= 20
        assert all(found[0])
    finally:
        journal.close()


def test_a_scopes_size_is_counted_in_growing_chunks_of_namespaces_up_to_the_cap(journal: Any) -> None:
    """scope_size binds the namespaces a growing chunk at a time and stops at the cap: the same count as
    one statement over them all, whichever chunk the records are in, kinds filtered alike."""
    from langmem_tiers.journal.sql_core import SCOPE_SIZE_FIRST_CHUNK, scope_size

    sessions = [journal.namespace_id(Namespace(f"s{i}", "u")) or 0 for i in range(4 * SCOPE_SIZE_FIRST_CHUNK)]
    other = journal.namespace_id(Namespace("x", "v")) or 0
    journal.add_records(other, [NewRecord("turn", "not in the scope") for _ in range(20)])
    # Records only past the first two chunks (32 + 64 sessions), and a fact among them.
    for ns_id in sessions[3 * SCOPE_SIZE_FIRST_CHUNK:]:
        journal.add_records(ns_id, [NewRecord("turn", "a turn"), NewRecord("turn", "another")])
    journal.add_records(sessions[-1], [NewRecord("fact", "a fact")])
    turns = 2 * SCOPE_SIZE_FIRST_CHUNK
    with journal._autocommit() as db:
        assert scope_size(db, sessions, None, 10_000) == turns + 1
        assert scope_size(db, sessions, ["fact"], 10_000) == 1
        assert scope_size(db, sessions, ["turn"], 10) == 10  # stops at the cap
        assert scope_size(db, sessions, None, turns + 1) == turns + 1
        assert scope_size(db, [*sessions, other], None, 10_000) == turns + 1 + 20
        assert scope_size(db, [], None, 10) == 0


def _analyzed(journal: Any) -> None:
    """ANALYZE the journal's records (the test server runs no autovacuum) and have the journal read the statistics."""
    with journal._autocommit() as db:
        db.execute("ANALYZE records")
    journal._stats.clear()


def test_postgres_estimates_the_common_words_from_the_planners_statistics(
        request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Over the budget, a word the planner's statistics hold among the commonest lexemes is estimated, not
    counted; the others are counted. On a table ANALYZE sampled whole the estimates are the counts, so the
    hits are those of the counted plan."""
    import langmem_tiers.journal.postgres as postgres

    journal = _open("postgres", tmp_path, request)
    try:
        ns_id = journal.namespace_id(Namespace("s", "u")) or 0
        ids = _few_hundred(journal, ns_id)
        queries = ["kayak lisbon garden weather", "weather garden", "zanzibar weather report", "lisbon stormy"]
        counted_plan = {q: _ids(journal, q, [ns_id], 5, budget=50) for q in queries}  # no statistics yet
        assert counted_plan["kayak lisbon garden weather"][:2] == ids["kayak"]
        _analyzed(journal)
        counted: list[list[str]] = []
        real = postgres._count_matches
        monkeypatch.setattr(postgres, "_count_matches",
                            lambda db, terms, cap, scope=None: counted.append([w for _, w in terms]) or
                            real(db, terms, cap, scope))
        for q in queries:
            assert _ids(journal, q, [ns_id], 5, budget=50) == counted_plan[q], q
        # Only the word no record holds (so not among the commonest) was counted.
        assert counted == [["zanzibar"]]
        with journal._autocommit() as db:
            stats = journal._stats.get(db)
        assert stats is not None
        assert stats.matches("'weather'", 51) == 51  # 201 records, capped at the budget + 1
        assert stats.matches("'lisbon'", 51) == 31
        assert stats.matches("'zanzibar'", 51) is None
        assert (round(stats.rows), stats.share([ns_id]), stats.share([ns_id + 1])) == (312, 1.0, 0.0)
        # The process holds the frequencies under keyed hashes: no lexeme of the journal's text.
        assert all(isinstance(h, bytes) and len(h) == 8 for h in stats.frequencies)
        assert b"lisbon" not in pickle.dumps(stats)
    finally:
        journal.close()


def test_postgres_compact_leaves_no_erased_word_in_the_planners_statistics(
        request: pytest.FixtureRequest, tmp_path: Path) -> None:
    journal = _open("postgres", tmp_path, request)
    try:
        erased = journal.namespace_id(Namespace("erased", "u1")) or 0
        kept = journal.namespace_id(Namespace("kept", "u2")) or 0
        journal.add_records(erased, [NewRecord("turn", f"zanzibar ferry {i}") for i in range(40)])
        journal.add_records(kept, [NewRecord("turn", f"garden notes {i}") for i in range(40)])
        _analyzed(journal)

        def common_lexemes() -> str:
            with journal._autocommit() as db:
                row = db.one("SELECT most_common_elems::text FROM pg_stats WHERE schemaname = current_schema() "
                             "AND tablename = 'records' AND attname = 'tsv'")
            assert row is not None
            return str(row[0])

        assert "zanzibar" in common_lexemes()
        journal.delete_namespaces([erased])
        assert journal._stats._held is None  # dropped at the erasure
        assert "zanzibar" in common_lexemes()  # PostgreSQL's own statistics keep it until ANALYZE
        assert journal.compact() is True
        assert "zanzibar" not in common_lexemes()
        assert "garden" in common_lexemes()
    finally:
        journal.close()


def _twenty_users(journal: Any, kayak: bool = False) -> list[int]:
    """20 users writing one after another, 100 records each: "the trip" in every fifth, "garden notes" in the
    rest; with ``kayak``, the fourth record of the first ten users is "kayak and the trip". Analyzed."""
    users = []
    for u in range(20):
        ns_id = journal.namespace_id(Namespace("s", f"user-{u}")) or 0
        journal.add_records(ns_id, [NewRecord("turn", f"kayak and the trip {u}" if kayak and i == 3 and u < 10 else
                                              f"the trip {u}, day {i}" if i % 5 == 0 else
                                              f"garden notes {u}, day {i}") for i in range(100)])
        users.append(ns_id)
    _analyzed(journal)
    return users


def test_postgres_ranks_every_match_of_a_scope_expected_to_hold_few_without_walking_the_journal(
        request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A word over the budget in a journal of 20 users is not over it in one user's 100 records: with the
    planner's statistics, the user's search ranks all of their matches, as without a budget, instead of
    walking the journal's newest matches (all the newest user's) and planning again. A scope of every user's
    records, where the word's matches are over the budget, still walks."""
    import langmem_tiers.journal.postgres as postgres

    journal = _open("postgres", tmp_path, request)
    try:
        users = _twenty_users(journal)
        walks: list[int] = []
        real = postgres._newest_matches
        monkeypatch.setattr(postgres, "_newest_matches", lambda db, lexemes, cap, scope=None:
                            walks.append(1) or real(db, lexemes, cap, scope))
        oldest = [users[0]]
        # 400 'trip' records in 2,000: a share of 50 of them fits 250 records, and the user holds 100.
        assert _ids(journal, "trip", oldest, 10, budget=50) == _ids(journal, "trip", oldest, 10)
        assert walks == []
        assert len(_ids(journal, "trip", users, 10, budget=50)) == 10  # 2,000 records: more than 250
        assert walks == [1]
    finally:
        journal.close()


def test_postgres_plans_on_the_matches_expected_in_the_scope(
        request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A user's plan is the matches expected in their share of a shared journal, not the journal's: a word over
    the budget in the journal (trip: 400 of 2,000 records) but not in one user's 100 records is kept beside a
    rarer word that fits either way (kayak), so the search gets the unbounded hits at once, without planning
    again on the scope's own counts."""
    import langmem_tiers.journal.postgres as postgres

    journal = _open("postgres", tmp_path, request)
    try:
        users = _twenty_users(journal, kayak=True)
        scoped_counts: list[int] = []
        real = postgres._count_matches
        monkeypatch.setattr(postgres, "_count_matches", lambda db, terms, cap, scope=None:
                            scoped_counts.append(scope is not None) or real(db, terms, cap, scope))
        oldest = [users[0]]
        unbounded = _ids(journal, "kayak trip", oldest, 10)
        assert len(unbounded) == 10
        assert _ids(journal, "kayak trip", oldest, 10, budget=50) == unbounded
        assert not any(scoped_counts)  # planned once, on the estimates (a plan again counts the scope)
    finally:
        journal.close()


def test_a_scopes_expected_matches_scale_each_kind_of_count() -> None:
    """The journal's matches times the scope's share: a common word from its estimate (uncapped), a word
    counted under the cap from its count (at least one), a word counted at the cap from the least common
    word's estimate, never below the cap; a word with no match stays at none. Without the sessions'
    statistics, or for a scope of every record, the counts are the journal's."""
    pytest.importorskip("psycopg")
    from langmem_tiers.journal.postgres import _expected_in_scope
    from langmem_tiers.journal.postgres_stats import JournalStats, Shares

    counts = [TermCount("'trip'", 2001, 3), TermCount("'kayak'", 40, 9), TermCount("'storm'", 2001, 5),
              TermCount("'zanzibar'", 0, 0)]

    def stats(rows: float, sessions: Shares | None) -> JournalStats:
        return JournalStats.of(["trip", "lisbon"], [0.5, 0.01], rows=rows, key=b"k" * 16, sessions=sessions)

    small = stats(100_000, Shares({"7": 0.5}, 0.001))  # least common: 1,000, under the cap
    assert [(c.matches, c.oldest) for c in _expected_in_scope(counts, small, small.share([8, 9]), 2001)] == [
        (100, 3), (1, 9), (4, 5), (0, 0)]  # 50,000 x 0.002; 0.08 -> 1; 2,001 x 0.002; none
    large = stats(1_000_000, Shares({"7": 0.5}, 0.001))  # least common: 10,000, over the cap
    assert [c.matches for c in _expected_in_scope(counts, large, large.share([8, 9]), 2001)] == [1000, 1, 20, 0]
    assert _expected_in_scope(counts, stats(100_000, None), stats(100_000, None).share([8]), 2001) == counts
    whole = stats(100_000, Shares({"7": 1.0}, 0.0))
    assert _expected_in_scope(counts, whole, whole.share([7]), 2001) == counts


def test_postgres_counts_a_scopes_records_only_where_its_plan_would_leave_matches_out(
        request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A scope of at most the budget's records ranks every match. The statistics say which scopes may be that
    small: those are counted first (a session of 10 records), a larger one only when its plan would leave
    matches out. A user's 100 records at a budget of 50, "trip" expected in 20 of them: every match ranked,
    no count; "garden" expected in 80: counted (over the budget: planned); every user's: counted."""
    import langmem_tiers.journal.postgres as postgres

    journal = _open("postgres", tmp_path, request)
    try:
        users = _twenty_users(journal)
        small = journal.namespace_id(Namespace("small", "user-new")) or 0
        journal.add_records(small, [NewRecord("turn", f"garden notes, day {i}") for i in range(10)])
        sized: list[int] = []
        real = postgres.scope_size
        monkeypatch.setattr(postgres, "scope_size", lambda db, ns_ids, kinds, cap:
                            sized.append(len(ns_ids)) or real(db, ns_ids, kinds, cap))
        for query, ns_ids, counted, every_match in (("trip", [users[0]], [], True), ("garden", [users[0]], [1], False),
                                                    ("trip", users, [20], False), ("garden", [small], [1], True)):
            sized.clear()
            found = _ids(journal, query, ns_ids, 5, budget=50)
            assert sized == counted, (query, len(ns_ids))
            if every_match:  # ranked as without a budget
                assert found == _ids(journal, query, ns_ids, 5), (query, len(ns_ids))
    finally:
        journal.close()
