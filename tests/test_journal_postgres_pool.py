"""The PostgreSQL journal's connection pool: a connection is checked before use only after it sat idle.

psycopg_pool's check is a round trip (an empty statement); a ``context()`` takes ~13 connections in a row,
and checking each cost 1-4 ms a call on the servers (postgres.CHECK_IDLE_S). One idle longer than
``CHECK_IDLE_S`` is still checked, so a connection the server dropped meanwhile is replaced before a
statement runs on it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import psycopg
import psycopg_pool
import pytest

from langmem_tiers.journal import postgres
from langmem_tiers.journal.base import Namespace, NewRecord
from tests.support.postgres import postgres_url


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    with postgres_url() as url:
        yield url


@pytest.fixture
def journal(pg_url: str) -> Iterator[postgres.PostgresJournal]:
    j = postgres.PostgresJournal(pg_url, schema=f"pool_{uuid.uuid4().hex[:16]}", max_size=2)
    yield j
    j.close()


def _counted_checks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    checks: list[int] = []
    real = psycopg_pool.ConnectionPool.check_connection

    def counted(conn: psycopg.Connection) -> None:  # type: ignore[type-arg]
        checks.append(1)
        real(conn)

    monkeypatch.setattr(psycopg_pool.ConnectionPool, "check_connection", staticmethod(counted))
    return checks


def test_a_connection_handed_back_just_now_is_not_checked_again(journal: postgres.PostgresJournal,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    ns_id = journal.namespace_id(Namespace("s", "u")) or 0
    journal.add_records(ns_id, [NewRecord("turn", "a kayak trip")])
    time.sleep(postgres.CHECK_IDLE_S + 0.1)
    checks = _counted_checks(monkeypatch)
    for _ in range(10):
        assert [h.record_id for h in journal.keyword_search("kayak", [ns_id], 5)]
    assert len(checks) == 1  # the first take, after the idle half second; the next nine within it


def test_a_connection_dropped_while_idle_is_replaced_before_use(journal: postgres.PostgresJournal, pg_url: str,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    ns_id = journal.namespace_id(Namespace("s", "u")) or 0
    (rid,) = journal.add_records(ns_id, [NewRecord("turn", "a kayak trip")])
    pool = journal._pool
    assert pool is not None
    with pool.connection() as a, pool.connection() as b:  # both of the pool's connections (max_size=2)
        pids = [a.info.backend_pid, b.info.backend_pid]
    with psycopg.connect(pg_url, autocommit=True) as admin:  # dropped, as a server restart would
        dropped = admin.execute("SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM unnest(%s::int[]) pid",
                                [pids]).fetchone()
    assert dropped == (2,)
    time.sleep(postgres.CHECK_IDLE_S + 0.1)
    checks = _counted_checks(monkeypatch)
    assert [h.record_id for h in journal.keyword_search("kayak", [ns_id], 5)] == [rid]
    assert checks  # the dead connection was found by the check, not by the search's statement
