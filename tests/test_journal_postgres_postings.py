"""A large scope's keyword postings held in the process (PostgreSQL, ``journal/postgres_postings.py``).

The held ranking must be the statement's (``BM25_SQL`` over every match), stay in step with what other
handles write, edit and erase, and never hold an erased record's words. Scopes here are made "large" by
lowering the size a scope needs (``size_from``) and the keyword budget (so that a search finds the scope
over it and asks for its postings).
"""

from __future__ import annotations

import math
import random
import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from langmem_tiers.journal.base import Namespace, NewRecord
from langmem_tiers.journal.postgres_postings import BYTES_PER_LEXEME, MERGE_FROM, Postings, lexeme_of
from tests.support.postgres import postgres_url
from tests.test_journal_contract import RANKING_CASES, RANKING_CORPUS

EXTRA = [
    "We rented a kayak on the lake and the kayak leaked twice",
    "The quarterly report is due on Friday, the report needs charts",
    "My sister's wedding is in June at the old mill by the river",
    "I switched to a standing desk and my back feels better",
    "The dentist moved my appointment to Tuesday afternoon",
    "Running in the morning before work keeps me calm; I ran 5k today",
]


def _same(got: list[tuple[int, float]], want: list[tuple[int, float]]) -> bool:
    """The same records in the same order, scores equal but for float rounding."""
    return [i for i, _ in got] == [i for i, _ in want] and all(
        math.isclose(a, b, rel_tol=1e-9) for (_, a), (_, b) in zip(got, want, strict=True))


def _bm25_reference(docs: dict[int, dict[str, int]], dl: dict[int, int], query: list[str],
                    k: int) -> list[tuple[int, float]]:
    """BM25_SQL written out plainly: df and average length among the matching records."""
    hits = [d for d, tf in docs.items() if any(q in tf for q in query)]
    if not hits:
        return []
    avgdl = max(sum(dl[d] for d in hits) / len(hits), 1.0)
    scores = {}
    for d in hits:
        s = 0.0
        for q in dict.fromkeys(query):
            if q in docs[d]:
                df = sum(1 for h in hits if q in docs[h])
                tf = docs[d][q]
                s += math.log(1 + (len(hits) - df + 0.5) / (df + 0.5)) * tf * 2.2 / (
                    tf + 1.2 * (0.25 + 0.75 * dl[d] / avgdl))
        scores[d] = s
    return sorted(scores.items(), key=lambda p: (-p[1], -p[0]))[:k]


def test_postings_rank_as_bm25_written_out_and_forget_dropped_rows() -> None:
    docs = {10: {"kayak": 2, "lake": 1}, 11: {"lake": 1, "report": 3}, 12: {"report": 1},
            13: {"kayak": 1, "report": 1, "wed": 1}, 14: {"june": 1}}
    dl = {d: len(tf) + 1 for d, tf in docs.items()}
    p = Postings()
    rows = [(d, 100 + d % 2, "fact" if d == 12 else "turn", dl[d], list(tf), list(tf.values()))
            for d, tf in docs.items()]
    p.append(rows[:3])
    p.pack()
    p.append(rows[3:])  # fresh postings beside the packed ones
    for query in (["kayak"], ["report", "lake"], ["kayak", "report", "nothing"], ["nothing"]):
        for k in (1, 3, 10):
            got = p.rank(query, None, k)
            assert _same(got, _bm25_reference(docs, dl, query, k))
    assert [d for d, _ in p.rank(["report"], ["fact"], 5)] == [12]
    p.drop([101])  # the odd ids' namespace: 11 and 13 go, with the only record holding "wed"
    assert sorted(p.ids.tolist()) == [10, 12, 14]
    assert "wed" not in p.vocab
    assert not p.fresh
    kept = {d: docs[d] for d in (10, 12, 14)}
    assert _same(p.rank(["report", "kayak"], None, 5), _bm25_reference(kept, dl, ["report", "kayak"], 5))


def test_postings_grown_a_few_rows_at_a_time_rank_as_written_out_and_pack_when_due() -> None:
    # Columns grow in place into spare room (appended()); packs, drops and more appends in between must
    # leave every row where rank() reads it, and a pack leaves no spare room for nbytes() to miss.
    rng = random.Random(5)
    words = [f"w{i}" for i in range(40)]
    docs = {d: {w: rng.randint(1, 3) for w in rng.sample(words, rng.randint(1, 6))} for d in range(1, 3001)}
    dl = {d: sum(tf.values()) for d, tf in docs.items()}
    p = Postings()
    ids = sorted(docs)
    for at in range(0, len(ids), 7):
        p.append([(d, d // 100, "turn", dl[d], list(docs[d]), list(docs[d].values())) for d in ids[at:at + 7]])
        if at == 1400:
            p.pack()
            assert all(a.base is None for a in (p.ids, p.ns, p.dl, p.kind, p.live))
        if at == 2100:
            p.drop([3])  # ids 300-399
    kept = {d: tf for d, tf in docs.items() if d // 100 != 3}
    # Two words of ~9% of the rows each: each match placed once; three: past a quarter, marked per row.
    for query in (["w1"], ["w1", "w2"], ["w2", "w7", "w39"], ["w5", "nothing"]):
        assert _same(p.rank(query, None, 10), _bm25_reference(kept, dl, query, 10))
        assert _same(p.rank(query, None, 3000), _bm25_reference(kept, dl, query, 3000))
    assert sorted(p.ids[p.live].tolist()) == sorted(kept)
    p.pack_if_due()  # the rows appended since the pack (ids 1408-3000; the drop, 100 rows, packs nothing): apart
    assert p.fresh_rows == 3000 - 1407
    p.append([(d, d // 100, "turn", 1, ["w1"], [1]) for d in range(5001, 5001 + MERGE_FROM)])
    p.pack_if_due()
    assert p.fresh_rows == 0
    assert not p.fresh


def test_a_drop_unlinks_the_rows_words_at_once_and_a_pack_removes_them() -> None:
    # Dropping a few rows of a large scope does not pack (a copy of every posting): their packed postings point
    # at one dead row with no frequency, lexemes only they held leave the vocabulary, their fresh postings leave
    # the lists; rankings are those of the rows kept; the next pack leaves the dropped rows out of every array.
    rng = random.Random(11)
    words = [f"w{i}" for i in range(30)]
    docs = {d: {w: rng.randint(1, 3) for w in rng.sample(words, rng.randint(1, 5))} for d in range(1, 401)}
    docs[7] = {"onlyseven": 2, "w1": 1}  # packed, the only record holding its word
    docs[395] = {"onlyfresh": 1, "w2": 2}  # fresh, likewise
    dl = {d: sum(tf.values()) for d, tf in docs.items()}
    p = Postings()
    ns_of = {d: 1 if d in (7, 8, 395, 396) else 2 + d % 5 for d in docs}
    p.append([(d, ns_of[d], "turn", dl[d], list(docs[d]), list(docs[d].values())) for d in range(1, 301)])
    p.pack()
    p.append([(d, ns_of[d], "turn", dl[d], list(docs[d]), list(docs[d].values())) for d in range(301, 401)])
    rows_before = len(p.rows)
    p.drop([1])
    assert len(p.rows) == rows_before  # not packed: 4 of 400 rows
    assert not p.live.all()
    dead = np.flatnonzero(~p.live)
    assert sorted(p.ids[dead].tolist()) == [7, 8, 395, 396]
    pointing = np.isin(p.rows, dead)
    assert (p.rows[pointing] == p.tomb).all()
    assert (p.tf[pointing] == 0).all()
    assert "onlyseven" not in p.vocab
    assert "onlyseven" not in p.terms
    assert "onlyfresh" not in p.fresh
    assert "onlyfresh" not in p.fresh_keys
    assert all(not np.isin(np.frombuffer(r, np.int32), dead).any() for r, _, _ in p.fresh.values())
    kept = {d: tf for d, tf in docs.items() if ns_of[d] != 1}
    for query in (["onlyseven"], ["onlyfresh", "w2"], ["w1", "w3", "w4"], ["w5"]):
        assert _same(p.rank(query, None, 10), _bm25_reference(kept, dl, query, 10))
    p.append([(d, 1, "turn", dl[d], list(docs[d]), list(docs[d].values())) for d in (8, 396)])  # read again
    kept.update({8: docs[8], 396: docs[396]})
    assert _same(p.rank(["w1", "w2", "w3"], None, 400), _bm25_reference(kept, dl, ["w1", "w2", "w3"], 400))
    p.pack()
    assert p.live.all()
    assert p.tomb == -1
    assert None not in p.terms
    assert sorted(p.ids.tolist()) == sorted(kept)
    assert _same(p.rank(["w1", "w2", "w3"], None, 400), _bm25_reference(kept, dl, ["w1", "w2", "w3"], 400))


def test_random_appends_packs_and_drops_rank_as_written_out() -> None:
    # Drops below and past the share that packs, merges, and namespaces read again, in random order.
    for seed in range(40):
        rng = random.Random(seed)
        words = [f"w{i}" for i in range(25)]
        docs: dict[int, dict[str, int]] = {}
        ns_of: dict[int, int] = {}
        p, next_id = Postings(), 1
        for _ in range(rng.randint(2, 9)):
            batch = []
            for _ in range(rng.randint(0, 60)):
                docs[next_id] = {w: rng.randint(1, 3) for w in rng.sample(words, rng.randint(1, 5))}
                ns_of[next_id] = rng.randint(1, 12)
                batch.append((next_id, ns_of[next_id], "turn", sum(docs[next_id].values()), list(docs[next_id]),
                              list(docs[next_id].values())))
                next_id += 1
            p.append(batch)
            step = rng.random()
            if step < 0.3:
                p.pack()
            elif step < 0.7:
                gone = rng.randint(1, 12)
                p.drop([gone])
                docs = {d: tf for d, tf in docs.items() if ns_of[d] != gone}
            dl = {d: sum(tf.values()) for d, tf in docs.items()}
            query = rng.sample(words, rng.randint(1, 4))
            assert _same(p.rank(query, None, 15), _bm25_reference(docs, dl, query, 15)), seed
        assert sorted(p.ids[p.live].tolist()) == sorted(docs)


def test_postings_bytes_count_every_array_rank_keeps_as_its_rows_grow() -> None:
    # The byte bound holds what nbytes() says: the columns, the postings and rank()'s scratch, which is
    # kept between searches and regrown as a scope gains rows (a scratch that doubled held 24 bytes a row
    # where 12 were counted). The vocabulary's dict is estimated per lexeme and left out here.
    p = Postings()
    for start in range(0, 20_000, 2_500):
        p.append([(d, 1, "turn", 3, ["common", f"w{d % 50}"], [1, 1]) for d in range(start, start + 2_500)])
        p.pack()
        assert p.rank(["common", "w7"], None, 5)
        held = sum(a.nbytes for a in (p.ids, p.ns, p.dl, p.kind, p.live, p.rows, p.tf, p._seen, p._acc))
        assert p.nbytes() - BYTES_PER_LEXEME * len(p.vocab) >= held


def test_a_query_word_is_one_lexeme_a_stop_word_or_several() -> None:
    assert lexeme_of("'run'") == "run"
    assert lexeme_of("'it''s'") == "it's"
    assert lexeme_of("") == ""
    assert lexeme_of("'e-mail' <-> 'e' <-> 'mail'") is None


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    with postgres_url() as url:
        yield url


@pytest.fixture
def journal(pg_url: str) -> Iterator[Any]:
    from langmem_tiers.journal.postgres import PostgresJournal

    j = PostgresJournal(pg_url, schema=f"kwp_{uuid.uuid4().hex[:16]}")
    j.keyword_budget = 5
    j.keyword_postings.size_from = 20
    yield j
    j.close()


def _statement(journal: Any, query: str, ns_ids: list[int], k: int, kinds: list[str] | None = None) -> list[Any]:
    from langmem_tiers.journal.postgres import _bm25

    terms = journal._query_terms(query, ns_ids)
    with journal._autocommit() as db:
        return [(int(r[0]), float(r[1])) for r in _bm25(db, terms, terms, ns_ids, kinds, k)] if terms else []


def _held(journal: Any, query: str, ns_ids: list[int], k: int = 10, kinds: list[str] | None = None) -> list[Any]:
    """The search, answered from the held postings (asserted: not the statement)."""
    terms = journal._query_terms(query, ns_ids)
    assert not terms or journal._held_search(terms, ns_ids, kinds, k) is not None
    return [(h.record_id, h.score) for h in journal.keyword_search(query, ns_ids, k, kinds)]


def _fill(journal: Any, sessions: int = 3) -> list[int]:
    ns_ids = [journal.namespace_id(Namespace(f"s{i}", "u")) for i in range(sessions)]
    for i, text in enumerate([*RANKING_CORPUS, *EXTRA] * 2):
        journal.add_records(ns_ids[i % sessions], [NewRecord("fact" if i % 4 == 0 else "turn", text)])
    return ns_ids


def _build(journal: Any, ns_ids: list[int]) -> None:
    journal.keyword_search("kayak report", ns_ids, 3)  # over the budget: asks for the postings
    assert journal.keyword_postings.wait_build(30)
    assert journal.keyword_postings.stats()["entries"] == 1


def test_the_held_ranking_is_the_statement_s(journal: Any) -> None:
    ns_ids = _fill(journal)
    _build(journal, ns_ids)
    checked = 0
    for _, query, _ in [*RANKING_CASES, ("", "kayak lake report wedding running", None)]:
        for kinds in (None, ["fact"], ["turn", "fact"]):
            for k in (1, 5, 40):
                held = _held(journal, query, ns_ids, k, kinds)
                assert _same(held, _statement(journal, query, ns_ids, k, kinds)), (query, kinds, k)
                checked += bool(held)
    assert checked > 20


def test_what_another_handle_adds_edits_and_deletes_is_seen_by_the_next_search(journal: Any, pg_url: str) -> None:
    from langmem_tiers.journal.postgres import PostgresJournal

    ns_ids = _fill(journal)
    _build(journal, ns_ids)
    other = PostgresJournal(pg_url, schema=journal.schema)
    try:
        (added,) = other.add_records(ns_ids[1], [NewRecord("turn", "a zeppelin over the harbour")])
        assert [i for i, _ in _held(journal, "zeppelin", ns_ids)] == [added]
        other.update_record(added, text="a balloon over the harbour")
        assert _held(journal, "zeppelin", ns_ids) == []
        assert [i for i, _ in _held(journal, "balloon", ns_ids)] == [added]
        (entry,) = journal.keyword_postings._entries.values()
        assert "balloon" in entry.postings.fresh or "balloon" in entry.postings.vocab
        kayaks = [i for i, _ in _statement(journal, "kayak", ns_ids, 50)]
        other.delete_records(kayaks[:1])
        assert [i for i, _ in _held(journal, "kayak", ns_ids, 50)] == kayaks[1:]
        other.delete_records([added])
        assert _held(journal, "balloon", ns_ids) == []
        assert "balloon" not in entry.postings.vocab
        assert "zeppelin" not in entry.postings.vocab
        for query in ("kayak lake", "report wedding", "the harbour"):
            assert _same(_held(journal, query, ns_ids, 20), _statement(journal, query, ns_ids, 20))
    finally:
        other.close()


def test_a_deleted_record_is_unlinked_without_a_pack_and_compact_packs_it_away(journal: Any) -> None:
    # The next search reads the session's record ids (not its records) and drops the row of the one gone, without
    # packing the postings (Postings._scrub); compact() then packs it away.
    ns_ids = _fill(journal, sessions=12)
    (unique,) = journal.add_records(ns_ids[5], [NewRecord("turn", "the xylophone recital by the lake")])
    _build(journal, ns_ids)
    (entry,) = journal.keyword_postings._entries.values()
    postings = entry.postings
    assert [i for i, _ in _held(journal, "xylophone", ns_ids)] == [unique]
    rows = postings.size
    journal.delete_records([unique])
    assert _held(journal, "xylophone", ns_ids) == []
    assert postings.size == rows  # the session was not read again
    assert postings.ids[~postings.live].tolist() == [unique]
    assert postings.tomb >= 0  # unlinked, not packed
    assert "xylophon" not in postings.vocab
    assert "xylophon" not in postings.fresh
    for query in ("kayak lake", "report wedding", "the recital"):
        assert _same(_held(journal, query, ns_ids, 20), _statement(journal, query, ns_ids, 20))
    assert journal.compact()
    assert postings.live.all()
    assert postings.tomb == -1
    assert unique not in set(postings.ids.tolist())
    assert _same(_held(journal, "kayak lake", ns_ids, 20), _statement(journal, "kayak lake", ns_ids, 20))


def test_an_erased_session_leaves_the_held_scope(journal: Any, pg_url: str) -> None:
    from langmem_tiers.journal.postgres import PostgresJournal

    ns_ids = _fill(journal)
    (unique,) = journal.add_records(ns_ids[2], [NewRecord("turn", "the xylophone recital")])
    _build(journal, ns_ids)
    assert [i for i, _ in _held(journal, "xylophone", ns_ids)] == [unique]
    (entry,) = journal.keyword_postings._entries.values()
    assert "xylophon" in entry.postings.vocab  # the english stem
    other = PostgresJournal(pg_url, schema=journal.schema)
    try:
        other.delete_namespaces([ns_ids[2]])
    finally:
        other.close()
    # The stale scope (a listing read before the erasure) finds nothing of the erased session, and holds none of it.
    assert _held(journal, "xylophone", ns_ids) == []
    assert ns_ids[2] not in set(entry.postings.ns.tolist())
    assert "xylophon" not in entry.postings.vocab
    # This handle's own erasure forgets every held scope at once, and the query words it looked up.
    assert "xylophone" in journal._lexemes
    journal.delete_namespaces([ns_ids[1]])
    assert journal.keyword_postings.held() == 0
    assert not journal._lexemes


def test_a_scope_grown_by_a_session_takes_over_the_held_postings(journal: Any) -> None:
    ns_ids = _fill(journal)
    _build(journal, ns_ids)
    new = journal.namespace_id(Namespace("s-new", "u"))
    (rid,) = journal.add_records(new, [NewRecord("turn", "kayak trip next summer")])
    grown = [*ns_ids, new]
    held = _held(journal, "kayak trip", grown, 20)
    assert journal.keyword_postings.stats()["entries"] == 1  # taken over, not built again
    assert rid in [i for i, _ in held]
    assert _same(held, _statement(journal, "kayak trip", grown, 20))


def test_a_scope_inside_a_held_one_is_ranked_from_it_and_kept_fresh(journal: Any, pg_url: str) -> None:
    # The profile searches the sessions holding memories, recall every session: one entry serves both.
    from langmem_tiers.journal.postgres import PostgresJournal

    ns_ids = _fill(journal, sessions=4)
    _build(journal, ns_ids)
    inner = ns_ids[1:3]
    for _, query, _ in [*RANKING_CASES, ("", "kayak lake report wedding running", None)]:
        for kinds in (None, ["fact"]):
            assert _same(_held(journal, query, inner, 40, kinds), _statement(journal, query, inner, 40, kinds))
    assert journal.keyword_postings.stats()["entries"] == 1
    # A word PostgreSQL parses into several lexemes (foo_bar) sends the inner scope to the statement, over the budget:
    # the held scope holding it stops a build of its own.
    journal.keyword_search("kayak foo_bar report", inner, 3)
    assert journal.keyword_postings.wait_build(30)
    assert journal.keyword_postings.stats()["entries"] == 1
    other = PostgresJournal(pg_url, schema=journal.schema)
    try:
        (inside,) = other.add_records(inner[0], [NewRecord("turn", "a zeppelin over the harbour")])
        (outside,) = other.add_records(ns_ids[0], [NewRecord("turn", "a zeppelin over the lake")])
        assert [i for i, _ in _held(journal, "zeppelin", inner)] == [inside]  # the scope's news only
        (entry,) = journal.keyword_postings._entries.values()
        assert ns_ids[0] in set(entry.postings.ns[entry.postings.live].tolist())  # the rest left as it was
        assert outside not in set(entry.postings.ids.tolist())  # read by a search of its own scope
        assert sorted(i for i, _ in _held(journal, "zeppelin", ns_ids)) == [inside, outside]  # no row twice
        other.delete_namespaces([inner[1]])
    finally:
        other.close()
    assert _same(_held(journal, "kayak report", inner, 40), _statement(journal, "kayak report", inner, 40))
    assert inner[1] not in set(next(iter(journal.keyword_postings._entries.values())).postings.ns.tolist())


def test_a_scope_held_after_one_inside_it_replaces_that_entry(journal: Any, monkeypatch: Any) -> None:
    from langmem_tiers.journal import postgres_postings

    monkeypatch.setattr(postgres_postings, "MAX_NEW_SESSIONS", 0)  # the larger scope is built, not taken over
    ns_ids = _fill(journal, sessions=4)
    _build(journal, ns_ids[:2])
    journal.keyword_search("kayak report", ns_ids, 3)
    assert journal.keyword_postings.wait_build(30)
    assert list(journal.keyword_postings._entries) == [frozenset(ns_ids)]
    assert _same(_held(journal, "kayak", ns_ids[:2], 40), _statement(journal, "kayak", ns_ids[:2], 40))


def test_words_of_several_lexemes_and_encrypted_journals_keep_the_statement(journal: Any) -> None:
    ns_ids = _fill(journal)
    _build(journal, ns_ids)
    journal.add_records(ns_ids[0], [NewRecord("turn", "send the e-mail to foo_bar")])
    budget = journal.keyword_budget
    # Ranked by the statement under the budget, as before: the same as the statement's bounded search.
    from langmem_tiers.journal.postgres import _bounded_bm25

    terms = journal._query_terms("e-mail foo_bar", ns_ids)
    with journal._autocommit() as db:
        rows, _ = _bounded_bm25(db, terms, ns_ids, None, 5, budget)
    found = journal.keyword_search("e-mail foo_bar", ns_ids, 5)
    assert [h.record_id for h in found] == [int(r[0]) for r in rows]
    assert journal._lexemes_of(["e-mail"]) is None


def test_a_caller_s_listing_versions_bring_the_held_scope_up_to_them_and_older_ones_change_nothing(
        journal: Any) -> None:
    from langmem_tiers.journal.base import Scope

    ns_ids = _fill(journal)
    _build(journal, ns_ids)
    listing = journal.scope_listing(Scope("user", Namespace("s0", "u")))
    assert set(listing.ids) == set(ns_ids)
    (added,) = journal.add_records(ns_ids[0], [NewRecord("turn", "a quokka at the zoo")])
    reads: list[Any] = []
    postings = journal.keyword_postings
    real = postings._read_rows
    postings._read_rows = lambda floors: reads.append(floors) or real(floors)
    # Up to the listing's versions, read before the record was added: not there yet, and nothing read.
    assert journal.keyword_search("quokka", ns_ids, 5, versions=listing.versions) == []
    assert reads == []
    # Read now: found.
    assert [h.record_id for h in journal.keyword_search("quokka", ns_ids, 5)] == [added]
    assert len(reads) == 1
    # The older listing again (another request's, read before): the record stays, nothing read again.
    assert [h.record_id for h in journal.keyword_search("quokka", ns_ids, 5, versions=listing.versions)] == [added]
    assert len(reads) == 1
    fresh = journal.scope_listing(Scope("user", Namespace("s0", "u")))
    assert [h.record_id for h in journal.keyword_search("quokka", ns_ids, 5, versions=fresh.versions)] == [added]
    assert len(reads) == 1


def test_a_build_under_way_when_this_process_erases_is_not_installed(journal: Any) -> None:
    import threading

    ns_ids = _fill(journal)
    gone = journal.namespace_id(Namespace("gone", "another-user"))
    journal.add_records(gone, [NewRecord("turn", "erased while the build read")])
    postings = journal.keyword_postings
    real, release = postings._read_scope, threading.Event()

    def paused(scope: Any) -> Iterator[Any]:  # the journal's own read, held after its snapshot's versions
        chunks = real(scope)
        yield next(chunks)
        release.wait(10)
        yield from chunks

    postings._read_scope = paused
    journal.keyword_search("kayak report", ns_ids, 3)  # over the budget: the build is decided here
    journal.delete_namespaces([gone])  # this process erases a session while the build reads
    release.set()
    assert postings.wait_build(30)
    assert postings.held() == 0
    postings._read_scope = real
    _build(journal, ns_ids)  # asked again after the erasure: installed


def test_the_byte_bound_projects_rows_and_postings_not_the_vocabulary(journal: Any) -> None:
    # 6,000 records of six words from a pool of 4,000: the build's first chunk (2,000 records) already holds most
    # of the pool. The postings take ~1.0 MB; scaling that chunk's bytes whole to 6,000 records said ~2 MB (the
    # vocabulary counted three times) and declined a scope that fits 1.5 MB. Under 0.8 MB it is declined, and
    # the statement keeps answering.
    rng = random.Random(3)
    pool = [f"w{i}x" for i in range(4_000)]
    ns_ids = [journal.namespace_id(Namespace(f"s{i}", "u")) for i in range(3)]
    for at in range(0, 6_000, 500):
        journal.add_records(ns_ids[at // 2_000], [NewRecord("turn", " ".join(rng.sample(pool, 6)))
                                                  for _ in range(500)])
    postings = journal.keyword_postings
    postings.max_bytes = 800_000
    journal.keyword_search("w1x w2x w3x", ns_ids, 3)  # over the budget: asks for the postings
    assert postings.wait_build(60)
    assert postings.stats()["entries"] == 0
    assert frozenset(ns_ids) in postings._too_large
    assert _statement(journal, "w7x", ns_ids, 5)
    postings._too_large.clear()
    postings.max_bytes = 1_500_000
    journal.keyword_search("w1x w2x w3x", ns_ids, 3)
    assert postings.wait_build(60)
    stats = postings.stats()
    assert stats["entries"] == 1
    assert stats["records"] == 6_000
    assert stats["bytes"] <= 1_500_000
    assert _same(_held(journal, "w7x w8x", ns_ids, 20), _statement(journal, "w7x w8x", ns_ids, 20))


def test_memory_config_bounds_the_held_postings_of_a_postgres_journal(pg_url: str) -> None:
    from langmem_tiers import MemoryConfig, TieredMemory

    for config, expected in ((MemoryConfig(), 256 * 2**20), (MemoryConfig(keyword_cache_mb=3), 3 * 2**20),
                             (MemoryConfig(keyword_cache_mb=0), 0)):
        memory = TieredMemory.open(pg_url, session_id="s", user_id="u", config=config, embedder=False)
        try:
            assert memory.journal.keyword_postings.max_bytes == expected  # type: ignore[attr-defined]
        finally:
            memory.close()


def test_a_scope_not_held_keeps_the_statement_and_looks_up_no_lexemes(journal: Any) -> None:
    ns_ids = _fill(journal)
    _build(journal, ns_ids)
    other = journal.namespace_id(Namespace("small", "another-user"))
    (rid,) = journal.add_records(other, [NewRecord("turn", "a walrus on the beach")])
    assert [h.record_id for h in journal.keyword_search("walrus", [other], 3)] == [rid]
    assert "walrus" not in journal._lexemes  # no round trip for a scope whose postings are not held
