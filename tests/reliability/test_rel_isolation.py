"""Isolation and erasure: no API returns another namespace's record (a hypothesis property over
core search and context, the LangChain retriever and chat history, and LlamaIndex ``get``);
``forget("session")`` / ``forget("user")`` erase journal rows, FTS rows and Chroma vectors; the
PII redactor runs before anything is persisted or indexed."""

from __future__ import annotations

import contextlib
import itertools
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from langmem_tiers.errors import SessionErasedError
from langmem_tiers.journal.base import Scope
from langmem_tiers.redact import PIIRedactor
from tests.reliability.workers import open_memory

# (user, agent, session); every text carries its owner's tag zq<index>zq
NAMESPACES = [("u1", "a1", "s1"), ("u1", "a1", "s2"), ("u1", "a2", "s3"), ("u2", "a1", "s1"), ("u2", "a1", "s4")]
VOCAB = ["copper", "harbor", "violet", "ledger", "quantum", "meadow"]
TAG = re.compile(r"zq(\d+)zq")
_unique = itertools.count()


def _visible(owner: int, reader: int, scope: str) -> bool:
    ou, oa, os_ = NAMESPACES[owner]
    ru, ra, rs = NAMESPACES[reader]
    if scope == "user":
        return ou == ru
    if scope == "agent":
        return (ou, oa) == (ru, ra)
    return (ou, oa, os_) == (ru, ra, rs)


def _owners(text: str) -> set[int]:
    return {int(t) for t in TAG.findall(text)}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Any:
    path = tmp_path_factory.mktemp("isolation")
    memories = [open_memory(path, s, user=u, agent_id=a, chroma="embedded") for u, a, s in NAMESPACES]
    yield memories
    for m in memories:
        m.close()


ops = st.lists(st.tuples(st.integers(0, len(NAMESPACES) - 1), st.sampled_from(["msg", "fact"]),
                         st.lists(st.sampled_from(VOCAB), min_size=1, max_size=4)), min_size=1, max_size=12)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=ops, reader=st.integers(0, len(NAMESPACES) - 1), scope=st.sampled_from(["session", "agent", "user"]),
       query=st.lists(st.sampled_from(VOCAB), min_size=1, max_size=3))
def test_no_api_crosses_namespaces(world: list[Any], ops: list[Any], reader: int, scope: str,
                                   query: list[str]) -> None:
    from langchain_langmem_tiers import TieredChatMessageHistory, TieredMemoryRetriever
    from llama_index.memory.langmem_tiers import TieredChatMemory

    for owner, kind, words in ops:
        text = f"zq{owner}zq {' '.join(words)} n{next(_unique)}"
        if kind == "fact":
            world[owner].remember(text)
        else:
            world[owner].add_messages([{"role": "user", "content": text},
                                       {"role": "assistant", "content": f"zq{owner}zq noted {' '.join(words)}"}])
    memory = world[reader]
    q = " ".join(query)
    for hit in memory.search(q, k=20, scope=scope):
        ns = hit.namespace
        owner = NAMESPACES.index((ns.user_id, ns.agent_id, ns.session_id))
        assert _visible(owner, reader, scope), (hit, reader, scope)
        assert _owners(hit.text) <= {o for o in range(len(NAMESPACES)) if _visible(o, reader, scope)}
    # The session's own messages and window hold only its own texts.
    for text in [m.text for m in memory.messages()] + [m.text for m in memory.window()]:
        assert _owners(text) <= {reader}, (text, reader)
    # What recall brings into a prompt reaches as far as config.recall_scope (default: the user), never further.
    reach = {o for o in range(len(NAMESPACES)) if _visible(o, reader, memory.config.recall_scope)}
    texts = [m.text for m in memory.context(query=q).messages]
    history = TieredChatMessageHistory(memory)
    texts += [str(m.content) for m in history.messages]
    texts += [str(m.content) for m in TieredChatMemory.from_memory(memory).get(input=q)]
    for text in texts:
        assert _owners(text) <= reach, (text, reader)
    docs = TieredMemoryRetriever(memory=memory, k=20, scope=scope).invoke(q)
    texts_scoped = [d.page_content for d in docs]
    for text in texts_scoped:
        assert _owners(text) <= {o for o in range(len(NAMESPACES)) if _visible(o, reader, scope)}, text


def _fts_count(path: Path, word: str) -> int:
    db = sqlite3.connect(str(path / "journal.sqlite3"))
    try:
        return int(db.execute("SELECT count(*) FROM records_fts WHERE records_fts MATCH ?", (word,)).fetchone()[0])
    finally:
        db.close()


def _fill(memory: Any, word: str) -> None:
    for t in range(8):
        memory.add_messages([{"role": "user", "content": f"{word} question {t} about the harbor"},
                             {"role": "assistant", "content": f"{word} answer {t}"}])
    memory.remember(f"{word} likes green tea")
    memory.flush()


@pytest.mark.parametrize("target", ["session", "user"])
def test_forget_erases_journal_fts_and_chroma(target: str, tmp_path: Path) -> None:
    mine = open_memory(tmp_path, "s1", user="u1", chroma="embedded")
    sibling = open_memory(tmp_path, "s2", user="u1", chroma="embedded")
    stranger = open_memory(tmp_path, "s1", user="u2", chroma="embedded")
    try:
        for memory, word in ((mine, "alphaword"), (sibling, "betaword"), (stranger, "gammaword")):
            _fill(memory, word)
        store, recall = mine.recall.store, mine.recall
        assert _fts_count(tmp_path, "alphaword") > 0
        assert store.count(where=recall.where(Scope("session", mine.namespace))) > 0
        removed = mine.forget(target)
        assert removed > 0
        gone = ["alphaword"] + (["betaword"] if target == "user" else [])
        kept = ["gammaword"] + ([] if target == "user" else ["betaword"])
        db = sqlite3.connect(str(tmp_path / "journal.sqlite3"))

        def rows(table: str, column: str, word: str) -> int:
            sql = f"SELECT count(*) FROM {table} WHERE {column} LIKE ?"
            return int(db.execute(sql, (f"%{word}%",)).fetchone()[0])

        try:
            for word in gone:
                assert rows("messages", "content", word) == 0
                assert rows("records", "text", word) == 0
            for word in kept:
                assert rows("messages", "content", word) > 0
        finally:
            db.close()
        for word in gone:
            assert _fts_count(tmp_path, word) == 0
        for word in kept:
            assert _fts_count(tmp_path, word) > 0
        assert store.count(where=recall.where(Scope(target, mine.namespace))) == 0
        assert store.count(where=recall.where(Scope("session", stranger.namespace))) > 0
        got = store._collection.get(include=["documents", "metadatas"])
        assert not [d for d in got["documents"] if d is not None], "Chroma must hold no texts"
        assert not [m for m in got["metadatas"] if any(w in str(m) for w in gone)]
        assert mine.messages() == []
        assert not [h for h in mine.search("alphaword harbor", scope="user") if "alphaword" in h.text]
        assert stranger.search("gammaword harbor")
    finally:
        for m in (mine, sibling, stranger):
            m.close()


PII = ["ada.lovelace@example.com", "+44 20 7946 0958", "4111 1111 1111 1111"]


def test_pii_redacted_before_persistence_and_indexing(tmp_path: Path) -> None:
    memory = open_memory(tmp_path, "s", chroma="embedded", redactor=PIIRedactor())
    try:
        for t in range(8):
            memory.add_messages([
                {"role": "user", "content": f"turn {t}: mail {PII[0]}, call {PII[1]}, card {PII[2]}"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": f"c{t}", "name": "send", "arguments": {"to": PII[0], "card": PII[2]}}]},
                {"role": "tool", "content": f"sent to {PII[0]}", "tool_call_id": f"c{t}"},
                {"role": "assistant", "content": [{"type": "text", "text": f"done, phone {PII[1]}"}]},
            ])
        memory.remember(f"the user's e-mail is {PII[0]} and card {PII[2]}", pinned=True)
        memory.flush()
        assert memory.stats().records > 1
        db = sqlite3.connect(str(tmp_path / "journal.sqlite3"))
        try:
            rows = [str(v) for table in ("messages", "records", "state")
                    for row in db.execute(f"SELECT * FROM {table}") for v in row]
        finally:
            db.close()
        blob = "\n".join(rows)
        assert "[EMAIL]" in blob
        for secret in PII:
            assert secret not in blob
            assert secret.replace(" ", "") not in blob.replace(" ", "")
        got = memory.recall.store._collection.get(include=["documents", "metadatas"])
        assert got["ids"], "the records were indexed"
        assert not [d for d in got["documents"] if d is not None], "Chroma must hold no texts"
        assert not [m for m in got["metadatas"] if any(s in str(m) for s in PII)]
        assert _fts_count(tmp_path, '"example.com"') == 0
    finally:
        memory.close()


# --- issue 13: stale handles, anonymous sessions, scope terms, Unicode ids (SQLite and PostgreSQL) -----


@pytest.fixture(scope="module")
def pg_url() -> Any:
    from tests.support.postgres import postgres_url

    with postgres_url() as url:
        yield url


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.server)])
def open_ns(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """Opens sessions on one journal: SQLite + embedded Chroma (hashing embedder), or PostgreSQL
    (keyword recall; ids carry a per-test suffix, since the database is shared by the module)."""
    opened: list[Any] = []
    if request.param == "sqlite":
        def make(session: str, user: str | None = None, agent: str | None = None) -> Any:
            memory = open_memory(tmp_path, session, user=user, agent_id=agent, chroma="embedded")  # type: ignore[arg-type]
            opened.append(memory)
            return memory
    else:
        from langmem_tiers import TieredMemory, WordCounter
        from tests.reliability.workers import CONFIG

        url, tag = request.getfixturevalue("pg_url"), f"-{next(_unique)}-{tmp_path.name[-12:]}"

        def make(session: str, user: str | None = None, agent: str | None = None) -> Any:
            memory = TieredMemory.open(url, session_id=session + tag, user_id=user and user + tag,
                                       agent_id=agent and agent + tag, embedder=False, counter=WordCounter(),
                                       config=CONFIG)
            opened.append(memory)
            return memory
    yield make
    for memory in reversed(opened):
        memory.close()


def _texts(memory: Any, query: str) -> list[str]:
    """Everything a handle can read: its messages, every search scope and the assembled context."""
    out = [m.text for m in memory.messages()]
    for scope in ("session", "agent", "user"):
        out += [h.text for h in memory.search(query, k=20, scope=scope)]
    out += [m.text for m in memory.context(query=query).messages]
    return out


def test_stale_handle_after_forget_user_never_reaches_another_tenant(open_ns: Any) -> None:
    """Issue 13 item 1: after ``forget("user")`` through one handle, the user's other open handles
    (``for_session`` and a second ``open``) write into a fresh session of the same user, never into a
    session created meanwhile by another user, and never read it."""
    alice = open_ns("s", user="alice")
    sibling = alice.for_session(alice.namespace.session_id)
    second = open_ns("s", user="alice")
    alice.add("user", "alice before the forget zqoldzq")
    alice.remember("alice fact zqoldzq")
    erased_id = alice._ns_id
    assert alice.forget("user") > 0
    carol = open_ns("c1", user="carol")
    carol.add("user", "carol private copper zqcarolzq")
    carol.add("assistant", "carol answer copper zqcarolzq")
    carol.remember("carol fact copper zqcarolzq")
    assert carol._ns_id != erased_id, "a namespace id was reused"
    for n, handle in enumerate((sibling, second)):
        assert not [t for t in _texts(handle, "copper zqcarolzq") if "zqcarolzq" in t]
        stored = handle.add("user", f"alice after the forget {n}")
        assert stored.id is not None
        with contextlib.suppress(SessionErasedError):  # a typed error naming the erasure is allowed
            handle.remember(f"alice fact after the forget {n}")
        assert not [t for t in _texts(handle, "copper zqcarolzq") if "zqcarolzq" in t or "zqoldzq" in t]
    assert [m.text for m in carol.messages()] == ["carol private copper zqcarolzq", "carol answer copper zqcarolzq"]
    assert not [t for t in _texts(carol, "alice forget") if "alice" in t]
    fresh = open_ns("s", user="alice")  # the session as anyone opening it now sees it
    assert [m.text for m in fresh.messages()] == ["alice after the forget 0", "alice after the forget 1"]


def test_anonymous_sessions_never_reach_each_other(open_ns: Any) -> None:
    """Issue 13 item 2: without a user id, the user and agent scopes narrow to the session itself."""
    mine, other = open_ns("anon-mine"), open_ns("anon-other")
    for memory, tag in ((mine, "zqminezq"), (other, "zqotherzq")):
        for t in range(3):
            memory.add_messages([{"role": "user", "content": f"{tag} copper question {t}"},
                                 {"role": "assistant", "content": f"{tag} copper answer {t}"}])
        memory.remember(f"{tag} copper fact")
    other_record = other.search("copper fact", k=1)[0].record_id
    my_record = mine.search("copper fact", k=1)[0].record_id
    for scope in ("session", "agent", "user", mine.config.recall_scope):  # the last: what the retriever uses
        hits = mine.search("copper zqotherzq", k=20, scope=scope)
        assert hits, "the session's own records must be found"
        assert all("zqminezq" in h.text for h in hits), (scope, [h.text for h in hits])
    assert all("zqotherzq" not in m.text for m in mine.context(query="copper zqotherzq").messages)
    doomed = mine.cleanup(max_age=0, dry_run=True)
    assert doomed
    assert all("zqminezq" in h.text for h in doomed)
    assert mine.forget(other_record) == 0
    from langmem_tiers import ConfigError

    with pytest.raises(ConfigError):
        mine.link(my_record, other_record)
    before = len(other.messages())
    assert mine.forget("agent") > 0
    assert len(other.messages()) == before
    assert other.search("copper fact", k=5)
    mine.add("user", "zqminezq copper again")
    mine.remember("zqminezq copper fact again")
    assert mine.forget("user") > 0, "forget('user') without a user id erases this session"
    assert mine.messages() == []
    assert len(other.messages()) == before
    assert [h.record_id for h in other.search("copper fact", k=5, kinds=["fact"])] == [other_record]


def test_scope_terms_are_not_searchable_words(open_ns: Any) -> None:
    """Issue 13 item 4: "S3 bucket" matched every record of namespace 3 (scope terms were indexed)."""
    first = open_ns("scope-a", user="sam")
    second = open_ns("scope-b", user="sam")
    for memory in (first, second):
        for t in range(4):
            memory.remember(f"the harbor ledger entry {t}")
    first.remember("the bucket holds copper")
    for memory in (first, second):
        for scope in ("session", "user"):
            query = f"S{memory._ns_id} bucket"
            hits = memory.search(query, k=20, scope=scope)
            # Vector recall ranks every record by similarity; the keyword side must match real words only.
            keyword = [h.text for h in hits if h.parts.get("keyword_rank") is not None]
            if memory is first or scope == "user":
                assert keyword, "the bucket record is a keyword match"
            assert all("bucket" in t for t in keyword), (query, keyword)
    alone = first.search(f"s{first._ns_id}", k=20, scope="user")
    assert [h.text for h in alone if h.parts.get("keyword_rank") is not None] == []


def test_unicode_forms_of_a_user_id_are_one_user(open_ns: Any) -> None:
    """Issue 13 item 17: "jose\\u0301" and "jos\\u00e9" name one user; forgetting through one form
    erases what was stored under the other."""
    decomposed = open_ns("nfc-1", user="jose\u0301")
    composed = open_ns("nfc-2", user="jos\u00e9")
    decomposed.add("user", "zqjosezq copper question")
    decomposed.remember("zqjosezq copper fact")
    assert [h.text for h in composed.search("copper zqjosezq", k=5, scope="user")], "one user across both forms"
    stranger = open_ns("nfc-3", user="joss")
    stranger.remember("zqjosszq copper fact")
    assert composed.forget("user") > 0
    again = open_ns("nfc-1", user="jose\u0301")
    assert again.messages() == []
    assert not again.search("copper zqjosezq", k=5, scope="user")
    assert [h.text for h in stranger.search("copper", k=5, scope="user")] == ["zqjosszq copper fact"]


def test_index_pending_counts_only_the_sessions_own_rows(tmp_path: Path) -> None:
    """Issue 13 item 14: ``stats()`` pending figures covered the whole deployment, not the session."""
    from langmem_tiers import TieredMemory, WordCounter
    from tests.reliability.workers import CONFIG, hashed_embedder

    calls = {"fail": True}

    def vectors(texts: list[str]) -> list[list[float]]:
        if calls["fail"]:
            raise ConnectionError("embedder down")
        from tests.reliability.workers import hashed_vectors

        return hashed_vectors(texts)

    from langmem_tiers.embedders.callable import CallableEmbedder

    embedder = CallableEmbedder(vectors, dimension=16, key=hashed_embedder().key)
    busy = TieredMemory.open(tmp_path, session_id="busy", user_id="u1", embedder=embedder, counter=WordCounter(),
                             config=CONFIG.with_changes(background_index=False))
    quiet = busy.for_session("quiet", user_id="u2")
    try:
        for t in range(5):
            busy.remember(f"fact number {t} about copper")
        assert busy.stats().index_pending == 5
        assert quiet.stats().index_pending == 0
        calls["fail"] = False
        busy.flush()
        assert busy.stats().index_pending == 0
    finally:
        quiet.close()
        busy.close()


def test_index_error_shows_only_the_sessions_own_failure(tmp_path: Path) -> None:
    from langmem_tiers import TieredMemory, WordCounter
    from langmem_tiers.embedders.callable import CallableEmbedder
    from tests.reliability.workers import CONFIG

    def down(texts: list[str]) -> list[list[float]]:
        raise ConnectionError("embedder down")

    busy = TieredMemory.open(tmp_path, session_id="busy", user_id="u1", counter=WordCounter(),
                             embedder=CallableEmbedder(down, dimension=16, key="test:down16"),
                             config=CONFIG.with_changes(background_index=False))
    quiet = busy.for_session("quiet", user_id="u2")
    try:
        busy.remember("a fact about copper")
        assert busy.stats().last_index_error
        assert quiet.stats().index_pending == 0
        assert quiet.stats().last_index_error is None, "another session's indexing error"
    finally:
        quiet.close()
        busy.close()
