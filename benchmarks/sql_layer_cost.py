"""What SQLAlchemy Core would cost the journal: the statements of one add() and one context(),
run through the raw driver and through SQLAlchemy Core, p50/p95 per operation (issue 14).

    .venv/bin/python benchmarks/sql_layer_cost.py                       # SQLite, and a throwaway PostgreSQL
    .venv/bin/python benchmarks/sql_layer_cost.py --postgres URL        # an existing PostgreSQL server
    .venv/bin/python benchmarks/sql_layer_cost.py --no-postgres --n 2000
    .venv/bin/python benchmarks/sql_layer_cost.py --keyword 20000      # PostgreSQL keyword ranking: bm25 vs ts_rank_cd

Both sides run the same statements on the same schema (a journal opened by langmem-tiers, so the
same tables, indexes, FTS5 triggers, WAL and ``synchronous=FULL``), in one write transaction:
- add(): lock/read the session's state, insert one message, read the window entries, insert the
  turn record, queue it in the outbox, bump the session version, commit;
- context(): in one read snapshot, the state, the window's messages (~20), the pinned records and
  the current memories of the user's sessions.
SQLAlchemy runs them as Core constructs (``table()``/``column()``, compiled once and cached, as a
rewrite would write them) on a ``Connection`` from ``create_engine``; the raw side is the
statements the journals send today, on ``sqlite3`` / ``psycopg``. The ratio is SQLAlchemy / raw.

``--keyword N`` instead times PostgreSQL's keyword search on N records of one session (Zipf-distributed
words, as ``benchmarks/core_latency.py`` writes them): the journal's bm25 statement against the
single ``ts_rank_cd`` statement it replaced, for the same 5-word questions.

``--keyword-scale SIZES`` times ``keyword_search`` (k=20) at each size, records of ONE session or of
1,000 sessions of one user (searched in user scope), with and without the keyword budget
(``langmem_tiers.journal.keyword_budget``), calls alternated, and says how many queries got the
same hits and the mean overlap of the top 20. Records are LoCoMo chat lines (``--chat``, the
official file) each with two words of the 5,000-word Zipf vocabulary appended (names and places
that keep a long tail as the history grows). Query shapes: "rare" ("What did I say about the
<Zipf tail word>?"), "common" (three of the 40 most frequent content words of the chat lines),
"mixed" (LoCoMo's own questions). SQLite journals are kept in ``--keep DIR`` and reused.

    .venv/bin/python benchmarks/sql_layer_cost.py --keyword-scale 10000,100000,1000000 --keep KEEP_DIR
    .venv/bin/python benchmarks/sql_layer_cost.py --keyword-scale 10000,100000 --backend postgres

With ``--held-counts`` (SQLite) both sides keep the budget, and the pair is the term counts the
journal holds between searches (``keyword_budget.TermCounts``) against the same search with them
counted afresh into throwaway counts; before each pair one chat line is appended to the user's last
session (a conversation grows between questions), so the held side pays its seeks to the new matches.
The "same" column is then an exactness check: the held counts must give the hits of counting afresh.
The appended lines are deleted at the end: a kept journal holds the same records (its ids move on).

    .venv/bin/python benchmarks/sql_layer_cost.py --keyword-scale 100000,1000000 --held-counts --keep KEEP_DIR

``--decode N`` times ``journal.records()`` of N turn records (a context() loads ~300 candidates) on
SQLite, and the row decoder alone against the one it replaced (every column through json.loads),
on the same rows, alternated call by call.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import bindparam, column, create_engine, event, func, insert, literal_column, select, table, update

from langmem_tiers.journal.base import Namespace

MSG = table("messages", column("id"), column("ns"), column("role"), column("content"), column("name"),
            column("tool_calls"), column("tool_call_id"), column("metadata"), column("created_at"),
            column("tokens"), column("tokens_key"), column("key"))
STATE = table("state", column("ns"), column("window_start"), column("summary"), column("summary_tokens"),
              column("summary_cursor"), column("summary_version"), column("failures"), column("last_error"),
              column("retry_at"), column("version"))
REC = table("records", column("id"), column("ns"), column("kind"), column("text"), column("message_ids"),
            column("importance"), column("pinned"), column("tags"), column("metadata"), column("created_at"),
            column("scope_terms"), column("key"), column("terms"), column("valid_to"))
NSS = table("namespaces", column("ns"), column("session_id"), column("user_id"), column("agent_id"))
OUTBOX = table("outbox", column("record_id"), column("op"), column("seq"), column("ns"))
MSG_COLS = "id, role, content, name, tool_calls, tool_call_id, metadata, created_at, tokens, tokens_key, key, ns"
STATE_COLS = ("window_start, summary, summary_tokens, summary_cursor, summary_version, failures, last_error, "
              "retry_at, version")
REC_SELECT = ("SELECT r.id, n.session_id, n.user_id, n.agent_id, r.kind, r.text, r.message_ids, r.importance, "
              "r.pinned, r.tags, r.metadata, r.created_at, r.key, r.valid_to FROM records r "
              "JOIN namespaces n ON n.ns = r.ns")


def timed(n: int, op: Callable[[int], None]) -> tuple[float, float]:
    for i in range(min(50, n)):  # warm caches (statement cache, compiled cache, pages)
        op(i)
    samples = []
    for i in range(n):
        start = time.perf_counter()
        op(i)
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return statistics.median(samples), samples[int(0.95 * (len(samples) - 1))]


# --- raw drivers: the statements as the journals send them ----------------------------------

def raw_ops(conn: Any, ns_id: int, pg: bool) -> tuple[Callable[[int], None], Callable[[int], None]]:
    p = "%s" if pg else "?"

    def q(sql: str) -> str:
        return sql.replace("?", p)

    def add(i: int) -> None:
        conn.execute("BEGIN" if pg else "BEGIN IMMEDIATE")
        conn.execute(q("SELECT ns FROM state WHERE ns=?" + (" FOR UPDATE" if pg else "")), (ns_id,)).fetchone()
        st = conn.execute(q(f"SELECT {STATE_COLS} FROM state WHERE ns=?"), (ns_id,)).fetchone()
        cur = conn.execute(q("INSERT INTO messages (ns, role, content, name, tool_calls, tool_call_id, metadata, "
                             "created_at, tokens, tokens_key, key) VALUES (?,?,?,?,?,?,?,?,?,?,?)"
                             + (" RETURNING id" if pg else "")),
                           (ns_id, "user", json.dumps(f"message {i} about the garden"), None, None, None, None,
                            time.time(), 9, "k", None))
        mid = cur.fetchone()[0] if pg else cur.lastrowid
        conn.execute(q("SELECT id, role, tokens FROM messages WHERE ns=? AND id>=? ORDER BY id"),
                     (ns_id, max(int(st[0]), int(mid) - 20))).fetchall()
        scope = () if pg else (f"s{ns_id}",)  # FTS5's scope column (PostgreSQL filters by ns alone)
        cur = conn.execute(q("INSERT INTO records (ns, kind, text, message_ids, importance, pinned, tags, metadata, "
                             "created_at, key, terms" + ("" if pg else ", scope_terms") + ") VALUES "
                             "(?,?,?,?,?,?,?,?,?,?,?" + ("" if pg else ",?") + ")" + (" RETURNING id" if pg else "")),
                           (ns_id, "turn", f"turn {i} garden basil", json.dumps([mid]), 0.5, False, "[]", "{}",
                            time.time(), None, None, *scope))
        rid = cur.fetchone()[0] if pg else cur.lastrowid
        conn.execute(q("INSERT INTO outbox (record_id, op, seq, ns) VALUES (?,?,?,?) ON CONFLICT (record_id) DO "
                       "UPDATE SET op=excluded.op, seq=excluded.seq"), (rid, "upsert", i, ns_id))
        conn.execute(q("UPDATE state SET version=version+1 WHERE ns=?"), (ns_id,))
        conn.execute("COMMIT")

    def context(i: int) -> None:
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY" if pg else "BEGIN")
        st = conn.execute(q(f"SELECT {STATE_COLS} FROM state WHERE ns=?"), (ns_id,)).fetchone()
        last = conn.execute(q("SELECT max(id) FROM messages WHERE ns=?"), (ns_id,)).fetchone()[0]
        conn.execute(q(f"SELECT {MSG_COLS} FROM messages WHERE ns=? AND id>=? ORDER BY id"),
                     (ns_id, max(int(st[0]), int(last) - 20))).fetchall()
        conn.execute(q(f"{REC_SELECT} WHERE r.ns IN (?) AND r.pinned" + ("" if pg else " = 1") + " ORDER BY r.id"),
                     (ns_id,)).fetchall()
        conn.execute(q(f"{REC_SELECT} WHERE r.ns IN (?) AND r.kind != 'turn' AND r.valid_to IS NULL ORDER BY r.id"),
                     (ns_id,)).fetchall()
        conn.execute("COMMIT")

    return add, context


# --- SQLAlchemy Core: the same statements as constructs, compiled once and cached ------------

def core_ops(conn: Any, ns_id: int, pg: bool) -> tuple[Callable[[int], None], Callable[[int], None]]:
    lock = select(STATE.c.ns).where(STATE.c.ns == bindparam("ns"))
    if pg:
        lock = lock.with_for_update()
    state = select(*(STATE.c[c.strip()] for c in STATE_COLS.split(","))).where(STATE.c.ns == bindparam("ns"))
    add_msg = insert(MSG).returning(MSG.c.id)
    entries = (select(MSG.c.id, MSG.c.role, MSG.c.tokens)
               .where(MSG.c.ns == bindparam("ns"), MSG.c.id >= bindparam("start")).order_by(MSG.c.id))
    add_rec = insert(REC).returning(REC.c.id)
    if pg:
        from sqlalchemy.dialects.postgresql import insert as upsert_of
    else:
        from sqlalchemy.dialects.sqlite import insert as upsert_of  # type: ignore[assignment]
    up = upsert_of(OUTBOX)
    queue = up.on_conflict_do_update(index_elements=["record_id"], set_={"op": up.excluded.op,
                                                                         "seq": up.excluded.seq})
    bump = update(STATE).where(STATE.c.ns == bindparam("b_ns")).values(version=STATE.c.version + 1)
    last = select(func.max(MSG.c.id)).where(MSG.c.ns == bindparam("ns"))
    window = (select(*(MSG.c[c.strip()] for c in MSG_COLS.split(",")))
              .where(MSG.c.ns == bindparam("ns"), MSG.c.id >= bindparam("start")).order_by(MSG.c.id))
    joined = REC.join(NSS, NSS.c.ns == REC.c.ns)
    rec_cols = (REC.c.id, NSS.c.session_id, NSS.c.user_id, NSS.c.agent_id, REC.c.kind, REC.c.text,
                REC.c.message_ids, REC.c.importance, REC.c.pinned, REC.c.tags, REC.c.metadata, REC.c.created_at,
                REC.c.key, REC.c.valid_to)
    pinned = (select(*rec_cols).select_from(joined)
              .where(REC.c.ns.in_(bindparam("nss", expanding=True)),
                     REC.c.pinned if pg else REC.c.pinned == literal_column("1")).order_by(REC.c.id))
    memories = (select(*rec_cols).select_from(joined)
                .where(REC.c.ns.in_(bindparam("nss", expanding=True)), REC.c.kind != "turn",
                       REC.c.valid_to.is_(None)).order_by(REC.c.id))

    def add(i: int) -> None:
        with conn.begin():
            conn.execute(lock, {"ns": ns_id}).fetchone()
            st = conn.execute(state, {"ns": ns_id}).fetchone()
            mid = conn.execute(add_msg, {
                "ns": ns_id, "role": "user", "content": json.dumps(f"message {i} about the garden"), "name": None,
                "tool_calls": None, "tool_call_id": None, "metadata": None, "created_at": time.time(),
                "tokens": 9, "tokens_key": "k", "key": None}).scalar_one()
            conn.execute(entries, {"ns": ns_id, "start": max(int(st[0]), int(mid) - 20)}).fetchall()
            record = {"ns": ns_id, "kind": "turn", "text": f"turn {i} garden basil", "message_ids": json.dumps([mid]),
                      "importance": 0.5, "pinned": False, "tags": "[]", "metadata": "{}", "created_at": time.time(),
                      "key": None, "terms": None}
            if not pg:
                record["scope_terms"] = f"s{ns_id}"
            rid = conn.execute(add_rec, record).scalar_one()
            conn.execute(queue, {"record_id": rid, "op": "upsert", "seq": i, "ns": ns_id})
            conn.execute(bump, {"b_ns": ns_id})

    def context(i: int) -> None:
        with conn.begin():
            st = conn.execute(state, {"ns": ns_id}).fetchone()
            top = conn.execute(last, {"ns": ns_id}).scalar_one()
            conn.execute(window, {"ns": ns_id, "start": max(int(st[0]), int(top) - 20)}).fetchall()
            conn.execute(pinned, {"nss": [ns_id]}).fetchall()
            conn.execute(memories, {"nss": [ns_id]}).fetchall()

    return add, context


# --- backends ---------------------------------------------------------------------------------

Op = Callable[[int], None]


def sqlalchemy_side(engine: Any, ns_id: int, pg: bool) -> tuple[Op, Op, Callable[[], None]]:
    """add() and context() on one SQLAlchemy connection, and what closes it."""
    sa = engine.connect()
    add, ctx = core_ops(sa, ns_id, pg)

    def closer() -> None:
        sa.close()
        engine.dispose()

    return add, ctx, closer


def measure(rows: list[tuple[str, str, float, float]], side: str, n: int, add: Op, ctx: Op) -> None:
    rows.append((side, "add", *timed(n, add)))
    rows.append((side, "context", *timed(n, ctx)))


def sqlite_rows(folder: Path, n: int) -> list[tuple[str, str, float, float]]:
    import sqlite3

    from langmem_tiers.journal.sqlite import SqliteJournal

    rows = []
    for side in ("raw", "sqlalchemy"):
        path = folder / f"{side}.sqlite3"
        journal = SqliteJournal(path)  # the real schema and file settings (WAL persists in the file)
        ns_id = journal.namespace_id(Namespace("bench", "u"))
        assert ns_id is not None
        journal.close()
        if side == "raw":
            conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False, timeout=30)
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA secure_delete=ON")
            add, ctx = raw_ops(conn, ns_id, pg=False)
            closer: Callable[[], None] = conn.close
        else:
            engine = create_engine(f"sqlite:///{path}", connect_args={"isolation_level": None, "timeout": 30})

            @event.listens_for(engine, "connect")
            def _pragmas(dbapi_conn: Any, _record: Any) -> None:
                dbapi_conn.execute("PRAGMA synchronous=FULL")
                dbapi_conn.execute("PRAGMA secure_delete=ON")

            @event.listens_for(engine, "begin")
            def _begin(sa_conn: Any) -> None:  # the journal's writer lock, as pysqlite's docs advise
                sa_conn.exec_driver_sql("BEGIN IMMEDIATE")

            add, ctx, closer = sqlalchemy_side(engine, ns_id, pg=False)
        measure(rows, f"sqlite {side}", n, add, ctx)
        closer()
    return rows


def postgres_rows(url: str, n: int) -> list[tuple[str, str, float, float]]:
    import uuid

    import psycopg

    from langmem_tiers.journal.postgres import PostgresJournal

    rows = []
    for side in ("raw", "sqlalchemy"):
        schema = f"bench_{uuid.uuid4().hex[:12]}"
        journal = PostgresJournal(url, schema=schema)
        ns_id = journal.namespace_id(Namespace("bench", "u"))
        assert ns_id is not None
        journal.close()
        if side == "raw":
            conn = psycopg.connect(url, autocommit=True)
            conn.execute(f'SET search_path TO "{schema}"')
            add, ctx = raw_ops(conn, ns_id, pg=True)
            closer: Callable[[], None] = conn.close
        else:
            engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1),
                                   connect_args={"options": f"-c search_path={schema}"})
            add, ctx, closer = sqlalchemy_side(engine, ns_id, pg=True)
        measure(rows, f"postgres {side}", n, add, ctx)
        closer()
    return rows


@contextlib.contextmanager
def throwaway_postgres(url: str | None, wanted: bool) -> Iterator[str | None]:
    if not wanted:
        yield None
    elif url:
        yield url
    else:
        from tests.support.postgres import postgres_server

        with postgres_server() as started:
            yield started


# The keyword search PostgreSQL ran before bm25 (ts_rank_cd of the whole OR query).
TS_RANK_CD_SQL = ("SELECT r.id, ts_rank_cd(r.tsv, q.query) AS score FROM records r, "
                  "to_tsquery('english'::regconfig, %s) AS q(query) WHERE r.tsv @@ q.query AND r.ns = ANY(%s) "
                  "ORDER BY score DESC, r.id DESC LIMIT %s")


def keyword_rows(url: str, size: int, n: int) -> list[tuple[str, str, float, float]]:
    import random
    import uuid

    import psycopg

    from benchmarks.core_latency import ZIPF_WEIGHTS, ZIPF_WORDS
    from langmem_tiers.journal.base import NewRecord
    from langmem_tiers.journal.postgres import PostgresJournal, ts_query

    rng = random.Random(7)
    schema = f"bench_kw_{uuid.uuid4().hex[:12]}"
    journal = PostgresJournal(url, schema=schema)
    try:
        ns_id = journal.namespace_id(Namespace("bench", "u"))
        assert ns_id is not None
        for start in range(0, size, 1000):
            journal.add_records(ns_id, [NewRecord("turn", " ".join(rng.choices(ZIPF_WORDS, ZIPF_WEIGHTS, k=30)))
                                        for _ in range(min(1000, size - start))])
        questions = [" ".join(rng.choices(ZIPF_WORDS, ZIPF_WEIGHTS, k=5)) for _ in range(n)]
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'SET search_path TO "{schema}"')
            conn.execute("ANALYZE records")

            def old(i: int) -> None:
                conn.execute(TS_RANK_CD_SQL, (ts_query(questions[i]), [ns_id], 10)).fetchall()

            def new(i: int) -> None:
                journal.keyword_search(questions[i], [ns_id], 10)

            # Alternate the two call by call, so a machine whose load drifts charges both alike.
            samples: dict[str, list[float]] = {"ts_rank_cd (before)": [], "bm25 (now)": []}
            for i in range(n):
                for name, op in (("ts_rank_cd (before)", old), ("bm25 (now)", new))[::1 if i % 2 else -1]:
                    start = time.perf_counter()
                    op(i)
                    samples[name].append((time.perf_counter() - start) * 1000)
        where = f"postgres {size} records"
        return [(where, name, statistics.median(v), sorted(v)[int(0.95 * (len(v) - 1))]) for name, v in samples.items()]
    finally:
        journal.close()


# --- keyword search at scale (issue 15) --------------------------------------------------------

SCALE_K = 20
DEFAULT_CHAT = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo_dev.json"


def chat_corpus(path: Path) -> tuple[list[str], list[str]]:
    """LoCoMo's chat lines and questions (the official file format)."""
    if not path.exists():
        raise SystemExit(f"no chat data at {path}: pass --chat with LoCoMo's locomo10.json (or its dev copy)")
    samples = json.loads(path.read_text())
    lines = [t["text"] for s in samples for key, turns in s["conversation"].items()
             if key.startswith("session_") and isinstance(turns, list) for t in turns]
    return lines, [q["question"] for s in samples for q in s["qa"]]


def query_shapes(lines: list[str], questions: list[str], n: int) -> dict[str, list[str]]:
    import collections
    import random

    from benchmarks.core_latency import ZIPF_WORDS
    from langmem_tiers.text import query_words

    rng = random.Random(3)
    frequent = [w for w, _ in collections.Counter(w for line in lines for w in set(query_words(line))).most_common(40)]
    return {"rare": [f"What did I say about the {rng.choice(ZIPF_WORDS[3000:])}?" for _ in range(n)],
            "common": [" ".join(rng.sample(frequent, 3)) for _ in range(n)],
            "mixed": [rng.choice(questions) for _ in range(n)]}


def fill_scale(journal: Any, size: int, sessions: int, lines: list[str]) -> list[int]:
    """``size`` records in ``sessions`` sessions of user "u" (one after the other, as a history grows)."""
    import random

    from benchmarks.core_latency import ZIPF_WEIGHTS, ZIPF_WORDS
    from langmem_tiers.journal.base import NewRecord

    rng = random.Random(7)
    ns_ids = []
    for s in range(sessions):
        ns_id = journal.namespace_id(Namespace(f"s{s}", "u"))
        ns_ids.append(ns_id)
        count = size // sessions + (1 if s < size % sessions else 0)
        for start in range(0, count, 2000):
            journal.add_records(ns_id, [
                NewRecord("turn", f"{rng.choice(lines)} {' '.join(rng.choices(ZIPF_WORDS, ZIPF_WEIGHTS, k=2))}",
                          created_at=1.0) for _ in range(min(2000, count - start))])
    return ns_ids


def scale_journal(backend: str, size: int, sessions: int, lines: list[str], keep: Path | None,
                  pg_url: str | None) -> tuple[Any, list[int]]:
    if backend == "postgres":
        import uuid

        from langmem_tiers.journal.postgres import PostgresJournal

        assert pg_url is not None
        pg = PostgresJournal(pg_url, schema=f"bench_kws_{uuid.uuid4().hex[:12]}")
        ns_ids = fill_scale(pg, size, sessions, lines)
        with pg._autocommit() as db:
            db.execute("ANALYZE records")
        return pg, ns_ids
    from langmem_tiers.journal.sqlite import SqliteJournal

    folder = keep or Path(tempfile.mkdtemp())
    path = folder / f"keyword_{size}_{sessions}.sqlite3"
    if path.exists():
        journal = SqliteJournal(path)
        return journal, [i for i, _ in journal.namespaces()]
    building = path.with_suffix(".building")
    journal = SqliteJournal(building, synchronous="NORMAL")
    start = time.perf_counter()
    fill_scale(journal, size, sessions, lines)
    journal.close()
    building.rename(path)
    for suffix in ("-wal", "-shm"):
        Path(f"{building}{suffix}").unlink(missing_ok=True)
    print(f"built {path} in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    journal = SqliteJournal(path)
    return journal, [i for i, _ in journal.namespaces()]


def keyword_scale_rows(backend: str, sizes: list[int], layouts: list[str], n: int, chat: Path,
                       keep: Path | None, pg_url: str | None, held_counts: bool = False) -> list[tuple[Any, ...]]:
    import random

    from langmem_tiers.journal.base import NewRecord
    from langmem_tiers.journal.keyword_budget import TermCounts

    lines, questions = chat_corpus(chat)
    shapes = query_shapes(lines, questions, n)
    sides = ("dropped", "held") if held_counts else ("unbounded", "bounded")
    rng = random.Random(11)
    rows: list[tuple[Any, ...]] = []
    for size in sizes:
        for layout in layouts:
            journal, ns_ids = scale_journal(backend, size, 1 if layout == "one" else 1000, lines, keep, pg_url)
            default = journal.keyword_budget
            appended: list[int] = []
            try:
                for shape, queries in shapes.items():
                    times: dict[str, list[float]] = {name: [] for name in sides}
                    hits: dict[str, list[list[int]]] = {name: [] for name in sides}
                    for q in queries[:5]:  # warm the page cache
                        journal.keyword_search(q, ns_ids, SCALE_K)
                    for i, q in enumerate(queries):
                        if held_counts:
                            appended += journal.add_records(ns_ids[-1], [NewRecord("turn", rng.choice(lines),
                                                                                   created_at=1.0)])
                        # Alternate the two call by call, so a machine whose load drifts charges both alike.
                        for name in sides[::1 if i % 2 else -1]:
                            if not held_counts:
                                journal.keyword_budget = None if name == "unbounded" else default
                            held = journal._term_counts
                            if name == "dropped":
                                # Every word counted afresh, into counts thrown away after the call: kept,
                                # they would spare the held side's next call its seeks to the new matches.
                                journal._term_counts = {index: TermCounts() for index in held}
                            start = time.perf_counter()
                            found = journal.keyword_search(q, ns_ids, SCALE_K)
                            times[name].append((time.perf_counter() - start) * 1000)
                            journal._term_counts = held
                            hits[name].append([h.record_id for h in found])
                    first, second = (hits[name] for name in sides)
                    same = sum(a == b for a, b in zip(first, second))
                    overlap = statistics.mean(len(set(a) & set(b)) / max(len(a), 1) for a, b in zip(first, second))
                    p = {name: (statistics.median(v), sorted(v)[int(0.95 * (len(v) - 1))]) for name, v in times.items()}
                    rows.append((backend, layout, size, shape, *p[sides[0]], *p[sides[1]], same, len(queries),
                                 overlap))
                    print(_scale_line(rows[-1]), flush=True)
            finally:
                journal.keyword_budget = default
                if appended:
                    journal.delete_records(appended)
                journal.close()
    return rows


def _scale_line(row: tuple[Any, ...]) -> str:
    backend, layout, size, shape, u50, u95, b50, b95, same, total, overlap = row
    return (f"{backend:<9}{layout:<6}{size:>9}  {shape:<7}{u50:>10.2f}{u95:>10.2f}{b50:>10.2f}{b95:>10.2f}"
            f"{same:>6}/{total:<4}{overlap:>8.2f}")


def json_row_record(row: Any, codec: Any) -> Any:
    """The row decoder before issue 15 (every JSON column through json.loads): the reference."""
    from langmem_tiers.journal.base import Record

    ns = codec.namespace_of(int(row[1]))
    text, tags, metadata, key = codec.record_fields(ns, str(row[3]), str(row[7]), str(row[8]), row[10])
    return Record(id=int(row[0]), namespace=ns, kind=str(row[2]), text=text, message_ids=tuple(json.loads(row[4])),
                  importance=float(row[5]), pinned=bool(row[6]), tags=tuple(json.loads(tags)),
                  metadata=json.loads(metadata), created_at=float(row[9]), key=key,
                  valid_to=None if row[11] is None else float(row[11]))


def decode_rows(count: int, n: int) -> list[tuple[str, float, float]]:
    from langmem_tiers.journal.base import NewRecord
    from langmem_tiers.journal.rows import RECORD_SELECT, row_records
    from langmem_tiers.journal.sqlite import SqliteJournal

    with tempfile.TemporaryDirectory() as tmp:
        journal = SqliteJournal(Path(tmp) / "journal.sqlite3")
        ns_id = journal.namespace_id(Namespace("s", "u"))
        ids = journal.add_records(ns_id, [NewRecord(
            "turn", f"user: what about the garden, day {i}?\nassistant: water the basil in the morning, day {i}.",
            message_ids=(2 * i + 1, 2 * i + 2), created_at=1.0 + i) for i in range(count)])
        codec = journal._row_codec
        members = ",".join("?" * len(ids))
        rows = journal._db.execute(f"{RECORD_SELECT} WHERE r.id IN ({members}) ORDER BY r.id", ids).fetchall()
        assert [json_row_record(r, codec) for r in rows] == row_records(rows, codec)
        ops: dict[str, Callable[[], object]] = {
            f"decode {count} rows, json.loads (before)": lambda: [json_row_record(r, codec) for r in rows],
            f"decode {count} rows (now)": lambda: row_records(rows, codec),
            f"journal.records({count} ids)": lambda: journal.records(ids),
        }
        samples: dict[str, list[float]] = {name: [] for name in ops}
        for i in range(n + 20):
            for name, op in ops.items():
                start = time.perf_counter()
                op()
                if i >= 20:  # warm-up
                    samples[name].append((time.perf_counter() - start) * 1000)
        journal.close()
    return [(name, statistics.median(v), sorted(v)[int(0.95 * (len(v) - 1))]) for name, v in samples.items()]


SCALE_HEADER = (f"{'backend':<9}{'layout':<6}{'records':>9}  {'shape':<7}{'unb p50':>10}{'unb p95':>10}"
                f"{'bud p50':>10}{'bud p95':>10}{'same':>11}{'top20':>8}")
HELD_HEADER = (f"{'backend':<9}{'layout':<6}{'records':>9}  {'shape':<7}{'drop p50':>10}{'drop p95':>10}"
               f"{'held p50':>10}{'held p95':>10}{'same':>11}{'top20':>8}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1000, help="operations timed per side (default 1000)")
    parser.add_argument("--postgres", metavar="URL", help="an existing server (default: start a throwaway one)")
    parser.add_argument("--no-postgres", action="store_true", help="SQLite only")
    parser.add_argument("--keyword", type=int, metavar="N", help="time PostgreSQL keyword search on N records")
    parser.add_argument("--keyword-scale", metavar="SIZES",
                        help="time keyword_search with and without the budget at these sizes (comma-separated)")
    parser.add_argument("--layouts", default="one,many", help="one session, and/or 1,000 sessions of one user")
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--keep", type=Path, help="build SQLite journals here once and reuse them")
    parser.add_argument("--chat", type=Path, default=DEFAULT_CHAT, help="LoCoMo's data file (official format)")
    parser.add_argument("--decode", type=int, metavar="N", help="time decoding N records (journal.records)")
    parser.add_argument("--held-counts", action="store_true",
                        help="with --keyword-scale (SQLite): the term counts held between searches against dropped")
    args = parser.parse_args()
    if args.decode:
        print(f"{'operation':<44}{'p50 ms':>9}{'p95 ms':>9}")
        for name, p50, p95 in decode_rows(args.decode, args.n if args.n != 1000 else 300):
            print(f"{name:<44}{p50:>9.3f}{p95:>9.3f}")
        return
    if args.keyword_scale:
        sizes = [int(s) for s in args.keyword_scale.split(",")]
        layouts = args.layouts.split(",")
        queries = args.n if args.n != 1000 else 60
        if args.held_counts and args.backend != "sqlite":
            parser.error("--held-counts is a SQLite journal's (PostgreSQL counts in its GIN index at each search)")
        with throwaway_postgres(args.postgres, args.backend == "postgres") as url:
            print(HELD_HEADER if args.held_counts else SCALE_HEADER)
            keyword_scale_rows(args.backend, sizes, layouts, queries, args.chat, args.keep, url, args.held_counts)
        return
    if args.keyword:
        with throwaway_postgres(args.postgres, True) as url:
            assert url is not None
            kw = keyword_rows(url, args.keyword, args.n)
        print(f"{'journal':<26}{'keyword ranking':<22}{'p50 ms':>9}{'p95 ms':>9}")
        for where, what, p50, p95 in kw:
            print(f"{where:<26}{what:<22}{p50:>9.3f}{p95:>9.3f}")
        return
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        rows += sqlite_rows(Path(tmp), args.n)
    with throwaway_postgres(args.postgres, not args.no_postgres) as url:
        if url:
            rows += postgres_rows(url, args.n)
    by = {(side, op): (p50, p95) for side, op, p50, p95 in rows}
    print(f"{'backend / layer':<22}{'op':<9}{'p50 ms':>9}{'p95 ms':>9}{'p50 ratio':>11}")
    for side, op, p50, p95 in rows:
        engine_name = side.split()[0]
        base = by[(f"{engine_name} raw", op)][0]
        print(f"{side:<22}{op:<9}{p50:>9.3f}{p95:>9.3f}{p50 / base:>10.2f}x")


if __name__ == "__main__":
    main()
