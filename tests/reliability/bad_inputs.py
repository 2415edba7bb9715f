"""The bad-input corpus, shared by ``test_rel_bad_inputs.py`` and ``report_bad_inputs.py``.

Each case builds one bad message for each surface (core dict, LangChain ``BaseMessage``,
LlamaIndex ``ChatMessage``) and states the expected answer there: ``"error"`` (a typed
:class:`~langmem_tiers.errors.LangmemTiersError`, nothing written) or ``"accept"`` (documented
handling, described in ``note``). A surface is ``None`` where the bad value cannot be
built (the framework's own pydantic model refuses it first) or does not apply. Bad operations
that are not one message (issue 13 item 14) live in :mod:`tests.reliability.bad_operations`.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langmem_tiers import MemoryConfig, TieredMemory, WordCounter
from langmem_tiers.errors import LangmemTiersError

TEN_MB = "x" * 10_000_000
SURFACES = ("core", "langchain", "llama_index")


@dataclass(frozen=True)
class Case:
    name: str
    core: Callable[[], Any] | None
    lc: Callable[[], Any] | None = None
    li: Callable[[], Any] | None = None
    expect: dict[str, str] = field(default_factory=lambda: dict.fromkeys(SURFACES, "error"))
    note: str = ""
    xfail: dict[str, str] = field(default_factory=dict)


def _lc() -> Any:
    import langchain_core.messages as m

    return m


def _li(role: str = "user", **kw: Any) -> Any:
    from llama_index.core.llms import ChatMessage

    return ChatMessage(role=role, **kw)


def _image_block() -> Any:
    from llama_index.core.llms import ChatMessage, ImageBlock

    return ChatMessage(role="user", blocks=[ImageBlock()])


ERR = dict.fromkeys(SURFACES, "error")
CALL = {"id": "c1", "name": "lookup", "arguments": "{}"}

CASES: tuple[Case, ...] = (
    Case("None instead of a message", lambda: None, lambda: None, lambda: None),
    Case("content None (user)", lambda: {"role": "user", "content": None}, None,
         lambda: _li(content=None),
         expect={**ERR, "llama_index": "accept"},
         note="LangChain: HumanMessage(content=None) is refused by pydantic. LlamaIndex allows empty "
              "messages: stored with an `li_empty` part, round-trips as empty"),
    Case("content int", lambda: {"role": "user", "content": 42}, None, None,
         note="not constructible in either framework (pydantic refuses)"),
    Case("content dict", lambda: {"role": "user", "content": {"a": 1}}),
    Case("empty string", lambda: {"role": "user", "content": ""}, lambda: _lc().HumanMessage(""),
         lambda: _li(content=""), expect={**ERR, "llama_index": "accept"},
         note="LlamaIndex: stored as an empty message (`li_empty` part), as LlamaIndex allows"),
    Case("whitespace only", lambda: {"role": "user", "content": " \n\t"}, lambda: _lc().HumanMessage(" \n")),
    Case("empty assistant", lambda: {"role": "assistant", "content": ""}, lambda: _lc().AIMessage(""),
         expect={**ERR, "core": "accept", "langchain": "accept"},
         note="accepted: a model may answer with nothing (empty assistant messages are stored, as LangChain allows)"),
    Case("10 MB message", lambda: {"role": "user", "content": TEN_MB}, lambda: _lc().HumanMessage(TEN_MB),
         lambda: _li(content=TEN_MB), note="over max_message_chars (1,000,000)"),
    Case("lone surrogate", lambda: {"role": "user", "content": "a\ud800b"}, lambda: _lc().HumanMessage("a\ud800b"),
         lambda: _li(content="a\ud800b")),
    Case("NUL byte", lambda: {"role": "user", "content": "a\x00b"}, lambda: _lc().HumanMessage("a\x00b"),
         lambda: _li(content="a\x00b")),
    Case("unknown role", lambda: {"role": "robot", "content": "x"},
         lambda: _lc().ChatMessage(role="robot", content="x"), lambda: _li("chatbot", content="x"),
         expect={**ERR, "llama_index": "accept"},
         note="LlamaIndex's enum refuses 'robot'; its own extra roles (chatbot, model, function) are stored "
              "as user/assistant with the original role in metadata"),
    Case("role None", lambda: {"role": None, "content": "x"}),
    Case("orphan tool result", lambda: {"role": "tool", "content": "r", "tool_call_id": "nope"},
         lambda: _lc().ToolMessage("r", tool_call_id="nope"),
         lambda: _li("tool", content="r", additional_kwargs={"tool_call_id": "nope"}),
         expect={**ERR, "llama_index": "accept"},
         note="LlamaIndex: a result whose call is gone is stored as assistant text (metadata keeps role tool)"),
    Case("tool result without tool_call_id", lambda: {"role": "tool", "content": "r"}, None,
         lambda: _li("tool", content="r"), expect={**ERR, "llama_index": "accept"},
         note="LangChain's ToolMessage requires tool_call_id; LlamaIndex: stored as assistant text"),
    Case("tool call without result", lambda: {"role": "assistant", "content": None, "tool_calls": [CALL]},
         lambda: _lc().AIMessage("", tool_calls=[{"id": "c1", "name": "lookup", "args": {}}]),
         lambda: _li("assistant", content="", additional_kwargs={"tool_calls": [
             {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]}),
         expect=dict.fromkeys(SURFACES, "accept"),
         note="accepted: the journal keeps the call; context() returns it as is, without a result "
              "(see test_tool_call_without_result_context)"),
    Case("image part without a source", lambda: {"role": "user", "content": [{"type": "image_url"}]},
         lambda: _lc().HumanMessage(content=[{"type": "image_url"}]), _image_block,
         expect={**ERR, "llama_index": "accept"},
         note="LlamaIndex: ImageBlock() is kept as an opaque block in metadata"),
    Case("part without type", lambda: {"role": "user", "content": [{"text": "x"}]},
         lambda: _lc().HumanMessage(content=[{"text": "x"}])),
    Case("text part with int text", lambda: {"role": "user", "content": [{"type": "text", "text": 5}]},
         lambda: _lc().HumanMessage(content=[{"type": "text", "text": 5}])),
    Case("non-JSON part", lambda: {"role": "user", "content": [{"type": "custom", "x": object()}]}),
    Case("part not a dict", lambda: {"role": "user", "content": [object()]}),
    Case("tool call with empty id", lambda: {"role": "assistant", "content": "",
                                              "tool_calls": [{"id": "", "name": "f"}]}),
    Case("metadata not JSON", lambda: {"role": "user", "content": "x", "metadata": {"a": object()}}),
    Case("metadata with a lone surrogate", lambda: {"role": "user", "content": "x", "metadata": {"a": "\ud800"}}),
    Case("name with a lone surrogate", lambda: {"role": "user", "content": "x", "name": "\ud800"}),
    Case("created_at NaN", lambda: {"role": "user", "content": "x", "created_at": float("nan")}),
    Case("created_at in milliseconds (JavaScript Date.now())",
         lambda: {"role": "user", "content": "x", "created_at": 1_764_000_000_000.0},
         note="issue 13: a millisecond stamp (year 57869) stopped LLM summaries forever; refused by range"),
    Case("empty batch", list, list, None, expect={**ERR, "langchain": "accept"},
         note="LangChain: add_messages([]) is a no-op, as BaseChatMessageHistory expects"),
)


def _memory(path: str, session: str) -> TieredMemory:
    config = MemoryConfig(context_tokens=400, window_tokens=100, summary_tokens=40, recall_tokens=100)
    return TieredMemory.open(path, session_id=session, embedder=False, counter=WordCounter(), config=config)


def _batch(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def good(surface: str) -> Any:
    if surface == "core":
        return {"role": "user", "content": "a fine message"}
    if surface == "langchain":
        return _lc().HumanMessage("a fine message")
    return _li(content="a fine message")


def run_case(case: Case, surface: str, path: str, *, asynchronous: bool, with_good: bool) -> tuple[str, int, str]:
    """Feed the case to one surface; returns (outcome, messages written, detail).

    outcome: ``"error"`` (typed), ``"untyped"`` (another exception), ``"accept"`` or ``"n/a"``.
    """
    builder = {"core": case.core, "langchain": case.lc, "llama_index": case.li}[surface]
    if builder is None:
        return "n/a", 0, "not constructible / not applicable"
    value = builder()
    batch = _batch(value)
    if with_good:
        batch = [good(surface), *batch] if batch else batch
    memory = _memory(path, f"{surface}-{'a' if asynchronous else 's'}-{'b' if with_good else '1'}")
    try:
        before = memory.journal.count_messages(memory._ns_id)
        try:
            if surface == "core":
                if asynchronous:
                    asyncio.run(memory.aadd_messages(batch))
                else:
                    memory.add_messages(batch)
            elif surface == "langchain":
                from langchain_langmem_tiers import TieredChatMessageHistory

                history = TieredChatMessageHistory(memory)
                if asynchronous:
                    asyncio.run(history.aadd_messages(batch))
                else:
                    history.add_messages(batch)
            else:
                from llama_index.memory.langmem_tiers import TieredChatMemory

                chat = TieredChatMemory.from_memory(memory)
                if asynchronous:
                    asyncio.run(chat.aput_messages(batch) if with_good else chat.aput(batch[0]))
                else:
                    chat.put_messages(batch) if with_good else chat.put(batch[0])
            outcome, detail = "accept", ""
        except LangmemTiersError as e:
            outcome, detail = "error", f"{type(e).__name__}: {e}"
        except Exception as e:
            outcome, detail = "untyped", f"{type(e).__name__}: {e}"
        written = memory.journal.count_messages(memory._ns_id) - before
        return outcome, written, detail
    finally:
        memory.close()


def markdown(rows: list[tuple[str, str, str, str, int, str]]) -> str:
    lines = ["| input | surface | mode | answer | written | detail |", "|---|---|---|---|---|---|"]
    for name, surface, mode, outcome, written, detail in rows:
        detail = detail.replace("|", "\\|").replace("\n", " ")[:140]
        lines.append(f"| {name} | {surface} | {mode} | {outcome} | {written} | {detail} |")
    return "\n".join(lines)


def main() -> None:
    rows = []
    with tempfile.TemporaryDirectory() as path:
        for case in CASES:
            for surface in SURFACES:
                for asynchronous in (False, True):
                    outcome, written, detail = run_case(case, surface, path, asynchronous=asynchronous,
                                                        with_good=False)
                    rows.append((case.name, surface, "async" if asynchronous else "sync", outcome, written,
                                 detail or case.note))
    print(markdown(rows))
    print()
    from tests.reliability.bad_operations import report as operations_report

    op_rows = operations_report()
    print()
    print(counts(rows, op_rows))


OUTCOME_WORDS = {"error": "typed error", "accept": "accepted", "untyped": "crash", "n/a": "n/a"}


def counts(rows: list[tuple[str, str, str, str, int, str]], op_rows: list[tuple[str, str, str, str]]) -> str:
    """One line per corpus: how many answers were typed errors, accepted (documented handling), crashes."""
    def line(what: str, outcomes: list[str]) -> str:
        total = {word: outcomes.count(o) for o, word in OUTCOME_WORDS.items()}
        return (f"{what}: {len(outcomes)} answers: typed error {total['typed error']}, accepted {total['accepted']}, "
                f"crash {total['crash']}" + (f", not applicable {total['n/a']}" if total["n/a"] else ""))

    unexpected = [name for name, outcome, expect, _ in op_rows if outcome not in (expect, "n/a")]
    return "\n".join([line("bad messages (cases x surfaces x sync/async)", [r[3] for r in rows]),
                      line("bad operations (issue 13 item 14 and kin)", [r[1] for r in op_rows])
                      + f"; not the expected answer: {len(unexpected)}" + (f" ({'; '.join(unexpected)})"
                                                                            if unexpected else "")])
