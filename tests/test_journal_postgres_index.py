"""PostgreSQL's keyword index takes each record at once (schema v14): no GIN pending list for searches to read.

With GIN's default ``fastupdate = on``, new entries wait in a pending list that every search reads in full
until it passes 4 MB or VACUUM merges it (postgres.py's V14_SQL has the figures). A journal at v14 turns
it off, and the migration merges what an older journal had pending. Read with ``pageinspect`` (contrib,
shipped with the server), installed in the test's own schema.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from langmem_tiers.journal.base import Namespace, NewRecord
from tests.support.postgres import postgres_url
from tests.test_journal_contract import _postgres_backend


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    with postgres_url() as url:
        yield url


def _index(url: str, schema: str) -> tuple[list[str] | None, int]:
    """records_tsv's storage options and its pending list's pages."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pageinspect")  # this module's own server
        options = conn.execute(f"SELECT reloptions FROM pg_class WHERE oid = '{schema}.records_tsv'::regclass"
                               ).fetchone()
        pending = conn.execute(f"SELECT n_pending_pages FROM gin_metapage_info(get_raw_page('{schema}.records_tsv', 0))"
                               ).fetchone()
    assert options is not None
    assert pending is not None
    return options[0], int(pending[0])


def test_a_version_13_journal_migrates_with_its_pending_entries_merged_and_none_after(pg_url: str) -> None:
    backend = _postgres_backend(pg_url)
    backend.create_at_version(13)  # namespace 1 ('u', '', 'old')
    for i in range(200):
        backend.execute("INSERT INTO records (ns, kind, text, created_at) VALUES (1, 'turn', ?, ?)",
                        (f"kayak lesson {i} on the lake", float(i)))
    options, pending = _index(pg_url, backend.schema)
    assert options is None  # version 13: GIN's default, so the records wait in the pending list
    assert pending > 0
    journal = backend.journal()
    try:
        name = backend.schema
        assert _index(pg_url, name) == (["fastupdate=off"], 0)  # the migration merged what was pending
        journal.add_records(1, [NewRecord("turn", f"a kayak trip, day {i}") for i in range(50)])
        journal.add_records(1, [NewRecord("turn", "one more kayak")])
        assert _index(pg_url, name)[1] == 0  # taken at once
        assert len(journal.keyword_search("kayak", [1], 300)) == 251
    finally:
        journal.close()


def test_a_new_journal_takes_each_record_into_its_keyword_index_at_once(pg_url: str) -> None:
    from langmem_tiers.journal.postgres import PostgresJournal

    journal = PostgresJournal(pg_url, schema="gin_new_journal_test")
    try:
        ns_id = journal.namespace_id(Namespace("s", "u")) or 0
        for i in range(100):
            journal.add_records(ns_id, [NewRecord("turn", f"garden notes {i}")])
        assert _index(pg_url, "gin_new_journal_test") == (["fastupdate=off"], 0)
        assert len(journal.keyword_search("garden", [ns_id], 200)) == 100
    finally:
        journal.close()
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("DROP SCHEMA gin_new_journal_test CASCADE")
