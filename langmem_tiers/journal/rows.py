"""How messages and records are laid out in journal rows, for every SQL backend (pure, no I/O).

The column lists the journals select, the JSON encoding of stored documents (one function,
so both backends write the same bytes), and the decoders that turn a row, opened by a
:class:`~langmem_tiers.journal.encryption.RowCodec`, back into a :class:`Message` or a
:class:`Record`.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable, Sequence
from typing import Any

from langmem_tiers.journal.base import Namespace, NewRecord, Record
from langmem_tiers.journal.encryption import RowCodec
from langmem_tiers.messages import Message, ToolCall

MSG_COLS = "id, role, content, name, tool_calls, tool_call_id, metadata, created_at, tokens, tokens_key, key, ns"
# Positions in MSG_COLS that callers read besides the message itself.
MSG_TOKENS, MSG_TOKENS_KEY, MSG_KEY = 8, 9, 10
# A record's columns (of records ``r`` alone), in the order row_records reads them. Its session's ids are
# resolved from ``r.ns`` by the journal's cache of namespaces, not joined: PostgreSQL hash-joined the whole
# namespaces table to a read of a few hundred records (100 ids of a user of 10,000 sessions: 2.5-3.0 -> 1.1 ms
# p50, benchmarks/record_reads.py, BENCHMARKS.md issue 15 session 66).
RECORD_COLS = ("r.id, r.ns, r.kind, r.text, r.message_ids, r.importance, r.pinned, r.tags, r.metadata, "
               "r.created_at, r.key, r.valid_to")
RECORD_SELECT = f"SELECT {RECORD_COLS} FROM records r"
STATE_COLS = ("window_start, summary, summary_tokens, summary_cursor, summary_version, failures, last_error, "
              "retry_at, version")


def to_json(value: Any) -> str:
    """The stored form of a JSON document: UTF-8 text as typed, never ``\\uXXXX`` escapes.

    One function for every column and both backends: an escaped copy of a name would hide
    from ``residue()`` (which searches the UTF-8 bytes) while still being there.
    """
    return json.dumps(value, ensure_ascii=False)


def message_values(message: Message, codec: RowCodec, ns_id: int
                   ) -> tuple[str, str | None, list[dict[str, Any]] | None, str | None, float]:
    """Content (JSON), name, tool calls, metadata (JSON), sealed when encryption is on, and the creation time."""
    created = message.created_at if message.created_at is not None else time.time()
    content, name, calls, metadata = codec.message_columns(
        ns_id, to_json(message.to_dict()["content"]), message.name,
        [c.to_dict() for c in message.tool_calls] if message.tool_calls else None,
        to_json(dict(message.metadata)) if message.metadata else None)
    return content, name, calls, metadata, created


def record_values(record: NewRecord, codec: RowCodec, ns_id: int) -> tuple[Any, ...]:
    """``kind, text, message_ids, importance, pinned, tags, metadata, created_at, key, terms`` as stored."""
    text, tags, metadata, key, terms = codec.record_columns(
        ns_id, record.text, to_json(list(record.tags)), to_json(dict(record.metadata)), record.key)
    return (record.kind, text, to_json(list(record.message_ids)), record.importance, bool(record.pinned),
            tags, metadata, record.created_at or time.time(), key, terms)


def row_message(row: Sequence[Any], codec: RowCodec) -> Message:
    """A message from a row of ``MSG_COLS``.

    ``tool_calls`` arrives as JSON text from SQLite and already decoded from PostgreSQL's jsonb.
    """
    stored_calls = row[4]
    if isinstance(stored_calls, str):
        stored_calls = json.loads(stored_calls)
    raw, name, calls, metadata = codec.message_fields(int(row[11]), row[2], row[3], stored_calls or None, row[6])
    content = json.loads(raw)
    return Message(
        role=row[1],
        content=content if isinstance(content, str) else tuple(content),
        name=name,
        tool_calls=tuple(ToolCall(**c) for c in calls) if calls else (),
        tool_call_id=row[5],
        metadata=json.loads(metadata) if metadata else {},
        created_at=float(row[7]),
        id=int(row[0]),
        key=row[MSG_KEY],
    )


# A list of message ids as ``to_json`` writes it: "[]", "[12]", "[12, 13]".
_ID = r"-?(?:0|[1-9][0-9]*)"
_ID_LIST = re.compile(rf"\[(?:{_ID}(?:, {_ID})*)?\]")


def id_tuple(stored: str) -> tuple[Any, ...]:
    """``tuple(json.loads(stored))``, without the JSON decoder for the lists of ids the journal writes
    (a third of a record's decoding time; anything else still goes through ``json.loads``)."""
    if _ID_LIST.fullmatch(stored):
        return tuple(map(int, stored[1:-1].split(","))) if len(stored) > 2 else ()
    return tuple(json.loads(stored))


def _row_record(row: Sequence[Any], codec: RowCodec, ns: Namespace) -> Record:
    """A record from a row of ``RECORD_SELECT``, of the namespace ``ns`` (its ``r.ns``).

    Most records have no tags and no metadata: the stored "[]" and "{}" decode without the JSON
    decoder (a new dict each time; nothing decoded is kept between calls).
    """
    text, tags, metadata, key = codec.record_fields(ns, str(row[3]), str(row[7]), str(row[8]), row[10])
    return _record(
        id=int(row[0]),
        namespace=ns,
        kind=str(row[2]),
        text=text,
        message_ids=id_tuple(row[4]),
        importance=float(row[5]),
        pinned=bool(row[6]),
        tags=() if tags == "[]" else tuple(json.loads(tags)),
        metadata={} if metadata == "{}" else json.loads(metadata),
        created_at=float(row[9]),
        key=key,
        valid_to=None if row[11] is None else float(row[11]),
    )


def row_records(rows: Iterable[Sequence[Any]], codec: RowCodec) -> list[Record]:
    """The records of rows of ``RECORD_SELECT``, their namespaces resolved once per session among them
    (``RowCodec.namespaces``). A row whose namespace is gone (erased after the row was read, by another
    statement's snapshot) is left out with it."""
    rows = list(rows)
    names = codec.namespaces({int(r[1]) for r in rows})
    return [_row_record(r, codec, ns) for r in rows if (ns := names.get(int(r[1]))) is not None]


def _record(**values: Any) -> Record:
    """``Record(**values)`` for values this module decoded, every field given, without the frozen
    dataclass's ``__init__``: it sets each field through ``object.__setattr__``, ~4 us a record, and a
    ``context()`` at 100k reads ~550 records. ``Record`` has no ``__post_init__`` to skip
    (tests/test_journal_rows.py checks that the two build equal records with the same fields)."""
    record = object.__new__(Record)
    record.__dict__.update(values)
    return record
