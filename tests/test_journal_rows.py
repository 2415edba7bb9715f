"""Records decoded from journal rows (``langmem_tiers.journal.rows``) are the records ``Record(...)``
builds: the decoder skips the frozen dataclass's ``__init__`` for speed, so this is the check that
it still sets every field, and nothing else, on a plaintext and on an encrypted journal."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from langmem_tiers.journal.base import Namespace, NewRecord, Record
from langmem_tiers.journal.encryption import RowCodec
from langmem_tiers.journal.rows import RECORD_SELECT, row_records
from langmem_tiers.journal.sqlite import SqliteJournal
from langmem_tiers.keyring import FolderKeyRing

FIELDS = {f.name for f in dataclasses.fields(Record)}


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "encrypted"])
def test_decoded_records_are_the_records_the_dataclass_builds(tmp_path: Path, encrypted: bool) -> None:
    keyring = FolderKeyRing(tmp_path / "keys") if encrypted else None
    journal = SqliteJournal(tmp_path / "journal.sqlite3", keyring=keyring)
    try:
        a = journal.namespace_id(Namespace("a", "u", "bot")) or 0
        b = journal.namespace_id(Namespace("b", "u")) or 0
        ids = journal.add_records(a, [
            NewRecord("turn", "user: hi\nassistant: hello", (1, 2), created_at=5.0),
            NewRecord("fact", "I live in Porto", (3,), importance=0.8, pinned=True, tags=("home", "city"),
                      metadata={"source": "extract", "n": [1, 2]}, created_at=10.0, key="location"),
        ])
        ids += journal.add_records(b, [NewRecord("note", "no messages", created_at=20.0)])
        with journal.write(b) as tx:
            tx.supersede([ids[1]], 15.0)
        records = journal.records(ids)
    finally:
        journal.close()
    expected = [
        Record(ids[0], Namespace("a", "u", "bot"), "turn", "user: hi\nassistant: hello", (1, 2), created_at=5.0),
        Record(ids[1], Namespace("a", "u", "bot"), "fact", "I live in Porto", (3,), 0.8, True, ("home", "city"),
               {"source": "extract", "n": [1, 2]}, 10.0, "location", 15.0),
        Record(ids[2], Namespace("b", "u"), "note", "no messages", created_at=20.0),
    ]
    assert records == expected
    for got in records:
        assert set(vars(got)) == FIELDS  # every field set, no stray attribute
        with pytest.raises(dataclasses.FrozenInstanceError):
            got.text = "changed"  # type: ignore[misc]
    # Rows of one session share its namespace; each record's metadata is its own dict.
    assert records[0].namespace is records[1].namespace
    assert records[0].metadata is not records[2].metadata


def test_a_row_whose_session_is_gone_is_left_out(tmp_path: Path) -> None:
    """Rows name their session by namespace id; one the journal no longer resolves (erased after the row
    was read, by another statement) is left out, not decoded with a session it no longer has."""
    journal = SqliteJournal(tmp_path / "journal.sqlite3")
    try:
        kept, gone = (journal.namespace_id(Namespace(s, "u")) or 0 for s in ("kept", "gone"))
        ids = [*journal.add_records(kept, [NewRecord("turn", "stays")]),
               *journal.add_records(gone, [NewRecord("turn", "x")])]
        rows = journal._db.execute(f"{RECORD_SELECT} WHERE r.id IN (?, ?) ORDER BY r.id", ids).fetchall()
        codec = journal._row_codec
        resolves_kept = RowCodec(None, lambda ids: {n: ns for n, ns in codec.namespaces(ids).items() if n != gone})
        assert [r.text for r in row_records(rows, codec)] == ["stays", "x"]
        assert [(r.text, r.namespace) for r in row_records(rows, resolves_kept)] == [("stays", Namespace("kept", "u"))]
    finally:
        journal.close()


def test_beside_leaves_out_turns_of_a_session_gone_meanwhile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``beside`` reads its rows, then resolves their sessions: one erased in between by another handle
    (staged at that point: the reader's lookup runs the erasure first) loses its turns from the answer,
    which is still given."""
    path = tmp_path / "journal.sqlite3"
    writer = SqliteJournal(path)
    reader = SqliteJournal(path)  # knows none of the sessions yet, as after a restart
    try:
        mine = writer.namespace_id(Namespace("mine", "u")) or 0
        ids = writer.add_records(mine, [NewRecord("turn", t) for t in ("t1", "t2", "t3")])
        resolve = reader._namespaces_of

        def erased_first(db: Any, ns_ids: Any) -> dict[int, Namespace]:
            writer.delete_namespaces([mine])
            return resolve(db, ns_ids)

        monkeypatch.setattr(reader, "_namespaces_of", erased_first)
        assert reader.beside([ids[1]], "turn", 2) == {ids[1]: ([], [])}
        monkeypatch.undo()
        assert reader.records(ids) == []
    finally:
        reader.close()
        writer.close()
