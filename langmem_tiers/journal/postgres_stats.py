"""PostgreSQL's statistics of the keyword column, read as the keyword budget's estimates of common words.

Over the keyword budget a search plans on each query word's matches in the journal (``keyword_budget``).
Counting a word's matches in the GIN index reads the heap row of every match up to the budget + 1 (GIN
keeps no counts, and each match's visibility is checked), ~1.2 ms a word of 1.7% at 100k records. For the
words the planner's statistics hold among the most common lexemes (``pg_stats.most_common_elems`` of
``records.tsv``, the ~1,000 commonest in ANALYZE's sample of 30,000 records at the default statistics
target), the estimate is exact enough for a plan that only asks "fits the budget, or not, and which is
rarest": their fraction of the sampled records times the records now. A word outside them is rarer than
every one of them, and counted as before (few matches, so cheap).

What this process holds: the frequencies, each under a keyed hash of its lexeme (a key of this process),
never a lexeme. PostgreSQL itself keeps the lexemes in ``pg_statistic`` until the next ANALYZE, which
``PostgresJournal.compact()`` runs after an erasure.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass, field

from langmem_tiers.journal.sql_core import Sql

# Statistics are read again after this many seconds: autovacuum analyzes a changing table at most about
# once a minute (``autovacuum_naptime``), and the estimate scales with the table's size when read.
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


def tsquery_text(lexeme: str) -> str:
    """A lexeme as ``to_tsquery(...)::text`` writes a query of it alone (quoted, quotes and backslashes doubled).

    Example:
        >>> tsquery_text("lisbon"), tsquery_text("o'neil")
        ("'lisbon'", "'o''neil'")
    """
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


@dataclass(frozen=True, slots=True)
class CommonLexemes:
    """The journal's commonest lexemes as the statistics last read held them: a lexeme's estimated matches.

    Example:
        >>> common = CommonLexemes.of(["trip", "lisbon"], [0.5, 0.01], rows=100_000, key=b"k" * 16)
        >>> common.matches("'trip'", cap=2001), common.matches("'lisbon'", cap=2001), common.matches("'kayak'", 2001)
        (2001, 1000, None)
    """

    rows: float
    key: bytes = field(repr=False)
    frequencies: dict[bytes, float] = field(repr=False)

    @classmethod
    def of(cls, lexemes: list[str], frequencies: list[float], rows: float, key: bytes) -> CommonLexemes:
        """From ``pg_stats``' arrays (``frequencies`` may run past ``lexemes``: the least and greatest follow)."""
        return cls(rows, key, {_hashed(key, tsquery_text(x)): f for x, f in zip(lexemes, frequencies, strict=False)})

    @property
    def rows_cap(self) -> int:
        """A cap no estimate reaches (:meth:`matches` uncapped)."""
        return int(self.rows) + 1

    def matches(self, query_text: str, cap: int) -> int | None:
        """Estimated matches (up to ``cap``) of a ``to_tsquery`` text of one lexeme; ``None`` when it is not
        among the commonest (or holds several lexemes): count it."""
        frequency = self.frequencies.get(_hashed(self.key, query_text))
        return None if frequency is None else min(cap, round(frequency * self.rows))


class StatsReader:
    """Reads :class:`CommonLexemes` at most every ``STATS_KEPT_S`` seconds; ``None`` while there are none (a table
    never analyzed: then every word is counted). Thread-safe enough: readers racing read twice."""

    def __init__(self, kept_s: float = STATS_KEPT_S) -> None:
        self.kept_s = kept_s
        self._key = os.urandom(16)
        self._held: CommonLexemes | None = None
        self._read_at = float("-inf")

    def get(self, db: Sql) -> CommonLexemes | None:
        now = time.monotonic()
        if now - self._read_at >= self.kept_s:
            row = db.one(COMMON_LEXEMES_SQL)
            self._held = None if row is None else CommonLexemes.of(list(row[0]), list(row[1]), float(row[2]),
                                                                    self._key)
            self._read_at = now
        return self._held

    def clear(self) -> None:
        """Forget what was read (after an erasure): the next search reads the statistics again."""
        self._held = None
        self._read_at = float("-inf")


def _hashed(key: bytes, text: str) -> bytes:
    return hashlib.blake2b(text.encode(), key=key, digest_size=8).digest()
