"""Bad operations: inputs that are not one message (issue 13 item 14 and kin).

Each :class:`OpCase` runs one operation against real stores and states the expected answer:
``"error"`` (a typed :class:`~langmem_tiers.errors.LangmemTiersError`) or ``"accept"`` (the
documented handling, which the case checks itself: a failed check counts as a crash). Cases
that need PostgreSQL or a Chroma server are "n/a" where none can be started.

Shared by ``test_rel_bad_inputs.py`` and ``report_bad_inputs.py``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langmem_tiers import MemoryConfig, TieredMemory, WordCounter
from langmem_tiers import errors as lmt_errors
from langmem_tiers.errors import LangmemTiersError
from langmem_tiers.journal.base import Scope

ROOT = Path(__file__).resolve().parents[2]
CONFIG = MemoryConfig(context_tokens=400, window_tokens=100, summary_tokens=40, recall_tokens=100)
ChromaFactory = Callable[[Path], AbstractContextManager[tuple[str, int]]]


@dataclass(frozen=True)
class OpContext:
    """Where a case runs: a fresh folder, and the servers it may use (``None``: not available)."""

    tmp: Path
    pg_url: str | None = None
    chroma: ChromaFactory | None = None


@dataclass(frozen=True)
class OpCase:
    name: str
    run: Callable[[OpContext], str]
    expect: str
    note: str = ""
    needs: tuple[str, ...] = ()
    xfail: str = ""


def run_op(case: OpCase, ctx: OpContext) -> tuple[str, str]:
    """Returns (outcome, detail): ``error`` (typed), ``accept``, ``untyped`` (a crash) or ``n/a``."""
    missing = [n for n in case.needs if getattr(ctx, n) is None]
    if missing:
        return "n/a", f"needs {', '.join(missing)}"
    try:
        detail = case.run(ctx)
    except LangmemTiersError as e:
        return "error", f"{type(e).__name__}: {e}"
    except Exception as e:
        return "untyped", f"{type(e).__name__}: {e}"
    return "accept", detail


def _hashed() -> Any:
    from tests.reliability.workers import hashed_embedder

    return hashed_embedder()


def _fill(memory: TieredMemory, turns: int = 4) -> None:
    for t in range(turns):
        memory.add_messages([{"role": "user", "content": f"question {t} about the copper harbor"},
                             {"role": "assistant", "content": f"answer {t}: the harbor is copper"}])
    memory.remember("the user likes copper kettles")
    memory.flush()


# --- the cases -------------------------------------------------------------------------------


def huge_message_on_postgres(ctx: OpContext) -> str:
    """A 700 KB message of 20k distinct words made every context() of its session fail on PostgreSQL
    (``stack depth limit exceeded``); it must be stored, and context() and keyword search keep working."""
    assert ctx.pg_url is not None
    words = ["lex" + hashlib.sha1(str(i).encode()).hexdigest()[:31] for i in range(20_000)]
    text = " ".join(words)
    assert 650_000 < len(text) < CONFIG.max_message_chars
    with TieredMemory.open(ctx.pg_url, session_id=f"big-{uuid.uuid4().hex[:8]}", user_id="big", embedder=False,
                           counter=WordCounter(), config=CONFIG) as memory:
        memory.add("user", text)
        memory.add("assistant", "noted")
        memory.add("user", "and what comes next?")
        memory.flush()
        memory.context()
        memory.context(query=text)
        hits = memory.search(words[12_345], k=3)
        assert hits, "the word must be found by keyword search"
        assert words[12_345] in hits[0].text
        assert memory.search(text, k=3), "the whole message as the query"
    return f"stored {len(text)} chars of {len(words)} distinct words; context() and keyword search work"


def schema_version_not_an_integer_sqlite(ctx: OpContext) -> str:
    with TieredMemory.open(ctx.tmp, session_id="s", embedder=False, counter=WordCounter()) as memory:
        memory.add("user", "hello")
    db = sqlite3.connect(ctx.tmp / "journal.sqlite3")
    with db:
        db.execute("UPDATE meta SET value='4.0beta' WHERE key='schema_version'")
    db.close()
    TieredMemory.open(ctx.tmp, session_id="s", embedder=False, counter=WordCounter()).close()
    return "opened a journal whose schema version is '4.0beta'"


def schema_version_not_an_integer_postgres(ctx: OpContext) -> str:
    import psycopg

    from langmem_tiers.journal.postgres import PostgresJournal

    assert ctx.pg_url is not None
    schema = f"lmt_badversion_{uuid.uuid4().hex[:8]}"
    PostgresJournal(ctx.pg_url, schema=schema).close()
    with psycopg.connect(ctx.pg_url, autocommit=True) as conn:
        conn.execute(f"UPDATE {schema}.meta SET value='4.0beta' WHERE key='schema_version'")
    PostgresJournal(ctx.pg_url, schema=schema).close()
    return "opened a journal whose schema version is '4.0beta'"


def file_as_the_path(ctx: OpContext) -> str:
    target = ctx.tmp / "notes.txt"
    target.write_text("not a folder")
    TieredMemory.open(target, session_id="s", embedder=False, counter=WordCounter()).close()
    return "opened a file as the memory folder"


_READ_ONLY_CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from langmem_tiers import TieredMemory, WordCounter
from langmem_tiers.errors import LangmemTiersError
from tests.reliability.workers import hashed_embedder
try:
    embedder = hashed_embedder() if sys.argv[3] == "vectors" else False
    with TieredMemory.open(sys.argv[2], session_id="s", embedder=embedder, counter=WordCounter()) as memory:
        texts = [m.text for m in memory.messages()]
        assert any("copper" in t for t in texts), texts
        assert memory.search("copper kettles", k=3), "recall must answer"
        memory.context(query="copper")
        try:
            memory.add("user", "a write into a read-only folder")
            write = "a write was accepted"
        except LangmemTiersError as e:
            write = f"writes refused: {type(e).__name__}"
    print(json.dumps({"outcome": "accept", "detail": f"read {len(texts)} messages, recall answers; {write}"}))
except LangmemTiersError as e:
    print(json.dumps({"outcome": "error", "type": type(e).__name__, "detail": str(e)}))
except Exception as e:
    print(json.dumps({"outcome": "untyped", "type": type(e).__name__, "detail": str(e)}))
"""


def _read_only(ctx: OpContext, vectors: bool) -> str:
    folder = ctx.tmp / "ro"
    with TieredMemory.open(folder, session_id="s", embedder=_hashed() if vectors else False,
                           counter=WordCounter()) as memory:
        _fill(memory)
    prefix: list[str] = []
    if os.geteuid() == 0:
        # Root ignores file modes; without CAP_DAC_OVERRIDE it obeys them like any user.
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            raise RuntimeError("running as root without setpriv: a read-only folder cannot be simulated")
        prefix = [setpriv, "--bounding-set", "-dac_override,-dac_read_search"]
    paths = sorted(folder.rglob("*"), reverse=True)
    for path in [*paths, folder]:
        path.chmod(0o555 if path.is_dir() else 0o444)
    try:
        done = subprocess.run([*prefix, sys.executable, "-c", _READ_ONLY_CHILD, str(ROOT), str(folder),
                               "vectors" if vectors else "keyword"], capture_output=True, text=True, timeout=120)
    finally:
        for path in [folder, *paths]:
            path.chmod(0o755 if path.is_dir() else 0o644)
    try:
        answer = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        raise RuntimeError(f"the reader crashed: {done.stdout[-500:]} {done.stderr[-1500:]}") from None
    if answer["outcome"] == "error":
        raise getattr(lmt_errors, answer["type"], LangmemTiersError)(answer["detail"])
    if answer["outcome"] == "untyped":
        raise RuntimeError(f"{answer['type']}: {answer['detail']}")
    return str(answer["detail"])


def read_only_folder_keyword(ctx: OpContext) -> str:
    return _read_only(ctx, vectors=False)


def read_only_folder_with_vectors(ctx: OpContext) -> str:
    return _read_only(ctx, vectors=True)


def forget_with_chroma_down(ctx: OpContext) -> str:
    """The erase commits and forget() returns; the vector deletes wait in the outbox and are applied
    once the server answers again."""
    assert ctx.chroma is not None
    data = ctx.tmp / "chroma-data"
    with ctx.chroma(data) as (host, port):
        memory = TieredMemory.open(ctx.tmp / "j", session_id="s", user_id="u", embedder=_hashed(),
                                   chroma=f"http://{host}:{port}", counter=WordCounter(), config=CONFIG)
        _fill(memory)
        recall = memory.recall
        assert recall is not None
        assert recall.store is not None
        erased_ns = [n for n, _ in memory.journal.namespaces(Scope("user", memory.namespace))]
        assert recall.store.count(where=recall.where_ns(erased_ns)) > 0
    try:
        removed = memory.forget("user")  # the server is down now
        assert removed > 0
        assert memory.messages() == []
        assert not memory.search("copper harbor", k=5, scope="user")
        queued = memory.journal.outbox_count()
        assert queued > 0, "the vector deletes must wait in the outbox"
    finally:
        memory.close()
    with ctx.chroma(data) as (host, port), TieredMemory.open(
            ctx.tmp / "j", session_id="s", user_id="u", embedder=_hashed(), chroma=f"http://{host}:{port}",
            counter=WordCounter(), config=CONFIG) as again:
        again.flush()
        recall = again.recall
        assert recall is not None
        assert recall.store is not None
        left = recall.store.count(where=recall.where_ns(erased_ns))
        assert left == 0, f"{left} vectors of the forgotten user after the server came back"
    return f"forget removed {removed} records while the server was down; {queued} deletes queued, applied on restart"


OP_CASES: tuple[OpCase, ...] = (
    OpCase("700 KB message of 20k distinct words (PostgreSQL), then context() and keyword search",
           huge_message_on_postgres, "accept", needs=("pg_url",),
           note="the keyword query keeps at most 256 terms; the tsvector is built from the stored text"),
    OpCase("schema version not an integer (SQLite)", schema_version_not_an_integer_sqlite, "error"),
    OpCase("schema version not an integer (PostgreSQL)", schema_version_not_an_integer_postgres, "error",
           needs=("pg_url",)),
    OpCase("a file given as the path", file_as_the_path, "error"),
    OpCase("read-only folder opened for reading (keyword recall)", read_only_folder_keyword, "accept",
           note="reads work; writes get a typed JournalError"),
    OpCase("read-only folder opened for reading (embedded Chroma)", read_only_folder_with_vectors, "accept",
           note="opens with keyword recall (the Chroma folder cannot be locked or written); writes get a typed "
                "JournalError"),
    OpCase("forget() with the Chroma server down", forget_with_chroma_down, "accept", needs=("chroma",),
           note="the erase commits; vector deletes stay queued and are applied when the server is back"),
)


# --- the report ------------------------------------------------------------------------------


@contextlib.contextmanager
def servers() -> Iterator[tuple[str | None, ChromaFactory | None]]:
    """A throwaway PostgreSQL and the Chroma server factory, where this machine has them."""
    from tests.support.chroma_server import chroma_server
    from tests.support.postgres import find_bindir, postgres_server

    chroma: ChromaFactory | None = chroma_server
    try:
        import chromadb  # noqa: F401
    except ImportError:
        chroma = None
    if os.environ.get("LANGMEM_TIERS_TEST_PG_URL"):
        yield os.environ["LANGMEM_TIERS_TEST_PG_URL"], chroma
    elif find_bindir() is None:
        yield None, chroma
    else:
        with postgres_server() as url:
            yield url, chroma


def report() -> list[tuple[str, str, str, str]]:
    """Run every case, print a markdown table, return rows (name, outcome, expected, detail)."""
    rows = []
    with servers() as (pg_url, chroma):
        for case in OP_CASES:
            with tempfile.TemporaryDirectory() as tmp:
                outcome, detail = run_op(case, OpContext(Path(tmp), pg_url, chroma))
            rows.append((case.name, outcome, case.expect, detail or case.note))
    lines = ["| operation | answer | expected | detail |", "|---|---|---|---|"]
    for name, outcome, expect, detail in rows:
        detail = detail.replace("|", "\\|").replace("\n", " ")[:160]
        lines.append(f"| {name} | {outcome} | {expect} | {detail} |")
    print("\n".join(lines))
    return rows
