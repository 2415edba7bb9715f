"""Bad input corpus through the core and both integrations, sync and async.

Each input gets a typed error (a ``LangmemTiersError``) with nothing written, or its
documented handling (see ``note`` in :mod:`tests.reliability.bad_inputs`); a batch with one
bad message stores none. The session-scoped ``bad_input_report`` fixture writes the
markdown table of answers to ``$LANGMEM_BAD_INPUTS_REPORT`` (default: the pytest temp
folder) and prints its path; ``report_bad_inputs.py`` prints the same table.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from langmem_tiers import ConfigError, InvalidMessageError, InvalidNamespaceError, TieredMemory, WordCounter
from tests.reliability.bad_inputs import CASES, SURFACES, Case, _memory, markdown, run_case
from tests.reliability.bad_operations import OP_CASES, OpCase, OpContext, run_op

ROWS: list[tuple[str, str, str, str, int, str]] = []


@pytest.fixture(scope="session")
def bad_input_report(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Any]]:
    yield ROWS
    target = Path(os.environ.get("LANGMEM_BAD_INPUTS_REPORT") or tmp_path_factory.getbasetemp() / "bad_inputs.md")
    target.write_text(markdown(sorted(ROWS)) + "\n", encoding="utf-8")
    print(f"\n[bad inputs] {len(ROWS)} answers, report: {target}")


def _params() -> list[Any]:
    out = []
    for case in CASES:
        for surface in SURFACES:
            for mode in ("sync", "async"):
                marks = []
                if surface in case.xfail:
                    marks.append(pytest.mark.xfail(strict=True, reason=case.xfail[surface]))
                out.append(pytest.param(case, surface, mode, marks=marks, id=f"{case.name}-{surface}-{mode}"))
    return out


@pytest.mark.parametrize(("case", "surface", "mode"), _params())
def test_bad_input(case: Case, surface: str, mode: str, tmp_path: Path, bad_input_report: list[Any]) -> None:
    expected = case.expect[surface]
    for with_good in (False, True):
        outcome, written, detail = run_case(case, surface, str(tmp_path), asynchronous=mode == "async",
                                            with_good=with_good)
        if not with_good:
            ROWS.append((case.name, surface, mode, outcome, written, detail or case.note))
        if outcome == "n/a":
            return
        assert outcome != "untyped", f"untyped error: {detail}"
        assert outcome == expected, detail
        if expected == "error":
            assert written == 0, "a refused batch must write nothing"
        else:
            assert written >= (1 if case.name != "empty batch" else 0)


def test_tool_call_without_result_context(tmp_path: Path) -> None:
    """Documented handling of a tool call without its result.

    Accepted: the journal keeps the assistant message with its tool call. ``context()``
    returns that message as is, with no tool result after it (an OpenAI-style API would
    refuse the request until the caller adds the result), and a later user message is
    accepted. Once a new user turn has started, a late result for that call is refused as
    an orphan (tool results answer calls of the current turn only).
    """
    memory = _memory(str(tmp_path), "tc")
    try:
        memory.add("user", "look it up")
        call = memory.add("assistant", None, tool_calls=[{"id": "c1", "name": "lookup", "arguments": "{}"}])
        memory.add("user", "next question")
        roles = [(m.role, bool(m.tool_calls)) for m in memory.context().messages]
        assert roles[-3:] == [("user", False), ("assistant", True), ("user", False)]
        assert [m.id for m in memory.messages()][1] == call.id
        count = len(memory.messages())
        with pytest.raises(InvalidMessageError, match="unknown call 'c1'"):
            memory.add("tool", "late result", tool_call_id="c1")
        assert len(memory.messages()) == count
    finally:
        memory.close()


NAMESPACE_IDS = ["a'b\"c", "a/b", "..", "../../etc/passwd", "会话-ü-🙂", "x" * 512, "Robert'); DROP TABLE messages;--"]


@pytest.mark.parametrize("session_id", NAMESPACE_IDS, ids=lambda s: repr(s)[:24])
def test_odd_namespace_ids_are_plain_data(session_id: str, tmp_path: Path) -> None:
    """Quotes, slashes, ``..``, unicode and SQL are accepted as opaque ids: no file is created for
    them, and each stays isolated from the others."""
    before = set(os.listdir(tmp_path))
    with TieredMemory.open(tmp_path, session_id=session_id, user_id=session_id, agent_id=session_id,
                           embedder=False, counter=WordCounter()) as memory:
        memory.add("user", "zebra secret of this namespace")
        memory.remember("zebra fact of this namespace")
        assert memory.namespace.session_id == session_id
    with TieredMemory.open(tmp_path, session_id="other", embedder=False, counter=WordCounter()) as other:
        assert other.messages() == []
        assert other.search("zebra", scope="user") == []
    after = set(os.listdir(tmp_path))
    assert after - before <= {"journal.sqlite3", "journal.sqlite3-wal", "journal.sqlite3-shm"}
    assert not (tmp_path.parent / "etc").exists()


@pytest.mark.parametrize("bad", ["x" * 10_000, "", None, 5, "a\x00b", "\ud800"], ids=repr)
@pytest.mark.parametrize("field", ["session_id", "user_id", "agent_id"])
def test_bad_namespace_ids_refused(field: str, bad: Any, tmp_path: Path) -> None:
    ids = {"session_id": "s", field: bad}
    if bad is None and field != "session_id":
        pytest.skip("None means 'no user/agent'")
    with pytest.raises(InvalidNamespaceError):
        TieredMemory.open(tmp_path, embedder=False, counter=WordCounter(), **ids)


def test_bad_namespace_ids_through_integrations(tmp_path: Path) -> None:
    from langchain_langmem_tiers import TieredChatMessageHistory
    from llama_index.memory.langmem_tiers import TieredChatMemory

    with pytest.raises(InvalidNamespaceError):
        TieredChatMessageHistory.open(tmp_path, session_id="x" * 10_000, embedder=False)
    memory = TieredChatMemory.from_defaults(path=str(tmp_path), session_id="x" * 10_000, embed_model=False)
    with pytest.raises(InvalidNamespaceError):
        memory.get()
    memory.close()


def test_context_query_must_be_text(tmp_path: Path) -> None:
    memory = _memory(str(tmp_path), "q")
    try:
        memory.add("user", "hello")
        with pytest.raises(ConfigError):
            memory.search(None)  # type: ignore[arg-type]
    finally:
        memory.close()


def test_context_query_non_string_is_typed(tmp_path: Path) -> None:
    from langmem_tiers.errors import LangmemTiersError

    memory = _memory(str(tmp_path), "q2")
    try:
        memory.add("user", "hello")
        with pytest.raises(LangmemTiersError):
            memory.context(query=5)  # type: ignore[arg-type]
    finally:
        memory.close()


# --- bad operations (issue 13 item 14): each needs real stores, some a server ----------------------


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    from tests.support.postgres import postgres_url

    with postgres_url() as url:
        yield url


def _op_params() -> list[Any]:
    out = []
    for case in OP_CASES:
        marks: list[Any] = [pytest.mark.server] if case.needs else []
        if case.xfail:
            marks.append(pytest.mark.xfail(strict=True, reason=case.xfail))
        out.append(pytest.param(case, marks=marks, id=case.name))
    return out


@pytest.mark.parametrize("case", _op_params())
def test_bad_operation(case: OpCase, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    pg = request.getfixturevalue("pg_url") if "pg_url" in case.needs else None
    chroma = None
    if "chroma" in case.needs:
        pytest.importorskip("chromadb")
        from tests.support.chroma_server import chroma_server

        chroma = chroma_server
    outcome, detail = run_op(case, OpContext(tmp_path, pg, chroma))
    print(f"\n[bad operation] {case.name}: {outcome} ({detail[:200]})")
    assert outcome != "untyped", f"crash: {detail}"
    assert outcome == case.expect, detail
