"""TieredChatMessageHistory: a contract suite (sync and async share one table), then end to end."""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory
from langmem_tiers import InvalidMessageError, InvalidNamespaceError, MemoryConfig, TieredMemory
from lc_fakes import SMALL, ScriptedChatModel, conversation

from langchain_langmem_tiers import TieredChatMessageHistory

BIG = MemoryConfig(context_tokens=8000, window_tokens=4000)


async def _maybe(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class Ops:
    """One face of the history: sync methods or their async twins."""

    def __init__(self, history: TieredChatMessageHistory, mode: str) -> None:
        self.h, self.mode = history, mode

    def add(self, messages: list[BaseMessage]) -> Awaitable[None] | None:
        return self.h.aadd_messages(messages) if self.mode == "async" else self.h.add_messages(messages)

    def get(self) -> Awaitable[list[BaseMessage]] | list[BaseMessage]:
        return self.h.aget_messages() if self.mode == "async" else self.h.messages

    def clear(self) -> Awaitable[None] | None:
        return self.h.aclear() if self.mode == "async" else self.h.clear()


TURN = [
    HumanMessage("What is the weather in Paris?", id="u1"),
    AIMessage("", id="a1", tool_calls=[{"name": "get_weather", "args": {"city": "Paris"}, "id": "c1"}]),
    ToolMessage("18C and sunny", tool_call_id="c1", id="t1"),
    AIMessage("It is 18C and sunny in Paris.", id="a2"),
]


async def _round_trip(ops: Ops) -> None:
    await _maybe(ops.add(TURN[:2]))
    await _maybe(ops.add(TURN[2:]))
    assert await _maybe(ops.get()) == TURN


async def _order_one_by_one(ops: Ops) -> None:
    msgs = [
        HumanMessage(f"message {i}", id=f"m{i}") if i % 2 == 0 else AIMessage(f"reply {i}", id=f"m{i}")
        for i in range(10)
    ]
    for m in msgs:
        await _maybe(ops.add([m]))
    assert [m.id for m in await _maybe(ops.get())] == [m.id for m in msgs]


async def _bulk_add(ops: Ops) -> None:
    msgs = [HumanMessage(f"bulk {i}") for i in range(50)]
    await _maybe(ops.add(msgs))
    got = await _maybe(ops.get())
    assert [m.content for m in got] == [m.content for m in msgs]


async def _clear(ops: Ops) -> None:
    await _maybe(ops.add(TURN))
    await _maybe(ops.clear())
    assert await _maybe(ops.get()) == []
    await _maybe(ops.add(TURN[:1]))
    assert await _maybe(ops.get()) == TURN[:1]


async def _empty(ops: Ops) -> None:
    assert await _maybe(ops.get()) == []


async def _bad_batch_is_atomic(ops: Ops) -> None:
    await _maybe(ops.add([HumanMessage("kept")]))
    with pytest.raises(ValueError, match="unknown call"):
        await _maybe(ops.add([HumanMessage("dropped"), ToolMessage("orphan", tool_call_id="nope")]))
    assert [m.content for m in await _maybe(ops.get())] == ["kept"]


CONTRACT: list[Callable[[Ops], Awaitable[None]]] = [
    _round_trip,
    _order_one_by_one,
    _bulk_add,
    _clear,
    _empty,
    _bad_batch_is_atomic,
]


@pytest.mark.parametrize("view", ["context", "full"])
@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("case", CONTRACT, ids=lambda c: c.__name__.strip("_"))
async def test_history_contract(tmp_path, case, mode: str, view: str) -> None:
    with TieredChatMessageHistory.open(tmp_path, session_id="s", config=BIG, view=view, embedder=False) as h:
        await case(Ops(h, mode))


def test_wraps_an_existing_memory_and_persists_across_reopen(tmp_path) -> None:
    memory = TieredMemory.open(tmp_path, session_id="s", embedder=False)
    TieredChatMessageHistory(memory).add_messages(TURN)
    memory.close()
    with TieredChatMessageHistory.open(tmp_path, session_id="s", embedder=False) as again:
        assert again.messages == TURN


def test_sessions_are_isolated(tmp_path) -> None:
    factory = TieredChatMessageHistory.factory(tmp_path, embedder=False)
    factory("a").add_messages([HumanMessage("I am in session a")])
    factory("b").add_messages([HumanMessage("I am in session b")])
    assert [m.content for m in factory("a").messages] == ["I am in session a"]
    assert [m.content for m in factory("b").messages] == ["I am in session b"]
    factory.close()


def test_context_view_is_stable_until_the_next_add(tmp_path) -> None:
    with TieredChatMessageHistory.open(tmp_path, session_id="s", config=SMALL, embedder=False) as h:
        for text in conversation(10):
            h.add_messages([HumanMessage(text), AIMessage("ok")])
        first = h.messages
        assert h.memory.stats().summary_cursor > 0  # evicted and summarized
        assert isinstance(first[0], SystemMessage)
        assert "Summary of earlier conversation" in first[0].text
        assert h.messages == first
        h.add_messages([HumanMessage("one more")])
        assert h.messages[-1].content == "one more"
        assert len(h.memory.messages()) == 21  # nothing lost


def _chain(model: ScriptedChatModel, factory: Any, *, history_key: bool) -> RunnableWithMessageHistory:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        if history_key:
            prompt = ChatPromptTemplate.from_messages(
                [("system", "You are helpful."), MessagesPlaceholder("history"), ("human", "{question}")]
            )
            return RunnableWithMessageHistory(
                prompt | model, factory, input_messages_key="question", history_messages_key="history"
            )
        return RunnableWithMessageHistory(model, factory)


@pytest.mark.parametrize("history_key", [False, True])
@pytest.mark.parametrize("mode", ["invoke", "ainvoke", "stream", "astream"])
async def test_runnable_with_message_history_end_to_end(
    tmp_path, model, mode: str, history_key: bool
) -> None:
    factory = TieredChatMessageHistory.factory(tmp_path, config=SMALL, embedder=False)
    chain = _chain(model, factory, history_key=history_key)
    cfg = {"configurable": {"session_id": "s1"}}
    turns = conversation(12)
    for text in turns:
        inp: Any = {"question": text} if history_key else [HumanMessage(text)]
        if mode == "invoke":
            chain.invoke(inp, cfg)
        elif mode == "ainvoke":
            await chain.ainvoke(inp, cfg)
        elif mode == "stream":
            list(chain.stream(inp, cfg))
        else:
            [c async for c in chain.astream(inp, cfg)]
    journal = factory("s1").memory.messages()
    # Every turn journaled exactly once, in order, nothing duplicated by the double read.
    assert [m.role for m in journal] == ["user", "assistant"] * len(turns)
    assert [m.text for m in journal[::2]] == turns
    assert all(m.text.startswith("Noted, thank you") for m in journal[1::2])
    last_input = model.inputs[-1]
    # The model saw the summary and only a window, not the whole conversation.
    assert any(
        "Summary of earlier conversation" in m.text for m in last_input if isinstance(m, SystemMessage)
    )
    assert turns[0] not in [m.text for m in last_input]
    assert last_input[-1].text == turns[-1]
    factory.close()


def test_recall_reaches_the_model_through_context_messages(tmp_path, model) -> None:
    """Real embedder + Chroma: a fact evicted long ago is recalled for the new question."""
    with TieredChatMessageHistory.open(tmp_path, session_id="s", config=SMALL) as h:
        h.add_messages(
            [HumanMessage("My locker combination is 4812-alpha, please remember it."), AIMessage("Noted.")]
        )
        for text in conversation(10):
            h.add_messages([HumanMessage(text), AIMessage("ok")])
        question = HumanMessage("What was my locker combination?")
        model.invoke([*h.context_messages(question.text), question])
        memory_text = model.inputs[-1][0].text
        assert "Recalled from earlier conversation" in memory_text
        assert "4812-alpha" in memory_text.split("Recalled from earlier conversation")[1]


# --- freshness: another object or process writes the same session -----------------------------


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_write_or_clear_elsewhere_shows_on_the_next_read(tmp_path, mode: str) -> None:
    with (
        TieredChatMessageHistory.open(tmp_path, session_id="s", config=BIG, embedder=False) as h1,
        TieredChatMessageHistory.open(tmp_path, session_id="s", config=BIG, embedder=False) as h2,
    ):
        one, two = Ops(h1, mode), Ops(h2, mode)
        await _maybe(one.add(TURN[:1]))
        assert await _maybe(one.get()) == TURN[:1]  # h1 has a cached view now
        await _maybe(two.add(TURN[1:]))
        assert await _maybe(one.get()) == TURN
        await _maybe(two.clear())
        assert await _maybe(one.get()) == []


def test_the_context_is_rebuilt_only_when_the_session_changed(tmp_path) -> None:
    with TieredChatMessageHistory.open(tmp_path, session_id="s", config=BIG, embedder=False) as h:
        h.add_messages(TURN)
        built = []
        context = h.memory.context

        def counting_context(*args: Any, **kwargs: Any) -> Any:
            built.append(args)
            return context(*args, **kwargs)

        h.memory.context = counting_context  # type: ignore[method-assign]
        for _ in range(3):
            assert h.messages == TURN
        assert len(built) == 1
        other = h.memory.for_session("s")  # another handle on the same session writes
        other.add_messages([{"role": "user", "content": "and tomorrow?"}])
        assert h.messages[-1].content == "and tomorrow?"
        assert h.messages[-1].content == "and tomorrow?"
        assert len(built) == 2


def test_a_request_view_holds_its_context_until_it_writes(tmp_path) -> None:
    with TieredChatMessageHistory.open(tmp_path, session_id="s", config=BIG, embedder=False) as shared:
        shared.add_messages(TURN)
        view = shared.request_view()
        assert view.memory is shared.memory
        held = view.load_context("weather in Paris")
        shared.add_messages([HumanMessage("another request's question", id="x1")])
        assert view.messages == held  # RWMH's second read in this request sees what the first saw
        assert shared.messages[-1].content == "another request's question"  # the shared one is fresh
        view.add_messages([HumanMessage("this request's question", id="x2")])
        assert [m.id for m in view.messages[-2:]] == ["x1", "x2"]
        view.close()  # closes nothing: the view does not own the memory
        assert len(shared.messages) == 6


# --- history.messages = [...] ------------------------------------------------------------------


@pytest.mark.parametrize("view", ["context", "full"])
def test_assigning_messages_replaces_the_session(tmp_path, view: str) -> None:
    with TieredChatMessageHistory.open(tmp_path, session_id="s", config=BIG, view=view, embedder=False) as h:
        h.add_messages([HumanMessage("old", id="o1"), AIMessage("old reply", id="o2")])
        h.messages = TURN
        assert h.messages == TURN
        assert [m.key for m in h.memory.messages()] == [m.id for m in TURN]
        h.messages = []
        assert h.messages == []
        assert h.memory.messages() == []


def test_assigning_a_bad_batch_keeps_the_previous_messages(tmp_path) -> None:
    with TieredChatMessageHistory.open(tmp_path, session_id="s", config=BIG, embedder=False) as h:
        h.add_messages(TURN)
        with pytest.raises(ValueError, match="unknown call"):
            h.messages = [HumanMessage("new"), ToolMessage("orphan", tool_call_id="nope")]
        assert h.messages == TURN
        with pytest.raises(InvalidMessageError, match="expected a LangChain BaseMessage"):
            h.messages = ["not a message"]  # type: ignore[list-item]
        assert h.messages == TURN


# --- idempotent adds and users --------------------------------------------------------------


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_adding_a_message_id_again_stores_nothing(tmp_path, mode: str) -> None:
    with TieredChatMessageHistory.open(tmp_path, session_id="s", config=BIG, embedder=False) as h:
        ops = Ops(h, mode)
        await _maybe(ops.add(TURN))
        await _maybe(ops.add(TURN))  # a retry of the same batch
        await _maybe(ops.add([TURN[0], HumanMessage("new", id="n1")]))
        assert [m.key for m in h.memory.messages()] == [m.id for m in TURN] + ["n1"]


def test_the_factory_keys_sessions_by_user_and_compares_ids_as_text(tmp_path) -> None:
    factory = TieredChatMessageHistory.factory(tmp_path, user_id="ada", embedder=False)
    factory("7").add_messages([HumanMessage("Ada's message")])
    factory("7", user_id="bob").add_messages([HumanMessage("Bob's message")])
    assert [m.content for m in factory(7).messages] == ["Ada's message"]  # 7 and "7": one session
    assert factory(7) is factory("7", user_id="ada")
    assert [m.content for m in factory("7", user_id="bob").messages] == ["Bob's message"]
    assert factory("7", user_id="bob").memory.namespace.user_id == "bob"
    with pytest.raises(InvalidNamespaceError, match="session_id must be a string"):
        factory(7.5)  # type: ignore[arg-type]
    factory.close()


def test_the_factory_keeps_at_most_max_sessions_open(tmp_path) -> None:
    factory = TieredChatMessageHistory.factory(tmp_path, embedder=False, max_sessions=2)
    first = factory("a")
    first.add_messages([HumanMessage("in a")])
    factory("b")
    factory("c")  # "a" is the least recently used: pushed out
    again = factory("a")
    assert again is not first
    assert [m.content for m in again.messages] == ["in a"]  # nothing lost: the journal has it
    assert first.messages == again.messages  # the old handle keeps working for a request using it
    factory.close()
    with pytest.raises(ValueError, match="max_sessions"):
        TieredChatMessageHistory.factory(tmp_path, embedder=False, max_sessions=0)
