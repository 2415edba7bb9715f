"""A large scope's keyword postings held in this process, so PostgreSQL's keyword search of it is not a statement.

Why: at 100k records of one user in 1,000 sessions, a user-scope ``search()`` on the servers took 15.9 ms of
which the bm25 statement took 7.4 (reading and grouping up to the keyword budget's 2,000 matches on the
server, BENCHMARKS.md issue 15 session 58), where SQLite's FTS5 runs in the process. So a scope of more than
``POSTINGS_FROM`` records gets, once a search found it that large, its records' lexemes read in the
background (each record's tsvector unnested: lexeme and number of positions, the journal's own stemming) and
packed here; from then on its searches are ranked here with the statement's formula (``BM25_SQL`` over every
match, :data:`~langmem_tiers.journal.keyword_budget.KEYWORD_BUDGET` or not: a numpy pass over the query's
postings costs less than the budget's planning did), and the statement answers meanwhile.

Kept in step as :mod:`langmem_tiers.recall.scope_vectors` is: every search brings the entry up to the
scope's versions (``scope_versions``: largest record id, records deleted, texts edited, per namespace; the
caller's listing's when it passes them, else read) before it ranks. Records above an entry's last id are
read; a namespace whose deleted count moved has its record ids read and the rows of the records gone
dropped; one whose edited count moved, or that is new to the entry, is read again whole and its old rows
dropped; a namespace that no longer exists (an erased session) is dropped. Dropped rows are
unlinked from their words at once (``Postings.drop``: their postings point at one dead row, and lexemes no
record holds leave the vocabulary), so an erased record's words are neither served nor held, nor any posting
saying which record held a word, past that search; the arrays are packed without them once they are an eighth
of the rows, or by the journal's ``compact()``. A scope that grew by
a few sessions takes over the entry of the scope it grew from; a scope inside a held one (the profile's
search of the sessions holding memories, inside recall's of every session) is ranked from it, its matches
alone (its namespaces brought up to date, the rest left as they are), and an entry built for a scope
holding held ones replaces them: one user's sessions are held once. A process's own session erasures clear every
entry (``PostgresJournal._forget_held``; a build under way then is not installed); another process's is
seen by the next search of each scope holding the session, and an entry whose scope is never searched
again goes when the byte bound needs room, or when a build of an overlapping scope finds the session gone.
Hits are record ids: callers read the records from the journal, so a record deleted since the versions
used is never returned with its text.

Encrypted journals keep the statement (their records hold blind tokens and plaintext words under two
configurations); so do queries whose words PostgreSQL parses into several lexemes (``e-mail``, ``foo_bar``).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from langmem_tiers.journal.base import Versions

log = logging.getLogger(__name__)

# A scope of more records than this is ranked here once its postings are read. Below it the statement is
# cheap (every match of a few thousand records) and tests and evaluation haystacks keep the statement's path.
POSTINGS_FROM = 20_000
# All entries together, in bytes (estimated as below); a scope that alone would exceed it keeps the statement.
DEFAULT_MAX_BYTES = 256 * 2**20
BYTES_PER_POSTING = 8  # row index (int32) and term frequency (float32)
# id, namespace (int64), length (float64), kind code (int16), live (bool); and rank()'s scratch (int32, float64),
# grown to the rows and 1 / SCRATCH_SLACK more (nbytes() counts the spare room as allocated)
SCRATCH_PER_ROW = 12
BYTES_PER_ROW = 27 + SCRATCH_PER_ROW
SCRATCH_SLACK = 8  # so a search's few new rows do not regrow it
DEAD_SHARE = 8  # rows dropped since the last pack are left out by a pack once they are this share of the rows
BYTES_PER_LEXEME = 120  # the vocabulary's dict entry and string, and the packed offset
READ_CHUNK = 2_000  # rows fetched at a time from a build's server-side cursor
# Appended rows are held apart until they are this many, and an eighth of the rest, then packed with it (every
# posting copied: 0.15-0.24 s at 1M records, benchmarks/keyword_postings.py, paid by one search): so a large
# scope pays it every ~125k rows appended, not every 4,096.
MERGE_FROM = 4_096
MERGE_SHARE = 8
LEXEMES_KEPT = 65_536  # query words whose lexeme this process remembers
MAX_NEW_SESSIONS = 64  # a scope that grew by at most this many sessions takes over the entry it grew from
RECHECK_AFTER = 256  # a scope found small is counted again after this many more searches found it over the budget
SMALL_KEPT = 4_096  # scopes remembered as small
# A record's lexemes and each one's number of positions (= ts_rank_cd's term frequency with unit weights and
# one lexeme, as BM25_SQL computes it); records without a lexeme match nothing and are not read.
ROWS_SQL = (
    "SELECT r.id, r.ns, r.kind, length(r.tsv), u.lexemes, u.counts "
    "FROM unnest(?::bigint[], ?::bigint[], ?::bigint[]) AS f(ns_id, above, upto) "
    "JOIN records r ON r.ns = f.ns_id AND r.id > f.above AND r.id <= f.upto, "
    "LATERAL (SELECT array_agg(t.lexeme), array_agg(coalesce(array_length(t.positions, 1), 0)) "
    "FROM unnest(r.tsv) t) AS u(lexemes, counts) WHERE u.lexemes IS NOT NULL")
_ONE_LEXEME = re.compile(r"'((?:[^'\\]|'')*)'")


def lexeme_of(tsquery_text: str) -> str | None:
    """The lexeme of ``to_tsquery(config, word)::text`` when it is one (``'run'``), ``""`` for a stop word,
    ``None`` when the word parses into more than one (``'e-mail' <-> 'e' <-> 'mail'``)."""
    if tsquery_text == "":
        return ""
    m = _ONE_LEXEME.fullmatch(tsquery_text)
    return m.group(1).replace("''", "'") if m else None


def appended(column: np.ndarray, values: Sequence[Any]) -> np.ndarray:
    """``column`` followed by ``values``. A column this made is a view of a buffer with room to spare, which
    the next call fills in place; a full one is copied into a buffer twice its size. So a build's chunks and
    a search's few new rows cost what they add, not a copy of every row (a 1M-record build appends 500
    chunks)."""
    n, m = len(column), len(values)
    buffer = column.base
    if (isinstance(buffer, np.ndarray) and buffer.dtype == column.dtype and buffer.ndim == 1
            and len(buffer) >= n + m and buffer.ctypes.data == column.ctypes.data):
        out = buffer[:n + m]
    else:
        out = np.empty(max(n + m, 2 * n, 1024), column.dtype)[:n + m]
        out[:n] = column
    out[n:] = values
    return out


@dataclass
class Postings:
    """One scope's rows and postings (pure: no I/O). Rows are appended; postings are packed by lexeme
    (``offsets`` into ``rows`` and ``tf``) plus the lists of rows appended since (``fresh``), which
    :meth:`pack` merges (a build appends everything, then packs once)."""

    ids: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    dl: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64))
    kind: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int16))
    live: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    vocab: dict[str, int] = field(default_factory=dict)
    terms: list[str | None] = field(default_factory=list)  # a packed lexeme's index -> it (None: forgotten, _scrub)
    offsets: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int64))
    rows: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    tf: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    # Per lexeme: its appended rows, their term frequencies, and its slot in ``fresh_keys``.
    fresh: dict[str, tuple[array[int], array[float], int]] = field(default_factory=dict)
    fresh_rows: int = 0
    fresh_postings: int = 0  # counted as appended: nbytes() is asked after every chunk of a build
    # Each appended row's lexemes, as slots (``fresh_slots[fresh_starts[i]:fresh_starts[i + 1]]`` for the i-th row
    # appended since the last pack), so a drop finds the fresh lists of its rows without walking every list. Kept
    # once packed: a build appends every row and then packs, and nothing is dropped from it before (keeping
    # them made a build's appends 5-15% slower, a throwaway timing at 300k rows).
    packed: bool = False
    fresh_keys: list[str | None] = field(default_factory=list)
    fresh_slots: array[int] = field(default_factory=lambda: array("i"))
    fresh_starts: array[int] = field(default_factory=lambda: array("i", [0]))
    kinds: dict[str, int] = field(default_factory=dict)
    tomb: int = -1  # the dead row that every posting of a row dropped since the last pack points at (_scrub)
    # rank()'s per-row scratch, kept between calls (regrown past the rows) so that a search costs its matches, not
    # the scope's rows: a place per row (each match found once) and a score per row (summed over the terms).
    _seen: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32), repr=False)
    _acc: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64), repr=False)

    @property
    def size(self) -> int:
        """Rows held, those dropped since the last pack included."""
        return len(self.ids)

    def nbytes(self) -> int:
        spare = max(self._seen.nbytes + self._acc.nbytes - SCRATCH_PER_ROW * len(self.ids), 0)
        return (BYTES_PER_ROW * len(self.ids) + spare + BYTES_PER_POSTING * (len(self.rows) + self.fresh_postings)
                + self.fresh_slots.itemsize * (len(self.fresh_slots) + len(self.fresh_starts))
                + BYTES_PER_LEXEME * (len(self.terms) + len(self.fresh)))

    def projected(self, rows: int) -> float:
        """:meth:`nbytes` once ``rows`` rows are held, from the rows held now: rows and postings in proportion, the
        vocabulary as it is (a scope's words repeat, so it grows far slower than its rows: scaled too, the
        lexemes of a build's first 2,000 rows made a 1M-row scope of 137 MB look 770 MB, and its build was
        declined; now 130 MB: ``benchmarks/keyword_postings.py``, ``bytes_*_after_first_chunk``)."""
        vocabulary = BYTES_PER_LEXEME * (len(self.terms) + len(self.fresh))
        return (self.nbytes() - vocabulary) * rows / max(self.size, 1) + vocabulary

    def append(self, records: Iterable[tuple[int, int, str, int, Sequence[str], Sequence[int]]]) -> None:
        """Add rows ``(id, namespace, kind, length, lexemes, counts)``; their postings wait in ``fresh``."""
        ids: list[int] = []
        nss: list[int] = []
        dls: list[int] = []
        kinds: list[int] = []
        row = len(self.ids)
        for rid, ns, kind, dl, lexemes, counts in records:
            ids.append(rid)
            nss.append(ns)
            dls.append(dl)
            kinds.append(self.kinds.setdefault(kind, len(self.kinds)))
            for lexeme, count in zip(lexemes, counts, strict=True):
                held = self.fresh.get(lexeme)
                if held is None:
                    held = self.fresh[lexeme] = (array("i"), array("f"), len(self.fresh_keys))
                    self.fresh_keys.append(lexeme)
                held[0].append(row)
                held[1].append(count)
                if self.packed:
                    self.fresh_slots.append(held[2])
            if self.packed:
                self.fresh_starts.append(len(self.fresh_slots))
            self.fresh_postings += len(lexemes)
            row += 1
        if not ids:
            return
        self.ids = appended(self.ids, ids)
        self.ns = appended(self.ns, nss)
        self.dl = appended(self.dl, dls)
        self.kind = appended(self.kind, kinds)
        self.live = appended(self.live, [True] * len(ids))
        self.fresh_rows += len(ids)

    def drop(self, namespaces: Iterable[int], keep: Iterable[int] | None = None) -> None:
        """Remove every row of these namespaces (but those of the records ``keep``, when given: the records still
        there) from what any search or posting says, and their words from memory: unlinked at once
        (:meth:`_scrub`: no copy), and left out of the arrays by the next pack, which comes here once dropped rows
        are ``1 / DEAD_SHARE`` of the rows. Packing at every drop copied every posting: 0.3-0.4 s at 1M rows for
        each search after a record of a held scope was deleted (an agent's working memory replaces a record at
        each set)."""
        gone = np.isin(self.ns, np.fromiter(namespaces, np.int64)) & self.live
        if keep is not None:
            rows = np.flatnonzero(gone)
            gone[rows[np.isin(self.ids[rows], np.fromiter(keep, np.int64))]] = False
        if not gone.any():
            return
        self.live &= ~gone
        if not self.packed or DEAD_SHARE * (len(self.live) - int(np.count_nonzero(self.live))) >= len(self.live):
            self.pack()
        else:
            self._scrub(gone)

    def _scrub(self, gone: np.ndarray) -> None:
        """Unlink the rows ``gone`` (just made dead) from their words: their packed postings point at one dead
        row (``tomb``) with no frequency, so no posting says which record held a word; a lexeme no live row
        holds any more leaves the vocabulary (its string leaves memory); their fresh postings leave their lists.
        Until the next pack a held lexeme's list keeps a count of postings that point at the tomb (none is
        ever ranked: the tomb is dead), as PostgreSQL's own index keeps dead entries until a VACUUM."""
        first_fresh = len(self.ids) - self.fresh_rows
        # A pass over the packed postings (~50 ms at 1M rows), unless every row gone was appended since the pack.
        where = np.flatnonzero(gone[self.rows]) if gone[:first_fresh].any() else self.rows[:0]
        if len(where):
            if self.tomb < 0:
                self.tomb = int(np.flatnonzero(gone)[0])
            self.rows[where] = self.tomb
            self.tf[where] = 0.0
            for t in np.unique(np.searchsorted(self.offsets, where, side="right") - 1).tolist():
                x = self.terms[t]
                if x is not None and not self.live[self.rows[self.offsets[t]:self.offsets[t + 1]]].any():
                    del self.vocab[x]
                    self.terms[t] = None
        appended_gone = np.flatnonzero(gone[first_fresh:])
        if len(appended_gone):
            starts, slots = np.frombuffer(self.fresh_starts, np.int32), np.frombuffer(self.fresh_slots, np.int32)
            for slot in set(np.concatenate([slots[starts[i]:starts[i + 1]] for i in appended_gone]).tolist()):
                x = self.fresh_keys[slot]
                if x is None:
                    continue
                fresh_rows, fresh_tf, _ = self.fresh[x]
                rows, tf = np.frombuffer(fresh_rows, np.int32), np.frombuffer(fresh_tf, np.float32)
                keep = ~gone[rows]
                self.fresh_postings -= len(rows) - int(np.count_nonzero(keep))
                if keep.any():
                    self.fresh[x] = (array("i", rows[keep].tobytes()), array("f", tf[keep].tobytes()), slot)
                else:
                    del self.fresh[x]
                    self.fresh_keys[slot] = None

    def pack(self) -> None:
        """Pack the fresh postings with the rest and leave out the rows that are no longer live (their
        postings, and the lexemes only they held)."""
        lexemes = [*self.terms, *(x for x in self.fresh if x not in self.vocab)]
        index = {x: i for i, x in enumerate(lexemes) if x is not None}
        packed = np.zeros(len(lexemes), np.int64)  # per lexeme: its packed postings, then its fresh ones
        packed[:len(self.terms)] = np.diff(self.offsets)
        fresh_terms = np.fromiter((index[x] for x in self.fresh), np.int64, len(self.fresh))
        fresh_counts = np.fromiter((len(r) for r, _, _ in self.fresh.values()), np.int64, len(self.fresh))
        counts = packed.copy()
        counts[fresh_terms] += fresh_counts
        fresh_rows = np.concatenate([np.frombuffer(r, np.int32) for r, _, _ in self.fresh.values()]
                                    or [self.rows[:0]])
        fresh_tf = np.concatenate([np.frombuffer(f, np.float32) for _, f, _ in self.fresh.values()] or [self.tf[:0]])
        if len(self.rows) and self.fresh:
            # Merged in lexeme order by placing the fresh postings after their lexeme's packed ones and the packed
            # ones, in order, around them: both parts are already grouped by lexeme, so nothing is sorted (the
            # argsort of every posting this replaces took 0.45-1.4 s at 1M rows in an A/B of 5 rounds, against
            # 0.15-0.24 s; BENCHMARKS.md issue 15 session 65).
            first_fresh = np.cumsum(fresh_counts) - fresh_counts  # each fresh list's first place among them
            place = np.arange(len(fresh_rows)) + np.repeat(
                np.cumsum(counts)[fresh_terms] - fresh_counts - first_fresh, fresh_counts)
            is_packed = np.ones(len(self.rows) + len(fresh_rows), bool)
            is_packed[place] = False
            rows, tf = np.empty(len(is_packed), np.int32), np.empty(len(is_packed), np.float32)
            rows[is_packed], tf[is_packed] = self.rows, self.tf
            rows[place], tf[place] = fresh_rows, fresh_tf
        elif self.fresh:  # a build: already in lexeme order
            rows, tf = fresh_rows, fresh_tf
        else:
            rows, tf = self.rows, self.tf
        keep_rows = self.live
        if not keep_rows.all():
            term = np.repeat(np.arange(len(lexemes), dtype=np.int32), counts)
            kept = keep_rows[rows]
            term, rows, tf = term[kept], rows[kept], tf[kept]
            rows = (np.cumsum(keep_rows) - 1)[rows].astype(np.int32)
            self.ids, self.ns, self.dl, self.kind = (a[keep_rows] for a in (self.ids, self.ns, self.dl, self.kind))
            self.live = np.ones(len(self.ids), bool)
            counts = np.bincount(term, minlength=len(lexemes))
        else:  # the columns' spare room (appended()) goes, so nbytes() counts what is held
            self.ids, self.ns, self.dl, self.kind, self.live = (
                a.copy() if a.base is not None else a for a in (self.ids, self.ns, self.dl, self.kind, self.live))
        held = np.flatnonzero(counts)  # a forgotten lexeme's postings all pointed at the tomb, which is dead
        self.terms = [lexemes[t] for t in held.tolist()]
        self.vocab = {x: i for i, x in enumerate(self.terms) if x is not None}
        self.tomb = -1
        self.offsets = np.concatenate([[0], np.cumsum(counts[held])]).astype(np.int64)
        self.rows, self.tf = rows, tf
        self.fresh, self.fresh_rows, self.fresh_postings = {}, 0, 0
        self.fresh_keys, self.fresh_slots, self.fresh_starts = [], array("i"), array("i", [0])
        self.packed = True

    def pack_if_due(self) -> None:
        """Pack when the rows appended since the last pack are ``MERGE_FROM`` and ``1 / MERGE_SHARE`` of the
        rest (a merge's cost grows with every posting: paid at a share of the rows, it stays a cost per row)."""
        if self.fresh_rows >= max(MERGE_FROM, (self.size - self.fresh_rows) // MERGE_SHARE):
            self.pack()

    def _postings(self, lexeme: str) -> tuple[np.ndarray, np.ndarray]:
        parts_r, parts_f = [], []
        t = self.vocab.get(lexeme)
        if t is not None:
            a, b = self.offsets[t], self.offsets[t + 1]
            parts_r.append(self.rows[a:b])
            parts_f.append(self.tf[a:b])
        if lexeme in self.fresh:
            fresh_rows, fresh_tf, _ = self.fresh[lexeme]
            parts_r.append(np.frombuffer(fresh_rows, np.int32))
            parts_f.append(np.frombuffer(fresh_tf, np.float32))
        if not parts_r:
            return np.zeros(0, np.int32), np.zeros(0, np.float32)
        return np.concatenate(parts_r), np.concatenate(parts_f)

    def rank(self, lexemes: Sequence[str], kinds: Sequence[str] | None, k: int,
             namespaces: Iterable[int] | None = None) -> list[tuple[int, float]]:
        """The ``k`` best ``(record id, score)`` holding any of ``lexemes`` (of ``kinds``, and of
        ``namespaces`` when given: a scope inside the one held), by ``BM25_SQL``'s bm25 over every match:
        each lexeme's document frequency and the length average among the matches, ties by the larger id.

        Its work is the query's postings, every test made on them, unless they hold more than a quarter of
        the rows (benchmarks/keyword_postings.py at 1M rows: selective words 1.1 -> 0.13 ms p50 against a
        pass over every row). Not thread-safe (the scratch): callers hold the entry's lock."""
        if k <= 0 or not len(self.ids):
            return []
        kind_ok = None  # with kinds: a lookup by kind code
        if kinds is not None:
            kind_ok = np.zeros(len(self.kinds) + 1, bool)
            kind_ok[[self.kinds[x] for x in kinds if x in self.kinds]] = True
        inside = None  # with namespaces: a lookup by namespace id
        if namespaces is not None:
            wanted = np.fromiter(namespaces, np.int64)
            inside = np.zeros(int(wanted.max(initial=0)) + 2, bool)  # the last slot: every id past the scope's
            inside[wanted] = True
        per_term = []
        for lexeme in dict.fromkeys(lexemes):
            rows, tf = self._postings(lexeme)
            keep = self.live[rows]
            if kind_ok is not None:
                keep &= kind_ok[self.kind[rows]]
            if inside is not None:
                keep &= inside[np.minimum(self.ns[rows], len(inside) - 1)]
            rows, tf = rows[keep], tf[keep].astype(np.float64)
            if len(rows):
                per_term.append((rows, tf))  # a lexeme's rows are distinct
        if not per_term:
            return []
        seen, acc = self._scratch()
        if len(per_term) == 1:
            found = per_term[0][0]
        elif 4 * sum(len(rows) for rows, _ in per_term) > len(self.ids):
            # Common words, postings of more than a quarter of the rows: one mark per row and a pass over them
            # cost less than placing every posting (a guess between the benchmark's two ends, not tuned).
            hit = np.zeros(len(self.ids), bool)
            for rows, _ in per_term:
                hit[rows] = True
            found = np.flatnonzero(hit)
        else:  # each matched row once: the one place of it that its scratch slot kept
            every = np.concatenate([rows for rows, _ in per_term])
            places = np.arange(len(every), dtype=np.int32)
            seen[every] = places
            found = every[seen[every] == places]
        n = len(found)
        avgdl = max(float(self.dl[found].mean()), 1.0)
        acc[found] = 0.0
        for rows, tf in per_term:
            df = float(len(rows))
            idf = np.log(1.0 + (n - df + 0.5) / (df + 0.5))
            acc[rows] += idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * self.dl[rows] / avgdl))
        scores = acc[found]
        if n > k:  # the k-th best score and every tie of it, then ordered: not a sort of every match
            top = scores >= np.partition(scores, n - k)[n - k]
            found, scores = found[top], scores[top]
        order = np.lexsort((-self.ids[found], -scores))[:k]
        return list(zip(self.ids[found[order]].tolist(), scores[order].tolist(), strict=True))

    def _scratch(self) -> tuple[np.ndarray, np.ndarray]:
        """rank()'s scratch, at least a slot per row (no slot is read before a search writes it)."""
        if len(self._seen) < len(self.ids):
            size = len(self.ids) + len(self.ids) // SCRATCH_SLACK
            self._seen, self._acc = np.empty(size, np.int32), np.empty(size, np.float64)
        return self._seen, self._acc


ScopeVersions = dict[int, Versions]  # per namespace id


@dataclass
class _Entry:
    postings: Postings
    versions: ScopeVersions  # as of the rows read
    applied: object = None  # the last versions mapping applied (a caller's listing's: the same object while unchanged)
    lock: threading.Lock = field(default_factory=threading.Lock)


RowReader = Callable[[Sequence[tuple[int, int, int]]], list[Any]]
# Reads a scope whole in one snapshot: yields its versions first, then chunks of rows.
ScopeReader = Callable[[Sequence[int]], Iterator[Any]]


class ScopePostings:
    """The in-process postings of large scopes, under a byte bound (least recently searched first out).

    ``read_versions`` is the journal's ``scope_versions``; ``read_rows`` reads ``ROWS_SQL`` for ``(namespace,
    above, upto)`` triples; ``read_scope`` reads a scope whole in one snapshot, its versions first, on a
    background thread (:meth:`want`)."""

    def __init__(self, read_versions: Callable[[Sequence[int]], ScopeVersions], read_rows: RowReader,
                 read_ids: Callable[[Sequence[int]], Mapping[int, Sequence[int]]],
                 read_scope: ScopeReader, count: Callable[[Sequence[int], int], int], *,
                 max_bytes: int = DEFAULT_MAX_BYTES, size_from: int = POSTINGS_FROM) -> None:
        self._read_versions = read_versions
        self._read_rows = read_rows
        self._read_ids = read_ids  # the journal's record_ids_many: each namespace's record ids now
        self._read_scope = read_scope
        self._count = count  # the scope's records, counted up to a cap
        self.max_bytes = max_bytes
        self.size_from = size_from
        self._small: OrderedDict[frozenset[int], int] = OrderedDict()  # scope -> searches before a recount
        self._lock = threading.Lock()
        self._entries: OrderedDict[frozenset[int], _Entry] = OrderedDict()
        self._building: frozenset[int] | None = None
        self._too_large: set[frozenset[int]] = set()
        self._closed = False
        self._thread: threading.Thread | None = None
        self._last_build_ms = 0  # the last finished build's wall time (stats())
        self._cleared = 0  # clear() calls: a build that began before one is not installed

    def held(self) -> int:
        """Scopes whose postings are held."""
        with self._lock:
            return len(self._entries)

    def stats(self) -> dict[str, int]:
        """Held scopes, their records and postings, estimated bytes and the bound (benchmarks, the inspector)."""
        with self._lock:
            entries = [e.postings for e in self._entries.values()]
            return {"entries": len(entries), "records": sum(int(np.count_nonzero(p.live)) for p in entries),
                    "postings": sum(len(p.rows) for p in entries), "bytes": sum(p.nbytes() for p in entries),
                    "max_bytes": self.max_bytes, "building": int(self._building is not None),
                    "last_build_ms": self._last_build_ms}

    def wait_build(self, timeout_s: float | None = None) -> bool:
        """Wait for a background build to end (benchmarks and tests); ``False`` on timeout."""
        with self._lock:
            thread = self._thread
        if thread is not None:
            thread.join(timeout_s)
            return not thread.is_alive()
        return True

    def rank(self, ns_ids: Sequence[int], lexemes_of: Callable[[], Sequence[str] | None],
             kinds: Sequence[str] | None, k: int,
             versions: Mapping[int, Versions] | None = None) -> list[tuple[int, float]] | None:
        """The scope's best matches, ranked here after applying what changed up to ``versions`` (the caller's
        listing's, when they cover the scope; else read now); ``None`` when its postings are not held, or
        ``lexemes_of`` gives ``None`` (the statement answers). ``lexemes_of`` is called only once the entry is
        found (the query's lexemes may cost the caller a round trip)."""
        key = frozenset(ns_ids)
        with self._lock:
            held = key if key in self._entries or self._adopt(key) is not None else self._covering(key)
            if held is None:
                return None
            entry = self._entries[held]
            self._entries.move_to_end(held)
        lexemes = lexemes_of()
        if lexemes is None:
            return None
        if versions is None or not key <= versions.keys():
            versions = self._read_versions(list(key))
        with entry.lock:
            try:
                self._refresh(entry, key, versions, whole=held == key)
            except BaseException:
                # Rows may have been dropped and not read again: the entry no longer describes the scope.
                with self._lock:
                    if self._entries.get(held) is entry:
                        del self._entries[held]
                raise
            return entry.postings.rank(lexemes, kinds, k, None if held == key else key)

    def want(self, ns_ids: Sequence[int]) -> None:
        """A search found this scope over the keyword budget: count it in the background and, past
        ``size_from`` records, read its postings (one build at a time; a scope over the byte bound is not
        tried again, one found small is counted again after ``RECHECK_AFTER`` more such searches)."""
        key = frozenset(ns_ids)
        with self._lock:
            if (self._closed or key in self._entries or key in self._too_large or self._building is not None
                    or self._covering(key) is not None):
                return
            left = self._small.get(key)
            if left is not None:
                if left > 0:
                    self._small[key] = left - 1
                    return
                del self._small[key]
            self._building = key
            # The erasures so far, counted when the build is decided: one from now on voids it.
            self._thread = threading.Thread(target=self._build, args=(key, self._cleared), name="langmem-postings",
                                            daemon=True)
            self._thread.start()

    def pack(self) -> None:
        """Pack every held entry, so that rows dropped since their last pack leave the arrays (the journal's
        ``compact()``, beside PostgreSQL's VACUUM)."""
        with self._lock:
            entries = list(self._entries.values())
        for entry in entries:
            with entry.lock:
                entry.postings.pack()

    def clear(self) -> None:
        """Forget every entry (this process erased something)."""
        with self._lock:
            self._entries.clear()
            self._too_large.clear()
            self._small.clear()
            self._cleared += 1

    def close(self, timeout_s: float = 30.0) -> None:
        with self._lock:
            self._closed = True
            thread = self._thread
        if thread is not None:
            thread.join(timeout_s)
        self.clear()

    def _covering(self, key: frozenset[int]) -> frozenset[int] | None:
        """The smallest held scope holding every session of this one (lock held): it ranks this scope's matches
        alone (a user's profile searches the sessions holding memories, recall every session: one entry)."""
        covering = [s for s in self._entries if key < s]
        return min(covering, key=len) if covering else None

    def _grown_from(self, key: frozenset[int]) -> frozenset[int] | None:
        """The largest held scope this one grew from by at most ``MAX_NEW_SESSIONS`` sessions (lock held)."""
        grown = [s for s in self._entries if s < key and len(key - s) <= MAX_NEW_SESSIONS]
        return max(grown, key=len) if grown else None

    def _adopt(self, key: frozenset[int]) -> _Entry | None:
        """The entry of the scope this one grew from (:meth:`_grown_from`), taken over (lock held)."""
        source = self._grown_from(key)
        if source is None:
            return None
        entry = self._entries.pop(source)
        self._entries[key] = entry
        return entry

    def _refresh(self, entry: _Entry, key: frozenset[int], versions: Mapping[int, Versions],
                 whole: bool = True) -> None:
        """Apply what changed in the scope since the entry's rows were read (entry's lock held). A namespace's
        counters never go back while it exists, so versions older than the entry's (a listing read before
        another thread's search) change nothing; a namespace absent from them no longer exists. Not
        ``whole``: ``key`` is a scope inside the entry's, and only its namespaces are brought up to date."""
        held = entry.versions if whole else {n: v for n, v in entry.versions.items() if n in key}
        if versions is entry.applied or versions == held:
            return  # a listing read unchanged since (listings are never modified), or nothing changed
        gone = [n for n in held if n not in versions or n not in key]
        reread: list[tuple[int, int, int]] = []
        diffed: list[int] = []  # records deleted: the rows of those no longer there are dropped
        newer = dict(held)
        for n in key:
            now = versions.get(n)
            if now is None:
                continue
            before = held.get(n)
            if before is None or now[2] > before[2]:
                reread.append((n, 0, now[0]))  # new to the entry, or texts edited: read again whole
                gone.append(n)
            elif now[0] <= before[0] and now[1] <= before[1]:
                continue  # nothing added or deleted since
            else:
                if now[1] > before[1]:
                    diffed.append(n)
                if now[0] > before[0]:
                    reread.append((n, before[0], now[0]))
            newer[n] = now
        if not gone and not reread and not diffed:
            return
        if gone:
            entry.postings.drop(gone)
        if diffed:  # as the vector index does (scope_vectors): the ids still there are read, not their records
            current = self._read_ids(diffed)
            entry.postings.drop(diffed, keep=[i for n in diffed for i in current.get(n, ())])
        rows = self._read_rows(reread) if reread else []
        entry.postings.append(rows)
        entry.postings.pack_if_due()
        now_held = {n: v for n, v in newer.items() if n in key and n in versions}
        if whole:
            entry.versions, entry.applied = now_held, versions
        else:  # the rest of the entry's namespaces as they were
            entry.versions = {**{n: v for n, v in entry.versions.items() if n not in key}, **now_held}

    def _build(self, key: frozenset[int], cleared: int) -> None:
        started = time.perf_counter()
        try:
            # Counted up to the most records the bound could hold (a record costs at least a row and a posting).
            records = self._count(sorted(key), max(self.size_from, self.max_bytes // (BYTES_PER_ROW
                                                                                      + BYTES_PER_POSTING)) + 1)
            if records <= self.size_from:
                with self._lock:
                    self._small[key] = RECHECK_AFTER
                    while len(self._small) > SMALL_KEPT:
                        self._small.popitem(last=False)
                return
            self._drop_stale(key)
            read = self._read(key, records)
            with self._lock:
                if self._closed or self._cleared != cleared:
                    return  # closed, or this process erased something while the build read (it may hold it)
                if read is None:
                    self._too_large.add(key)
                    log.info("keyword postings of a scope of %d records exceed the bound (%d bytes): statement kept",
                             records, self.max_bytes)
                    return
                postings, versions = read
                size = postings.nbytes()
                for inner in [s for s in self._entries if s < key]:
                    del self._entries[inner]  # this entry ranks their scopes from now on
                while self._entries and size + sum(e.postings.nbytes() for e in self._entries.values()) \
                        > self.max_bytes:
                    self._entries.popitem(last=False)
                self._entries[key] = _Entry(postings, versions)
                self._last_build_ms = round((time.perf_counter() - started) * 1000)
        except Exception as e:  # the statement keeps answering; a later search asks again
            log.warning("could not read the keyword postings of a scope of %d sessions: %s", len(key), e)
        finally:
            with self._lock:
                self._building = None

    def _read(self, key: frozenset[int], records: int) -> tuple[Postings, ScopeVersions] | None:
        """The scope's postings and the versions they are as of; ``None`` when they would not fit the bound
        (stopped as soon as the bytes so far, or those projected for the scope's ``records``, would not) or on
        close."""
        chunks = self._read_scope(sorted(key))
        try:
            versions: ScopeVersions = next(chunks)
            postings = Postings()
            for chunk in chunks:
                postings.append(chunk)
                if max(postings.nbytes(), postings.projected(records)) > self.max_bytes or self._closed:
                    return None
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()
        postings.pack()
        return (postings, versions) if postings.nbytes() <= self.max_bytes else None

    def _drop_stale(self, key: frozenset[int]) -> None:
        """Drop held entries overlapping ``key`` that hold a session no longer there (erased elsewhere)."""
        with self._lock:
            others = [s for s in self._entries if s & key and not s <= key]
        if not others:
            return
        alive = self._read_versions(sorted(set().union(*others)))
        with self._lock:
            for s in others:
                if any(n not in alive for n in s):
                    self._entries.pop(s, None)
