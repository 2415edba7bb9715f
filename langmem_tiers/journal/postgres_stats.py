"""PostgreSQL's statistics of the records table, read as the keyword budget's estimates.

Over the keyword budget a search plans on each query word's matches in the journal (``keyword_budget``).
Counting a word's matches in the GIN index reads the heap row of every match up to the budget + 1 (GIN
keeps no counts, and each match's visibility is checked): ~1.2 ms a word of 1.7% at 100k records (an
``EXPLAIN ANALYZE`` in a throwaway probe; BENCHMARKS.md, issue 15, session 55). For the
words the planner's statistics hold among the most common lexemes (``pg_stats.most_common_elems`` of
``records.tsv``, the ~1,000 commonest in ANALYZE's sample of 30,000 records at the default statistics
target), the estimate is exact enough for a plan that only asks "fits the budget, or not, and which is
rarest": their fraction of the sampled records times the records now. A word outside them is rarer than
every one of them, and counted as before (few matches, so cheap).

A scope's records are estimated as the planner estimates them, from the ``ns`` and ``kind`` columns'
statistics: a session among the most common values has its sampled share, any other an equal part of
the rest. Counting them instead bound all of a user's sessions: one user's 200k records in 2,000 sessions
searched in 90-93 ms against 36.6 (``benchmarks/shared_journal.py --postgres``, commit dd146d4).

What this process holds: the lexemes' frequencies, each under a keyed hash of its lexeme (a key of this
process), never a lexeme; and the shares of session ids and kinds. PostgreSQL itself keeps the lexemes
in ``pg_statistic`` until the next ANALYZE, which ``PostgresJournal.compact()`` runs after an erasure.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langmem_tiers.journal.sql_core import Sql

# Statistics are read again after this many seconds: autovacuum analyzes a changing table at most about
# once a minute (``autovacuum_naptime``), and the estimates scale with the table's size when read.
STATS_KEPT_S = 60.0

# The commonest lexemes of the keyword column and their fraction of the sampled records (the array of
# frequencies ends with the least and the greatest of them, which are left out); the records now,
# as the planner estimates them (the rows per page at the last ANALYZE times the pages now).
COMMON_LEXEMES_SQL = """
SELECT s.most_common_elems::text::text[], s.most_common_elem_freqs,
       c.reltuples / c.relpages * (pg_relation_size(c.oid) / current_setting('block_size')::int)
FROM pg_class c JOIN pg_stats s ON s.schemaname = current_schema() AND s.tablename = 'records' AND s.attname = 'tsv'
WHERE c.oid = 'records'::regclass AND c.relpages > 0 AND c.reltuples > 0 AND s.most_common_elems IS NOT NULL
"""
# The most common sessions and kinds, their shares, and how many distinct values each column holds
# (negative: a fraction of the rows).
COLUMN_SHARES_SQL = """
SELECT attname, most_common_vals::text::text[], most_common_freqs, n_distinct FROM pg_stats
WHERE schemaname = current_schema() AND tablename = 'records' AND attname IN ('ns', 'kind')
"""


def tsquery_text(lexeme: str) -> str:
    """A lexeme as ``to_tsquery(...)::text`` writes a query of it alone (quoted, quotes and backslashes doubled).

    Example:
        >>> tsquery_text("lisbon"), tsquery_text("o'neil")
        ("'lisbon'", "'o''neil'")
    """
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


@dataclass(frozen=True, slots=True)
class Shares:
    """A column's values as the statistics know them: the commonest values' shares of the rows, and the share of
    any other value (the rest spread evenly over the other distinct values)."""

    common: Mapping[str, float]
    other: float

    @classmethod
    def of(cls, values: Sequence[str] | None, freqs: Sequence[float] | None, n_distinct: float,
           rows: float) -> Shares:
        common = dict(zip(values or [], freqs or [], strict=False))
        distinct = -n_distinct * rows if n_distinct < 0 else n_distinct
        others = max(distinct - len(common), 1.0)
        return cls(common, max(1.0 - sum(common.values()), 0.0) / others)

    def of_values(self, values: Iterable[Any], key: Callable[[str], Any] = str) -> float:
        """The share of rows holding any of ``values`` (compared with the commonest values as ``key`` reads them):
        one pass over the commonest values, not over ``values`` (a user's 10,000 sessions, converted one by one,
        cost ~0.9 ms a search)."""
        wanted = set(values)
        inside = [f for v, f in self.common.items() if key(v) in wanted]
        return sum(inside) + self.other * (len(wanted) - len(inside))


@dataclass(frozen=True, slots=True)
class JournalStats:
    """The records table as the statistics last read held it: a lexeme's estimated matches, a scope's share.

    Example:
        >>> stats = JournalStats.of(["trip", "lisbon"], [0.5, 0.01], rows=100_000, key=b"k" * 16,
        ...                         sessions=Shares({"7": 0.5}, 0.001), kinds=Shares({"turn": 0.9}, 0.05))
        >>> stats.matches("'trip'", cap=2001), stats.matches("'lisbon'", cap=2001), stats.matches("'kayak'", 2001)
        (2001, 1000, None)
        >>> stats.share([7]), stats.share([8, 9]), stats.share([8, 9], ["fact"]), stats.least_common
        (0.5, 0.002, 0.0001, 1000)
    """

    rows: float
    key: bytes = field(repr=False)
    frequencies: dict[bytes, float] = field(repr=False)
    sessions: Shares | None = field(default=None, repr=False)
    kinds: Shares | None = field(default=None, repr=False)

    @classmethod
    def of(cls, lexemes: list[str], frequencies: list[float], rows: float, key: bytes,
           sessions: Shares | None = None, kinds: Shares | None = None) -> JournalStats:
        """From ``pg_stats``' arrays (``frequencies`` may run past ``lexemes``: the least and greatest follow)."""
        hashed = {_hashed(key, tsquery_text(x)): f for x, f in zip(lexemes, frequencies, strict=False)}
        return cls(rows, key, hashed, sessions, kinds)

    @property
    def least_common(self) -> int:
        """The estimated matches of the least common of the commonest lexemes: about the most that any other
        lexeme has (it was not among them)."""
        return round(min(self.frequencies.values(), default=0.0) * self.rows)

    @property
    def rows_cap(self) -> int:
        """A cap no estimate reaches (:meth:`matches` uncapped)."""
        return int(self.rows) + 1

    def matches(self, query_text: str, cap: int) -> int | None:
        """Estimated matches (up to ``cap``) of a ``to_tsquery`` text of one lexeme; ``None`` when it is not
        among the commonest (or holds several lexemes): count it."""
        frequency = self.frequencies.get(_hashed(self.key, query_text))
        return None if frequency is None else min(cap, round(frequency * self.rows))

    def share(self, ns_ids: Sequence[int], kinds: Sequence[str] | None = None) -> float | None:
        """The estimated share of the records that are of these sessions (and of these kinds); ``None``
        without the columns' statistics."""
        if self.sessions is None or (kinds and self.kinds is None):
            return None
        share = min(self.sessions.of_values(ns_ids, int), 1.0)
        if kinds and self.kinds is not None:
            share *= min(self.kinds.of_values(kinds), 1.0)
        return share


class StatsReader:
    """Reads :class:`JournalStats` at most every ``STATS_KEPT_S`` seconds; ``None`` while there are none (a table
    never analyzed: then every word is counted). Thread-safe enough: readers racing read twice."""

    def __init__(self, kept_s: float = STATS_KEPT_S) -> None:
        self.kept_s = kept_s
        self._key = os.urandom(16)
        self._held: JournalStats | None = None
        self._read_at = float("-inf")

    def get(self, db: Sql) -> JournalStats | None:
        now = time.monotonic()
        if now - self._read_at >= self.kept_s:
            self._held = self._read(db)
            self._read_at = now
        return self._held

    def _read(self, db: Sql) -> JournalStats | None:
        row = db.one(COMMON_LEXEMES_SQL)
        if row is None:
            return None
        rows = float(row[2])
        columns = {str(r[0]): Shares.of(r[1], r[2], float(r[3]), rows) for r in db.all(COLUMN_SHARES_SQL)}
        return JournalStats.of(list(row[0]), list(row[1]), rows, self._key, columns.get("ns"), columns.get("kind"))

    def clear(self) -> None:
        """Forget what was read (after an erasure): the next search reads the statistics again."""
        self._held = None
        self._read_at = float("-inf")


def _hashed(key: bytes, text: str) -> bytes:
    return hashlib.blake2b(text.encode(), key=key, digest_size=8).digest()
