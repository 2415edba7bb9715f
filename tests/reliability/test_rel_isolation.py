"""Isolation and erasure: no API returns another namespace's record (a hypothesis property over
core search and context, the LangChain retriever and chat history, and LlamaIndex ``get``);
``forget("session")`` / ``forget("user")`` erase journal rows, FTS rows and Chroma vectors; the
PII redactor runs before anything is persisted or indexed."""

from __future__ import annotations

import itertools
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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
    texts = [m.text for m in memory.context(query=q).messages]
    docs = TieredMemoryRetriever(memory=memory, k=20, scope=scope).invoke(q)
    texts_scoped = [d.page_content for d in docs]
    history = TieredChatMessageHistory(memory)
    texts += [str(m.content) for m in history.messages]
    texts += [str(m.content) for m in TieredChatMemory.from_memory(memory).get(input=q)]
    for text in texts:
        assert _owners(text) <= {reader}, (text, reader)
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
        docs = store._collection.get(include=["documents"])["documents"]
        assert not [d for d in docs if any(w in d for w in gone)]
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
        docs = memory.recall.store._collection.get(include=["documents"])["documents"]
        assert docs
        assert not [d for d in docs if any(s in d for s in PII)]
        assert _fts_count(tmp_path, '"example.com"') == 0
    finally:
        memory.close()
