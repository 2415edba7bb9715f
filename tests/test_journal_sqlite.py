"""SQLite-only journal behaviour: the v3 -> v4 migration, on-disk erasure, paths and read-only folders.

The contract suite (tests/test_journal_contract.py) covers what both backends share; these
tests need the SQLite file itself.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from pathlib import Path

import pytest

from langmem_tiers.errors import JournalError, SchemaVersionError
from langmem_tiers.journal.base import SCHEMA_VERSION, Namespace, NewRecord
from langmem_tiers.journal.sqlite import (
    DEFAULT_MMAP_BYTES,
    MIGRATIONS,
    SqliteJournal,
    _split_sql,
    read_only_reason,
    read_only_uri,
)
from langmem_tiers.messages import make_message

NEEDLE = "zanzibar-quokka-4417"


def _create_v3(path: Path) -> None:
    """A journal exactly as langmem-tiers with schema version 3 wrote it, with data in every table."""
    db = sqlite3.connect(path)
    with db:
        for script in MIGRATIONS[:3]:
            assert isinstance(script, str)
            for statement in _split_sql(script):
                db.execute(statement)
        db.execute("INSERT INTO meta VALUES ('uid', 'v3-uid'), ('schema_version', '3')")
        db.executemany("INSERT INTO namespaces VALUES (?, ?, '', ?, 1.0)",
                       [(1, "ann", "trip"), (2, "bob", "work")])
        db.execute("INSERT INTO state (ns, window_start, summary, summary_tokens, summary_cursor, summary_version) "
                   "VALUES (1, 3, 'ann plans a kayak trip', 6, 2, 4), (2, 0, '', 0, 0, 0)")
        db.executemany("INSERT INTO messages (ns, role, content, created_at, tokens, tokens_key) "
                       "VALUES (?, ?, ?, ?, 5, 'k')",
                       [(1, "user", json.dumps("where can I kayak?"), 1.0),
                        (1, "assistant", json.dumps("try the fjords"), 2.0),
                        (2, "user", json.dumps("deploy on friday"), 3.0)])
        db.executemany("INSERT INTO records (ns, kind, text, created_at, scope_terms) VALUES (?, ?, ?, ?, ?)",
                       [(1, "turn", "kayak in the fjords", 4.0, "s1"), (2, "fact", "bob deploys on friday", 5.0, "s2")])
        db.execute("INSERT INTO outbox (record_id, op, seq) VALUES (2, 'upsert', 7)")
        db.execute("INSERT INTO links VALUES (1, 2, 'related', 0.5)")
    db.close()


def test_v3_journal_migrates_keeping_every_row(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    _create_v3(path)
    journal = SqliteJournal(path)
    assert journal.uid == "v3-uid"
    assert journal.integrity_check() == "ok"
    ann = journal.namespace_id(Namespace("trip", "ann"), create=False)
    bob = journal.namespace_id(Namespace("work", "bob"), create=False)
    assert (ann, bob) == (1, 2)
    assert [m.text for m in journal.iter_messages(1)] == ["where can I kayak?", "try the fjords"]
    assert [m.key for m in journal.iter_messages(1)] == [None, None]
    with journal.read() as rx:
        state = rx.state(1)
    assert (state.window_start, state.summary, state.summary_cursor, state.summary_version, state.version) == (
        3, "ann plans a kayak trip", 2, 4, 0)
    assert [r.text for r in journal.scoped_records([1, 2])] == ["kayak in the fjords", "bob deploys on friday"]
    assert [h.record_id for h in journal.keyword_search("kayak", [1], 5)] == [1]
    assert [(i.record_id, i.op, i.seq) for i in journal.outbox(10)] == [(2, "upsert", 7)]
    assert journal.outbox_count([2]) == 1  # the migration learned the row's namespace
    assert journal.links([1]) == [(1, 2, "related", 0.5)]
    # New rows: seq keeps growing past the old ones; namespace ids are no longer reused.
    [rid] = journal.add_records(1, [NewRecord("fact", "ann owns a red kayak")])
    assert max(i.seq for i in journal.outbox(10) if i.record_id == rid) > 7
    journal.delete_namespaces([2])
    assert (journal.namespace_id(Namespace("new", "cy")) or 0) > 2
    journal.close()
    db = sqlite3.connect(path)
    assert db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == (str(SCHEMA_VERSION),)
    assert "AUTOINCREMENT" in db.execute("SELECT sql FROM sqlite_master WHERE name='namespaces'").fetchone()[0]
    assert db.execute("PRAGMA foreign_key_check").fetchall() == []
    db.close()


# --- on-disk erasure -------------------------------------------------------------------------------


def _store_secret(journal: SqliteJournal, session: str, user: str) -> int:
    ns_id = journal.namespace_id(Namespace(session, user)) or 0
    with journal.write(ns_id) as tx:
        tx.insert_messages([make_message("user", f"my code word is {NEEDLE}", key=f"key-{NEEDLE}")], [5], "k")
        tx.set_summary(f"the user said {NEEDLE}", 5, 0)
    journal.add_records(ns_id, [NewRecord("fact", f"code word {NEEDLE}", metadata={"said": NEEDLE})])
    return ns_id


def _files(path: Path) -> list[Path]:
    return [path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")]


def _raw_count(path: Path, needle: str) -> dict[str, int]:
    return {f.name: f.read_bytes().count(needle.encode()) if f.exists() else 0 for f in _files(path)}


def test_erased_namespace_leaves_no_byte_on_disk(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    journal = SqliteJournal(path)
    keep = journal.namespace_id(Namespace("keep", "bob")) or 0
    journal.add_records(keep, [NewRecord("turn", f"bob's filler note {i} about the weather") for i in range(200)])
    ns_id = _store_secret(journal, "secret", "erased-user")
    journal.delete_namespaces([ns_id])
    before = journal.residue([NEEDLE])[NEEDLE]
    assert before > 0  # deleted rows alone leave copies behind (WAL, FTS segments): compact is needed
    assert journal.compact() is True
    assert journal.residue([NEEDLE, "erased-user"]) == {NEEDLE: 0, "erased-user": 0}
    assert _raw_count(path, NEEDLE) == {f.name: 0 for f in _files(path)}  # checked per file, independently
    assert journal.keyword_search("bob filler weather", [keep], 3)  # the rest is intact
    journal.close()
    assert _raw_count(path, NEEDLE) == {f.name: 0 for f in _files(path)}


def test_cleared_session_leaves_no_byte_on_disk(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    journal = SqliteJournal(path)
    ns_id = _store_secret(journal, "chat", "ann")
    journal.clear_session(ns_id)
    journal.compact()
    assert journal.residue([NEEDLE]) == {NEEDLE: 0}
    with journal.read() as rx:
        assert rx.state(ns_id).summary == ""
    journal.close()


def test_residue_counts_across_chunk_boundaries(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    journal = SqliteJournal(path)
    needle = "boundary-needle"
    ns_id = journal.namespace_id(Namespace("s")) or 0
    # One record of ~3 MB with a needle every ~1000 bytes: many copies straddle the 1 MiB read chunks.
    text = " ".join(f"{'x' * 997}{needle}" for _ in range(3000))
    journal.add_records(ns_id, [NewRecord("turn", text)])
    counted = journal.residue([needle])[needle]
    assert counted == sum(_raw_count(path, needle).values())  # the chunked scan misses nothing a full read finds
    # Not all 3000: a long text spills into overflow pages, and a copy cut by a page header is
    # not a byte run any scan can find (residue's docstring says so).
    assert counted > 2900
    journal.close()


def test_threads_opening_one_new_journal_at_once_all_succeed(tmp_path: Path) -> None:
    """SQLite refuses a racing ``journal_mode=WAL`` switch without waiting (CI failed on it
    once: 8 threads opening one new journal); the open retries within the busy timeout."""
    for round_ in range(40):
        path = tmp_path / f"j{round_}" / "journal.sqlite3"
        path.parent.mkdir()
        errors: list[BaseException] = []

        def open_close() -> None:
            try:
                SqliteJournal(path).close()
            except BaseException as e:  # collected and reported below
                errors.append(e)

        threads = [threading.Thread(target=open_close) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, (round_, errors)
    journal = SqliteJournal(tmp_path / "j0" / "journal.sqlite3")
    assert journal.integrity_check() == "ok"
    journal.close()


# --- paths ----------------------------------------------------------------------------------------


def test_a_file_where_the_folder_should_be_is_a_typed_error(tmp_path: Path) -> None:
    not_a_folder = tmp_path / "memory"
    not_a_folder.write_text("I am a file")
    with pytest.raises(JournalError, match=r"memory is a file, not a folder"):
        SqliteJournal(not_a_folder / "journal.sqlite3")
    with pytest.raises(JournalError, match=r"memory is a file, not a folder"):
        SqliteJournal(not_a_folder / "deeper" / "journal.sqlite3")
    assert not_a_folder.read_text() == "I am a file"


def test_a_folder_as_the_journal_path_is_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(JournalError, match="is a folder: give the journal file inside it"):
        SqliteJournal(tmp_path)


def test_a_file_that_is_not_a_journal_is_a_typed_error(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("plain text, not SQLite " * 100)
    with pytest.raises(JournalError, match=r"notes.txt.*not a database"):
        SqliteJournal(path)
    assert path.read_text().startswith("plain text")  # untouched


def test_non_integer_schema_version_names_the_value(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    SqliteJournal(path).close()
    db = sqlite3.connect(path)
    with db:
        db.execute("UPDATE meta SET value='4.0-beta' WHERE key='schema_version'")
    db.close()
    with pytest.raises(SchemaVersionError, match=r"'4.0-beta', which is not an integer"):
        SqliteJournal(path)


# --- read-only ------------------------------------------------------------------------------------


def _journal_with_data(path: Path) -> int:
    journal = SqliteJournal(path)
    ns_id = journal.namespace_id(Namespace("s", "u")) or 0
    with journal.write(ns_id) as tx:
        tx.insert_messages([make_message("user", "kayaks are fun")], [3], "k")
    journal.add_records(ns_id, [NewRecord("fact", "likes kayaks")])
    journal.close()  # the last connection removes -wal and -shm
    return ns_id


def _check_reads_work_and_writes_refused(journal: SqliteJournal, ns_id: int) -> None:
    assert journal.read_only
    assert [m.text for m in journal.iter_messages(ns_id)] == ["kayaks are fun"]
    assert journal.namespace_id(Namespace("s", "u")) == ns_id  # found without writing
    with journal.read() as rx:
        assert rx.last_message_id(ns_id) > 0
    assert [h.record_id for h in journal.keyword_search("kayak", [ns_id], 3)]
    with pytest.raises(JournalError, match="read-only"):
        journal.add_records(ns_id, [NewRecord("fact", "refused")])
    with pytest.raises(JournalError, match="read-only"), journal.write(ns_id) as tx:
        tx.set_window_start(1)
    with pytest.raises(JournalError, match="read-only"):
        journal.namespace_id(Namespace("new session"))


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions: chmod 0555 cannot make "
                    "a folder read-only for this process (the decision logic is tested below)")
def test_read_only_folder_opens_for_reading(tmp_path: Path) -> None:
    folder = tmp_path / "memory"
    folder.mkdir()
    ns_id = _journal_with_data(folder / "journal.sqlite3")
    folder.chmod(0o555)
    try:
        journal = SqliteJournal(folder / "journal.sqlite3")
        _check_reads_work_and_writes_refused(journal, ns_id)
        journal.close()
    finally:
        folder.chmod(0o755)


def test_read_only_open_reads_and_refuses_writes(tmp_path: Path) -> None:
    """Forced ``read_only=True``: the same ``mode=ro`` connection an unwritable folder gets.

    This runs as any user (root included); it checks the read-only connection and the
    refusal of writes, not the kernel's permission check.
    """
    path = tmp_path / "journal.sqlite3"
    ns_id = _journal_with_data(path)
    journal = SqliteJournal(path, read_only=True)
    _check_reads_work_and_writes_refused(journal, ns_id)
    journal.close()
    assert [m.text for m in SqliteJournal(path).iter_messages(ns_id)] == ["kayaks are fun"]


def test_read_only_decision(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Which folders count as unwritable, and when ``immutable=1`` is safe (no -wal: no writer can exist).

    ``os.access`` is replaced by a stand-in that denies writes to the folder, so this tests
    the decision as an unprivileged user would get it, also when the suite runs as root.
    """
    path = tmp_path / "journal.sqlite3"
    _journal_with_data(path)
    assert read_only_reason(path) is None or os.geteuid() != 0
    real_access = os.access

    def no_writes_in_folder(p: str | os.PathLike[str], mode: int, **kwargs: object) -> bool:
        if Path(p) == tmp_path and mode & os.W_OK:
            return False
        return real_access(p, mode)

    monkeypatch.setattr(os, "access", no_writes_in_folder)
    assert "folder" in (read_only_reason(path) or "")
    assert read_only_uri(path, folder_writable=False).endswith("?mode=ro&immutable=1")
    path.with_name(path.name + "-wal").write_bytes(b"")  # a writer may be live: no immutable promise
    assert read_only_uri(path, folder_writable=False).endswith("?mode=ro")
    path.with_name(path.name + "-wal").unlink()
    journal = SqliteJournal(path)  # decided from the (stand-in) file system: opened read-only
    assert journal.read_only
    assert "not writable" in (journal.read_only_reason or "")
    with pytest.raises(JournalError, match="read-only"):
        journal.namespace_id(Namespace("new"))
    journal.close()


def test_read_only_journal_that_needs_migrating_says_so(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    _create_v3(path)
    with pytest.raises(JournalError, match=f"needs migrating to {SCHEMA_VERSION}, but it can only be read here"):
        SqliteJournal(path, read_only=True)


def test_v3_langchain_ids_become_idempotency_keys(tmp_path: Path) -> None:
    """Messages the LangChain adapter stored before keys existed keep their LangChain id as key,
    so a thread restored from a checkpointer after the upgrade is not journaled twice."""
    path = tmp_path / "journal.sqlite3"
    _create_v3(path)
    long_id = "x" * 300
    db = sqlite3.connect(path)
    with db:
        db.executemany("INSERT INTO messages (ns, role, content, metadata, created_at, tokens, tokens_key) "
                       "VALUES (?, 'user', '\"hi\"', ?, 9.0, 1, 'k')",
                       [(2, json.dumps({"langchain": {"id": "run-1"}})),
                        (2, json.dumps({"langchain": {"id": "run-1"}})),  # an old duplicate: first keeps the key
                        (2, json.dumps({"langchain": {"id": long_id}})),
                        (2, json.dumps({"other": 1}))])
    db.close()
    journal = SqliteJournal(path)
    keys = [m.key for m in journal.iter_messages(2)]
    import hashlib

    assert keys == [None, "run-1", None, "sha256:" + hashlib.sha256(long_id.encode()).hexdigest(), None]
    with journal.write(2) as tx:
        assert set(tx.messages_by_key(["run-1"])) == {"run-1"}
    journal.close()


@pytest.mark.parametrize("read_only", [False, True])
def test_reads_go_through_a_memory_map_unless_it_is_turned_off(tmp_path: Path, read_only: bool) -> None:
    path = tmp_path / "journal.sqlite3"
    ns_id = _journal_with_data(path)
    for extra, mapped in (({}, DEFAULT_MMAP_BYTES), ({"mmap_bytes": 0}, 0)):  # the default, then turned off
        journal = SqliteJournal(path, read_only=read_only, **extra)
        try:
            assert journal._db.execute("PRAGMA mmap_size").fetchone()[0] == mapped
            assert [m.text for m in journal.iter_messages(ns_id)] == ["kayaks are fun"]
        finally:
            journal.close()


@pytest.mark.parametrize("mmap_bytes", [-1, True, 1.5, "1GB"])
def test_a_bad_memory_map_size_is_a_typed_error(tmp_path: Path, mmap_bytes: object) -> None:
    with pytest.raises(JournalError, match="mmap_bytes"):
        SqliteJournal(tmp_path / "journal.sqlite3", mmap_bytes=mmap_bytes)  # type: ignore[arg-type]
    assert not (tmp_path / "journal.sqlite3").exists()  # refused before anything was written
