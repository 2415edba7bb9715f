"""One contract suite for every journal backend (SQLite and PostgreSQL).

Each test takes the ``backend`` fixture, parametrized over the backends; a
backend opens journals on its own fresh storage (a SQLite file, a PostgreSQL
schema) and can rewrite the stored schema version. PostgreSQL tests use
``LANGMEM_TIERS_TEST_PG_URL`` or a temporary server (skipped without binaries).
"""

from __future__ import annotations

import json
import random
import sqlite3
import string
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from langmem_tiers.errors import JournalError, SchemaVersionError, SessionErasedError
from langmem_tiers.journal.base import (
    MAX_QUERY_TERMS,
    SCHEMA_VERSION,
    Journal,
    Namespace,
    NewRecord,
    Scope,
    SessionState,
    search_terms,
)
from langmem_tiers.journal.sqlite import SqliteJournal
from langmem_tiers.messages import Message, ToolCall, make_message
from tests.support.postgres import postgres_url

KEY = "test-key"


@dataclass
class Backend:
    name: str
    open: Callable[[], Journal]
    set_schema_version: Callable[[int | str], None]
    memory_path: Callable[[str], str]
    create_at_version: Callable[[int], None]
    # Runs raw SQL (with ? placeholders) on the backend's storage, outside any journal.
    execute: Callable[[str, tuple[Any, ...]], None]
    opened: list[Journal] = field(default_factory=list)
    schema: str = ""  # PostgreSQL's schema of the journal

    def journal(self) -> Journal:
        j = self.open()
        self.opened.append(j)
        return j


# Rows written by schema version 1 (the same SQL on both backends).
OLD_NAMESPACE = "INSERT INTO namespaces (ns, user_id, agent_id, session_id, created_at) VALUES (1, 'u', '', 'old', 1.0)"
OLD_STATE = "INSERT INTO state (ns, window_start) VALUES (1, 0)"
OLD_MESSAGE = (
    "INSERT INTO messages (ns, role, content, created_at, tokens, tokens_key) "
    "VALUES (1, 'user', '\"written by version 1 about kayaks\"', 2.0, 5, 'k')"
)


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    with postgres_url() as url:
        yield url


def _sqlite_backend(tmp_path: Path) -> Backend:
    path = tmp_path / "journal.sqlite3"

    def set_version(version: int | str) -> None:
        db = sqlite3.connect(path)
        with db:
            db.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(version),))
        db.close()

    def execute(sql: str, args: tuple[Any, ...]) -> None:
        db = sqlite3.connect(path)
        with db:
            db.execute(sql, args)
        db.close()

    def create_at_version(version: int) -> None:
        from langmem_tiers.journal.sqlite import MIGRATIONS, SqliteSql, _split_sql

        db = sqlite3.connect(path)
        with db:
            for script in MIGRATIONS[:version]:
                if callable(script):  # a migration written in Python (version 4)
                    script(SqliteSql(db))
                    continue
                for statement in _split_sql(script):
                    db.execute(statement)
            db.execute("INSERT INTO meta VALUES ('uid', 'old-uid'), ('schema_version', ?)", (str(version),))
            db.execute(OLD_NAMESPACE)
            db.execute(OLD_STATE)
            db.execute(OLD_MESSAGE)
        db.close()

    return Backend("sqlite", lambda: SqliteJournal(path), set_version, lambda _: str(tmp_path / "memory"),
                   create_at_version, execute)


def _postgres_backend(url: str) -> Backend:
    import psycopg

    from langmem_tiers.journal.postgres import PostgresJournal

    schema = f"t_{uuid.uuid4().hex[:16]}"

    def set_version(version: int | str) -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"UPDATE {schema}.meta SET value=%s WHERE key='schema_version'", (str(version),))

    def execute(sql: str, args: tuple[Any, ...]) -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"SET search_path TO {schema}")
            conn.execute(sql.replace("?", "%s"), args)

    def create_at_version(version: int) -> None:
        from langmem_tiers.journal.postgres import MIGRATIONS, PostgresSql

        with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
            conn.execute(f"CREATE SCHEMA {schema}")
            conn.execute(f"SET search_path TO {schema}")
            for script in MIGRATIONS[:version]:
                if callable(script):  # a migration written in Python (version 4)
                    script(PostgresSql(conn))
                else:
                    conn.execute(script)
            conn.execute("INSERT INTO meta VALUES ('uid', 'old-uid'), ('schema_version', %s)", (str(version),))
            for statement in (OLD_NAMESPACE, OLD_STATE, OLD_MESSAGE):
                conn.execute(statement)

    return Backend("postgres", lambda: PostgresJournal(url, schema=schema), set_version, lambda _: url,
                   create_at_version, execute, schema=schema)


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    b = _sqlite_backend(tmp_path) if request.param == "sqlite" else _postgres_backend(request.getfixturevalue("pg_url"))
    yield b
    for j in b.opened:
        j.close()


@pytest.fixture
def journal(backend: Backend) -> Journal:
    return backend.journal()


def _ns(journal: Journal, session: str = "s", user: str = "", agent: str = "") -> int:
    ns_id = journal.namespace_id(Namespace(session, user, agent))
    assert ns_id is not None
    return ns_id


def _append(journal: Journal, ns_id: int, messages: list[Message], tokens: list[int] | None = None) -> list[Message]:
    with journal.write(ns_id) as tx:
        return tx.insert_messages(messages, tokens or [7] * len(messages), KEY)


def _texts(journal: Journal, ns_id: int) -> list[str]:
    return [m.text for m in journal.iter_messages(ns_id)]


# --- messages -------------------------------------------------------------------

MESSAGE_CASES: list[tuple[str, dict[str, Any]]] = [
    ("plain text", {"role": "user", "content": "Where is my order #1234?"}),
    ("unicode and newlines", {"role": "user", "content": "Grüße 👋\n日本語 — \"quotes\" and 'apostrophes' \\ back"}),
    ("parts", {"role": "user", "content": [
        {"type": "text", "text": "what is in this picture?"},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png", "detail": "low"}},
    ]}),
    ("tool calls", {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "name": "lookup", "arguments": '{"order": 1234}'},
        {"id": "call_2", "name": "weather", "arguments": '{"city": "Zürich"}'},
    ]}),
    ("named assistant with metadata", {"role": "assistant", "content": "Done.", "name": "bot",
                                       "metadata": {"run": {"id": "r-1", "scores": [1, 2.5, None]}, "ü": True}}),
    ("system with created_at", {"role": "system", "content": "Be brief.", "created_at": 1_700_000_000.123456}),
]


@pytest.mark.parametrize(("label", "fields"), MESSAGE_CASES, ids=[c[0] for c in MESSAGE_CASES])
def test_message_round_trip(journal: Journal, label: str, fields: dict[str, Any]) -> None:
    ns_id = _ns(journal)
    fields = dict(fields)
    message = make_message(fields.pop("role"), fields.pop("content"), **fields)
    before = time.time()
    [stored] = _append(journal, ns_id, [message], [42])
    assert stored.id is not None
    assert stored.id > 0
    assert stored.created_at is not None
    if message.created_at is None:
        assert before - 1 <= stored.created_at <= time.time() + 1
    else:
        assert stored.created_at == message.created_at
    expected = stored
    assert list(journal.iter_messages(ns_id)) == [expected]
    assert journal.messages_by_id([stored.id]) == [expected]
    with journal.read() as rx:
        assert rx.window_messages(ns_id, 0) == [(expected, 42, KEY)]
    with journal.write(ns_id) as tx:
        assert tx.messages_between(0, stored.id + 1) == [expected]
        assert tx.window_entries(0)[0].tokens == 42


def test_tool_result_round_trip_and_open_calls(journal: Journal) -> None:
    ns_id = _ns(journal)
    call = make_message("assistant", None, tool_calls=[{"id": "c'1\"/x", "name": "f", "arguments": "{}"}])
    result = make_message("tool", "42", tool_call_id="c'1\"/x")
    first, second = _append(journal, ns_id, [call, result])
    assert journal.messages_by_id([second.id or 0])[0].tool_call_id == "c'1\"/x"
    assert first.tool_calls == (ToolCall("c'1\"/x", "f", "{}"),)
    with journal.write(ns_id) as tx:
        assert tx.open_tool_calls(0) == {"c'1\"/x"}
        assert tx.open_tool_calls((first.id or 0) + 1) == set()


def test_ids_increase_across_sessions(journal: Journal) -> None:
    a, b = _ns(journal, "a"), _ns(journal, "b")
    ids = []
    for i in range(6):
        [m] = _append(journal, a if i % 2 else b, [make_message("user", f"m{i}")])
        ids.append(m.id)
    assert ids == sorted(ids)
    assert len(set(ids)) == 6
    batch = _append(journal, a, [make_message("user", f"batch {i}") for i in range(5)])
    assert [m.id for m in batch] == sorted(m.id for m in batch)
    assert (batch[0].id or 0) > (ids[-1] or 0)
    assert journal.count_messages(a) == 8
    assert journal.count_messages(b) == 3
    assert journal.count_messages() == 11
    empty = _ns(journal, "empty")
    with journal.read() as rx:  # no other journal call inside a transaction: SQLite would refuse it
        assert rx.last_message_id(a) == batch[-1].id
        assert rx.last_message_id(empty) == 0
        assert rx.count_between(a, 0, (batch[-1].id or 0) + 1) == 8
        assert rx.count_between(a, batch[0].id or 0, (batch[-1].id or 0)) == 3
    assert [m.text for m in journal.iter_messages(a, after=batch[1].id or 0, batch=2)] == [
        "batch 2", "batch 3", "batch 4"]
    assert journal.messages_by_id([]) == []


def test_update_tokens(journal: Journal) -> None:
    ns_id = _ns(journal)
    stored = _append(journal, ns_id, [make_message("user", "a"), make_message("user", "b")])
    with journal.write(ns_id) as tx:
        tx.update_tokens([(stored[0].id or 0, 99)], "other-key")
    with journal.read() as rx:
        rows = rx.window_messages(ns_id, 0)
    assert [(t, k) for _, t, k in rows] == [(99, "other-key"), (7, KEY)]


# --- namespaces ----------------------------------------------------------------

NAMESPACE_CASES = [
    Namespace("plain"),
    Namespace("it's \"quoted\"", "u'1", 'a"1'),
    Namespace("a/b/../c", "../..", "/etc/passwd"),
    Namespace("sessão-日本-🙂", "usuário", "агент"),
    Namespace("%s %(x)s ? :name $1", "' OR 1=1 --", "; DROP TABLE messages;"),
    Namespace("x" * 512, "y" * 512, "z" * 512),
]


def test_namespaces_are_distinct_and_stable(backend: Backend) -> None:
    journal = backend.journal()
    ids = [journal.namespace_id(ns) for ns in NAMESPACE_CASES]
    assert len(set(ids)) == len(ids)
    for ns, ns_id in zip(NAMESPACE_CASES, ids):
        assert journal.namespace_id(ns) == ns_id
        assert journal.namespace_id(ns, create=False) == ns_id
        assert ns_id is not None
        _append(journal, ns_id, [make_message("user", f"hello {ns.session_id[:20]}")])
    assert journal.namespace_id(Namespace("never"), create=False) is None
    assert journal.namespaces() == [(i, ns) for i, ns in zip(ids, NAMESPACE_CASES)]  # type: ignore[misc]
    for ns, ns_id in zip(NAMESPACE_CASES, ids):
        assert _texts(journal, ns_id or 0) == [f"hello {ns.session_id[:20]}"]
    reopened = backend.journal()
    assert [reopened.namespace_id(ns, create=False) for ns in NAMESPACE_CASES] == ids


def test_namespaces_by_scope(journal: Journal) -> None:
    spaces = [Namespace("s1", "u1", "a1"), Namespace("s2", "u1", "a1"), Namespace("s3", "u1", "a2"),
              Namespace("s1", "u2", "a1"), Namespace("s4", "u1")]
    ids = {ns: journal.namespace_id(ns) for ns in spaces}

    def found(kind: str, ns: Namespace) -> set[Namespace]:
        got = journal.namespaces(Scope(kind, ns))
        assert all(ids[n] == i for i, n in got)
        return {n for _, n in got}

    assert found("session", spaces[0]) == {spaces[0]}
    assert found("user", spaces[0]) == {spaces[0], spaces[1], spaces[2], spaces[4]}
    assert found("agent", spaces[0]) == {spaces[0], spaces[1]}
    assert found("agent", spaces[4]) == {spaces[4]}


# --- transactions -------------------------------------------------------------


def test_write_rolls_back_on_error(journal: Journal) -> None:
    ns_id = _ns(journal)
    _append(journal, ns_id, [make_message("user", "kept")])

    def half_write() -> None:
        with journal.write(ns_id) as tx:
            tx.insert_messages([make_message("user", "lost 1"), make_message("user", "lost 2")], [1, 1], KEY)
            tx.set_window_start(10**6)
            tx.set_summary("half-written", 3, 10**6)
            tx.insert_records([NewRecord("turn", "lost record")])
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        half_write()
    assert _texts(journal, ns_id) == ["kept"]
    with journal.read() as rx:
        assert rx.state(ns_id) == SessionState(version=1)  # only the committed append counted
    assert journal.scoped_records([ns_id]) == []
    assert journal.outbox_count() == 0


def test_database_error_becomes_journal_error_and_rolls_back(journal: Journal) -> None:
    ns_id = _ns(journal)
    bad = Message(role=None, content="no role")  # type: ignore[arg-type]  # violates NOT NULL

    def bad_write() -> None:
        with journal.write(ns_id) as tx:
            tx.insert_messages([make_message("user", "lost")], [1], KEY)
            tx.insert_messages([bad], [1], KEY)

    with pytest.raises(JournalError) as info:
        bad_write()
    assert info.value.__cause__ is not None
    assert journal.count_messages(ns_id) == 0
    _append(journal, ns_id, [make_message("user", "works after")])  # the journal is still usable
    assert _texts(journal, ns_id) == ["works after"]


def test_state_cursors_and_summary(journal: Journal) -> None:
    ns_id = _ns(journal)
    other = _ns(journal, "other")
    with journal.write(ns_id) as tx:
        assert tx.ns_id == ns_id
        assert tx.state() == SessionState()
        tx.set_window_start(5)
        tx.set_failure("RuntimeError: down", 2, 1234.5)
        assert tx.state() == SessionState(window_start=5, failures=2, last_error="RuntimeError: down",
                                          retry_at=1234.5)
        tx.set_summary("the user likes tea", 5, 4)
    with journal.read() as rx:
        assert rx.state(ns_id) == SessionState(5, "the user likes tea", 5, 4, 1, 0, None, 0.0, version=1)
        assert rx.state(other) == SessionState()
        assert rx.state(10**9) == SessionState()
    with journal.write(ns_id) as tx:
        tx.set_summary("the user likes green tea", 6, 4)
    with journal.read() as rx:
        assert rx.state(ns_id).summary_version == 2
        assert rx.state(ns_id).version == 2


def test_read_is_a_snapshot(backend: Backend) -> None:
    reader, writer = backend.journal(), backend.journal()
    ns_id = _ns(reader)
    _append(writer, ns_id, [make_message("user", "first")])
    with reader.read() as rx:
        before = (rx.state(ns_id), rx.last_message_id(ns_id))
        _append(writer, ns_id, [make_message("user", "second")])
        with writer.write(ns_id) as tx:
            tx.set_summary("changed", 1, 1)
        assert (rx.state(ns_id), rx.last_message_id(ns_id)) == before
    with reader.read() as rx:
        assert rx.state(ns_id).summary == "changed"


def test_writers_of_one_session_are_serialized(backend: Backend) -> None:
    journals = [backend.journal() for _ in range(3)]
    ns_id = _ns(journals[0])
    errors: list[BaseException] = []

    def bump(j: Journal) -> None:
        try:
            for _ in range(15):
                with j.write(ns_id) as tx:
                    count = tx.state().summary_tokens
                    time.sleep(0.001)  # widen the race a lost update would need
                    tx.set_summary(f"n={count + 1}", count + 1, 0)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=bump, args=(j,)) for j in journals for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with journals[0].read() as rx:
        assert rx.state(ns_id).summary_tokens == 90
        assert rx.state(ns_id).summary_version == 90


# --- records and keyword search -----------------------------------------------

CORPUS = [
    ("turn", "I run every morning before work"),
    ("turn", "She ran a marathon in Berlin last year"),
    ("fact", "The user's dog is called Biscuit; he loves running on the beach!"),
    ("preference", "Prefers TEA over coffee, especially green tea"),
    ("turn", "Deploy the app with docker compose on port 8080"),
    ("fact", "Lives in Zürich and works as a café owner"),
]

SEARCH_CASES: list[tuple[str, str, list[str] | None, list[int], list[int]]] = [
    # (label, query, kinds, must include (corpus indexes), must exclude)
    ("exact word", "marathon", None, [1], [0, 2, 3, 4, 5]),
    ("stemming: running finds run", "running", None, [0, 2], [3, 4, 5]),
    ("stemming: runs finds run", "runs", None, [0, 2], [3, 4, 5]),
    ("case", "DOCKER Compose", None, [4], [0, 1, 2, 3, 5]),
    ("punctuation in query", "tea?! (green) \"coffee\" & | ! :* <-> 'quoted'", None, [3], [0, 1, 4]),
    ("possessive and punctuation in text", "user dog Biscuit", None, [2], [0, 1, 4]),
    ("numbers", "8080", None, [4], [0, 1, 2, 3, 5]),
    ("unicode word", "Zürich", None, [5], [0, 1, 2, 3, 4]),
    ("kinds filter", "running tea", ["fact"], [2], [0, 1, 3, 4, 5]),
    ("no match", "xylophone", None, [], [0, 1, 2, 3, 4, 5]),
]


@pytest.fixture
def corpus(journal: Journal) -> tuple[Journal, int, int, list[int]]:
    ns_id, other = _ns(journal, "mine"), _ns(journal, "theirs")
    ids = journal.add_records(ns_id, [NewRecord(kind, text, created_at=1000.0 + i)
                                      for i, (kind, text) in enumerate(CORPUS)])
    journal.add_records(other, [NewRecord(kind, text) for kind, text in CORPUS])
    return journal, ns_id, other, ids


@pytest.mark.parametrize(("label", "query", "kinds", "include", "exclude"), SEARCH_CASES,
                         ids=[c[0] for c in SEARCH_CASES])
def test_keyword_search(corpus: tuple[Journal, int, int, list[int]], label: str, query: str,
                        kinds: list[str] | None, include: list[int], exclude: list[int]) -> None:
    journal, ns_id, _, ids = corpus
    hits = journal.keyword_search(query, [ns_id], 10, kinds)
    found = [h.record_id for h in hits]
    assert set(found) <= set(ids), "a hit from another namespace"
    assert {ids[i] for i in include} <= set(found)
    assert not {ids[i] for i in exclude} & set(found)
    assert [h.rank for h in hits] == list(range(1, len(hits) + 1))
    assert all(h.score > 0 for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_keyword_search_ranks_overlap_first_and_respects_scope_and_k(
        corpus: tuple[Journal, int, int, list[int]]) -> None:
    journal, ns_id, other, ids = corpus
    hits = journal.keyword_search("green tea coffee", [ns_id], 10)
    assert hits[0].record_id == ids[3]
    both = journal.keyword_search("marathon", [ns_id, other], 10)
    assert len(both) == 2
    assert ids[1] in {h.record_id for h in both}
    assert len(journal.keyword_search("run running ran tea docker", [ns_id], 2)) == 2
    assert journal.keyword_search("marathon", [], 10) == []
    assert journal.keyword_search("", [ns_id], 10) == []
    assert journal.keyword_search("?! ...", [ns_id], 10) == []


# A small chat history for ranking quality: the same expectations hold FTS5 bm25 and
# PostgreSQL's ranking to one standard (realistic lines, common words repeated across them).
RANKING_CORPUS = [
    "We booked the trip to Lisbon for the second week of May",
    "The business trip to Munich got moved to next month",
    "That trip was long, the trip back even longer",
    "We rented a kayak on the lake and it tipped over",
    "Planning a road trip along the coast with my brother",
    "The train trip from Porto took almost three hours",
    "My sister and her husband visited, my sister brought a cake",
    "My sister lives in Toronto now",
    "Hannah starts school in September",
    "I called my sister about the birthday party",
    "My older sister is a nurse",
    "My dentist appointment moved to Thursday afternoon",
    "The dentist said my teeth are fine",
    "I have an appointment with the bank on Monday",
    "Reschedule the appointment with the plumber",
    "I have a peanut allergy, so no satay please",
    "The wedding in Porto is on June 14",
    "Her wedding dress was blue",
    "We danced all night at the wedding",
    "The wedding planner sent the invoice",
    "Porto has great custard tarts",
    "Budget for the kitchen renovation is 12000 euros",
    "I keep the household budget in a spreadsheet",
    "The budget meeting ran late, the budget is tight this year",
    "Remember to water the basil on the balcony",
    "My laptop battery dies after two hours",
    "The cat knocked the plant off the windowsill",
    "I started learning Portuguese on Duolingo",
    "Our flight to Madrid leaves at 7:40",
    "The flight was delayed by two hours, so we missed dinner",
    "I prefer window seats on long flights",
    "My manager approved the vacation days",
    "The sprint review is on Friday",
    "Deploying the new cache cut latency in half",
    "I ran 10 kilometers this morning",
    "The marathon training plan starts in June",
    "Grandma's recipe uses too much sugar",
    "We adopted a rescue dog named Pepper",
    "Pepper chewed my running shoes",
    "The car needs new winter tires before December",
]

RANKING_CASES: list[tuple[str, str, list[int]]] = [
    # (label, query, corpus indexes the top hits must be, in order)
    ("the rare word outranks a common word said twice", "what did I say about the kayak trip", [3]),
    ("a name outranks a common word said twice", "sister Hannah", [8]),
    ("both query words beat one", "dentist appointment", [11]),
    ("both words beat one common word", "Porto wedding", [16]),
    ("plural query finds the singular", "allergies", [15]),
    ("singular query finds the plural first", "flight delays", [29]),
    ("a rare word beats a frequent one", "budget spreadsheet", [22]),
]


@pytest.mark.parametrize(("label", "query", "top"), RANKING_CASES, ids=[c[0] for c in RANKING_CASES])
def test_keyword_ranking_quality(journal: Journal, label: str, query: str, top: list[int]) -> None:
    ns_id = _ns(journal, "ranking")
    ids = journal.add_records(ns_id, [NewRecord("turn", text, created_at=1000.0 + i)
                                      for i, text in enumerate(RANKING_CORPUS)])
    hits = journal.keyword_search(query, [ns_id], 5)
    ranked = [RANKING_CORPUS[ids.index(h.record_id)] for h in hits]
    assert ranked[:len(top)] == [RANKING_CORPUS[i] for i in top], ranked


def test_long_records_rank_by_their_words_for_a_long_query(journal: Journal) -> None:
    """Records of ~500 words (PostgreSQL stores their tsvectors compressed or out of line, and ranks a copy read
    once) asked with a pasted paragraph: the one saying the rare words more often ranks first, by bm25."""
    rng = random.Random(3)
    vocabulary = sorted({"".join(rng.choices(string.ascii_lowercase, k=rng.randint(5, 10))) for _ in range(3000)})
    filler = [" ".join(rng.sample(vocabulary[:2000], 500)) for _ in range(3)]
    ns_id = _ns(journal, "long")
    ids = journal.add_records(ns_id, [NewRecord("turn", f"{filler[0]} kayak kayak kayak lisbon"),
                                      NewRecord("turn", f"{filler[1]} kayak lisbon lisbon"),
                                      NewRecord("turn", f"{filler[2]} nothing of either")])
    query = "What about " + " ".join(rng.sample(vocabulary[2000:], 60)) + " and the kayak in lisbon?"  # words unsaid
    assert [h.record_id for h in journal.keyword_search(query, [ns_id], 5)][:2] == ids[:2]
    assert [h.record_id for h in journal.keyword_search("lisbon", [ns_id], 5)] == [ids[1], ids[0]]


def test_records_read_by_another_handle_carry_their_sessions(backend: Backend) -> None:
    """Records name their session from the handle's cache of namespaces (no join per row): a handle that
    never saw these sessions resolves them all at once, through every read that decodes records; and a
    session erased since takes its records with it."""
    writer = backend.journal()
    made = {Namespace(f"s{i}", f"u{i % 2}", "bot" if i % 3 == 0 else ""): 0 for i in range(7)}
    ids = []
    for ns in made:
        made[ns] = _ns(writer, ns.session_id, ns.user_id, ns.agent_id)
        ids += writer.add_records(made[ns], [NewRecord("turn", f"turn of {ns.session_id}"),
                                             NewRecord("fact", f"fact of {ns.session_id}")])
    reader = backend.journal()
    by_text = {r.text: r.namespace for r in reader.records(ids)}
    assert by_text == {f"{kind} of {ns.session_id}": ns for ns in made for kind in ("turn", "fact")}
    ns_ids = list(made.values())
    assert {(r.text, r.namespace) for r in reader.scoped_records(ns_ids, ["fact"])} == {
        (f"fact of {ns.session_id}", ns) for ns in made}
    first = next(iter(made))
    writer.add_records(made[first], [NewRecord("turn", "a later turn")])
    assert [(r.text, r.namespace) for r in backend.journal().beside([ids[0]], "turn", 1)[ids[0]][1]] == [
        ("a later turn", first)]
    writer.delete_namespaces([made[first]])
    assert {r.namespace for r in backend.journal().records(ids)} == set(made) - {first}


def test_records_beside_a_record_stay_in_its_session_and_kind(journal: Journal) -> None:
    """``beside``: the nearest records of a kind before and after one, within its session only
    (another session's records written in between are not its neighbors)."""
    mine, other = _ns(journal, "mine", "u"), _ns(journal, "other", "u")
    ids = {}
    for name, ns_id, kind in [("t1", mine, "turn"), ("x1", other, "turn"), ("t2", mine, "turn"),
                              ("f", mine, "fact"), ("x2", other, "turn"), ("t3", mine, "turn"), ("t4", mine, "turn")]:
        [ids[name]] = journal.add_records(ns_id, [NewRecord(kind, name)])
    around = journal.beside([ids["t2"], ids["t3"], 10**9], "turn", 4)
    assert [r.text for r in around[ids["t2"]][0]] == ["t1"]
    assert [r.text for r in around[ids["t2"]][1]] == ["t3", "t4"]  # nearest first; no fact, no other session
    assert [r.text for r in around[ids["t3"]][0]] == ["t2", "t1"]
    assert around[10**9] == ([], [])
    nearest = journal.beside([ids["t3"]], "turn", 1)[ids["t3"]]
    assert ([r.text for r in nearest[0]], [r.text for r in nearest[1]]) == (["t2"], ["t4"])
    assert journal.beside([ids["f"]], "fact", 2) == {ids["f"]: ([], [])}
    assert journal.beside([], "turn", 2) == {}


def test_newest_citations_are_the_sessions_own_newest_first(journal: Journal) -> None:
    mine, other = _ns(journal, "mine", "u"), _ns(journal, "other", "u")
    a, b = journal.add_records(mine, [NewRecord("turn", "a", message_ids=(1, 2)), NewRecord("fact", "b")])
    journal.add_records(other, [NewRecord("turn", "x", message_ids=(3, 4))])
    [c] = journal.add_records(mine, [NewRecord("turn", "c", message_ids=(5, 6))])
    assert journal.newest_citations(mine, 10) == [(c, (5, 6)), (b, ()), (a, (1, 2))]
    assert journal.newest_citations(mine, 1) == [(c, (5, 6))]
    assert journal.newest_citations(mine, 0) == []
    assert journal.newest_citations(_ns(journal, "empty"), 5) == []


def test_records_round_trip_update_and_delete(journal: Journal) -> None:
    ns = Namespace("s", "u", "a")
    ns_id = journal.namespace_id(ns) or 0
    [rid] = journal.add_records(ns_id, [NewRecord(
        "fact", "Ada prefers tea", message_ids=(3, 4), importance=0.9, pinned=True, tags=("drink", "ü"),
        metadata={"source": "chat", "n": [1, 2]}, created_at=1234.5)])
    [record] = journal.records([rid])
    assert (record.id, record.namespace, record.kind, record.text, record.message_ids, record.importance,
            record.pinned, record.tags, dict(record.metadata), record.created_at) == (
        rid, ns, "fact", "Ada prefers tea", (3, 4), 0.9, True, ("drink", "ü"), {"source": "chat", "n": [1, 2]},
        1234.5)
    [turn] = journal.add_records(ns_id, [NewRecord("turn", "hello there")])
    assert journal.records([turn])[0].created_at > 0
    assert [r.id for r in journal.scoped_records([ns_id])] == [rid, turn]
    assert [r.id for r in journal.scoped_records([ns_id], ["turn"])] == [turn]
    assert [r.id for r in journal.scoped_records([ns_id], pinned_only=True)] == [rid]
    assert journal.count_records(ns_id) == 2
    assert journal.count_records(_ns(journal, "nobody")) == 0
    assert journal.scoped_records([]) == []
    journal.update_record(rid, text="Ada prefers coffee", importance=0.2, message_ids=(9,), metadata={"v": 2})
    updated = journal.records([rid])[0]
    assert (updated.text, updated.importance, updated.message_ids, dict(updated.metadata)) == (
        "Ada prefers coffee", 0.2, (9,), {"v": 2})
    assert [h.record_id for h in journal.keyword_search("coffee", [ns_id], 5)] == [rid]
    assert journal.keyword_search("tea", [ns_id], 5) == []
    assert journal.delete_records([rid, 10**9]) == 1
    assert journal.records([rid]) == []
    assert journal.keyword_search("coffee", [ns_id], 5) == []


# --- outbox --------------------------------------------------------------------


def test_outbox_upsert_fail_retry_done(journal: Journal) -> None:
    ns_id = _ns(journal)
    ids = journal.add_records(ns_id, [NewRecord("turn", f"record {i}") for i in range(3)])
    assert [(i.record_id, i.op, i.attempts) for i in journal.outbox(10)] == [(r, "upsert", 0) for r in ids]
    assert journal.outbox_count() == 3
    assert journal.outbox_error() is None
    assert len(journal.outbox(2)) == 2
    items = {i.record_id: i for i in journal.outbox(10)}
    journal.outbox_failed([items[ids[0]]], "ConnectionError: chroma down")
    assert [i.record_id for i in journal.outbox(10)] == ids[1:]  # backing off
    assert journal.outbox_count() == 3
    assert journal.outbox_error() == "ConnectionError: chroma down"
    time.sleep(1.1)  # the first failure backs off 1 second
    [retry] = [i for i in journal.outbox(10) if i.record_id == ids[0]]
    assert retry.attempts == 1
    journal.outbox_done(journal.outbox(10))
    assert journal.outbox_count() == 0
    assert journal.outbox(10) == []
    journal.update_record(ids[0], text="changed")
    assert [(i.record_id, i.op) for i in journal.outbox(10)] == [(ids[0], "upsert")]
    journal.delete_records([ids[1]])
    assert [(i.record_id, i.op, i.attempts) for i in journal.outbox(10)] == [
        (ids[0], "upsert", 0), (ids[1], "delete", 0)]
    journal.outbox_failed([i for i in journal.outbox(10) if i.record_id == ids[1]], "x" * 5000)
    assert len(journal.outbox_error() or "") <= 2000


def test_requeue_all(journal: Journal) -> None:
    ns_id = _ns(journal)
    ids = journal.add_records(ns_id, [NewRecord("turn", f"alpha {i}") for i in range(4)])
    items = journal.outbox(10)
    journal.outbox_failed(items[:2], "down")
    journal.outbox_done(items[2:])
    assert journal.requeue_all() == 4
    assert [(i.record_id, i.op, i.attempts) for i in journal.outbox(10)] == [(r, "upsert", 0) for r in ids]
    assert len(journal.keyword_search("alpha", [ns_id], 10)) == 4


# --- deleting -------------------------------------------------------------------


def test_clear_session_removes_everything_of_that_session(journal: Journal) -> None:
    ns_id, other = _ns(journal, "gone"), _ns(journal, "kept")
    for n in (ns_id, other):
        _append(journal, n, [make_message("user", "secret words here")])
        with journal.write(n) as tx:
            tx.set_window_start(5)
            tx.set_summary("summary", 1, 2)
    rids = journal.add_records(ns_id, [NewRecord("turn", "secret words here"), NewRecord("fact", "secret fact")])
    kept = journal.add_records(other, [NewRecord("turn", "secret words here")])
    journal.outbox_done(journal.outbox(10))
    journal.add_link(rids[0], kept[0], "related", 0.5)
    assert sorted(journal.clear_session(ns_id)) == sorted(rids)
    assert journal.count_messages(ns_id) == 0
    assert journal.scoped_records([ns_id]) == []
    assert journal.keyword_search("secret", [ns_id], 10) == []
    assert journal.links(rids) == []
    with journal.read() as rx:
        state = rx.state(ns_id)
    assert (state.window_start, state.summary, state.summary_cursor, state.summary_version) == (0, "", 0, 2)
    assert {(i.record_id, i.op) for i in journal.outbox(10)} == {(r, "delete") for r in rids}
    assert journal.namespace_id(Namespace("gone"), create=False) == ns_id
    assert _texts(journal, other) == ["secret words here"]
    assert [h.record_id for h in journal.keyword_search("secret", [other], 10)] == kept
    _append(journal, ns_id, [make_message("user", "new start")])
    assert _texts(journal, ns_id) == ["new start"]


def test_delete_namespaces(journal: Journal) -> None:
    a, b, c = _ns(journal, "a", "u"), _ns(journal, "b", "u"), _ns(journal, "c", "u")
    for n in (a, b, c):
        _append(journal, n, [make_message("user", f"hello {n}")])
    ra = journal.add_records(a, [NewRecord("turn", "alpha")])
    rb = journal.add_records(b, [NewRecord("turn", "beta")])
    assert sorted(journal.delete_namespaces([b, a, a])) == sorted(ra + rb)
    assert journal.namespace_id(Namespace("a", "u"), create=False) is None
    assert journal.namespace_id(Namespace("b", "u"), create=False) is None
    assert [n for _, n in journal.namespaces()] == [Namespace("c", "u")]
    assert journal.count_messages() == 1
    assert journal.records(ra + rb) == []
    assert {i.op for i in journal.outbox(10) if i.record_id in ra + rb} == {"delete"}
    assert journal.namespace_id(Namespace("a", "u")) not in (None, b, c)  # can be created again


# --- links ------------------------------------------------------------------------


def test_links(journal: Journal) -> None:
    ns_id = _ns(journal)
    r1, r2, r3 = journal.add_records(ns_id, [NewRecord("fact", t) for t in ("one", "two", "three")])
    journal.add_link(r1, r2, "supports", 0.5)
    journal.add_link(r1, r2, "supports", 0.8)  # replaces
    journal.add_link(r3, r1, "contradicts", 0.3)
    assert sorted(journal.links([r1])) == sorted([(r1, r2, "supports", 0.8), (r3, r1, "contradicts", 0.3)])
    assert journal.links([r2]) == [(r1, r2, "supports", 0.8)]
    assert journal.links([]) == []
    journal.delete_records([r2])
    assert journal.links([r1]) == [(r3, r1, "contradicts", 0.3)]


# --- schema -----------------------------------------------------------------------


def test_schema_version_uid_and_integrity(backend: Backend) -> None:
    first = backend.journal()
    uid, url = first.uid, first.url  # type: ignore[attr-defined]
    assert isinstance(uid, str)
    assert len(uid) == 32
    assert url.startswith("sqlite:///" if backend.name == "sqlite" else "postgresql://")
    assert first.integrity_check() == "ok"
    first.close()
    again = backend.journal()  # migrations are idempotent; the uid stays
    assert again.uid == uid  # type: ignore[attr-defined]
    again.close()
    backend.set_schema_version(SCHEMA_VERSION + 1)
    with pytest.raises(SchemaVersionError, match="newer"):
        backend.open()
    backend.set_schema_version(SCHEMA_VERSION)
    backend.journal().close()


def test_forward_migration_keeps_data(backend: Backend) -> None:
    backend.create_at_version(1)
    journal = backend.journal()
    assert journal.uid == "old-uid"  # type: ignore[attr-defined]
    assert journal.integrity_check() == "ok"
    ns_id = journal.namespace_id(Namespace("old", "u"), create=False)
    assert ns_id is not None
    assert [(m.role, m.text, m.created_at) for m in journal.iter_messages(ns_id)] == [
        ("user", "written by version 1 about kayaks", 2.0)]
    [rid] = journal.add_records(ns_id, [NewRecord("turn", "kayaks on the lake", pinned=True)])
    assert [h.record_id for h in journal.keyword_search("kayak", [ns_id], 5)] == [rid]
    _append(journal, ns_id, [make_message("user", "after the upgrade")])
    assert _texts(journal, ns_id)[-1] == "after the upgrade"
    journal.close()
    backend.set_schema_version(SCHEMA_VERSION)  # reopening at the current version is a no-op
    assert backend.journal().count_messages(ns_id) == 2


def test_closed_journal_refuses(journal: Journal) -> None:
    journal.close()
    with pytest.raises(JournalError):
        journal.count_messages()


# --- TieredMemory end to end --------------------------------------------------------


def test_tiered_memory_end_to_end(backend: Backend) -> None:
    from langmem_tiers import MemoryConfig, TieredMemory

    session = f"e2e-{uuid.uuid4().hex[:8]}"
    config = MemoryConfig(context_tokens=1200, window_tokens=300, summary_tokens=120, recall_tokens=300)
    path = backend.memory_path(session)
    with TieredMemory.open(path, session_id=session, user_id="u-1", embedder=False, config=config) as memory:
        topics = ["volcanoes in Iceland", "sourdough baking", "the Rust borrow checker", "tide pools",
                  "jazz harmony", "orbital mechanics", "medieval castles", "bonsai trees"]
        for i, topic in enumerate(topics):
            memory.add("user", f"Tell me about {topic}, question {i}.")
            memory.add("assistant", f"Here is a long answer about {topic}. " * 6)
        memory.flush()
        everything = memory.messages()
        assert len(everything) == 16
        assert [m.id for m in everything] == sorted(m.id for m in everything)
        window = memory.window()
        assert 0 < len(window) < 16
        assert window == everything[-len(window):]
        summary = memory.summary
        assert summary
        context = memory.context("sourdough")
        assert context.messages
        assert context.tokens.total <= 1200
        hits = memory.search("sourdough baking", k=3)
        assert hits
        assert "sourdough" in hits[0].text.lower()
        rid = memory.remember("The user is allergic to peanuts", kind="fact")
        assert rid in {h.record_id for h in memory.search("peanuts allergic")}
        assert memory.stats().messages == 16
    with TieredMemory.open(path, session_id=session, user_id="u-1", embedder=False, config=config) as again:
        assert [m.id for m in again.messages()] == [m.id for m in everything]
        assert again.summary == summary
        again.clear()
        assert again.messages() == []
        assert again.search("sourdough") == []


def test_outbox_done_keeps_a_change_queued_meanwhile(journal: Journal) -> None:
    """An indexer that read an item must not drop a newer change queued while it worked."""
    ns_id = _ns(journal)
    [rid] = journal.add_records(ns_id, [NewRecord("turn", "old text")])
    [read] = journal.outbox(10)
    journal.update_record(rid, text="new text")  # queued again while the indexer embeds "old text"
    journal.outbox_done([read])
    [pending] = journal.outbox(10)
    assert (pending.record_id, pending.op) == (rid, "upsert")
    assert pending.seq > read.seq
    journal.outbox_failed([read], "stale item")  # a stale failure does not touch the new row either
    assert journal.outbox(10)[0].attempts == 0


# --- issue 13: ids never reused, erased sessions ---------------------------------------------


def test_ids_are_never_reused(journal: Journal) -> None:
    """Deleting the newest namespace, message and record never hands its id out again."""
    a = _ns(journal, "a", "alice")
    b = _ns(journal, "b", "bob")
    [m1, m2] = _append(journal, b, [make_message("user", "one"), make_message("user", "two")])
    [r1, r2] = journal.add_records(b, [NewRecord("turn", "first"), NewRecord("turn", "second")])
    assert journal.delete_records([r2]) == 1
    [r3] = journal.add_records(a, [NewRecord("turn", "third")])
    assert r3 > r2
    journal.clear_session(b)  # drops the newest messages
    [m3] = _append(journal, a, [make_message("user", "three")])
    assert (m3.id or 0) > (m2.id or 0)
    journal.delete_namespaces([b])  # the newest namespace
    c = _ns(journal, "c", "carol")
    assert c > b
    assert r1 < r3
    assert (m1.id or 0) < (m3.id or 0)


def test_stale_handle_after_erase_never_reaches_another_tenant(backend: Backend) -> None:
    alice_handle, eraser = backend.journal(), backend.journal()
    alice = _ns(alice_handle, "chat", "alice")
    _append(alice_handle, alice, [make_message("user", "alice's secret")])
    eraser.delete_namespaces([alice])
    carol = _ns(eraser, "chat", "carol")  # created meanwhile: must not get alice's old id
    assert carol != alice
    with pytest.raises(SessionErasedError, match=r"'chat' \(user 'alice'.*erased"):
        _append(alice_handle, alice, [make_message("user", "written after the erase")])
    with pytest.raises(SessionErasedError):
        alice_handle.add_records(alice, [NewRecord("fact", "late fact")])
    # Unknown to this handle: named by its id.
    with pytest.raises(SessionErasedError, match=f"namespace id {alice}"), eraser.write(alice) as tx:
        tx.set_window_start(1)
    assert _texts(eraser, carol) == []
    assert eraser.scoped_records([carol]) == []
    assert alice_handle.count_messages(alice) == 0
    assert list(alice_handle.iter_messages(alice)) == []
    with alice_handle.read() as rx:
        assert rx.state(alice) == SessionState()
        assert rx.window_messages(alice, 0) == []
    # The session can start afresh under a new id.
    again = _ns(alice_handle, "chat", "alice")
    assert again not in (alice, carol)
    _append(alice_handle, again, [make_message("user", "new start")])
    assert _texts(alice_handle, again) == ["new start"]


# --- issue 13 / issue 12 item 7: the session version stamp -------------------------------------


def test_version_grows_with_every_committed_write_of_the_session(journal: Journal) -> None:
    ns_id, other = _ns(journal, "mine"), _ns(journal, "other")

    def version(n: int = ns_id) -> int:
        with journal.read() as rx:
            return rx.state(n).version

    seen = [version()]

    def grew() -> None:
        now = version()
        assert now > seen[-1]
        seen.append(now)

    [m] = _append(journal, ns_id, [make_message("user", "hello")])
    grew()
    with journal.write(ns_id) as tx:
        tx.set_window_start(m.id or 0)
    grew()
    with journal.write(ns_id) as tx:
        tx.set_summary("greeting", 2, 0)
    grew()
    with journal.write(ns_id) as tx:
        tx.set_failure("boom", 1, 0.0)
    grew()
    with journal.write(ns_id) as tx:
        tx.update_tokens([(m.id or 0, 3)], "k2")
    grew()
    [rid] = journal.add_records(ns_id, [NewRecord("fact", "likes tea")])
    grew()
    journal.update_record(rid, importance=0.9)
    grew()
    journal.delete_records([rid])
    grew()
    with journal.write(ns_id) as tx:  # a write that only reads changes nothing
        tx.state()
        tx.window_entries(0)
    assert version() == seen[-1]
    with journal.read() as rx:
        summary_version = rx.state(ns_id).summary_version
    journal.clear_session(ns_id)
    grew()
    with journal.read() as rx:
        state = rx.state(ns_id)
    assert state.summary_version == summary_version + 1  # grows across a clear, never back to 0
    with journal.write(ns_id) as tx:
        tx.set_summary("after the clear", 2, 0)
    assert version() > seen[-1]
    with journal.read() as rx:
        assert rx.state(ns_id).summary_version == summary_version + 2
    assert version(other) == 0  # another session's writes never touch it


def test_version_is_shared_by_handles(backend: Backend) -> None:
    """The stamp lets a cached view notice another handle's write (one indexed read)."""
    h1, h2 = backend.journal(), backend.journal()
    ns_id = _ns(h1, "shared")
    with h1.read() as rx:
        before = rx.state(ns_id).version
    _append(h2, ns_id, [make_message("user", "from h2")])
    with h1.read() as rx:
        after_add = rx.state(ns_id).version
    h2.clear_session(ns_id)
    with h1.read() as rx:
        after_clear = rx.state(ns_id).version
    assert before < after_add < after_clear


# --- idempotency keys ---------------------------------------------------------------------------


def test_message_keys_round_trip_and_lookup(journal: Journal) -> None:
    ns_id, other = _ns(journal, "mine"), _ns(journal, "other")
    keyed = [make_message("user", "first", key="lc-1"), make_message("assistant", "no key"),
             make_message("assistant", "second", key="lc-2")]
    stored = _append(journal, ns_id, keyed)
    assert [m.key for m in stored] == ["lc-1", None, "lc-2"]
    assert [m.key for m in journal.iter_messages(ns_id)] == ["lc-1", None, "lc-2"]
    assert [m.key for m in journal.messages_by_id([m.id or 0 for m in stored])] == ["lc-1", None, "lc-2"]
    with journal.read() as rx:
        assert [m.key for m, _, _ in rx.window_messages(ns_id, 0)] == ["lc-1", None, "lc-2"]
    _append(journal, other, [make_message("user", "same key, other session", key="lc-1")])
    with journal.write(ns_id) as tx:
        found = tx.messages_by_key(["lc-2", "lc-1", "missing", "lc-1"])
        assert tx.messages_by_key([]) == {}
        assert [m.key for m in tx.messages_between(0, 10**12)] == ["lc-1", None, "lc-2"]
    assert found == {"lc-1": stored[0], "lc-2": stored[2]}
    with pytest.raises(JournalError, match="'lc-2' is already stored"):
        _append(journal, ns_id, [make_message("user", "retry", key="new"), make_message("user", "dup", key="lc-2")])
    assert journal.count_messages(ns_id) == 3  # the whole batch rolled back


# --- anonymous sessions -------------------------------------------------------------------------


def test_anonymous_scopes_narrow_to_the_session() -> None:
    a, b = Namespace("a"), Namespace("b")
    a_agent, b_agent = Namespace("a", agent_id="bot"), Namespace("b", agent_id="bot")
    for kind in ("session", "user", "agent"):
        assert Scope(kind, a).matches(a)
        assert not Scope(kind, a).matches(b)
        assert not Scope(kind, a_agent).matches(b_agent)
        assert Scope(kind, a).effective_kind == "session"
    assert Scope("user", Namespace("x", "u")).matches(Namespace("y", "u"))  # named users keep wide scopes


def test_two_anonymous_sessions_never_see_each_other(journal: Journal) -> None:
    spaces = [Namespace("a"), Namespace("b"), Namespace("a", agent_id="bot"), Namespace("b", agent_id="bot")]
    ids = {ns: _ns(journal, ns.session_id, ns.user_id, ns.agent_id) for ns in spaces}
    for ns, ns_id in ids.items():
        journal.add_records(ns_id, [NewRecord("fact", f"anonymous secret of {ns.session_id}/{ns.agent_id}")])
    for ns, ns_id in ids.items():
        for kind in ("session", "user", "agent"):
            visible = journal.namespaces(Scope(kind, ns))
            assert visible == [(ns_id, ns)], (kind, ns)
            hits = journal.keyword_search("anonymous secret", [i for i, _ in visible], 10)
            assert {r.namespace for r in journal.records([h.record_id for h in hits])} == {ns}


# --- scope terms are not words --------------------------------------------------------------------


def test_scope_is_not_a_searchable_word(journal: Journal) -> None:
    """ "S3 bucket" must not match every record of namespace 3 (nor "s3" any namespace's)."""
    ids = [_ns(journal, f"s{i}") for i in range(4)]
    for ns_id in ids:
        journal.add_records(ns_id, [NewRecord("turn", "we talked about the weather"),
                                    NewRecord("turn", "lunch plans for friday")])
    target = ids[-1]
    for ns_id in ids:
        assert journal.keyword_search(f"S{ns_id} bucket", [ns_id], 10) == []
        assert journal.keyword_search(f"s{ns_id}", ids, 10) == []
    [rid] = journal.add_records(target, [NewRecord("turn", f"the S{target} bucket policy is public")])
    assert [h.record_id for h in journal.keyword_search(f"S{target} bucket", [target], 10)] == [rid]
    assert [h.record_id for h in journal.keyword_search(f"S{target} bucket", ids, 10)] == [rid]


# --- unicode ids -----------------------------------------------------------------------------------


def test_namespace_of_normalizes_to_nfc() -> None:
    decomposed, composed = "jose\u0301", "jos\u00e9"
    assert Namespace.of(decomposed, decomposed, decomposed) == Namespace(composed, composed, composed)
    assert Namespace.of("s", "A\u030angstro\u0308m").user_id == "\u00c5ngstr\u00f6m"


def test_migration_merges_ids_equal_in_nfc(backend: Backend) -> None:
    """Data stored under "jose\\u0301" by an older version is found under "jos\\u00e9" after migrating."""
    backend.create_at_version(3)  # namespace 1 ('u', '', 'old') with one message
    rows = [(2, "jose\u0301", "s"), (3, "jos\u00e9", "s"), (4, "jose\u0301", "other")]
    for ns, user, session in rows:
        backend.execute("INSERT INTO namespaces (ns, user_id, agent_id, session_id, created_at) "
                        "VALUES (?, ?, '', ?, 1.0)", (ns, user, session))
        backend.execute("INSERT INTO state (ns, summary, summary_version) VALUES (?, ?, ?)",
                        (ns, f"summary of {ns}", ns))
        backend.execute("INSERT INTO messages (ns, role, content, created_at, tokens, tokens_key) "
                        "VALUES (?, 'user', ?, 2.0, 5, 'k')", (ns, json.dumps(f"message of {ns}")))
        backend.execute("INSERT INTO records (ns, kind, text, created_at) VALUES (?, 'fact', ?, 3.0)",
                        (ns, f"fact number{ns}"))
    journal = backend.journal()
    assert journal.integrity_check() == "ok"
    composed = "jos\u00e9"
    merged = journal.namespace_id(Namespace.of("s", "jose\u0301"), create=False)
    assert merged == 2  # the lower id survives
    assert _texts(journal, merged) == ["message of 2", "message of 3"]
    assert sorted(r.text for r in journal.scoped_records([merged])) == ["fact number2", "fact number3"]
    assert all(r.namespace == Namespace("s", composed) for r in journal.scoped_records([merged]))
    with journal.read() as rx:
        assert rx.state(merged).summary == "summary of 2"
        assert rx.state(3) == SessionState()
    renamed = journal.namespace_id(Namespace("other", composed), create=False)
    assert renamed == 4
    assert _texts(journal, renamed) == ["message of 4"]
    users = [ns.user_id for _, ns in journal.namespaces()]
    assert "jose\u0301" not in users
    assert sorted(users) == sorted(["u", composed, composed])
    # Every moved or renamed record is queued, so the vector store learns its new ids.
    texts = {r.text for r in journal.records([i.record_id for i in journal.outbox(10)])}
    assert texts >= {"fact number2", "fact number3", "fact number4"}
    assert journal.outbox_count([merged]) == 2
    assert journal.keyword_search("number3", [merged], 5) != []


# --- outbox for many replicas ------------------------------------------------------------------------


def test_claims_do_not_overlap_and_expire(backend: Backend) -> None:
    a, b = backend.journal(), backend.journal()
    ns_id = _ns(a)
    ids = a.add_records(ns_id, [NewRecord("turn", f"row {i}") for i in range(5)])
    first = a.claim_outbox(3, owner="replica-a", lease_s=60)
    assert [i.record_id for i in first] == ids[:3]
    assert {i.owner for i in first} == {"replica-a"}
    second = b.claim_outbox(10, owner="replica-b", lease_s=0.3)
    assert [i.record_id for i in second] == ids[3:]
    assert a.claim_outbox(10, owner="replica-c", lease_s=60) == []
    assert len(a.outbox(10)) == 5  # the unclaimed view still lists everything
    time.sleep(0.5)  # replica-b's lease expires (a crashed indexer)
    taken_over = a.claim_outbox(10, owner="replica-c", lease_s=60)
    assert [i.record_id for i in taken_over] == ids[3:]
    b.outbox_done(second)  # the late holder's done still removes the rows it indexed (same seq)
    a.outbox_done(first)
    assert a.outbox_count() == 0
    with pytest.raises(JournalError, match="owner"):
        a.claim_outbox(1, owner="", lease_s=1)
    with pytest.raises(JournalError, match="lease_s"):
        a.claim_outbox(1, owner="x", lease_s=0)


def test_requeue_keeps_the_lease_so_a_delete_waits_for_the_upsert(backend: Backend) -> None:
    indexer, other, app = backend.journal(), backend.journal(), backend.journal()
    ns_id = _ns(app)
    [rid] = app.add_records(ns_id, [NewRecord("turn", "soon forgotten")])
    [upsert] = indexer.claim_outbox(10, owner="indexer", lease_s=60)
    assert upsert.op == "upsert"
    app.delete_records([rid])  # forget while the upsert is in flight
    assert other.claim_outbox(10, owner="other", lease_s=60) == []  # nobody takes the delete meanwhile
    [pending] = app.outbox(10)
    assert (pending.op, pending.seq > upsert.seq) == ("delete", True)
    indexer.outbox_done([upsert])  # stale: the row stays, the lease is released
    [delete] = other.claim_outbox(10, owner="other", lease_s=60)
    assert (delete.record_id, delete.op) == (rid, "delete")
    other.outbox_done([delete])
    assert app.outbox_count() == 0


def test_outbox_failed_is_per_item_and_releases_the_lease(journal: Journal) -> None:
    ns_id = _ns(journal)
    ids = journal.add_records(ns_id, [NewRecord("turn", f"row {i}") for i in range(3)])
    claimed = journal.claim_outbox(10, owner="me", lease_s=60)
    journal.update_record(ids[2], text="changed meanwhile")
    journal.outbox_failed([claimed[0], claimed[2]], "embedder rejected the text")
    rows = {i.record_id: i for i in journal.outbox(10, due_only=False)}
    assert rows[ids[0]].attempts == 1
    assert rows[ids[2]].attempts == 0  # stale item: only its lease is released
    assert rows[ids[1]].attempts == 0
    # ids[0] backs off; ids[2] is claimable again (new change); ids[1] is still leased by "me".
    assert [i.record_id for i in journal.claim_outbox(10, owner="you", lease_s=60)] == [ids[2]]
    assert [i.record_id for i in journal.claim_outbox(10, owner="you", lease_s=60, due_only=False)] == [ids[0]]
    assert journal.outbox_error([ns_id]) == "embedder rejected the text"
    assert journal.outbox_error([_ns(journal, "clean")]) is None


def test_concurrent_claimers_take_each_item_once(backend: Backend) -> None:
    journals = [backend.journal() for _ in range(4)]
    ns_id = _ns(journals[0])
    ids = journals[0].add_records(ns_id, [NewRecord("turn", f"row {i}") for i in range(120)])
    taken: list[list[int]] = [[] for _ in journals]
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            while items := journals[n].claim_outbox(7, owner=f"replica-{n}", lease_s=60):
                taken[n] += [i.record_id for i in items]
                journals[n].outbox_done(items)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(len(journals))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    everything = [rid for part in taken for rid in part]
    assert sorted(everything) == ids  # each exactly once
    assert journals[0].outbox_count() == 0


def test_pending_records_and_counts_per_namespace(journal: Journal) -> None:
    mine, theirs = _ns(journal, "mine"), _ns(journal, "theirs")
    a, b, c = journal.add_records(mine, [NewRecord("turn", t) for t in ("alpha", "beta", "gamma")])
    journal.add_records(theirs, [NewRecord("turn", "delta")])
    assert [r.id for r in journal.pending_records([mine], 10)] == [a, b, c]
    assert [r.id for r in journal.pending_records([mine], 2)] == [b, c]  # the newest
    assert journal.pending_records([], 10) == []
    assert journal.outbox_count([mine]) == 3
    assert journal.outbox_count([theirs]) == 1
    assert journal.outbox_count([mine, theirs]) == journal.outbox_count() == 4
    journal.outbox_done([i for i in journal.outbox(10) if i.record_id == a])
    journal.delete_records([c])  # a pending delete is not a pending record
    assert [r.id for r in journal.pending_records([mine], 10)] == [b]
    assert journal.outbox_count([mine]) == 2  # b's upsert and c's delete still count for the session


# --- erasure --------------------------------------------------------------------------------------


def test_compact_and_residue_after_erase(journal: Journal) -> None:
    needle = "zanzibar-quokka-4417"
    ns_id = _ns(journal, "secret", "erased-user")
    _append(journal, ns_id, [make_message("user", f"my code word is {needle}")])
    journal.add_records(ns_id, [NewRecord("fact", f"code word {needle}")])
    with journal.write(ns_id) as tx:
        tx.set_summary(f"user said {needle}", 4, 0)
    assert journal.residue([needle])[needle] >= 3
    journal.delete_namespaces([ns_id])
    assert journal.compact() is True
    assert journal.residue([needle, "erased-user"]) == {needle: 0, "erased-user": 0}
    with pytest.raises(JournalError, match="non-empty"):
        journal.residue([""])


# --- bad inputs -----------------------------------------------------------------------------------


def test_non_integer_schema_version_is_a_typed_error(backend: Backend) -> None:
    backend.journal().close()
    backend.set_schema_version("three")
    with pytest.raises(SchemaVersionError, match=r"'three'.*not an integer"):
        backend.open()


def test_a_pasted_document_as_query_or_record_does_not_break_search(journal: Journal) -> None:
    """~20k distinct words (700 KB): PostgreSQL's parser overflowed its stack on such a query."""
    rng = random.Random(7)
    words = sorted({"".join(rng.choices(string.ascii_lowercase, k=rng.randint(6, 12))) for _ in range(21_000)})
    document = " ".join(words[:20_000])
    ns_id = _ns(journal)
    [big] = journal.add_records(ns_id, [NewRecord("turn", document)])
    [small] = journal.add_records(ns_id, [NewRecord("turn", f"notes about {words[5]} and kayaks")])
    assert {h.record_id for h in journal.keyword_search(document, [ns_id], 5)} >= {big}
    assert [h.record_id for h in journal.keyword_search("kayaks", [ns_id], 5)] == [small]
    assert len(search_terms(document)) == MAX_QUERY_TERMS


# --- the semantic tier (schema v5) ----------------------------------------------

def test_keyed_memories_supersede_and_merge_in_one_write(journal: Journal) -> None:
    a = journal.namespace_id(Namespace("a", "u")) or 0
    b = journal.namespace_id(Namespace("b", "u")) or 0
    [porto] = journal.add_records(a, [NewRecord("fact", "I live in Porto", (1,), created_at=10.0, key="location")])
    [turn] = journal.add_records(a, [NewRecord("turn", "a turn")])
    with journal.write(b) as tx:
        current = tx.current_memories([a, b])
        assert [(r.id, r.key, r.valid_to, r.current) for r in current] == [(porto, "location", None, True)]
        [lisbon] = tx.insert_records([NewRecord("fact", "I moved to Lisbon", (7,), created_at=20.0, key="location")])
        tx.supersede([porto], 20.0)
        tx.merge_memory(lisbon, 0.9, (7, 8))
    old, new = journal.records([porto, lisbon])
    assert (old.valid_to, old.current, old.text) == (20.0, False, "I live in Porto")  # kept: history
    assert (new.key, new.valid_to, new.importance, new.message_ids) == ("location", None, 0.9, (7, 8))
    with journal.write(a) as tx:
        assert [r.id for r in tx.current_memories([a, b])] == [lisbon]  # turns and superseded ones excluded
        tx.supersede([lisbon], 30.0)
        tx.supersede([lisbon], 40.0)  # superseded once: the first time stays
    assert journal.records([lisbon])[0].valid_to == 30.0
    assert journal.records([turn])[0].key is None


def test_memory_reads_narrowed_to_keyed_ones_and_the_listed_unkeyed_ones(journal: Journal) -> None:
    a = journal.namespace_id(Namespace("a", "u")) or 0
    b = journal.namespace_id(Namespace("b", "u")) or 0
    other = journal.namespace_id(Namespace("c", "someone else")) or 0
    [home, tea, kayak] = journal.add_records(a, [NewRecord("fact", "I live in Porto", key="home_city"),
                                                 NewRecord("preference", "I like green tea"),
                                                 NewRecord("fact", "I paddle a kayak")])
    [turn, job, old_job] = journal.add_records(b, [NewRecord("turn", "a turn"), NewRecord("fact", "I teach", key="job"),
                                                   NewRecord("fact", "I taught", key="job")])
    [foreign] = journal.add_records(other, [NewRecord("fact", "I live in Oslo", key="home_city")])
    with journal.write(a) as tx:
        tx.supersede([old_job], 5.0)
    with journal.write(a) as tx:
        assert [r.id for r in tx.current_memories([a, b], unkeyed=[kayak, turn, foreign])] == [home, kayak, job]
        assert [r.id for r in tx.current_memories([a, b], unkeyed=())] == [home, job]
        assert [r.id for r in tx.current_memories([a, b])] == [home, tea, kayak, job]
    kinds = ["fact", "preference"]
    assert [r.id for r in journal.scoped_records([a, b], kinds, unkeyed=[tea, turn, foreign])] == [home, tea, job,
                                                                                                   old_job]
    assert [r.id for r in journal.scoped_records([a, b], kinds, unkeyed=())] == [home, job, old_job]
    assert [r.id for r in journal.scoped_records([a, b], ["fact"], unkeyed=[tea, kayak])] == [home, kayak, job,
                                                                                              old_job]
    # The listed ids are read wherever they are (a search of the caller's scope found them), so the
    # namespaces may be only those holding a keyed record.
    assert [r.id for r in journal.scoped_records([b], kinds, unkeyed=[tea])] == [tea, job, old_job]
    assert [r.id for r in journal.scoped_records([], kinds, unkeyed=[tea])] == [tea]  # no session holds a key
    with journal.write(a) as tx:
        assert [r.id for r in tx.current_memories([], unkeyed=[kayak])] == [kayak]


def test_erasing_messages_erases_memories_that_came_only_from_them(journal: Journal) -> None:
    ns_id = journal.namespace_id(Namespace("s", "u")) or 0
    stored = _append(journal, ns_id, [make_message("user", f"message {i}") for i in range(3)])
    m0, m1, m2 = (m.id or 0 for m in stored)
    only, shared, explicit, turn = journal.add_records(ns_id, [
        NewRecord("fact", "said once", (m0,), key="k1"),
        NewRecord("fact", "said twice", (m0, m2)),
        NewRecord("fact", "remembered"),
        NewRecord("turn", "message 0 and 1", (m0, m1)),
    ])
    removed = journal.erase_messages(ns_id, [m0])
    assert sorted(removed) == sorted([only, turn])
    assert {r.id: r.message_ids for r in journal.records([only, shared, explicit, turn])} == {
        shared: (m2,), explicit: ()}
    assert all(h.record_id != only for h in journal.keyword_search("said once", [ns_id], 5))


def test_semantic_tier_end_to_end(backend: Backend) -> None:
    """Keyed supersession, extraction in the summary transaction and erasure, on every backend."""
    from langmem_tiers import MemoryConfig, TieredMemory

    user = f"u-{uuid.uuid4().hex[:8]}"
    config = MemoryConfig(context_tokens=1200, window_tokens=200, summary_tokens=80, recall_tokens=300)
    path = backend.memory_path(user)
    with TieredMemory.open(path, session_id="one", user_id=user, embedder=False, config=config) as memory, \
            TieredMemory.open(path, session_id="two", user_id=user, embedder=False, config=config) as other:
        memory.remember("Lives in Porto", key="home_city")
        other.remember("Lives in Lisbon", key="home_city")  # another session of the user supersedes it
        assert [f.text for f in memory.facts()] == ["Lives in Lisbon"]
        assert [(f.text, f.current) for f in memory.facts(include_superseded=True)] == [
            ("Lives in Porto", False), ("Lives in Lisbon", True)]
        memory.add("user", "My cat is called Miso.")
        memory.add("assistant", "Lovely.")
        for i in range(10):
            memory.add("user", f"Question {i} about tide pools and the weather on the coast.")
            memory.add("assistant", "A long answer about tide pools. " * 4)
        memory.flush()
        [cat] = [f for f in memory.facts() if f.key == "cat_name"]
        assert cat.source == (memory.messages()[0].id,)
        turn = next(h for h in memory.search("cat called Miso", k=5, kinds=["turn"]))
        memory.forget(turn.record_id)
        assert [f.key for f in memory.facts() if f.key] == ["home_city"]
        memory.forget("user")
        assert other.facts() == []
