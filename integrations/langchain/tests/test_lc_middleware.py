"""TieredMemoryMiddleware with create_agent: journaling, budgeted model input, recall, threads."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langmem_tiers import InvalidNamespaceError
from lc_fakes import SMALL, conversation

from langchain_langmem_tiers import TieredMemoryMiddleware


@tool
def get_weather(city: str) -> str:
    """The current weather of a city."""
    return f"18C and sunny in {city}"


def _agent(model, middleware, checkpointer=None):
    return create_agent(
        model,
        tools=[get_weather],
        middleware=[middleware],
        checkpointer=checkpointer,
        system_prompt="You are a helpful assistant.",
    )


def _cfg(thread: str) -> dict:
    return {"configurable": {"thread_id": thread}}


def _turns():
    turns = conversation(12)
    turns.insert(5, "What is the weather in Paris?")
    return turns


def _check_journal(middleware: TieredMemoryMiddleware, thread: str, turns: list[str]) -> None:
    journal = middleware.memory_for(thread).messages()
    assert [m.text for m in journal if m.role == "user"] == turns
    ids = [m.metadata["langchain"]["id"] for m in journal]
    assert len(ids) == len(set(ids)), "a message was journaled twice"
    tool_msgs = [m for m in journal if m.role == "tool"]
    assert len(tool_msgs) == 1
    assert tool_msgs[0].text == "18C and sunny in Paris"
    # 2 messages per plain turn, 4 for the tool turn (user, tool call, tool result, answer).
    assert len(journal) == 2 * len(turns) + 2


def _check_model_input(model, middleware, thread: str, turns: list[str]) -> None:
    last = model.inputs[-1]
    assert isinstance(last[0], SystemMessage)
    assert last[0].text.startswith("You are a helpful assistant.")
    assert "Summary of earlier conversation" in last[0].text
    assert last[-1].text == turns[-1]
    assert turns[0] not in [m.text for m in last]  # evicted: only the summary stands for it
    assert middleware.memory_for(thread).stats().summary_cursor > 0
    # Tool-call groups are never split in any model input.
    for messages in model.inputs:
        for i, m in enumerate(messages):
            if isinstance(m, ToolMessage):
                assert any(
                    isinstance(p, AIMessage) and any(c["id"] == m.tool_call_id for c in p.tool_calls)
                    for p in messages[:i]
                )


@pytest.mark.parametrize("checkpointer", [False, True], ids=["no-checkpointer", "checkpointer"])
def test_agent_sync(tmp_path, model, checkpointer: bool) -> None:
    middleware = TieredMemoryMiddleware(tmp_path, config=SMALL, embedder=False)
    agent = _agent(model, middleware, InMemorySaver() if checkpointer else None)
    turns = _turns()
    for text in turns:
        out = agent.invoke({"messages": [HumanMessage(text)]}, _cfg("t1"))
    if checkpointer:  # the agent state is never rewritten: the checkpointer keeps the whole thread
        assert [m.text for m in out["messages"] if isinstance(m, HumanMessage)] == turns
    assert any(m.text.startswith("The tool says: 18C") for m in middleware.memory_for("t1").messages())
    _check_journal(middleware, "t1", turns)
    _check_model_input(model, middleware, "t1", turns)
    middleware.close()


@pytest.mark.parametrize("checkpointer", [False, True], ids=["no-checkpointer", "checkpointer"])
async def test_agent_async(tmp_path, model, checkpointer: bool) -> None:
    middleware = TieredMemoryMiddleware(tmp_path, config=SMALL, embedder=False)
    agent = _agent(model, middleware, InMemorySaver() if checkpointer else None)
    turns = _turns()
    for text in turns:
        await agent.ainvoke({"messages": [HumanMessage(text)]}, _cfg("t1"))
    _check_journal(middleware, "t1", turns)
    _check_model_input(model, middleware, "t1", turns)
    middleware.close()


def test_threads_are_isolated_and_survive_reopen(tmp_path, model) -> None:
    middleware = TieredMemoryMiddleware(tmp_path, embedder=False)
    agent = _agent(model, middleware, InMemorySaver())
    agent.invoke({"messages": [HumanMessage("I am in thread a")]}, _cfg("a"))
    agent.invoke({"messages": [HumanMessage("I am in thread b")]}, _cfg("b"))
    assert [m.text for m in model.inputs[-1]] == ["You are a helpful assistant.", "I am in thread b"]
    middleware.close()
    # A new process: no checkpointer, the journal alone carries the thread on.
    again = TieredMemoryMiddleware(tmp_path, embedder=False)
    agent = _agent(model, again)
    agent.invoke({"messages": [HumanMessage("Where am I?")]}, _cfg("a"))
    assert [m.text for m in model.inputs[-1][1:]] == [
        "I am in thread a",
        "Noted, thank you: I am in thread a",
        "Where am I?",
    ]
    assert len(again.memory_for("a").messages()) == 4
    again.close()


def test_no_thread_id_uses_the_default_session(tmp_path, model) -> None:
    middleware = TieredMemoryMiddleware(tmp_path, embedder=False)
    _agent(model, middleware).invoke({"messages": [HumanMessage("hello")]})
    assert [m.role for m in middleware.memory_for("default").messages()] == ["user", "assistant"]
    middleware.close()


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_question_answered_from_recall(tmp_path, model, mode: str) -> None:
    """Real local embedder + embedded Chroma: an evicted fact reaches the model's input."""
    middleware = TieredMemoryMiddleware(tmp_path, config=SMALL, user_id="u1")
    agent = _agent(model, middleware, InMemorySaver())
    turns = [
        "My locker combination is 4812-alpha, please remember it.",
        *conversation(10),
        "What was my locker combination?",
    ]
    for text in turns:
        inp = {"messages": [HumanMessage(text)]}
        if mode == "sync":
            agent.invoke(inp, _cfg("t1"))
        else:
            await agent.ainvoke(inp, _cfg("t1"))
    context = middleware.last_context
    assert context is not None
    assert any("4812-alpha" in h.text for h in context.recalled)
    system = model.inputs[-1][0].text
    assert "4812-alpha" in system.split("Recalled from earlier conversation")[1]
    assert turns[0] not in [m.text for m in model.inputs[-1][1:]]  # not in the window: it came from recall
    middleware.close()


# --- identity: the session is (user, thread_id) ---------------------------------------------------


def _user_cfg(thread: object, user: str | None = None) -> dict:
    configurable: dict = {"thread_id": thread}
    if user is not None:
        configurable["user_id"] = user
    return {"configurable": configurable}


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_two_users_with_the_same_thread_id_never_share_a_session(tmp_path, model, mode: str) -> None:
    middleware = TieredMemoryMiddleware(tmp_path, embedder=False)
    agent = _agent(model, middleware)  # no checkpointer: it would key the state by thread_id alone
    runs = [("alice", "My secret word is pelican."), ("bob", "What is my secret word?")]
    for user, text in runs:
        inp = {"messages": [HumanMessage(text)]}
        if mode == "sync":
            agent.invoke(inp, _user_cfg("7", user))
        else:
            await agent.ainvoke(inp, _user_cfg("7", user))
    bob_input = "\n".join(m.text for m in model.inputs[-1])
    assert "pelican" not in bob_input
    assert "What is my secret word?" in bob_input
    alice = middleware.memory_for("7", user_id="alice")
    bob = middleware.memory_for("7", user_id="bob")
    assert alice.namespace.user_id == "alice"
    assert bob.namespace.user_id == "bob"
    assert alice.messages()[0].text == "My secret word is pelican."
    assert bob.messages()[0].text == "What is my secret word?"
    assert middleware.memory_for("7").messages() == []  # the session without a user is a third one
    middleware.close()


def test_thread_id_7_and_the_text_7_are_one_session(tmp_path, model) -> None:
    middleware = TieredMemoryMiddleware(tmp_path, embedder=False)
    agent = _agent(model, middleware)
    agent.invoke({"messages": [HumanMessage("first, as an integer thread id")]}, _cfg(7))  # type: ignore[arg-type]
    agent.invoke({"messages": [HumanMessage("second, as a text thread id")]}, _cfg("7"))
    assert "first, as an integer thread id" in [m.text for m in model.inputs[-1]]
    assert middleware.memory_for(7) is middleware.memory_for("7")
    with pytest.raises(InvalidNamespaceError, match="thread_id must be a string"):
        agent.invoke({"messages": [HumanMessage("hi")]}, _cfg(7.5))  # type: ignore[arg-type]
    middleware.close()


@dataclass
class UserContext:
    user_id: str


def test_the_user_comes_from_the_runtime_context_or_the_middleware(tmp_path, model) -> None:
    middleware = TieredMemoryMiddleware(tmp_path, user_id="default-user", embedder=False)
    agent = create_agent(model, middleware=[middleware], context_schema=UserContext)
    agent.invoke({"messages": [HumanMessage("from the context")]}, _cfg("t"), context=UserContext("carol"))
    agent.invoke({"messages": [HumanMessage("from nobody")]}, _cfg("t"))
    assert middleware.memory_for("t", user_id="carol").messages()[0].text == "from the context"
    assert middleware.memory_for("t").messages()[0].text == "from nobody"
    assert middleware.memory_for("t").namespace.user_id == "default-user"
    # Two places naming two users: refused, nothing journaled.
    with pytest.raises(InvalidNamespaceError, match="two different users"):
        agent.invoke(
            {"messages": [HumanMessage("who am I?")]}, _user_cfg("t", "dave"), context=UserContext("carol")
        )
    assert "who am I?" not in [m.text for m in middleware.memory_for("t", user_id="carol").messages()]
    assert middleware.memory_for("t", user_id="dave").messages() == []
    middleware.close()


def test_at_most_max_sessions_stay_open_and_a_reopened_thread_loses_nothing(tmp_path, model) -> None:
    middleware = TieredMemoryMiddleware(tmp_path, max_sessions=2, embedder=False)
    agent = _agent(model, middleware, InMemorySaver())
    agent.invoke({"messages": [HumanMessage("a: one")]}, _cfg("a"))
    agent.invoke({"messages": [HumanMessage("b: one")]}, _cfg("b"))
    agent.invoke({"messages": [HumanMessage("c: one")]}, _cfg("c"))
    assert middleware.open_sessions() == 2
    # "a" was pushed out; its checkpointed state (with "a: one") is journaled again on reopen,
    # and the journal keeps one copy of each message id.
    agent.invoke({"messages": [HumanMessage("a: two")]}, _cfg("a"))
    assert middleware.open_sessions() == 2
    journal = middleware.memory_for("a").messages()
    assert [m.text for m in journal if m.role == "user"] == ["a: one", "a: two"]
    assert len(journal) == 4
    assert "a: one" in [m.text for m in model.inputs[-1]]
    middleware.close()
    with pytest.raises(ValueError, match="max_sessions"):
        TieredMemoryMiddleware(tmp_path, max_sessions=0, embedder=False)
