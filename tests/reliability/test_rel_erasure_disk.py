"""Erasure on disk: after ``forget(..., physical=True)`` the raw bytes of every file hold no copy.

Two users fill their memories with distinctive words; one user is forgotten (``physical=True``)
and one session of the other is cleared and compacted. Then every file of the folder (the
SQLite journal, its ``-wal`` and ``-shm``, every file under ``chroma/``) is read as bytes and
searched for the erased words, the erased vector ids and the erased user id: 0 copies, while
the kept session's words and vector ids are still found (the positive control: the scan can
see what is stored). ``erase_report`` must agree.

On PostgreSQL SQL can only see live rows: the live tables hold no copy, and the test prints
what the server's own files still hold (the WAL and not yet overwritten pages), which no
client can erase; ``erase_report`` must say so instead of calling the journal clean.

Run: ``.venv/bin/python -m pytest tests/reliability/test_rel_erasure_disk.py -q -s`` (``-s``
prints the per-store figures).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from langmem_tiers import MemoryConfig, TieredMemory, WordCounter
from langmem_tiers.journal.base import Scope

CONFIG = MemoryConfig(context_tokens=400, window_tokens=60, window_low_ratio=0.5, summary_tokens=40,
                      recall_tokens=100, summary_retry_base_s=0, summary_retry_max_s=0)
ERASED_USER = "user-zorblat-4417"
KEPT_USER = "user-marmoset-2093"
TURNS = 4


def needle(tag: str, i: int) -> str:
    """A word no file holds by chance; it ends in a digit so the Porter stemmer keeps it whole."""
    return tag + hashlib.sha1(f"{tag}-{i}".encode()).hexdigest()[:12] + "7"


def tail(word: str) -> bytes:
    """What a raw scan looks for: FTS5 stores terms prefix-compressed (a term shares its first
    bytes with the term before it), so the scan skips the tag and the first hex digits."""
    return word[5:].encode()


def fill(memory: TieredMemory, tag: str) -> list[str]:
    """Turns and one explicit memory, each carrying distinctive words; returns the words."""
    words = []
    for i in range(TURNS):
        question, answer = needle(tag, i), needle(tag, 100 + i)
        memory.add("user", f"my locker note {question} is in the copper harbor")
        memory.add("assistant", f"noted, {answer} stays in the harbor")
        words += [question, answer]
    fact = needle(tag, 999)
    memory.remember(f"the user keeps {fact} in a drawer")
    words.append(fact)
    memory.flush()
    return words


def files_under(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file())


def scan(folder: Path, words: Iterable[str], *, whole: bool = False) -> dict[str, int]:
    """Raw copies of each word in every file under ``folder`` (``whole``: the full word, else its tail)."""
    patterns = {w: (w.encode() if whole else tail(w)) for w in words}
    counts = dict.fromkeys(patterns, 0)
    for path in files_under(folder):
        try:
            data = path.read_bytes()
        except OSError:  # a file removed while we read (a checkpoint): it holds nothing any more
            continue
        for word, pattern in patterns.items():
            counts[word] += data.count(pattern)
    return counts


def vector_ids(memory: TieredMemory) -> list[str]:
    recall = memory.recall
    assert recall is not None
    ns_ids = [n for n, _ in memory.journal.namespaces(Scope("session", memory.namespace))]
    return [recall.vector_id(r.id) for r in memory.journal.scoped_records(ns_ids)]


def distinct(gone: list[str], kept: list[str]) -> list[str]:
    """Erased vector ids that are no prefix of a kept one ("j:4" is inside "j:41"), so a raw count means it."""
    return [g for g in gone if not any(k != g and k.startswith(g) for k in kept)]


@pytest.fixture
def embedded(tmp_path: Path, local_embedder: Any) -> Iterator[dict[str, TieredMemory]]:
    """Sessions of two users on one folder (SQLite journal + embedded Chroma, the real local embedder)."""
    first = TieredMemory.open(tmp_path, session_id="a1", user_id=ERASED_USER, embedder=local_embedder,
                              counter=WordCounter(), config=CONFIG)
    memories = {"a1": first, "a2": first.for_session("a2"),
                "b1": first.for_session("b1", user_id=KEPT_USER), "b2": first.for_session("b2", user_id=KEPT_USER)}
    yield memories
    for key in ("a2", "b1", "b2", "a1"):  # the handle that owns the journal closes last
        memories[key].close()


def test_forgotten_user_and_cleared_session_leave_no_byte_on_disk(embedded: dict[str, TieredMemory],
                                                                  tmp_path: Path) -> None:
    words = {key: fill(memory, key) for key, memory in embedded.items()}
    ids = {key: vector_ids(memory) for key, memory in embedded.items()}
    erased_words = words["a1"] + words["a2"] + words["b1"]
    kept_words = words["b2"]
    every = erased_words + kept_words
    before = scan(tmp_path, every)
    assert all(before.values()), "the scan must see every stored word before erasure"
    assert (tmp_path / "chroma").is_dir()

    assert embedded["a1"].forget("user", physical=True) > 0
    embedded["b1"].clear()
    embedded["b1"].compact()

    chroma = tmp_path / "chroma"
    gone_ids = distinct(ids["a1"] + ids["a2"] + ids["b1"], ids["b2"])
    assert len(gone_ids) >= 5
    for moment in ("open", "closed"):
        if moment == "closed":
            for key in ("a2", "b1", "b2", "a1"):
                embedded[key].close()
        found = scan(tmp_path, every)
        erased_left = {w: n for w, n in found.items() if w in erased_words and n}
        kept_missing = [w for w in kept_words if not found[w]]
        ids_left = {i: n for i, n in scan(chroma, gone_ids, whole=True).items() if n}
        kept_ids = scan(chroma, ids["b2"], whole=True)
        files = ", ".join(p.relative_to(tmp_path).as_posix() for p in files_under(tmp_path)
                          if p.name.startswith("journal") or p.suffix == ".sqlite3")
        print(f"\n[erasure, embedded, handles {moment}] erased words: {len(erased_words)}, raw copies left: "
              f"{sum(erased_left.values())}; erased vector ids: {len(gone_ids)}, copies left: "
              f"{sum(ids_left.values())}; kept words found: {len(kept_words) - len(kept_missing)}/{len(kept_words)}, "
              f"kept vector ids found: {sum(1 for n in kept_ids.values() if n)}/{len(kept_ids)}; files: {files}")
        assert not erased_left, f"erased words still on disk ({moment}): {erased_left}"
        assert not ids_left, f"erased vector ids still in chroma/ ({moment}): {ids_left}"
        assert not kept_missing, f"kept words not found: the scan cannot see text ({moment})"
        assert all(kept_ids.values()), "kept vector ids not found: the scan cannot see Chroma's files"


def test_forgotten_turn_leaves_no_summary_version_on_disk(tmp_path: Path) -> None:
    """forget(turn id) erases its messages and every saved summary version that folded them; the
    other turns stay (and the summary is re-folded from the newest version without it)."""
    with TieredMemory.open(tmp_path, session_id="t1", user_id="user-turn-5521", embedder=False,
                           counter=WordCounter(), config=CONFIG) as memory:
        words = fill(memory, "tt")
        # The turn a saved summary version quotes (the capped summary keeps the newest lines).
        newest = memory.summary_history()[0]
        i = next(i for i in range(TURNS) if needle("tt", i) in newest.text)
        erased = [needle("tt", i), needle("tt", 100 + i)]  # that turn's question and answer
        turn = next(r for r in memory.journal.scoped_records([memory._ns_id], ["turn"]) if erased[0] in r.text)
        assert all(scan(tmp_path, erased).values()), "the scan must see the turn before erasure"
        memory.forget(turn.id, physical=True)
        memory.flush()
        memory.compact()
        history = memory.summary_history()
        assert not [v for v in history if any(w in v.text for w in erased)]
        found = scan(tmp_path, words)
        kept = [w for w in words if w not in erased]
        print(f"\n[erasure, one turn] erased words: {len(erased)}, raw copies left: "
              f"{sum(found[w] for w in erased)}; kept words found: {sum(1 for w in kept if found[w])}/{len(kept)}; "
              f"summary versions kept: {len(history)}")
        assert not {w: found[w] for w in erased if found[w]}, "the erased turn is still on disk"
        assert all(found[w] for w in kept), "the other turns must still be found"


def test_erase_report_is_clean_after_physical_forget(embedded: dict[str, TieredMemory]) -> None:
    words = {key: fill(memory, key) for key, memory in embedded.items()}
    memory = embedded["a1"]
    memory.forget("user", physical=True)
    embedded["b1"].clear()
    memory.compact()
    report = memory.erase_report(words["a1"] + words["a2"] + words["b1"])
    print("\n[erase_report, embedded]\n" + report.explain())
    assert {s.store for s in report.stores} == {"journal", "vectors"}
    assert all(s.counts is not None for s in report.stores), "both embedded stores can be scanned"
    assert report.clean
    kept = memory.erase_report(words["b2"])
    assert not kept.clean, "the report must see a live session's words"


def test_erased_user_id_leaves_the_journal(embedded: dict[str, TieredMemory], tmp_path: Path) -> None:
    for key, memory in embedded.items():
        fill(memory, key)
    embedded["a1"].forget("user", physical=True)
    found = scan(tmp_path, [ERASED_USER], whole=True)[ERASED_USER]
    kept = scan(tmp_path, [KEPT_USER], whole=True)[KEPT_USER]
    print(f"\n[erasure, embedded] erased user id: {found} raw copies; kept user id: {kept}")
    assert kept > 0
    assert found == 0


# --- PostgreSQL --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    from tests.support.postgres import postgres_url

    with postgres_url() as url:
        yield url


def live_copies(url: str, words: Iterable[str]) -> dict[str, int]:
    """Rows of every table of the journal's schema whose text (all columns) holds each word."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema='langmem_tiers' "
            "AND table_type='BASE TABLE'").fetchall()]
        # summary_versions: the rolling summary's history (schema v7) holds text too.
        assert {"messages", "records", "namespaces", "state", "summary_versions"} <= set(tables)
        counts = {}
        for word in words:
            counts[word] = sum(int(conn.execute(
                f'SELECT count(*) FROM langmem_tiers."{t}" x WHERE strpos(x::text, %s) > 0', (word,)
            ).fetchone()[0]) for t in tables)  # type: ignore[index]
        return counts


def server_files(url: str) -> dict[str, Path] | None:
    """The throwaway server's heap and WAL folders, when they are on this machine and readable."""
    import psycopg

    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CHECKPOINT")  # dirty pages reach the heap files
            data = Path(str(conn.execute("SHOW data_directory").fetchone()[0]))  # type: ignore[index]
    except Exception:
        return None
    if not (data / "base").is_dir():
        return None
    return {"heap": data / "base", "wal": data / "pg_wal"}


@pytest.mark.server
def test_postgres_live_rows_are_clean_and_the_rest_is_reported(pg_url: str) -> None:
    a = TieredMemory.open(pg_url, session_id="pa1", user_id=ERASED_USER + "-pg", embedder=False,
                         counter=WordCounter(), config=CONFIG)
    b = a.for_session("pb1", user_id=KEPT_USER + "-pg")
    try:
        erased = fill(a, "pa") + fill(a.for_session("pa2"), "pq")
        kept = fill(b, "pb")
        assert all(live_copies(pg_url, erased + kept).values()), "the SQL scan must see every stored word"
        assert a.forget("user", physical=True) > 0
        live = live_copies(pg_url, erased + kept)
        erased_left = {w: n for w, n in live.items() if w in erased and n}
        assert not erased_left, f"erased words in live rows: {erased_left}"
        assert all(live[w] for w in kept), "the kept user's words must still be there"
        report = a.erase_report(erased)
        journal = next(s for s in report.stores if s.store == "journal")
        files = server_files(pg_url)
        raw = ""
        if files is not None:
            heap, wal = scan(files["heap"], erased), scan(files["wal"], erased)
            raw = (f"; on the server's disk: {sum(1 for n in heap.values() if n)}/{len(erased)} erased words "
                   f"in heap files, {sum(1 for n in wal.values() if n)}/{len(erased)} in the WAL")
        print(f"\n[erasure, postgres] live rows: {sum(erased_left.values())} copies of {len(erased)} erased words"
              f"{raw}\n[erase_report, postgres]\n{report.explain()}")
        assert journal.counts is not None, "the live rows can be scanned"
        assert journal.clean, "erase_report must see the live rows clean"
    finally:
        b.close()
        a.close()


@pytest.mark.server
def test_postgres_erase_report_names_what_it_cannot_scan(pg_url: str) -> None:
    with TieredMemory.open(pg_url, session_id="pn1", user_id="user-note-pg", embedder=False,
                           counter=WordCounter(), config=CONFIG) as memory:
        words = fill(memory, "pn")
        memory.forget("user", physical=True)
        journal = next(s for s in memory.erase_report(words).stores if s.store == "journal")
        assert "WAL" in journal.note
        assert "dead" in journal.note
        assert "WAL" in memory.erase_report(words).explain()
