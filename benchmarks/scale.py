"""Scale: add(), context() and search() latency as the store grows (issues 7 and 15; not a timed test).

    .venv/bin/python benchmarks/scale.py --sizes 1000,10000,100000 --layout one-session
    .venv/bin/python benchmarks/scale.py --sizes 1000,10000,100000 --layout many-sessions
    .venv/bin/python benchmarks/scale.py --sizes 1000,10000 --layout many-sessions --servers
    .venv/bin/python benchmarks/scale.py --plot-only benchmarks/results/scale-*.json --out benchmarks/results/scale

Layouts (``--layout``), N stored filler messages as user/assistant turns with one recall record per
turn, written straight through the journal in large transactions as eviction would have left them:

* ``one-session``: all N messages in the live session itself (one user, one session): the live
  window holds only what the live part adds, the rest is recallable history.
* ``many-sessions``: N messages of the live user in sessions of ``--per-session`` messages (100 by
  default); context() recalls across them (``recall_scope="user"``, the default) and user-scope
  search() searches all of them.
* ``many-users`` (issue 7's table): sessions of ``--per-session`` messages spread over 50 users.

Filler records get random unit vectors in the vector store (embedded Chroma, or SQLite with
``--embedded-vectors sqlite``): this measures latency at that index size, not
recall quality (the evaluation harness measures quality). Random vectors are HNSW's worst case (no
structure to exploit: at 500k vectors its search costs ~7x what it costs on text vectors,
``benchmarks/vector_index.py``), so ``--text-vectors LOCOMO_JSON`` gives the filler text-like vectors
instead: the local model's vectors of that file's turns (each pair of consecutive messages of a
session), drawn at random and each jittered by noise of norm ``TEXT_NOISE`` (a copy keeps cosine ~0.9 to
its turn, as ``vector_index.py``'s ``real`` kind). They are embedded inside the fill's child process
(about 40 s on the 2-core host), so the row's peak RSS never holds a second model. Then the live
session is driven through the public API with the real local embedder: add() per message (durable),
flush(), then for each new question: context() with recall, search() with k=10 at session and user scope, and the
embedder alone on the same question (its own time, the yardstick of issue 15's target 2). The row's
figures are the first ``--samples`` questions after the fill; as many more follow, the same calls, and
their context() is ``warm_context`` (a large fill is read from disk at first: ``benchmarks/warmup.py``
times how context() warms, and BENCHMARKS.md, issue 15's session 43, has the 1M figures). Then as
many conversation turns (``turn_context``): the question added as the user's message, context(), a
reply added and indexed (flush(), untimed: the pause between turns), so every context() finds the
session grown since the previous one.
The first context() after filling (the cold one: in-process vector indexes are fetched) is reported
apart (with ``--agents``, the first agent-scope search too: another scope, another index), then the run
waits for any HNSW graph still building in the background (``graph_build_s``) before sampling, so the
samples measure the installed index (on PostgreSQL, for a large scope's keyword postings too: the row's
``keyword_postings`` says what was held). ``--during-build`` times context() calls meanwhile
(``building_context_ms_*``): until the graph is installed, a scope past 20k vectors is answered by the
vector store's query, or by its exact rows once they were read where they fit beside the graph
(``building_rows_installed_s`` after the cold context(), and ``building_indexed_context_ms_*`` for the calls
from then on). With ``--servers`` the journal is a
throwaway PostgreSQL cluster and the vectors a ``chroma run`` server, both on 127.0.0.1 (started
with the test suite's helpers in tests/support), the fill vacuumed and analyzed as autovacuum would
have left it (from session 55 on); the row then carries the Chroma server's RSS after each
phase and its peak since it started, beside this process's.

``--agents N`` puts the filler sessions under N agents in turn (the live session under the first), and
each sample also times an agent-scope ``search(k=10)`` (this user's sessions with the live session's agent:
with one agent, every session of the user, as many records as user scope) beside the user scope's: target 2
names both.

``--breakdown`` adds, after the samples, as many more context() calls with every journal read, the
embedder, the in-process vector index's search and Python's garbage collector timed apart: the row's
``breakdown_ms`` is the mean ms per context() call of each (they nest: the index's search includes any
journal read it makes), ``breakdown_calls`` the mean calls of each per context(); then as many
user-scope ``search(k=10)`` calls (target 2's figure) timed the same way, in ``user_search_breakdown_ms``
and ``user_search_breakdown_calls`` (with ``--agents``, agent scope's in ``agent_search_breakdown_*``).
The timing wrappers cost a little themselves, so these calls are not the row's latency figures.

``--reuse FOLDER`` measures on a folder an earlier run filled (each run prints its folder): a 1M
fill takes most of an hour here, so a before/after pair fills once, copies the folder, and runs each
tree on its copy (a newer journal schema migrates the copy when it opens).

Writes ``OUT.json`` (the rows) and ``OUT.png`` (p50/p95 latency against stored messages, log x);
``OUT`` defaults to ``benchmarks/results/scale-LAYOUT`` (``-servers`` appended with ``--servers``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import platform
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from timing import Counters, collections_timed, rss_kib

from langmem_tiers import MemoryConfig, TieredMemory
from langmem_tiers.journal.base import Namespace, NewRecord
from langmem_tiers.messages import Message

VOCAB = [f"{w}{i}" for i in range(60) for w in ("alpha", "bravo", "delta", "kilo", "lima", "oscar", "tango")]
COMMON = "the a we said about and then it was for my our trip meeting plan".split()
LAYOUTS = ("one-session", "many-sessions", "many-users")
LIVE_SESSION, LIVE_USER, LIVE_AGENT = "live", "user-0", "agent-0"
TEXT_NOISE = 0.5  # --text-vectors: norm of the noise on each drawn turn vector (as benchmarks/vector_index.py)
TARGET_MS = 30.0  # issue 15, targets 1 and 2
STORE_NAMES = {"ChromaStore": "embedded chroma", "SqliteVectorStore": "embedded sqlite"}  # a row's vectors_in


def filler_question(rng: random.Random, plain: bool = False) -> str:
    """A question about two filler words (each question of the scale benchmarks and their probes).

    Its "say" is a word no filler line holds: once questions are added to the history (scale.py's
    conversation round, or an earlier run on a reused fill), it is the query's rarest term, and a keyword
    search over the budget ranks its few matches only, which is cheap (BENCHMARKS.md, issue 15, session
    52). ``plain`` leaves it out ("What about X and Y?"): every word of the question fills the history.
    """
    if plain:
        return f"What about {rng.choice(VOCAB)} and {rng.choice(VOCAB)}?"
    return f"What did we say about {rng.choice(VOCAB)} and {rng.choice(VOCAB)}?"


def line(rng: random.Random) -> str:
    words = [rng.choice(VOCAB) if rng.random() < 0.4 else rng.choice(COMMON) for _ in range(18)]
    return " ".join(words).capitalize() + "."


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def filler_namespaces(size: int, layout: str, per_session: int, agents: int = 0) -> list[tuple[Namespace, int]]:
    """Where the N filler messages go: (namespace, messages) in write order. ``agents``: the sessions
    take turns among that many agents (``agent-0`` is the live session's), or have none (0)."""
    def agent(s: int) -> str:
        return f"agent-{s % agents}" if agents else ""

    if layout == "one-session":
        return [(Namespace(LIVE_SESSION, LIVE_USER, agent(0)), size)]
    sessions = max(size // per_session, 1)
    user = (lambda s: LIVE_USER) if layout == "many-sessions" else (lambda s: f"user-{s % 50}")
    return [(Namespace(f"filler-{s}", user(s), agent(s)), per_session) for s in range(sessions)]


def text_pool(path: Path, memory: TieredMemory) -> Any:
    """``--text-vectors``: unit vectors, by the memory's own embedder, of every whole turn of a LoCoMo file, as
    the core groups and writes them (``eval.datasets.turns_of``, one ``speaker: text`` line per message). Rows
    committed before session 48 were made from overlapping pairs of consecutive messages instead."""
    from langmem_tiers.eval.datasets import load_locomo, turns_of

    turns = ["\n".join(m.line for m in turn) for haystack in load_locomo(path)
             for session in haystack.sessions for turn in turns_of(session)]
    assert memory.recall is not None
    assert memory.recall.embedder is not None
    pool = np.asarray(memory.recall.embedder.embed(turns), dtype=np.float32)
    return pool / np.linalg.norm(pool, axis=1, keepdims=True)


def fill(memory: TieredMemory, size: int, rng: random.Random, vectors: bool, layout: str,
         per_session: int, batch: int = 2000, pool: Any = None, memories_every: int = 0, agents: int = 0) -> None:
    """Write ``size`` filler messages; with ``vectors``, each record's vector is a random unit vector, or
    with a ``pool`` (:func:`text_pool`) one of its rows at random, jittered by noise of norm ``TEXT_NOISE``.
    ``memories_every``: every that many turns, an unkeyed fact too (the turn's user line), as the offline
    extractor keeps one (about one turn in six of ``benchmarks/add_path.py``'s chat lines); 0: none."""
    journal = memory.journal
    recall = memory.recall
    store = recall.store if recall else None
    dim = recall.embedder.dimension if recall and recall.embedder else 0
    numpy_rng = np.random.default_rng(size)
    for ns, count in filler_namespaces(size, layout, per_session, agents):
        ns_id = journal.namespace_id(ns)
        assert ns_id is not None
        for start in range(0, count, batch):  # one transaction per batch: a 1M session fits in memory
            n = min(batch, count - start)
            n -= n % 2
            texts = [line(rng) for _ in range(n)]
            messages = [Message("user" if i % 2 == 0 else "assistant", t) for i, t in enumerate(texts)]
            with journal.write(ns_id) as tx:
                stored = tx.insert_messages(messages, [len(t.split()) for t in texts], "filler")
                last = stored[-1].id or 0
                tx.set_window_start(last + 1)
                tx.set_summary("filler summary", 2, last)
                record_ids = tx.insert_records([
                    NewRecord("turn", f"user: {stored[i].text}\nassistant: {stored[i + 1].text}",
                              (stored[i].id or 0, stored[i + 1].id or 0), created_at=time.time())
                    for i in range(0, n, 2)])
                if memories_every:
                    record_ids += tx.insert_records([
                        NewRecord("fact", stored[i].text, (stored[i].id or 0,), created_at=time.time())
                        for i in range(0, n, 2) if (start + i) // 2 % memories_every == 0])
            if vectors and store is not None and recall is not None:
                raw = numpy_rng.standard_normal((len(record_ids), dim)).astype(np.float32)
                if pool is not None:
                    raw = pool[numpy_rng.integers(0, len(pool), len(record_ids))] + raw * (TEXT_NOISE / np.sqrt(dim))
                vecs = raw / np.linalg.norm(raw, axis=1, keepdims=True)
                recs = journal.records(record_ids)
                store.upsert([recall.vector_id(r.id) for r in recs], vecs.tolist(), None,
                             [recall._metadata(r, ns_id) for r in recs])
            journal.outbox_done(journal.outbox(2 * len(record_ids)))


def _filler_vectors(vectors: bool, text_vectors: Path | None, reuse: Path | None) -> str | None:
    """What the row's filler vectors were: ``none``, ``random`` or ``text``; ``None`` for a reused fill,
    whose vectors this run did not write."""
    if reuse is not None:
        return None
    if not vectors:
        return "none"
    return "text" if text_vectors else "random"


def _timed(fn: Any) -> float:
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1000


def _p(values: list[float]) -> tuple[float, float]:
    return round(statistics.median(values), 2), round(pct(values, 0.95), 2)


def _open_setup(target: str | Path, chroma: str | None, vectors: bool,
                embedded_vectors: str | None = None) -> TieredMemory:
    config = MemoryConfig(context_tokens=4000, window_tokens=2000, summary_tokens=400, recall_tokens=800,
                          recall_scope="user", embedded_vectors=embedded_vectors)  # type: ignore[arg-type]
    return TieredMemory.open(target, session_id="setup", user_id="setup", config=config,
                             embedder=None if vectors else False, chroma=chroma)


def _fill_child(target: str | Path, chroma: str | None, size: int, vectors: bool, layout: str,
                per_session: int, text_vectors: Path | None, embedded_vectors: str | None,
                memories_every: int = 0, agents: int = 0) -> None:
    with _open_setup(target, chroma, vectors, embedded_vectors) as setup:
        pool = text_pool(text_vectors, setup) if vectors and text_vectors else None
        fill(setup, size, random.Random(size), vectors, layout, per_session, pool=pool, memories_every=memories_every,
             agents=agents)


def measure(size: int, vectors: bool, samples: int, layout: str, per_session: int,
            journal_url: str | None = None, chroma: str | None = None, reuse: Path | None = None,
            breakdown: bool = False, server: int | None = None, text_vectors: Path | None = None,
            embedded_vectors: str | None = None, memories_every: int = 0,
            plain_questions: bool = False, agents: int = 0, during_build: bool = False) -> dict[str, Any]:
    rng = random.Random(size)
    folder = reuse or Path(tempfile.mkdtemp(prefix="lt-scale-"))
    t0 = time.perf_counter()
    if reuse is None:
        # In a child process: the fill's garbage (a million rows and vectors passed through Python) and
        # its peak never count in this process's memory, whose peak RSS is the row's (issue 15, target 4).
        child = multiprocessing.get_context("spawn").Process(
            target=_fill_child,
            args=(journal_url or folder, chroma, size, vectors, layout, per_session, text_vectors, embedded_vectors,
                  memories_every, agents))
        child.start()
        child.join()
        if child.exitcode != 0:
            raise SystemExit(f"the fill of {size} messages failed (exit code {child.exitcode})")
        # The fill's writes reach the disk before anything is timed: a 1M fill leaves ~1.6 GB for the
        # kernel to write back, which would otherwise share the disk with the samples' first reads.
        if hasattr(os, "sync"):
            os.sync()
        if journal_url:
            _vacuum_postgres(journal_url)
    fill_s = time.perf_counter() - t0
    print(json.dumps({"size": size, "folder": str(folder), "fill_s": round(fill_s, 1)}), flush=True)
    rss_mb: dict[str, int] = {}  # this process's RSS after each phase (where target 4's memory goes)
    # With --servers, the Chroma server's (process ``server``) too: the vectors' memory moved there.
    server_mb: dict[str, int] = {}

    def mark(phase: str) -> None:
        rss_mb[phase] = round(rss_kib()[0] / 1024)
        if server is not None:
            server_mb[phase] = round(rss_kib(server)[0] / 1024)

    # The live handle opens on the finished journal, from a handle on another session.
    with _open_setup(journal_url or folder, chroma, vectors, embedded_vectors) as setup:
        mark("opened")
        vectors_in = type(setup.recall.store).__name__ if setup.recall and setup.recall.store else "none"
        memory = setup.for_session(LIVE_SESSION, user_id=LIVE_USER, agent_id=LIVE_AGENT if agents else None)
        embedder = memory.recall.embedder if memory.recall else None
        if embedder is not None:
            embedder.embed(["warm up the model"])
        mark("model loaded")
        add_ms = [_timed(lambda i=i: memory.add("user" if i % 2 == 0 else "assistant", line(rng)))
                  for i in range(samples)]
        memory.flush()
        mark("adds indexed")  # embedded Chroma loads its own index of the collection on the first write
        cold_ms = _timed(lambda: memory.context("What did we say about the plan?"))
        # With agents, the agent scope is another entry (fewer sessions than the user's, unless one agent): its
        # first query too, so that the samples below find both installed.
        cold_agent_ms = _timed(lambda: memory.search("What did we say about the plan?", k=10, scope="agent")) \
            if agents else None
        mark("cold context()")
        # A scope past 20k vectors gets its HNSW graph on a background thread (Chroma's filtered query
        # answers meanwhile): the samples below measure the installed graph, the build's time is its own row.
        t_build = time.perf_counter()
        scope_vectors = getattr(memory.recall, "_scope_vectors", None)  # absent in trees before issue 15's index
        building_ms: list[float] = []  # --during-build: what context() costs while the graph is built
        indexed_ms: list[float] = []  # ... those of them made once the scope's rows were installed
        rows_in_s: float | None = None  # when the rows were installed (exact or compact rows first)
        if scope_vectors is not None:
            during = random.Random(size + 1)  # its own questions: the samples' stay those of earlier rows
            entries = scope_vectors.stats()["entries"]
            while during_build and len(building_ms) < samples and (now := scope_vectors.stats())["building"]:
                question = filler_question(during, plain_questions)
                if rows_in_s is None and now["entries"] > entries:
                    rows_in_s = time.perf_counter() - t_build
                building_ms.append(_timed(lambda: memory.context(question)))
                if rows_in_s is not None:
                    indexed_ms.append(building_ms[-1])
            scope_vectors.wait_builds()
        build_s = time.perf_counter() - t_build
        # PostgreSQL: a large scope's keyword postings are read in the background too (absent before session 63).
        postings = getattr(memory.journal, "keyword_postings", None)
        if postings is not None:
            postings.wait_build()
        postings_stats = postings.stats() if postings is not None else None
        mark("graph built")
        delivered: list[tuple[int, int]] = []  # recalled hits and their tokens per context(): its cost follows them
        # Two rounds of the same calls. The first is the row's figures: the calls right after the graph
        # build, while the process and the OS page cache still warm to a large fill. The second is the
        # same calls warm (``warm_context``).
        rounds: list[tuple[list[float], list[float], list[float], list[float], list[float]]] = []
        for _ in range(2):
            context_ms, search_ms, user_ms, agent_ms, embed_ms = [], [], [], [], []
            for _ in range(samples):
                question = filler_question(rng, plain_questions)
                t = time.perf_counter()
                ctx = memory.context(question)
                context_ms.append((time.perf_counter() - t) * 1000)
                if not rounds:
                    delivered.append((len(ctx.recalled), ctx.tokens.recall))
                search_ms.append(_timed(lambda: memory.search(question, k=10)))
                user_ms.append(_timed(lambda: memory.search(question, k=10, scope="user")))
                if agents:
                    agent_ms.append(_timed(lambda: memory.search(question, k=10, scope="agent")))
                if embedder is not None:
                    embed_ms.append(_timed(lambda: embedder.embed([question])))
            rounds.append((context_ms, search_ms, user_ms, agent_ms, embed_ms))
        (context_ms, search_ms, user_ms, agent_ms, embed_ms), (warm_ms, *_) = rounds
        # A conversation: each question is added as the user's turn, context() is built for it, and the
        # reply is added; the user's scope grew since the previous context() (the samples above do not).
        # flush() stands for the seconds between turns, in which the indexer embeds the finished turn:
        # back to back, its embedding would share the cores with the next context()'s.
        turn_ms = []
        for _ in range(samples):
            question = filler_question(rng, plain_questions)
            memory.add("user", question)
            turn_ms.append(_timed(lambda: memory.context(question)))
            memory.add("assistant", line(rng))
            memory.flush()
        parts: dict[str, float] = {}  # ms per part, over the breakdown's context() calls
        part_calls: dict[str, int] = {}
        # The same over as many user-scope (and with agents, agent-scope) search() calls (target 2).
        scope_parts: dict[str, tuple[dict[str, float], dict[str, int]]] = {}
        if breakdown:
            questions = [filler_question(rng, plain_questions) for _ in range(samples)]
            with timed_parts(memory) as counters:
                for question in questions:
                    memory.context(question)
            parts = {name: sec * 1000 for name, sec in counters.seconds.items()}
            part_calls = dict(counters.calls)
            for scope in ("user", "agent") if agents else ("user",):
                with timed_parts(memory) as counters:
                    for question in questions:
                        memory.search(question, k=10, scope=scope)
                scope_parts[scope] = ({name: sec * 1000 for name, sec in counters.seconds.items()},
                                      dict(counters.calls))
        total = memory.journal.count_messages()
        mark("end")
        with memory.journal._autocommit() as db:  # type: ignore[attr-defined]
            # What the fill holds, not what a flag said: a reused folder may have been filled otherwise.
            facts = int(db.one("SELECT count(*) FROM records WHERE kind = 'fact'")[0])
    row: dict[str, Any] = {
        "layout": layout, "size": size, "stored_messages": total, "vectors": vectors,
        "filler_vectors": _filler_vectors(vectors, text_vectors, reuse), "fill_s": round(fill_s, 1),
        "memories_every": None if reuse else memories_every, "facts_stored": facts,
        "questions": "plain" if plain_questions else "with a rare word",
        "samples": samples, "agents": agents, "cold_context_ms": round(cold_ms, 2), "graph_build_s": round(build_s, 1),
    }
    if cold_agent_ms is not None:
        row["cold_agent_search_ms"] = round(cold_agent_ms, 2)
    if postings_stats is not None:
        row["keyword_postings"] = postings_stats  # held before the samples (issue 15, session 63)
    if during_build:
        row["building_context_calls"] = len(building_ms)  # p50 / p95 below when any
        # Rows first: when they were installed (seconds after the cold context()), and the calls after.
        row["building_rows_installed_s"] = None if rows_in_s is None else round(rows_in_s, 1)
        row["building_indexed_context_calls"] = len(indexed_ms)
    for name, values in (("add", add_ms), ("building_context", building_ms),
                         ("building_indexed_context", indexed_ms), ("context", context_ms),
                         ("warm_context", warm_ms), ("turn_context", turn_ms),
                         ("search", search_ms),
                         ("user_search", user_ms), ("agent_search", agent_ms), ("embed", embed_ms)):
        if values:
            row[f"{name}_ms_p50"], row[f"{name}_ms_p95"] = _p(values)
    if delivered:
        row["recalled_hits_p50"] = statistics.median(h for h, _ in delivered)
        row["recall_tokens_p50"] = statistics.median(t for _, t in delivered)
    if embed_ms:
        row["user_search_over_embed"] = round(row["user_search_ms_p50"] / row["embed_ms_p50"], 2)
        if agent_ms:
            row["agent_search_over_embed"] = round(row["agent_search_ms_p50"] / row["embed_ms_p50"], 2)
    row.update({
        "max_rss_mb": round(rss_kib()[1] / 1024),  # process peak so far
        "rss_mb_by_phase": rss_mb,
        "journal": "postgresql" if journal_url else "sqlite", "reused_fill": reuse is not None,
        "vectors_in": "chroma server" if chroma else STORE_NAMES.get(vectors_in, vectors_in),
    })
    if server is not None:
        row["chroma_server_rss_mb_by_phase"] = server_mb
        # Its peak since it started: every fill of this run included (one server serves all the sizes).
        row["chroma_server_peak_rss_mb"] = round(rss_kib(server)[1] / 1024)
    for prefix, timed, counted in (("", parts, part_calls),
                                   *((f"{scope}_search_", *split) for scope, split in scope_parts.items())):
        if timed:
            ms = {name: round(v / samples, 2) for name, v in sorted(timed.items(), key=lambda p: -p[1])}
            row[f"{prefix}breakdown_ms"] = ms
            row[f"{prefix}breakdown_calls"] = {name: round(counted[name] / samples, 2) for name in ms}
    return row


@contextlib.contextmanager
def timed_parts(memory: TieredMemory) -> Iterator[Counters]:
    """Time, in the counters yielded, each journal method, the embedder, the vector index's search,
    Python's garbage collector and the whole context() and search() calls made inside the block."""
    counters = Counters()
    undo: list[Callable[[], None]] = []
    journal = memory.journal
    for name in dir(type(journal)):
        if not name.startswith("_") and callable(getattr(journal, name)) and name not in ("read", "write"):
            counters.wrap(journal, name, f"journal.{name}", undo)
    recall = memory.recall
    if recall is not None and recall.embedder is not None:
        counters.wrap(recall.embedder, "embed", "embed", undo)
    scope_vectors = getattr(recall, "_scope_vectors", None)
    if scope_vectors is not None:
        counters.wrap(scope_vectors, "search", "scope_vectors.search", undo)
    counters.wrap(memory, "context", "context() total", undo)
    counters.wrap(memory, "search", "search() total", undo)
    try:
        with collections_timed() as pauses:
            yield counters
    finally:
        for seconds in (s for generation in pauses.values() for s in generation):
            counters.add("gc", seconds)
        for u in reversed(undo):
            u()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000,100000", help="stored filler messages, comma-separated")
    parser.add_argument("--layout", choices=LAYOUTS, default="one-session")
    parser.add_argument("--per-session", type=int, default=100, help="filler messages per session (many-*)")
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--no-vectors", action="store_true")
    parser.add_argument("--servers", action="store_true", help="PostgreSQL journal + Chroma server")
    parser.add_argument("--out", default=None, help="OUT.json and OUT.png (default benchmarks/results/scale-LAYOUT)")
    parser.add_argument("--reuse", type=Path, default=None, metavar="FOLDER",
                        help="measure on a folder an earlier run filled (its printed 'folder'; one size, "
                             "same layout) instead of filling a new one: before/after comparisons at 1M "
                             "without an hour of filling each")
    parser.add_argument("--text-vectors", type=Path, default=None, metavar="LOCOMO_JSON",
                        help="filler vectors drawn from the local model's vectors of this LoCoMo file's turns "
                             "(text-like) instead of random unit vectors (HNSW's worst case)")
    parser.add_argument("--memories-every", type=int, default=0, metavar="N",
                        help="an unkeyed fact record every N filler turns, as the offline extractor keeps (0: none; "
                             "ignored with --reuse: the row records the fill's facts_stored)")
    parser.add_argument("--embedded-vectors", choices=["chroma", "sqlite"], default=None,
                        help="the embedded folder's vector store (MemoryConfig.embedded_vectors; default Chroma)")
    parser.add_argument("--plain-questions", action="store_true",
                        help="questions of filler words only, without the rare 'say' that makes keyword search "
                             "cheap once questions are in the history (filler_question)")
    parser.add_argument("--agents", type=int, default=0, metavar="N",
                        help="the filler sessions take turns among N agents, the live session is agent-0's, and "
                             "agent-scope search(k=10) is timed beside user scope's (0: no agents, no agent scope)")
    parser.add_argument("--during-build", action="store_true",
                        help="time context() calls (at most --samples, questions of their own) while a scope's graph "
                             "is built in the background after the cold call: what a large user gets meanwhile "
                             "(graph_build_s then includes them)")
    parser.add_argument("--breakdown", action="store_true",
                        help="also time the parts of context() (journal reads, embedder, index, gc) apart")
    parser.add_argument("--plot-only", nargs="+", default=None, metavar="JSON",
                        help="draw OUT.png from these JSON files (one line set each) and exit")
    args = parser.parse_args()
    if args.reuse is not None and (args.servers or "," in args.sizes or not args.reuse.is_dir()):
        parser.error(f"--reuse ({args.reuse}) takes one existing folder, one size and no --servers")
    if args.text_vectors is not None and (args.no_vectors or args.reuse or not args.text_vectors.is_file()):
        parser.error(f"--text-vectors ({args.text_vectors}) takes an existing LoCoMo file, and no --no-vectors "
                     "or --reuse (a reused fill keeps its vectors)")
    if args.embedded_vectors is not None and args.servers:
        parser.error("--embedded-vectors chooses the embedded folder's store; --servers uses a Chroma server")
    if args.agents < 0:
        parser.error(f"--agents ({args.agents}) must be 0 (none) or more")
    if args.per_session < 2 or args.per_session % 2:
        parser.error(f"--per-session ({args.per_session}) must be an even number >= 2 (user/assistant turns)")
    if args.plot_only:
        out = Path(args.out or "benchmarks/results/scale")
        plot({Path(f).stem: json.loads(Path(f).read_text()) for f in args.plot_only}, out.with_suffix(".png"))
        return
    out = Path(args.out or f"benchmarks/results/scale-{args.layout}{'-servers' if args.servers else ''}")
    if args.servers:
        import sys

        # Appended: a before tree on PYTHONPATH stays first, in this process and in the fill's child.
        sys.path.append(str(Path(__file__).resolve().parents[1]))
        from tests.support.chroma_server import chroma_server
        from tests.support.postgres import postgres_server

        with contextlib.ExitStack() as stack:
            url = stack.enter_context(postgres_server())
            chroma_data = Path(tempfile.mkdtemp(prefix="lt-chroma-"))
            host, port = stack.enter_context(chroma_server(chroma_data))
            server_pid = int((chroma_data / f"server-{port}.pid").read_text())  # written by the helper
            run(args, out, url, f"http://{host}:{port}", server_pid)
    else:
        run(args, out, None, None)


def run(args: argparse.Namespace, out: Path, journal_url: str | None, chroma: str | None,
        server_pid: int | None = None) -> None:
    rows = []
    print(json.dumps({"machine": f"{platform.machine()} {os.cpu_count()} cores, python {platform.python_version()}",
                      "date": time.strftime("%Y-%m-%d"), "layout": args.layout}))
    out.parent.mkdir(parents=True, exist_ok=True)
    for size in (int(s) for s in args.sizes.split(",")):
        if journal_url:  # a fresh schema per size: drop what the previous size left
            _reset_postgres(journal_url)
        row = measure(size, vectors=not args.no_vectors, samples=args.samples, layout=args.layout,
                      per_session=args.per_session, journal_url=journal_url, chroma=chroma, reuse=args.reuse,
                      breakdown=args.breakdown, server=server_pid, text_vectors=args.text_vectors,
                      embedded_vectors=args.embedded_vectors, memories_every=args.memories_every,
                      plain_questions=args.plain_questions, agents=args.agents, during_build=args.during_build)
        rows.append(row)
        print(json.dumps(row), flush=True)
        out.with_suffix(".json").write_text(json.dumps(rows, indent=2))  # what is done survives an interrupt
    plot({out.name: rows}, out.with_suffix(".png"))


def plot(runs: dict[str, list[dict[str, Any]]], path: Path) -> None:
    """p50 (solid) and p95 (dashed) of context() (first and warm round) and user-scope search() against
    stored messages."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(11, 5))
    colors = iter(plt.rcParams["axes.prop_cycle"].by_key()["color"] * 4)
    for label, rows in runs.items():
        x = [r["stored_messages"] for r in rows]
        for metric, name in (("context", "context()"), ("warm_context", "context(), warm"),
                             ("user_search", "user-scope search()")):
            if any(f"{metric}_ms_p50" not in r for r in rows):
                continue  # rows from before the warm round
            color = next(colors)
            ax.plot(x, [r[f"{metric}_ms_p50"] for r in rows], "o-", color=color, label=f"{label}: {name} p50")
            ax.plot(x, [r[f"{metric}_ms_p95"] for r in rows], "x--", color=color, alpha=0.6,
                    label=f"{label}: {name} p95")
    embed = [r["embed_ms_p50"] for rows in runs.values() for r in rows if "embed_ms_p50" in r]
    if embed:
        ax.axhline(4 * statistics.median(embed), color="grey", linestyle=":", label="4x the embedder alone (p50)")
    ax.axhline(TARGET_MS, color="red", linestyle=":", label=f"target p50 {TARGET_MS:g} ms")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("stored messages")
    ax.set_ylabel("latency, ms")
    ax.set_title("langmem-tiers: latency against stored messages (issue 15)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _vacuum_postgres(url: str) -> None:
    """What autovacuum does to a bulk fill in a running deployment, before anything is timed: the planner's
    statistics (some plans change with them) and the visibility map. Rows before session 55 were measured
    without it, on tables autovacuum may or may not have reached yet."""
    import psycopg

    from langmem_tiers.journal.postgres import DEFAULT_SCHEMA

    tables = ", ".join(f"{DEFAULT_SCHEMA}.{t}" for t in ("records", "messages", "namespaces"))
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"VACUUM ANALYZE {tables}")


def _reset_postgres(url: str) -> None:
    import psycopg

    from langmem_tiers.journal.postgres import DEFAULT_SCHEMA

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {DEFAULT_SCHEMA} CASCADE")


if __name__ == "__main__":
    main()
