"""Per-user encryption with crypto-shredding, on real SQLite and real PostgreSQL.

What is checked: while the process runs, the raw bytes of the SQLite journal and its WAL hold
no plaintext of an encrypted user's messages, summary, memories or memory keys, and the
keyword index holds no plaintext word; every feature still works encrypted; a copy of the
journal taken before ``forget("user")`` (a backup) cannot be opened afterwards; on PostgreSQL,
rows read from a snapshot taken before the forget (dead tuples) are ciphertext without a key;
tampering with a ciphertext or moving it to another user, field or journal fails
authentication with a typed error; a plaintext journal works as before, and one that turns
encryption on later still reads its plaintext rows.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from langmem_tiers import MemoryConfig, TieredMemory, WordCounter
from langmem_tiers.errors import ConfigError, DecryptionError, EncryptionError, KeyUnavailableError
from langmem_tiers.journal.base import Namespace
from langmem_tiers.journal.encryption import PREFIX, FieldCipher, index_words, normalize_word
from langmem_tiers.journal.sqlite import SqliteJournal
from langmem_tiers.keyring import FolderKeyRing
from langmem_tiers.memory import JOURNAL_FILE, KEYS_DIR
from tests.support.postgres import postgres_url

pytest.importorskip("cryptography")

CONFIG = MemoryConfig(context_tokens=400, window_tokens=60, window_low_ratio=0.5, summary_tokens=40,
                      recall_tokens=100, summary_retry_base_s=0, summary_retry_max_s=0,
                      background_summary=False, background_index=False)


def needle(tag: str, i: int) -> str:
    """A word no file holds by chance (ends in a digit: stemmers keep it whole)."""
    return tag + hashlib.sha1(f"{tag}-{i}".encode()).hexdigest()[:10] + "7"


def fill(memory: TieredMemory, tag: str, turns: int = 4) -> list[str]:
    """Turns (enough to be evicted, summarized and extracted) and two keyed memories; returns the words."""
    words = []
    for i in range(turns):
        question, answer = needle(tag, i), needle(tag, 100 + i)
        memory.add("user", f"my locker code is {question} near the copper harbor",
                   metadata={"note": needle(tag, 300 + i)})
        memory.add("assistant", f"noted, {answer} stays in the harbor")
        words += [question, answer, needle(tag, 300 + i)]
    fact = needle(tag, 999)
    memory.remember(f"the user keeps {fact} in a drawer", key="drawer_item", tags=[needle(tag, 998)])
    words += [fact, needle(tag, 998)]
    memory.flush()
    return words


def raw_count(files: list[Path], words: list[str]) -> dict[str, int]:
    counts = dict.fromkeys(words, 0)
    for path in files:
        if not path.exists():
            continue
        data = path.read_bytes()
        for w in words:
            counts[w] += data.count(w.encode())
    return counts


def journal_files(folder: Path) -> list[Path]:
    return [folder / JOURNAL_FILE, folder / (JOURNAL_FILE + "-wal"), folder / (JOURNAL_FILE + "-shm")]


def open_memory(folder: Path, user: str | None = "ada", session: str = "s1", **options: Any) -> TieredMemory:
    options.setdefault("embedder", False)
    return TieredMemory.open(folder, session_id=session, user_id=user, config=CONFIG, counter=WordCounter(),
                             **options)


def fts_terms(path: Path) -> set[str]:
    """Every term of the keyword index (fts5vocab in a temporary schema: the file is not changed)."""
    db = sqlite3.connect(path)
    try:
        db.execute("CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, records_fts, row)")
        return {str(r[0]) for r in db.execute("SELECT term FROM temp.vocab")}
    finally:
        db.close()


# --- SQLite ---------------------------------------------------------------------------

def test_sqlite_files_hold_no_plaintext_while_running(tmp_path: Path) -> None:
    plain_folder, secret_folder = tmp_path / "plain", tmp_path / "secret"
    with open_memory(plain_folder) as plain:
        plain_words = fill(plain, "plain")
        # Positive control: the same scan finds a plaintext journal's words, so 0 below means something.
        assert all(raw_count(journal_files(plain_folder), plain_words).values())
        assert plain.summary
        assert plain.facts()
        assert plain.summary_history()
    with open_memory(secret_folder, keyring=True) as memory:
        words = fill(memory, "zorb")
        assert memory.summary, "the summary exists"
        # The summary's version history opens with the key, and is stored sealed like the summary.
        history = memory.summary_history()
        assert history[0].text == memory.summary
        db = sqlite3.connect(secret_folder / JOURNAL_FILE)
        try:
            stored = [str(r[0]) for r in db.execute("SELECT text FROM summary_versions")]
        finally:
            db.close()
        assert len(stored) == len(history)
        assert all(t.startswith(PREFIX) for t in stored)
        assert len(memory.facts()) >= 2, "extracted and explicit memories exist"
        counts = raw_count(journal_files(secret_folder), [*words, "locker", "copper", "harbor", "drawer_item",
                                                          "locker_code"])
        assert not any(counts.values()), counts
        terms = fts_terms(secret_folder / JOURNAL_FILE)
        scope_terms = {t for t in terms if t[0] == "s" and t[1:].isdigit()}
        assert terms - scope_terms, "the index holds blind tokens"
        stemmed = {normalize_word(w) for w in ["locker", "copper", "harbor", "drawer", "keeps", *words]}
        assert not terms & (stemmed | {w.lower() for w in words}), "no plaintext word in the FTS index"
        # The key lives outside the journal, in a 0600 file whose name is a hash, not the user id.
        keys = list((secret_folder / KEYS_DIR).iterdir())
        assert len(keys) == 1
        # A hex digest can spell "ada" by chance (CI's did), so check the name's form, not a substring.
        assert re.fullmatch(r"[0-9a-f]{64}\.key", keys[0].name), keys[0].name
        assert stat.S_IMODE(keys[0].stat().st_mode) == 0o600
        assert stat.S_IMODE((secret_folder / KEYS_DIR).stat().st_mode) == 0o700


def test_features_work_encrypted(tmp_path: Path) -> None:
    with open_memory(tmp_path, keyring=True) as memory:
        words = fill(memory, "feat", turns=6)
        assert memory.journal.encrypted  # type: ignore[attr-defined]
        hits = memory.search(f"where is {words[0]}?", k=3)
        assert hits
        assert words[0] in hits[0].text
        assert memory.search("harbors", k=1), "plural folding: 'harbors' finds 'harbor'"
        context = memory.context(f"what was {words[2 * 3]}")
        assert any(words[2 * 3] in h.text for h in context.recalled)
        assert "locker" in memory.summary
        facts = {f.key: f for f in memory.facts()}
        assert words[-2] in facts["drawer_item"].text
        memory.remember("the user keeps a compass in a drawer", key="drawer_item")
        current = {f.key: f.text for f in memory.facts()}
        assert current["drawer_item"] == "the user keeps a compass in a drawer", "a newer keyed memory supersedes"
        history = [f for f in memory.facts(include_superseded=True) if f.key == "drawer_item"]
        assert len(history) == 2
        exported = memory.messages()
        assert exported[0].text.startswith("my locker code is")
        assert exported[0].metadata["note"] == words[2]
        assert memory.erase_report(["locker"]).clean
    with open_memory(tmp_path, keyring=tmp_path / KEYS_DIR) as again:
        assert again.messages() == exported, "a reopened journal reads the same messages"


def test_tool_calls_and_names_are_sealed(tmp_path: Path) -> None:
    secret = needle("tool", 1)
    with open_memory(tmp_path, keyring=True) as memory:
        memory.add("user", "look it up", name="ada_lovelace")
        call = {"id": "call_1", "name": "lookup", "arguments": json.dumps({"q": secret})}
        memory.add("assistant", "", tool_calls=[call])
        memory.add("tool", f"found {secret}", tool_call_id="call_1")
        stored = memory.messages()
        assert stored[0].name == "ada_lovelace"
        assert json.loads(stored[1].tool_calls[0].arguments) == {"q": secret}
        assert memory.context().messages[-1].tool_call_id == "call_1", "tool results still pair with their calls"
        assert not any(raw_count(journal_files(tmp_path), [secret, "ada_lovelace"]).values())


def test_vector_recall_works_encrypted(tmp_path: Path, local_embedder: Any) -> None:
    with open_memory(tmp_path, keyring=True, embedder=local_embedder) as memory:
        memory.add("user", "My sister Beatrix is getting married in Porto next spring.")
        memory.add("assistant", "Congratulations to Beatrix!")
        for i in range(6):
            memory.add("user", f"Unrelated chatter about the weather number {i}.")
            memory.add("assistant", "Sure.")
        memory.flush()
        # No word in common with the turn: only the vector finds it.
        hits = memory.search("family wedding celebration", k=2)
        assert any("Beatrix" in h.text for h in hits)
        assert not raw_count(journal_files(tmp_path), ["Beatrix"])["Beatrix"]
        chroma = [p for p in (tmp_path / "chroma").rglob("*") if p.is_file()]
        assert not raw_count(chroma, ["Beatrix"])["Beatrix"], "Chroma holds vectors and ids, never text"


def test_backup_taken_before_forget_cannot_be_read_after(tmp_path: Path) -> None:
    folder = tmp_path / "live"
    with open_memory(folder, keyring=True) as memory, open_memory(folder, user="bob", keyring=True) as bob:
        fill(memory, "back")
        bob.add("user", "bob stays")
        backup = tmp_path / "backup" / JOURNAL_FILE
        backup.parent.mkdir()
        with sqlite3.connect(folder / JOURNAL_FILE) as src, sqlite3.connect(backup) as dst:
            src.backup(dst)
        # The backup opens while the key exists: the same text comes back.
        with open_memory(backup.parent, keyring=folder / KEYS_DIR) as restored:
            assert restored.messages() == memory.messages()
        memory.forget("user", physical=True)
        report = memory.erase_report(["locker"])
        assert report.key is not None
        assert report.key.destroyed is True, report.explain()
        assert "destroyed" in report.explain()
        assert len(list((folder / KEYS_DIR).iterdir())) == 1, "bob's key stays"
        assert bob.messages()[0].text == "bob stays"
    for keyring in (folder / KEYS_DIR, tmp_path / "fresh-keys"):
        with pytest.raises(KeyUnavailableError, match="forget"):
            open_memory(backup.parent, keyring=keyring)  # reading ada's window needs the destroyed key
        with pytest.raises(KeyUnavailableError):
            SqliteJournal(backup, keyring=FolderKeyRing(keyring)).messages_by_id([1])
    with pytest.raises(KeyUnavailableError, match="without a keyring"):
        open_memory(backup.parent)
    # What SQL sees in the backup is ciphertext.
    with sqlite3.connect(backup) as db:
        contents = [r[0] for r in db.execute("SELECT content FROM messages")]
    assert contents
    assert all(c.startswith(PREFIX) for c in contents)


def test_session_forget_of_a_user_who_stays_cannot_shred(tmp_path: Path) -> None:
    with open_memory(tmp_path, keyring=True) as first, open_memory(tmp_path, session="s2", keyring=True) as second:
        first.add("user", "first session words")
        second.add("user", "second session words")
        first.forget("session")
        report = first.erase_report(["first session words"])
        assert report.key is not None
        assert report.key.destroyed is False
        assert "still has sessions" in report.explain()
        assert second.messages()[0].text == "second session words"
        second.forget("session")  # the user's last session: now the key goes
        assert second.erase_report(["second"]).key.destroyed is True  # type: ignore[union-attr]


def test_anonymous_sessions_have_their_own_key(tmp_path: Path) -> None:
    with open_memory(tmp_path, user=None, keyring=True) as a, \
            open_memory(tmp_path, user=None, session="s2", keyring=True) as b:
        a.add("user", "anonymous one")
        b.add("user", "anonymous two")
        assert len(list((tmp_path / KEYS_DIR).iterdir())) == 2
        a.forget("session")
        assert a.erase_report(["one"]).key.destroyed is True  # type: ignore[union-attr]
        assert b.messages()[0].text == "anonymous two"
        a.add("user", "a fresh start")  # the session is re-created with a new key
        assert a.messages()[0].text == "a fresh start"


def test_blind_tokens_differ_between_users(tmp_path: Path) -> None:
    with open_memory(tmp_path, keyring=True) as ada, open_memory(tmp_path, user="bob", keyring=True) as bob:
        ada.remember("the password is swordfish")
        bob.remember("the password is swordfish")
        with sqlite3.connect(tmp_path / JOURNAL_FILE) as db:
            terms = [str(r[0]) for r in db.execute("SELECT terms FROM records ORDER BY id")]
        assert len(terms) == 2
        assert not set(terms[0].split()) & set(terms[1].split())
        assert [h.text for h in ada.search("swordfish", scope="user")] == ["the password is swordfish"]


def test_tampered_or_moved_ciphertext_fails_authentication(tmp_path: Path) -> None:
    with open_memory(tmp_path, keyring=True) as ada, open_memory(tmp_path, user="bob", keyring=True) as bob:
        ada_id = ada.remember("ada's secret")
        bob_id = bob.remember("bob's secret")
        ada.add("user", "hello")
        path = tmp_path / JOURNAL_FILE
        with sqlite3.connect(path) as db:
            ada_text = db.execute("SELECT text FROM records WHERE id=?", (ada_id,)).fetchone()[0]
            db.execute("UPDATE records SET text=? WHERE id=?", (ada_text, bob_id))  # moved to another user
        with pytest.raises(DecryptionError, match="another key"):
            bob.journal.records([bob_id])
        with sqlite3.connect(path) as db:
            content = db.execute("SELECT content FROM messages").fetchone()[0]
            db.execute("UPDATE records SET text=? WHERE id=?", (content, ada_id))  # moved to another field
        with pytest.raises(DecryptionError, match="failed authentication"):
            ada.journal.records([ada_id])
        flipped = content[:-6] + ("A" if content[-6] != "A" else "B") + content[-5:]
        with sqlite3.connect(path) as db:
            db.execute("UPDATE messages SET content=?", (flipped,))  # one byte altered
        with pytest.raises(DecryptionError):
            ada.messages()
        assert issubclass(DecryptionError, EncryptionError)


def test_plaintext_journal_unchanged_then_turned_on(tmp_path: Path) -> None:
    with open_memory(tmp_path) as memory:
        old_words = fill(memory, "olde")
        assert not memory.journal.encrypted  # type: ignore[attr-defined]
        assert memory.erase_report(["x"]).key.destroyed is None  # type: ignore[union-attr]
        assert all(raw_count(journal_files(tmp_path), old_words[:2]).values()), "stored as plaintext"
    assert not (tmp_path / KEYS_DIR).exists()
    with open_memory(tmp_path, keyring=True) as memory:
        new_words = fill(memory, "newe")
        texts = [m.text for m in memory.messages()]
        assert any(old_words[0] in t for t in texts)
        assert any(new_words[0] in t for t in texts)
        # Keyword search finds records from before (plaintext index) and after (blind tokens).
        assert old_words[0] in memory.search(old_words[0], k=1)[0].text
        assert new_words[0] in memory.search(new_words[0], k=1)[0].text
        assert not raw_count(journal_files(tmp_path), new_words[:2])[new_words[0]]
    with pytest.raises(KeyUnavailableError, match="without a keyring"):
        open_memory(tmp_path)


def test_keyring_rules(tmp_path: Path) -> None:
    first, second = FolderKeyRing(tmp_path / "k"), FolderKeyRing(tmp_path / "k")
    key = first.key("subject", create=True)
    assert second.key("subject", create=True) == key, "a second process keeps the first key"
    assert second.destroy("subject")
    assert not first.exists("subject")
    assert first.key("subject", create=False) is None, "a key destroyed elsewhere is not served from a cache"
    assert not first.destroy("subject")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="is a file"):
        FolderKeyRing(tmp_path / "file")
    with pytest.raises(ConfigError, match="PostgreSQL journal needs a key folder"):
        TieredMemory.open("postgresql://nobody@127.0.0.1:1/x", session_id="s", keyring=True, embedder=False)
    key = first.key("loose", create=True)
    os.chmod(first.path("loose"), 0o644)
    with pytest.raises(EncryptionError, match="readable by others"):
        FolderKeyRing(tmp_path / "k").key("loose", create=False)


def test_blind_query_over_many_users_is_bounded(tmp_path: Path) -> None:
    from langmem_tiers.journal.encryption import MAX_BLIND_QUERY_TOKENS

    cipher = FieldCipher(FolderKeyRing(tmp_path), "journal-uid")
    users = [Namespace.of("s", f"user{i}") for i in range(12)]
    for ns in users:
        cipher.index_terms(ns, "creates the key")
    words = [f"word{i}" for i in range(200)]
    tokens = cipher.query_terms(users, words)
    assert 0 < len(tokens) <= MAX_BLIND_QUERY_TOKENS
    assert len(set(cipher.query_terms(users[:2], ["same"]))) == 2, "one word, two users: two tokens"


def test_index_words_normalize_like_a_light_stemmer() -> None:
    assert index_words("The Buckets of Cities, and José's café") == ["bucket", "city", "jose", "cafe"]


# --- PostgreSQL -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    with postgres_url() as url:
        yield url


def test_postgres_rows_are_ciphertext_and_shredded(pg_url: str, tmp_path: Path) -> None:
    import psycopg

    from langmem_tiers.journal.postgres import PostgresJournal

    schema = f"enc_{os.getpid()}_{tmp_path.name[-8:].lower().replace('-', '_')}"
    keys = tmp_path / "keys"
    journal = PostgresJournal(pg_url, schema=schema, keyring=FolderKeyRing(keys))
    memory = TieredMemory(journal, Namespace.of("s1", "ada"), config=CONFIG, counter=WordCounter(),
                          recall=_keyword_recall(journal))
    try:
        words = fill(memory, "pgzo")
        assert memory.summary
        assert memory.facts()
        assert memory.summary_history()[0].text == memory.summary
        hits = memory.search(words[0], k=2)
        assert hits, "keyword search through blind tokens and ts_rank"
        assert words[0] in hits[0].text
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f'SET search_path TO "{schema}"')
            assert _plaintext_rows(conn, words) == 0
            history = [str(r[0]) for r in conn.execute("SELECT text FROM summary_versions")]
            assert history
            assert all(t.startswith(PREFIX) for t in history)
            tsv = " ".join(str(r[0]) for r in conn.execute("SELECT tsv::text FROM records"))
            assert tsv
            assert not any(w in tsv for w in [*words, "locker", "harbor", "copper"])
            # A snapshot taken before the forget: what a backup, a replica or dead tuples keep.
            snapshot = psycopg.connect(pg_url)
            snapshot.execute(f'SET search_path TO "{schema}"')
            snapshot.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            before = snapshot.execute("SELECT content FROM messages ORDER BY id").fetchall()
            memory.forget("user", physical=False)
            assert conn.execute("SELECT count(*) FROM messages").fetchone() == (0,)
            assert conn.execute("SELECT count(*) FROM summary_versions").fetchone() == (0,)
            after = snapshot.execute("SELECT content FROM messages ORDER BY id").fetchall()
            snapshot.close()
        assert after == before, "the old snapshot still sees the deleted rows"
        assert len(after) == 2 * 4
        assert all(str(r[0]).startswith(PREFIX) for r in after)
        assert not list(keys.iterdir()), "the key is destroyed"
        cipher = FieldCipher(FolderKeyRing(keys), journal.uid)
        with pytest.raises(KeyUnavailableError):
            cipher.open(Namespace.of("s1", "ada"), "messages.content", str(after[0][0]))
        report = memory.erase_report(["locker"])
        assert report.key is not None
        assert report.key.destroyed is True
    finally:
        memory.close()
        journal.close()
    with pytest.raises(KeyUnavailableError, match="without a keyring"):
        PostgresJournal(pg_url, schema=schema)


def test_postgres_tampering_fails_authentication(pg_url: str, tmp_path: Path) -> None:
    import psycopg

    from langmem_tiers.journal.postgres import PostgresJournal

    schema = f"enc_t_{os.getpid()}"
    journal = PostgresJournal(pg_url, schema=schema, keyring=FolderKeyRing(tmp_path / "keys"))
    try:
        ada = journal.namespace_id(Namespace.of("s1", "ada"))
        bob = journal.namespace_id(Namespace.of("s1", "bob"))
        assert ada is not None
        assert bob is not None
        from langmem_tiers.journal.base import NewRecord

        [ada_record] = journal.add_records(ada, [NewRecord(kind="fact", text="ada's secret")])
        [bob_record] = journal.add_records(bob, [NewRecord(kind="fact", text="bob's secret")])
        assert [r.text for r in journal.records([ada_record, bob_record])] == ["ada's secret", "bob's secret"]
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f'SET search_path TO "{schema}"')
            conn.execute("UPDATE records SET text=(SELECT text FROM records WHERE id=%s) WHERE id=%s",
                         (ada_record, bob_record))
        with pytest.raises(DecryptionError):
            journal.records([bob_record])
    finally:
        journal.close()


def _keyword_recall(journal: Any) -> Any:
    from langmem_tiers.recall.engine import RecallIndex

    return RecallIndex(journal, None, None)


def _plaintext_rows(conn: Any, words: list[str]) -> int:
    """Rows of any text column that hold one of the words in plaintext."""
    columns = {"messages": ("content", "name", "metadata", "tool_calls::text"),
               "records": ("text", "metadata", "tags", "key", "terms"), "state": ("summary",),
               "summary_versions": ("text",)}
    total = 0
    for table, cols in columns.items():
        for col in cols:
            for word in [*words, "locker", "drawer_item"]:
                row = conn.execute(f"SELECT count(*) FROM {table} WHERE {col} LIKE %s", (f"%{word}%",)).fetchone()
                total += int(row[0])
    return total
